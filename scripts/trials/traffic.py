"""Realistic mixed input for a trial: several formats, parallel calls, unanswered calls, duplicate
and unknown results, unreadable records, each conversation's clock following the wall clock.

Why apart: what a trial sends is independent of which fault it makes; every trial family draws
its traffic from here.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class Traffic:
    """Input records in production order: (key, value-maker). Values take their event time at send
    time, so each conversation's clock follows the wall clock the way real traffic does."""

    records: list[tuple[bytes, Callable[[float], bytes]]] = field(default_factory=list)
    unreadable: int = 0  # (the audit counts the events from the topic itself)

    def __len__(self) -> int:
        return len(self.records)


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def make_traffic(
    rng: random.Random,
    conversations: int,
    *,
    turns: tuple[int, int] = (2, 6),
    parallel: tuple[int, ...] = (1, 1, 1, 2, 3),
    unanswered: float = 0.05,
    bad: float = 0.01,
    payload_bytes: int = 200,
) -> Traffic:
    """Interleaved multi-conversation traffic in five input formats.

    Per conversation, a format is chosen; each turn is one assistant record with 1-3 parallel calls
    and the records with their results (sometimes reordered, sometimes missing, duplicated or
    pointing at an unknown id); a few records are unreadable. Conversations are interleaved at
    random but each keeps its own order (one message key per conversation -> one partition).
    """
    traffic = Traffic()
    per_conv: list[list[tuple[bytes, Callable[[float], bytes]]]] = []
    pad = "x" * payload_bytes
    for c in range(conversations):
        cid = f"conv-{c:06d}-{rng.randrange(1 << 30):08x}"
        fmt = rng.choice(["canonical", "anthropic", "claude_code", "openai_chat", "openai_legacy", "gemini"])
        recs: list[tuple[bytes, Callable[[float], bytes]]] = []
        key = cid.encode()
        for t in range(rng.randint(*turns)):
            n = rng.choice(parallel)
            ids = [f"call_{c}_{t}_{i}_{rng.randrange(1 << 20):05x}" for i in range(n)]
            names = [rng.choice(["search", "fetch", "weather", "calc"]) for _ in range(n)]
            answered = [rng.random() >= unanswered for _ in range(n)]
            calls, results = _turn(fmt, cid, ids, names, answered, pad=pad, rng=rng)
            recs += [(key, f) for f in calls]
            recs += [(key, f) for f in results]
            if rng.random() < bad:
                recs.append((key, lambda ts: b'{"conversation_id": "broken'))
                traffic.unreadable += 1
        per_conv.append(recs)
    # Interleave: repeatedly take the next record of a random conversation still holding some.
    live = [list(reversed(r)) for r in per_conv if r]
    while live:
        i = rng.randrange(len(live))
        traffic.records.append(live[i].pop())
        if not live[i]:
            live[i] = live[-1]
            live.pop()
    return traffic


def _turn(
    fmt: str,
    cid: str,
    ids: list[str],
    names: list[str],
    answered: list[bool],
    *,
    pad: str,
    rng: random.Random,
) -> tuple[list[Callable[[float], bytes]], list[Callable[[float], bytes]]]:
    """Makers for one turn's call record(s) and result record(s) in format `fmt`."""
    n = len(ids)
    order = [i for i in range(n) if answered[i]]
    rng.shuffle(order)  # results of parallel calls come back in any order
    extra = rng.random()
    calls: list[Callable[[float], bytes]] = []
    results: list[Callable[[float], bytes]] = []

    def ts_ms(ts: float) -> int:
        return int(ts * 1000)

    if fmt == "canonical":
        for i in range(n):
            calls.append(
                lambda ts, i=i: _dumps(
                    {
                        "conversation_id": cid,
                        "type": "tool_call",
                        "id": ids[i],
                        "name": names[i],
                        "arguments": {"q": pad},
                        "ts": ts_ms(ts),
                    }
                )
            )
        for i in order:
            results.append(
                lambda ts, i=i: _dumps(
                    {
                        "conversation_id": cid,
                        "type": "tool_result",
                        "id": ids[i],
                        "content": f"ok {pad}",
                        "ts": ts_ms(ts),
                    }
                )
            )
        if extra < 0.05 and order:  # a duplicate result
            results.append(results[0])
        elif extra < 0.08:  # a result whose call never existed
            results.append(
                lambda ts: _dumps(
                    {
                        "conversation_id": cid,
                        "type": "tool_result",
                        "id": "ghost-" + ids[0],
                        "content": "?",
                        "ts": ts_ms(ts),
                    }
                )
            )
    elif fmt in ("anthropic", "claude_code"):

        def wrap(role: str, content: list[Any], ts: float) -> bytes:
            if fmt == "claude_code":
                return _dumps(
                    {
                        "type": "assistant" if role == "assistant" else "user",
                        "sessionId": cid,
                        "timestamp": ts_ms(ts),
                        "message": {"role": role, "content": content},
                    }
                )
            return _dumps(
                {"conversation_id": cid, "ts": ts_ms(ts), "message": {"role": role, "content": content}}
            )

        blocks = [{"type": "text", "text": "working on it"}] + [
            {"type": "tool_use", "id": ids[i], "name": names[i], "input": {"q": pad}} for i in range(n)
        ]
        calls.append(lambda ts: wrap("assistant", blocks, ts))
        if order:
            res = [
                {
                    "type": "tool_result",
                    "tool_use_id": ids[i],
                    "content": f"ok {pad}",
                    "is_error": rng.random() < 0.1,
                }
                for i in order
            ]
            results.append(lambda ts: wrap("user", res, ts))
    elif fmt == "openai_chat":
        tcs = [
            {
                "id": ids[i],
                "type": "function",
                "function": {"name": names[i], "arguments": json.dumps({"q": pad})},
            }
            for i in range(n)
        ]
        calls.append(
            lambda ts: _dumps(
                {
                    "conversation_id": cid,
                    "created": ts,
                    "role": "assistant",
                    "content": None,
                    "tool_calls": tcs,
                }
            )
        )
        for i in order:
            results.append(
                lambda ts, i=i: _dumps(
                    {
                        "conversation_id": cid,
                        "created": ts,
                        "role": "tool",
                        "tool_call_id": ids[i],
                        "content": f"ok {pad}",
                    }
                )
            )
    elif fmt == "openai_legacy":  # no ids at all: FIFO by name, one call per turn
        for i in range(n):
            calls.append(
                lambda ts, i=i: _dumps(
                    {
                        "conversation_id": cid,
                        "created": ts,
                        "role": "assistant",
                        "function_call": {"name": names[i], "arguments": "{}"},
                    }
                )
            )
        for i in order:
            results.append(
                lambda ts, i=i: _dumps(
                    {
                        "conversation_id": cid,
                        "created": ts,
                        "role": "function",
                        "name": names[i],
                        "content": f"ok {pad}",
                    }
                )
            )
    else:  # gemini without ids: FIFO by function name
        parts = [{"functionCall": {"name": names[i], "args": {"q": pad}}} for i in range(n)]
        calls.append(
            lambda ts: _dumps({"conversation_id": cid, "ts": ts_ms(ts), "role": "model", "parts": parts})
        )
        if order:
            rparts = [{"functionResponse": {"name": names[i], "response": {"output": pad}}} for i in order]
            results.append(
                lambda ts: _dumps({"conversation_id": cid, "ts": ts_ms(ts), "role": "user", "parts": rparts})
            )
    return calls, results
