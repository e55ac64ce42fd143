"""`--map FILE`: a jq program that turns one input record into zero or more canonical events.

Why jq: it is what people already write to reshape these logs (`jq -c '...' log | ...`), so a
mapping tested in a shell runs here unchanged. Why libjq (the `jq` package) rather than a port: the
mapping must mean here exactly what it means in the user's own `jq` (README, Dependencies).

Contract, per record (the format layer calls `Mapping.parts`):
* the program reads the record (any JSON value) and emits values; each must be a canonical event
  (`{"type": "tool_call" | "tool_result", ...}`, schemas/canonical_event.schema.json), checked by the
  canonical reader itself, and becomes an event of format `mapped`, block = its output index;
* `empty` (no output) means the record carries no tool event: it is skipped, as a text turn is;
* `error(...)`, a runtime error, an output that is not a canonical event, or more than
  `max_events` outputs: the whole record is a `mapping_error` dead letter whose detail carries the
  mapping's message (nothing of the record is half-read);
* an event's `conversation_id` and `ts` are its own; absent, the record's (its conversation
  fields, else the Kafka key / the file's conversation) and the record's time.

Compiling is pure (the CLI reads the file); a program that does not compile raises
`MappingError` naming the file and line, one line, before any record is read.
"""

from __future__ import annotations

import re
from typing import Any, Final

import jq  # type: ignore[import-not-found,unused-ignore]

from stream_pairer.core.formats import canonical
from stream_pairer.core.formats.common import MARK_SCOPE, Part, json_type, mark, record_ts
from stream_pairer.core.vocab import DeadLetterReason
from stream_pairer.errors import FormatError, MappingError

__all__ = ["MAPPED", "MAPPING_ERROR", "Mapping", "MappingError", "compile_mapping"]

MAPPED: Final = "mapped"  # the `format` of every event a mapping made
MAPPING_ERROR: Final = DeadLetterReason.MAPPING_ERROR.value  # a record the mapping rejected
# Outputs of one record past which the record is refused: a runaway program (`repeat(.)`) must
# end in a dead letter, not in memory exhaustion. Far above any real record's tool events.
MAX_EVENTS: Final = 10_000
_DETAIL_CHARS: Final = 400

# libjq's compile diagnostics: "jq: error: <what> at <top-level>, line 3, column 8:\n    <source>"
_LOCATED: Final = re.compile(
    r"jq: error: (?P<what>.*?) at <[^>]*>, line (?P<line>\d+)(?:, column (?P<col>\d+))?:"
)


class Mapping:
    """A compiled mapping; `parts(record, text)` is what the format layer calls per record."""

    __slots__ = ("_program", "max_events", "name")

    def __init__(self, program: Any, name: str, max_events: int = MAX_EVENTS) -> None:
        self._program = program
        self.name = name
        self.max_events = max_events

    def __repr__(self) -> str:
        return f"Mapping({self.name!r})"

    def parts(self, text: str) -> list[Part]:
        """The events of one record (`text`: its JSON, already known valid), each after a SCOPE
        marker giving its own conversation id and time (None: the record's)."""
        out: list[Part] = []
        n = 0
        try:
            for value in self._program.input_text(text):
                n += 1
                if n > self.max_events:
                    raise self._reject(
                        f"the mapping emitted more than {self.max_events} values for one record"
                    )
                out.append(self._scope(value, n))
                out.append(self._event(value, n))
        except ValueError as err:  # jq's error(...) and runtime errors (FormatError is one too)
            if isinstance(err, FormatError):
                raise
            raise self._reject(f"the mapping rejected the record: {_clip(str(err))}") from None
        return out

    def _reject(self, what: str) -> FormatError:
        return FormatError(MAPPING_ERROR, f"--map {self.name}: {what}")

    def _event(self, value: Any, n: int) -> Part:
        if type(value) is not dict:
            hint = " (emit events one by one: `.[]`)" if type(value) is list else ""
            raise self._reject(f"output {n} is {json_type(value)}, expected a canonical event object{hint}")
        t = value.get("type")
        if t not in canonical.TYPES:
            raise self._reject(
                f'output {n} has type {_clip(repr(t), 60)}, expected "tool_call" or "tool_result" '
                "(a canonical event: README, Mappings)"
            )
        try:
            (part,) = canonical.parse(value)
        except FormatError as err:
            raise self._reject(f"output {n} is not a canonical event: {err.detail}") from None
        t, event_id, name, payload, is_error, block, _ = part
        return (t, event_id, name, payload, is_error, block, MAPPED)

    def _scope(self, value: Any, n: int) -> Part:
        if type(value) is not dict:
            return mark(MARK_SCOPE)  # refused by _event right after
        conv = value.get("conversation_id")
        if conv is not None:
            if type(conv) is int:
                conv = str(conv)
            elif type(conv) is not str:
                raise self._reject(
                    f"output {n}: conversation_id is {json_type(conv)}, expected a string or an integer"
                )
            conv = conv.strip() or None
        try:
            ts = record_ts(value, "")
        except FormatError as err:
            raise self._reject(f"output {n}: {err.detail}") from None
        return mark(MARK_SCOPE, conv, ts)


def compile_mapping(text: str, name: str, max_events: int = MAX_EVENTS) -> Mapping:
    """Compile a mapping's program text; `name` (the file path as given) is what errors say."""
    try:
        program = jq.compile(text)
    except ValueError as err:
        raise MappingError(_compile_message(str(err), name)) from None
    return Mapping(program, name, max_events)


def _compile_message(message: str, name: str) -> str:
    """libjq's multi-line diagnostic as one line: `FILE, line N, column C: what`."""
    found = _LOCATED.search(message)
    if found is None:
        first = message.strip().splitlines()[0] if message.strip() else "it does not compile"
        return f"--map {name}: {first.removeprefix('jq: error: ')}"
    col = found.group("col")
    where = f"line {found.group('line')}" + (f", column {col}" if col else "")
    return f"--map {name}, {where}: {found.group('what')}"


def _clip(s: str, n: int = _DETAIL_CHARS) -> str:
    return s if len(s) <= n else s[:n] + "..."
