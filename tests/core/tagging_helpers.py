"""Events as the formats layer builds them, for the failure-tagging tests (tests/core/test_tagging*.py).

Why apart: the three tagging suites (outcomes and argument faults, termination and the repeat
memory, tool selection and the schema registry) build their calls and results the same way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from stream_pairer.core.model import CALL, RESULT, ToolEvent
from tests.reference.state import Conversation
from tests.reference.tagging import FailureTagger

SAMPLES = Path(__file__).parents[1] / "samples" / "tool_schemas" / "shapes"
T0 = 1_735_689_600_000.0  # 2025-01-01T00:00:00Z


def call(
    name: str | None,
    args: Any,
    id: str | None = "call_1",
    *,
    ts: float | None = T0,
    fmt: str = "anthropic",
    raw: Any = None,
    conv: str = "c1",
) -> ToolEvent:
    return ToolEvent(CALL, conv, id, name, args, ts, fmt, {"file": "t.jsonl", "line": 1}, raw=raw)


def result(
    content: Any, is_error: bool | None = None, id: str | None = "call_1", *, fmt: str = "anthropic"
) -> ToolEvent:
    return ToolEvent(
        RESULT, "c1", id, None, content, T0 + 50, fmt, {"file": "t.jsonl", "line": 2}, is_error=is_error
    )


def pair(
    tagger: FailureTagger, c: ToolEvent, r: ToolEvent, conv: Conversation | None = None
) -> dict[str, Any]:
    tagger.on_call(c, conv or Conversation(c.conversation_id))
    rec: dict[str, Any] = {"kind": "pair", "tool": c.name}
    tagger.tag(rec, c, r)
    return rec


def run_calls(
    tagger: FailureTagger, calls: list[ToolEvent], conv: Conversation | None = None
) -> list[ToolEvent]:
    conv = conv or Conversation("c1")
    for c in calls:
        tagger.on_call(c, conv)
    return calls
