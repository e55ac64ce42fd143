"""Deterministic benchmark traffic: interleaved tool-call conversations as raw Kafka-style records.

Why a model of a conversation and not random records: the engine's cost depends on what it holds
(open conversations, open calls, the LRU touch, the FIFO scan), so the data must keep exactly `K`
conversations open at once. Each conversation is a *slot*; a slot that is picked emits the result
record(s) answering its open call(s), then its next call record(s), so after the warm-up (one call
per slot) every slot always holds at least one open call: `K` open conversations, steadily.

Mix (per the benchmark brief, all seeded):
* formats, per conversation: canonical 55 %, Anthropic message (in a logging wrapper) 25 %,
  OpenAI Chat Completions message (in a wrapper) 15 %, OpenAI Responses items 5 %;
* 10 % of call turns are parallel (2 to 4 calls in one turn: one message with several tool_use /
  tool_calls blocks, or several canonical records);
* 5 % of conversations are id-less (canonical without ids, or the legacy OpenAI `function_call`
  API), paired FIFO by tool name;
* 1 % of calls are never answered (orphans: they leave by timeout, or stay open at the end).

Records are about 1 KiB (600..1450 bytes, mean ~1 KiB), timestamps advance `dt_ms` per record.
Everything derives from `seed`: the same arguments give byte-identical records.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime

import orjson

EPOCH_MS = 1_750_000_000_000  # 2025-06-15: a fixed origin so the data is the same every run
TOOLS = (
    "read_file",
    "search_code",
    "run_shell",
    "web_search",
    "list_directory",
    "write_file",
    "get_weather",
    "query_database",
)
WORDS = (  # noqa: SIM905 - a sentence reads better than a list of words
    "the function returns a list of matching rows for the given query and the caller filters them by "
    "timestamp before rendering the table; error handling retries twice with backoff then gives up and "
    "logs the failure including the request id so that an operator can trace it later on "
    '한국어 로그 메시지도 섞여 있습니다 "quoted" path/to/src/module.py:42 {json: like} tab\tand\\slash'
).split(" ")


def _dumps(obj: object) -> bytes:
    """orjson.dumps, copied: a bytes object from orjson 3.13 keeps 4-8 KiB of RSS whatever its
    length (measured: 300k 1 KiB records held 2.3 GiB), which would swamp the memory figures."""
    return bytes(memoryview(orjson.dumps(obj)))


FORMAT_WEIGHTS = (("canonical", 55), ("anthropic", 25), ("openai_chat", 15), ("openai_responses", 5))


@dataclass(slots=True)
class Dataset:
    """Records as (key, value) bytes in send order. `warmup` opens one call per conversation."""

    warmup: list[tuple[bytes, bytes]]
    records: list[tuple[bytes, bytes]]
    conversations: int
    stats: Counter[str] = field(default_factory=Counter)

    @property
    def all(self) -> list[tuple[bytes, bytes]]:
        return self.warmup + self.records

    def describe(self) -> str:
        s = self.stats
        n = len(self.warmup) + len(self.records)
        total_bytes = s["bytes"]
        return (
            f"{n} records ({len(self.warmup)} warm-up), {s['calls']} calls, {s['results']} results, "
            f"{s['parallel_turns']} parallel turns, {s['idless_calls']} id-less calls, "
            f"{s['orphan_calls']} unanswered calls, mean {total_bytes / max(n, 1):.0f} B/record, "
            f"formats {dict(sorted((k[4:], v) for k, v in s.items() if k.startswith('fmt:')))}"
        )


class _Slot:
    __slots__ = ("conv", "fmt", "idless", "n", "open")

    def __init__(self, conv: str, fmt: str, idless: bool) -> None:
        self.conv = conv
        self.fmt = fmt
        self.idless = idless
        self.n = 0  # calls made, for unique call ids
        self.open: list[tuple[str | None, str]] = []  # (call id, tool name) awaiting a result


class Generator:
    def __init__(
        self,
        conversations: int,
        *,
        seed: int = 42,
        parallel: float = 0.10,
        idless: float = 0.05,
        orphan: float = 0.01,
        mean_bytes: int = 1024,
        dt_ms: float = 1.0,
    ) -> None:
        self.rng = random.Random(seed)
        self.parallel = parallel
        self.orphan = orphan
        self.mean_bytes = mean_bytes
        self.dt_ms = dt_ms
        self.t = 0
        self.stats: Counter[str] = Counter()
        # Text pool: slicing a long deterministic text is much cheaper than drawing words per record.
        rng = self.rng
        self.text = " ".join(rng.choice(WORDS) for _ in range(20_000))
        fmts = [f for f, w in FORMAT_WEIGHTS for _ in range(w)]
        self.slots: list[_Slot] = []
        for i in range(conversations):
            is_idless = rng.random() < idless
            fmt = rng.choice(("canonical", "openai_legacy")) if is_idless else rng.choice(fmts)
            conv = f"conv-{seed:x}-{i:07d}-{rng.getrandbits(40):010x}"
            self.slots.append(_Slot(conv, fmt, is_idless))

    # ------------------------------------------------------------------ helpers

    def _ts(self) -> str:
        self.t += 1
        ms = EPOCH_MS + int(self.t * self.dt_ms)
        dt = datetime.fromtimestamp(ms / 1000, tz=UTC)
        return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"

    def _blob(self, n: int) -> str:
        start = self.rng.randrange(0, len(self.text) - n - 1)
        return self.text[start : start + n]

    def _size(self) -> int:
        # Record bytes ~ uniform around the mean; the JSON envelope is ~250-400 B of it.
        return max(64, int(self.mean_bytes * self.rng.uniform(0.6, 1.4)) - 330)

    def _new_calls(self, s: _Slot) -> list[tuple[str | None, str]]:
        k = self.rng.randint(2, 4) if self.rng.random() < self.parallel else 1
        if k > 1:
            self.stats["parallel_turns"] += 1
        calls: list[tuple[str | None, str]] = []
        names = self.rng.sample(TOOLS, k)  # distinct names: id-less FIFO by name stays unambiguous
        for name in names:
            s.n += 1
            cid = None if s.idless else f"call_{s.conv[-10:]}_{s.n:05d}"
            calls.append((cid, name))
        self.stats["calls"] += k
        if s.idless:
            self.stats["idless_calls"] += k
        return calls

    # ------------------------------------------------------------------ record builders

    def _call_records(self, s: _Slot, calls: list[tuple[str | None, str]]) -> list[bytes]:
        per = self._size() // len(calls)
        fmt = s.fmt
        if fmt in ("canonical", "openai_legacy", "openai_responses") and len(calls) > 1:
            return [self._call_records(s, [c])[0] for c in calls]
        ts = self._ts()
        if fmt == "canonical":
            cid, name = calls[0]
            rec: dict[str, object] = {
                "conversation_id": s.conv,
                "type": "tool_call",
                "name": name,
                "arguments": {"query": self._blob(per), "limit": 20, "path": "src/app/main.py"},
                "ts": ts,
            }
            if cid is not None:
                rec["id"] = cid
            return [_dumps(rec)]
        if fmt == "anthropic":
            content: list[object] = [{"type": "text", "text": "Let me check that."}]
            content += [
                {
                    "type": "tool_use",
                    "id": cid,
                    "name": name,
                    "input": {"query": self._blob(per), "limit": 20},
                }
                for cid, name in calls
            ]
            msg = {
                "id": f"msg_{s.conv[-10:]}_{s.n}",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": content,
                "stop_reason": "tool_use",
            }
            return [_dumps({"conversation_id": s.conv, "ts": ts, "message": msg})]
        if fmt == "openai_chat":
            tool_calls = [
                {
                    "id": cid,
                    "type": "function",
                    "function": {
                        "name": name,
                        "arguments": orjson.dumps({"query": self._blob(per), "limit": 20}).decode(),
                    },
                }
                for cid, name in calls
            ]
            msg = {"role": "assistant", "content": None, "tool_calls": tool_calls}
            return [_dumps({"conversation_id": s.conv, "ts": ts, "message": msg})]
        if fmt == "openai_legacy":
            _, name = calls[0]
            args = orjson.dumps({"query": self._blob(per), "limit": 20}).decode()
            msg = {"role": "assistant", "content": None, "function_call": {"name": name, "arguments": args}}
            return [_dumps({"conversation_id": s.conv, "ts": ts, "message": msg})]
        # openai_responses: one function_call item per record, the conversation beside it
        cid, name = calls[0]
        item = {
            "type": "function_call",
            "id": f"fc_{s.n}",
            "call_id": cid,
            "name": name,
            "arguments": orjson.dumps({"query": self._blob(per), "limit": 20}).decode(),
            "status": "completed",
            "conversation_id": s.conv,
            "created_at": ts,
        }
        return [_dumps(item)]

    def _result_records(self, s: _Slot, calls: list[tuple[str | None, str]]) -> list[bytes]:
        fmt = s.fmt
        if fmt != "anthropic" and len(calls) > 1:
            return [self._result_records(s, [c])[0] for c in calls]
        per = self._size() // len(calls)
        self.stats["results"] += len(calls)
        ts = self._ts()
        if fmt == "canonical":
            cid, name = calls[0]
            rec: dict[str, object] = {
                "conversation_id": s.conv,
                "type": "tool_result",
                "name": name,
                "content": self._blob(per),
                "is_error": False,
                "ts": ts,
            }
            if cid is not None:
                rec["id"] = cid
            return [_dumps(rec)]
        if fmt == "anthropic":
            content = [
                {"type": "tool_result", "tool_use_id": cid, "content": self._blob(per), "is_error": False}
                for cid, _ in calls
            ]
            msg = {"role": "user", "content": content}
            return [_dumps({"conversation_id": s.conv, "ts": ts, "message": msg})]
        if fmt == "openai_chat":
            cid, _ = calls[0]
            msg = {"role": "tool", "tool_call_id": cid, "content": self._blob(per)}
            return [_dumps({"conversation_id": s.conv, "ts": ts, "message": msg})]
        if fmt == "openai_legacy":
            _, name = calls[0]
            msg = {"role": "function", "name": name, "content": self._blob(per)}
            return [_dumps({"conversation_id": s.conv, "ts": ts, "message": msg})]
        cid, _ = calls[0]
        item = {
            "type": "function_call_output",
            "id": f"fco_{s.n}",
            "call_id": cid,
            "output": self._blob(per),
            "conversation_id": s.conv,
            "created_at": ts,
        }
        return [_dumps(item)]

    # ------------------------------------------------------------------ streams

    def _open(self, s: _Slot, out: list[tuple[bytes, bytes]]) -> None:
        calls = self._new_calls(s)
        key = s.conv.encode()
        for raw in self._call_records(s, calls):
            out.append((key, raw))
        rng = self.rng
        for c in calls:
            if rng.random() < self.orphan:
                self.stats["orphan_calls"] += 1  # never answered: left out of `open`
            else:
                s.open.append(c)

    def step(self, s: _Slot, out: list[tuple[bytes, bytes]]) -> None:
        """Answer the slot's open calls, then open its next call turn."""
        if s.open:
            key = s.conv.encode()
            for raw in self._result_records(s, s.open):
                out.append((key, raw))
            s.open = []
        self._open(s, out)

    def warmup(self) -> list[tuple[bytes, bytes]]:
        out: list[tuple[bytes, bytes]] = []
        for s in self.slots:
            self._open(s, out)
        return out

    def stream(self, n_records: int) -> list[tuple[bytes, bytes]]:
        """At least `n_records` records of interleaved traffic over random slots."""
        out: list[tuple[bytes, bytes]] = []
        slots = self.slots
        rand = self.rng.randrange
        k = len(slots)
        while len(out) < n_records:
            self.step(slots[rand(k)], out)
        return out

    def drain(self) -> list[tuple[bytes, bytes]]:
        """Answer every still-open call (end of a finite run: all answerable calls get paired)."""
        out: list[tuple[bytes, bytes]] = []
        for s in self.slots:
            if s.open:
                key = s.conv.encode()
                for raw in self._result_records(s, s.open):
                    out.append((key, raw))
                s.open = []
        return out


