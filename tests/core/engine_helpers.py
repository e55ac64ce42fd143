"""Builders for engine tests: events made directly, as the formats layer would make them."""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

from stream_pairer.core.model import CALL, RESULT, ToolEvent

_line = itertools.count(1)


def call(
    conv: str,
    cid: str | None,
    name: str | None = "search",
    ts: float | None = None,
    size: int = 100,
    args: Any = None,
) -> ToolEvent:
    return ToolEvent(
        CALL,
        conv,
        cid,
        name,
        args if args is not None else {"q": cid},
        ts,
        "canonical",
        {"file": "t.jsonl", "line": next(_line)},
        size=size,
    )


def result(
    conv: str,
    cid: str | None,
    name: str | None = None,
    ts: float | None = None,
    size: int = 100,
    content: Any = "ok",
    is_error: bool | None = None,
) -> ToolEvent:
    return ToolEvent(
        RESULT,
        conv,
        cid,
        name,
        content,
        ts,
        "canonical",
        {"file": "t.jsonl", "line": next(_line)},
        size=size,
        is_error=is_error,
    )


def members(records: list[dict[str, Any]]) -> Counter[tuple[Any, ...]]:
    """Every input event an output record accounts for, as (file, line, block)."""
    seen: Counter[tuple[Any, ...]] = Counter()
    for rec in records:
        sides = [rec["call"], rec["result"]] if rec["kind"] == "pair" else [rec["event"]]
        for side in sides:
            seen[(side["source"]["file"], side["source"]["line"], side["block"])] += 1
    return seen


def key(ev: ToolEvent) -> tuple[Any, ...]:
    return (ev.source["file"], ev.source["line"], ev.block)
