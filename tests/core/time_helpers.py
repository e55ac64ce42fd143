"""Streams whose conversations keep different clocks: what several log shippers with different
delays, a backfill next to live traffic, or concatenated session files put into one stream."""

from __future__ import annotations

import random
from typing import Any

import orjson

T0 = 1_764_000_000_000  # 2025-11-24, ms


def canonical(conv: str, kind: str, cid: str | None, ts: float, name: str | None = "search") -> bytes:
    body: dict[str, Any] = {"conversation_id": conv, "type": kind, "ts": int(ts)}
    if cid is not None:
        body["id"] = cid
    if name is not None:
        body["name"] = name
    if kind == "tool_result":
        body["content"] = "ok"
    return orjson.dumps(body)


def lagging_conversations(
    seed: int, conversations: int = 300, spread_ms: float = 3_600_000.0, calls: tuple[int, int] = (2, 6)
) -> tuple[list[tuple[str, bytes]], int]:
    """`conversations` conversations of id-bearing calls, each answered 50 ms to 20 s later, read in
    the order they happened, but each conversation's timestamps lagging by its own delay, uniform
    over `spread_ms`. Returns (conversation id, record) in stream order and the number of calls."""
    rnd = random.Random(seed)
    timeline: list[tuple[float, int, str, bytes]] = []
    n_calls = 0
    for c in range(conversations):
        conv = f"lag-{c}"
        lag = rnd.uniform(0.0, spread_ms)
        t = rnd.uniform(0.0, 20 * 60_000.0)  # when it really happened, on one shared clock
        for i in range(rnd.randint(*calls)):
            cid = f"{conv}-{i}"
            answered = t + rnd.uniform(50.0, 20_000.0)
            timeline.append((t, len(timeline), conv, canonical(conv, "tool_call", cid, T0 + t - lag)))
            timeline.append(
                (answered, len(timeline), conv, canonical(conv, "tool_result", cid, T0 + answered - lag))
            )
            n_calls += 1
            t = answered + rnd.uniform(0.0, 30_000.0)
    timeline.sort()
    return [(conv, value) for _, _, conv, value in timeline], n_calls
