"""stream_pairer.errors: one exception root for everything the package raises on purpose."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import stream_pairer
from stream_pairer.errors import FormatError, StreamPairerError, ToolSchemaError


def _package_exceptions() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(stream_pairer.__path__, "stream_pairer."):
        if info.name.endswith("__main__"):
            continue  # importing it runs the command line
        mod = importlib.import_module(info.name)
        for name, obj in vars(mod).items():
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == info.name:
                found[f"{info.name}.{name}"] = obj
    return found


def test_every_public_exception_class_has_the_one_root() -> None:
    found = _package_exceptions()
    assert "stream_pairer.errors.CheckpointError" in found  # the walk reaches the tree itself
    strays = [name for name, cls in found.items() if not issubclass(cls, StreamPairerError)]
    # Private control-flow signals (a leading underscore) never leave their module.
    assert [n for n in strays if not n.rsplit(".", 1)[1].startswith("_")] == []
    assert all(cls.__module__ == "stream_pairer.errors" for n, cls in found.items() if n not in strays)


def test_value_errors_stay_value_errors() -> None:
    """Callers that caught ValueError before the tree had a root still catch these."""
    assert issubclass(FormatError, ValueError) and issubclass(ToolSchemaError, ValueError)
    err = FormatError("invalid_json", "line 1")
    assert (err.reason, err.detail, err.retriable) == ("invalid_json", "line 1", False)
