"""Shared helpers for the format-layer tests: reading the sample files and summarizing events."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from stream_pairer.core.formats import parse_record
from stream_pairer.core.model import FormatError, ToolEvent

SAMPLES = Path(__file__).parents[1] / "samples"


FAMILY_DOCUMENTS = ("openhands_trajectory.json", "smolagents_steps.json", "nock_anthropic_recording.json")


def family_records() -> list[bytes]:
    """The records of the agent-family samples (tests/samples/families), as the file reader feeds
    them: every JSONL line (the MCP transcript's direction prefixes included), the items of the
    JSON array documents, the ATIF trajectory whole."""
    import orjson  # noqa: PLC0415

    fam = SAMPLES / "families"
    out = [line for p in sorted(fam.glob("*.jsonl")) for line in p.read_bytes().splitlines() if line.strip()]
    out += [line for line in (fam / "mcp_stdio_transcript.log").read_bytes().splitlines() if line.strip()]
    out += [
        orjson.dumps(item) for name in FAMILY_DOCUMENTS for item in orjson.loads((fam / name).read_bytes())
    ]
    out.append(orjson.dumps(orjson.loads((fam / "atif_trajectory.json").read_bytes())))
    return out


def sample_lines(name: str) -> list[bytes]:
    return (SAMPLES / name).read_bytes().splitlines()


def parse_file(name: str, key: str | None = None) -> list[list[ToolEvent]]:
    """Events of every line of a sample file, by line (1-based line n is index n - 1)."""
    return [
        parse_record(raw, {"file": name, "line": n}, key=key) for n, raw in enumerate(sample_lines(name), 1)
    ]


def brief(ev: ToolEvent) -> tuple[Any, ...]:
    """(kind, id, name, is_error): the fields the pairing rules look at."""
    return ("call" if ev.is_call else "result", ev.id, ev.name, ev.is_error)


# Every dead-letter reason code the format layer may give. They are metric label values and alert
# inputs, so the tests pin the set: a new code must be added here, with a test of its own.
DEAD_LETTER_REASONS = frozenset(
    {
        "too_large",
        "invalid_utf8",
        "invalid_json",
        "not_an_object",
        "unknown_shape",
        "missing_conversation_id",
        "wrong_type",
        "missing_field",
    }
)


# Small hand-made records: one parsed, or its FormatError expected (test_formats_errors.py,
# test_formats_fields.py).
SRC = {"topic": "ai-logs", "partition": 3, "offset": 1207}


def parse(rec: Any, **kw: Any) -> list[ToolEvent]:
    raw = rec if isinstance(rec, bytes) else orjson.dumps(rec)
    return parse_record(raw, SRC, **kw)


def error(rec: Any, **kw: Any) -> FormatError:
    with pytest.raises(FormatError) as info:
        parse(rec, **kw)
    return info.value


def anthropic_call(**block: Any) -> dict[str, Any]:
    b = {"type": "tool_use", "id": "toolu_01", "name": "Read", "input": {}}
    b.update(block)
    return {
        "conversation_id": "c1",
        "message": {"role": "assistant", "content": [{"type": "text", "text": "hi"}, b]},
    }