def generate(
    conversations: int, records: int, *, seed: int = 42, drain: bool = False, **kw: float
) -> Dataset:
    """Warm-up (one call turn per conversation) + `records` interleaved records (+ the drain)."""
    g = Generator(conversations, seed=seed, **kw)  # type: ignore[arg-type]
    warm = g.warmup()
    recs = g.stream(records)
    if drain:
        recs += g.drain()
    ds = Dataset(warm, recs, conversations, g.stats)
    ds.stats["bytes"] = sum(len(v) for _, v in warm) + sum(len(v) for _, v in recs)
    for s in g.slots:
        ds.stats[f"fmt:{s.fmt}"] += 1
    return ds


if __name__ == "__main__":
    import argparse
    import sys
    import time

    p = argparse.ArgumentParser(description="Write benchmark records as JSONL (value only) to stdout.")
    p.add_argument("--conversations", type=int, default=1000)
    p.add_argument("--records", type=int, default=10_000)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--drain", action="store_true", help="answer every open call at the end")
    a = p.parse_args()
    t0 = time.perf_counter()
    d = generate(a.conversations, a.records, seed=a.seed, drain=a.drain)
    out = sys.stdout.buffer
    for _, v in d.all:
        out.write(v + b"\n")
    print(f"{d.describe()} in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
