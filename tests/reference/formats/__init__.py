"""The Python readers of the shapes the compiled core now reads alone (issue 23), kept as the oracle.

The package reads canonical events and MCP messages with one reader, in Rust (native/src/
canonical.rs, mcp.rs; formats/compiled.py hands it the objects the Python layer meets). The
readers the package used before live on here, unchanged: `parse_record` is the package's format
layer with them in place of the compiled ones, so the reference pipeline (and the differential
tests in tests/core/test_compiled_readers.py) compare the compiled readers with them record by
record, dead letters' wording included.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from stream_pairer.core import formats as _package
from stream_pairer.core.model import ToolEvent
from tests.reference.formats import anthropic, bedrock, canonical, gemini, mcp, openai

# The package module's name for each shape's reader -> the oracle reader.
ORACLES: dict[str, ModuleType] = {
    "anthropic": anthropic,
    "bedrock": bedrock,
    "canonical": canonical,
    "gemini": gemini,
    "mcp": mcp,
    "openai": openai,
}

# Every module of the format layer loaded now, so that none is first imported while the oracles
# stand in (it would keep an oracle as its reader for good).
for _info in pkgutil.iter_modules(_package.__path__):
    importlib.import_module(f"{_package.__name__}.{_info.name}")


def _users() -> list[tuple[ModuleType, str, ModuleType]]:
    """(module, name, the package's reader) for every format module that names a reader."""
    found = []
    for mod_name, mod in list(sys.modules.items()):
        if mod is None or not mod_name.startswith(_package.__name__):
            continue
        for name in ORACLES:
            reader = getattr(mod, name, None)
            if reader is sys.modules.get(f"{_package.__name__}.{name}"):
                found.append((mod, name, reader))
    return found


@contextmanager
def python_readers() -> Iterator[None]:
    """The package's format layer, with the oracle readers in place of the compiled ones."""
    users = _users()
    for mod, name, _ in users:
        setattr(mod, name, ORACLES[name])
    try:
        yield
    finally:
        for mod, name, reader in users:
            setattr(mod, name, reader)


def parse_record(raw: bytes, source: Any, **kw: Any) -> list[ToolEvent]:
    """`formats.parse_record` read by the oracle readers (same arguments, same result)."""
    with python_readers():
        return _package.parse_record(raw, source, **kw)
