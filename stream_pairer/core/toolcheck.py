"""The two steps of failure tagging the compiled core calls back into Python for, as plain functions.

Why in Python: their wording is a library's own. A call's arguments given as a JSON string that is
not an object are decoded by orjson (its error message is part of the detail), and `--tool-schemas`
validates arguments with jsonschema-rs (toolschemas.py). Everything else of tagging (outcomes,
failure points, loop caps, repeats) runs in the core (native/src/tagging.rs).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import orjson

from stream_pairer.core.vocab import MAX_DETAIL, FailurePoint

if TYPE_CHECKING:  # a registry is built (loading jsonschema_rs) only when --tool-schemas asks for one
    from stream_pairer.core.toolschemas import ToolSchemaRegistry

TOOL_SELECTION: Final = FailurePoint.TOOL_SELECTION.value
ARGUMENT_CONSTRUCTION: Final = FailurePoint.ARGUMENT_CONSTRUCTION.value

SchemaCheck = Callable[[str | None, bytes | None], list[tuple[str, str]]]


def cut(s: str) -> str:
    """A failure detail at most MAX_DETAIL characters long."""
    return s if len(s) <= MAX_DETAIL else s[: MAX_DETAIL - 3] + "..."


def decode_arguments(text: str) -> tuple[Any, str | None]:
    """Arguments given as a JSON string: the decoded value, or the text itself and a detail when
    it is not JSON (orjson's error message is part of the detail)."""
    try:
        return orjson.loads(text), None
    except orjson.JSONDecodeError as err:
        return text, cut(f"arguments are not valid JSON ({len(text)} chars): {err}")


def decode_arguments_encoded(text: str) -> tuple[bytes | None, str | None]:
    """`decode_arguments` as the core takes it: the decoded value re-encoded, or the detail."""
    value, bad = decode_arguments(text)
    if bad is not None:
        return None, bad
    try:
        return orjson.dumps(value), None
    except orjson.JSONEncodeError:  # nested deeper than orjson writes: the text stands for itself
        return None, None


def schema_findings(
    schemas: ToolSchemaRegistry, name: str | None, args: Any, bad_json: bool
) -> dict[str, str]:
    """The points the `--tool-schemas` check gives a call: an unregistered tool, or arguments
    its schema refuses (not checked when they are not even JSON)."""
    tool = schemas.get(name)
    if tool is None:
        return {TOOL_SELECTION: cut(f"tool {name!r} is not among the {len(schemas)} registered tools")}
    if not bad_json:
        violation = tool.check(args)
        if violation is not None:
            return {ARGUMENT_CONSTRUCTION: violation.detail()}
    return {}


def schema_check(schemas: ToolSchemaRegistry) -> SchemaCheck:
    """`schema_findings` as the core calls it: (tool name, encoded arguments or None when they
    are not JSON) -> [(failure point, detail)]."""

    def check(name: str | None, args_json: bytes | None) -> list[tuple[str, str]]:
        args = orjson.loads(args_json) if args_json is not None else None
        return list(schema_findings(schemas, name, args, args_json is None).items())

    return check
