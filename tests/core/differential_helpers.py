"""The inputs of the differential tests (tests/core/test_native_differential.py and
test_native_tagging_differential.py), and the step that compares both engines on one of them.

Why apart: the strategies (records of every format, skewed clocks, FIFO steals, duplicates, ticks)
are shared by both differential suites and by tests/stream/test_partition_engines.py; the tests
themselves are what each suite asserts.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import orjson
from hypothesis import strategies as st

from stream_pairer.core import native
from stream_pairer.core.vocab import RawMode
from tests.reference.engine import Engine, EngineConfig
from tests.reference.pipeline import Pipeline

T0 = 1_750_000_000_000
CONVS = ("c0", "c1", "c2", "c3")
IDS = ("a", "b", "c", "d", "e")
NAMES = ("read", "write", "shell")


def _iso(ms: int, offset: str) -> str:
    text = datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds")
    if offset == "Z":
        return text.replace("+00:00", "Z")
    return text  # "+00:00": the same instant with an explicit offset


@st.composite
def payloads(draw: st.DrawFn) -> Any:
    return draw(
        st.one_of(
            st.none(),
            st.text(max_size=12),
            st.integers(min_value=-(2**63), max_value=2**64 - 1),
            st.dictionaries(
                st.sampled_from(["q", "path", "é", "\n", 'k"']),
                st.one_of(st.integers(-5, 5), st.text(max_size=6), st.booleans(), st.none()),
                max_size=3,
            ),
            st.lists(st.integers(0, 3), max_size=3),
        )
    )


def _arguments(payload: Any) -> st.SearchStrategy[Any]:
    """OpenAI `arguments`: a JSON-encoded object (orjson's spelling or another), text, or a value."""
    return st.sampled_from(
        [
            orjson.dumps(payload if isinstance(payload, dict) else {"v": payload}).decode(),
            json.dumps({"q": 1, "r": [1, 2]}),
            "not json {",
            "[1,2]",
            payload,
        ]
    )


STREAM_SHAPES = ("bedrock", "gemini", "mcp")


def _maybe_padded(draw: st.DrawFn, rid: str | None) -> str | None:
    """An id as loggers write it: as is, padded with blanks (trimmed by both), or blank (FIFO)."""
    if rid is None:
        return draw(st.sampled_from([None, "", "  "]))
    return draw(st.sampled_from([rid, rid, f" {rid} "]))


@st.composite
def stream_message(
    draw: st.DrawFn,
    shape: str,
    conv: str,
    is_call: bool,
    rid: str | None,
    name: str | None,
    payload: Any,
    ts: Any,
    *,
    odd: bool,
) -> dict[str, Any]:
    """One Bedrock Converse, Gemini or MCP record carrying tool events, wrapped in a logging
    record, bare, or in the provider's response envelope. With `odd`, sometimes a spelling the
    fast path must leave to Python (a mixed content array, a wrong type, a message without a tool
    event, a shape that is a dead letter)."""
    quirk = draw(st.sampled_from(["none"] * 5 + ["odd"])) if odd else "none"
    msg: dict[str, Any]
    if shape == "bedrock":
        blocks: list[Any] = [{"text": "Let me check."}] if draw(st.booleans()) else []
        for j in range(draw(st.integers(1, 3))):
            bid = _maybe_padded(draw, rid if j == 0 else draw(st.one_of(st.none(), st.sampled_from(IDS))))
            if is_call:
                use: dict[str, Any] = {"toolUseId": bid, "name": name, "input": payload}
                if bid is None and draw(st.booleans()):
                    del use["toolUseId"]
                blocks.append({"toolUse": use})
            else:
                res: dict[str, Any] = {
                    "toolUseId": bid,
                    "content": draw(st.sampled_from([[{"json": payload}], [{"text": "done"}], payload])),
                }
                status = draw(st.sampled_from(["absent", "success", "error", "null"]))
                if status != "absent":
                    res["status"] = None if status == "null" else status
                blocks.append({"toolResult": res})
        if quirk == "odd":
            blocks.append(
                draw(
                    st.sampled_from(
                        [
                            {"type": "text", "text": "an Anthropic block beside Bedrock ones"},
                            {"toolResult": {"toolUseId": "a", "status": 1}},
                            {"toolUse": "not an object"},
                            {"toolUse": {"toolUseId": "a", "input": {}}},  # no name: a dead letter
                            {"type": 3},
                        ]
                    )
                )
            )
        msg = {"role": "assistant" if is_call else "user", "content": blocks}
        wrap = draw(st.sampled_from(["wrapped", "bare", "envelope", "claude_code"]))
    elif shape == "gemini":
        parts: list[Any] = [{"text": "Sure."}] if draw(st.booleans()) else []
        snake = draw(st.booleans())  # the Python SDK's model_dump() spelling
        for j in range(draw(st.integers(1, 3))):
            pid = _maybe_padded(draw, rid if j == 0 else draw(st.one_of(st.none(), st.sampled_from(IDS))))
            body: dict[str, Any] = {"name": name}
            if pid is not None or draw(st.booleans()):
                body["id"] = pid  # Gemini ids are optional: absent, null, or blank pair FIFO
            if is_call:
                body["args"] = payload
                parts.append({"function_call" if snake else "functionCall": body})
            else:
                if name is None:
                    del body["name"]
                body["response"] = draw(
                    st.sampled_from(
                        [
                            {"output": payload},
                            {"error": {"code": 503, "message": "hub offline"}},
                            {"error": None, "output": payload},
                            payload,
                        ]
                    )
                )
                parts.append({"function_response" if snake else "functionResponse": body})
            if draw(st.booleans()):
                parts[-1]["thoughtSignature"] = "CiQB0e2K"
        if quirk == "odd":
            parts.append(
                draw(
                    st.sampled_from(
                        [
                            "not a part",
                            {"functionCall": {"args": {}}},  # no name: a dead letter
                            {"functionResponse": [1]},
                            {"functionCall": {"name": 7}},
                        ]
                    )
                )
            )
        msg = {"role": "model" if is_call else "user", "parts": parts}
        wrap = draw(st.sampled_from(["wrapped", "bare", "envelope", "wrapped_envelope", "claude_code"]))
    else:
        jid: Any = draw(st.sampled_from([rid, IDS.index(rid)])) if rid is not None else None
        msg = {"jsonrpc": "2.0"}
        if jid is not None or draw(st.booleans()):
            msg["id"] = jid
        if is_call:
            msg |= {"method": "tools/call", "params": {"name": name, "arguments": payload}}
            if draw(st.booleans()):
                msg["params"]["_meta"] = {"progressToken": "p-1"}
        else:
            result = draw(st.sampled_from(["content", "content", "structured", "error", "flag_only"]))
            if result == "error":
                msg["error"] = {"code": -32602, "message": "Unknown tool"}
            elif result == "structured":
                msg["result"] = {"structuredContent": payload}
            elif result == "flag_only":
                msg["result"] = {"isError": draw(st.booleans()), "content": payload}
            else:
                msg["result"] = {"content": [{"type": "text", "text": "ok"}], "structuredContent": payload}
                if draw(st.booleans()):
                    msg["result"]["isError"] = draw(st.sampled_from([True, False, None]))
        if quirk == "odd":
            msg = draw(
                st.sampled_from(
                    [
                        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}},
                        {"jsonrpc": "2.0", "id": 1, "result": {"tools": []}},
                        {"jsonrpc": "2.0", "id": 1, "result": None},
                        {"jsonrpc": "2.0", "id": 1, "result": {"content": [], "isError": "yes"}},
                        {"jsonrpc": "2.0", "id": 1, "method": "tools/call"},  # no params: a dead letter
                        {"jsonrpc": "2.0", "id": 1},  # none of method, result, error
                        {"jsonrpc": "2.0", "id": 1.5, "error": {"code": 1}},
                    ]
                )
            )
        wrap = draw(st.sampled_from(["wrapped", "bare"]))
    if wrap == "claude_code":
        rec: dict[str, Any] = {"type": "assistant" if is_call else "user", "sessionId": conv}
        rec |= {"timestamp": ts, "message": msg}
        return rec
    rec = {"conversation_id": conv}
    if ts is not None:
        rec[draw(st.sampled_from(["ts", "timestamp", "createTime"]))] = ts
    if wrap == "wrapped":
        rec["message"] = msg
    elif wrap == "bare":
        rec |= msg
    elif shape == "bedrock":  # a Converse response: the model's message under output
        rec |= {"output": {"message": msg}, "stopReason": "tool_use", "usage": {"inputTokens": 3}}
    else:  # a generateContent response: the content under candidates
        candidates = [{"content": msg, "finishReason": "STOP"}]
        if draw(st.booleans()):
            candidates.append({"finishReason": "SAFETY"})  # a blocked candidate has no content
        envelope = {"candidates": candidates, "modelVersion": "gemini-2.5-flash"}
        if wrap == "wrapped_envelope":
            rec["message"] = envelope
        else:
            rec |= envelope
    return rec


def _event_time(draw: st.DrawFn, ms: int) -> Any:
    """The record's time in one of the spellings both paths read, or none (undated)."""
    ts_kind = draw(st.sampled_from(["iso", "iso", "offset", "epoch_ms", "epoch_s", "none"]))
    return {
        "iso": _iso(ms, "Z"),
        "offset": _iso(ms, "+00:00"),
        "epoch_ms": ms,
        "epoch_s": ms / 1000,
        "none": None,
    }[ts_kind]


@st.composite
def stream_records(draw: st.DrawFn, skew: dict[str, int]) -> tuple[bytes, str | None, float | None]:
    """A well-formed Bedrock, Gemini or MCP record with tool events, as orjson writes it: the
    fast path must read every one of them itself."""
    conv = draw(st.sampled_from(CONVS))
    is_call = draw(st.booleans())
    ms = T0 + skew[conv] + draw(st.integers(0, 40)) * 250
    shape = draw(st.sampled_from(STREAM_SHAPES))
    rid = draw(st.one_of(st.none(), st.sampled_from(IDS)))
    name = draw(st.sampled_from(NAMES)) if is_call else draw(st.one_of(st.sampled_from(NAMES), st.none()))
    rec = draw(
        stream_message(shape, conv, is_call, rid, name, draw(payloads()), _event_time(draw, ms), odd=False)
    )
    key = draw(st.one_of(st.none(), st.just(conv)))
    return orjson.dumps(rec), key, draw(st.one_of(st.none(), st.just(float(ms + 5))))


@st.composite
def records(draw: st.DrawFn, skew: dict[str, int]) -> tuple[bytes, str | None, float | None]:
    """One input record: (bytes, Kafka key, arrival ms)."""
    conv = draw(st.sampled_from(CONVS))
    is_call = draw(st.booleans())
    step = draw(st.integers(0, 40))
    ms = T0 + skew[conv] + step * 250
    shape = draw(
        st.sampled_from(["canonical"] * 6 + ["anthropic", "openai", "responses", "legacy", *STREAM_SHAPES])
    )
    rid = draw(st.one_of(st.none(), st.sampled_from(IDS)))
    name = draw(st.one_of(st.sampled_from(NAMES), st.none())) if not is_call else draw(st.sampled_from(NAMES))
    payload = draw(payloads())
    ts = _event_time(draw, ms)
    key = draw(st.one_of(st.none(), st.just(conv)))
    arrival = draw(st.one_of(st.none(), st.just(float(ms + 5))))
    rec: dict[str, Any]
    if shape == "canonical":
        rec = {"conversation_id": conv if key is None or draw(st.booleans()) else None}
        rec["type"] = "tool_call" if is_call else "tool_result"
        id_field = draw(st.sampled_from(["id", "id", "call_id"]))
        if rid is not None:
            rec[id_field] = draw(st.sampled_from([rid, f" {rid} ", rid]))
        elif draw(st.booleans()):
            rec[id_field] = draw(st.sampled_from([None, "", "  "]))
        if name is not None:
            rec["name"] = name
        rec["arguments" if is_call else "content"] = payload
        if not is_call and draw(st.booleans()):
            rec["is_error"] = draw(st.sampled_from([True, False, None]))
        if ts is not None:
            rec[draw(st.sampled_from(["ts", "timestamp", "created_at"]))] = ts
    elif shape in STREAM_SHAPES:
        rec = draw(stream_message(shape, conv, is_call, rid, name, payload, ts, odd=True))
        if key is not None and "conversation_id" in rec and draw(st.booleans()):
            rec["conversation_id"] = None  # the Kafka key is the conversation id
    elif shape == "anthropic":
        n_blocks = draw(st.integers(1, 3))
        blocks: list[Any] = [{"type": "text", "text": "thinking aloud"}] if draw(st.booleans()) else []
        for j in range(n_blocks):
            bid = rid if j == 0 else draw(st.one_of(st.none(), st.sampled_from(IDS)))
            if is_call:
                blocks.append(
                    {
                        "type": draw(st.sampled_from(["tool_use", "tool_use", "server_tool_use"])),
                        "id": bid or "",
                        "name": name,
                        "input": payload,
                    }
                )
            else:
                block: dict[str, Any] = {"type": "tool_result", "tool_use_id": bid or "", "content": payload}
                if draw(st.booleans()):
                    block["is_error"] = draw(st.booleans())
                blocks.append(block)
        msg: dict[str, Any] = {"role": "assistant" if is_call else "user", "content": blocks}
        if draw(st.booleans()):  # a Claude Code session line
            rec = {
                "type": "assistant" if is_call else "user",
                "sessionId": conv,
                "timestamp": ts,
                "message": msg,
            }
        elif draw(st.booleans()):
            rec = {"conversation_id": conv, "message": msg}
            rec["ts" if draw(st.booleans()) else "other"] = ts
            if draw(st.booleans()):
                msg["ts"] = _iso(ms + 7, "Z")  # read only when the wrapper has no timestamp
        else:  # a bare message, its time beside it
            rec = {"conversation_id": conv, "ts": ts, **msg}
    elif shape == "responses":
        rec = {"conversation_id": conv, "created_at": ts}
        if is_call:
            custom = draw(st.booleans())
            rec |= {"type": "custom_tool_call" if custom else "function_call", "name": name}
            rec["input" if custom else "arguments"] = draw(_arguments(payload))
        else:
            rec |= {"type": draw(st.sampled_from(["function_call_output", "custom_tool_call_output"]))}
            rec["output"] = payload
        if rid is not None or draw(st.booleans()):
            rec["call_id"] = rid or ""
    elif shape == "legacy":
        if is_call:
            msg = {
                "role": "assistant",
                "function_call": {"name": name, "arguments": draw(_arguments(payload))},
            }
        else:
            msg = {"role": "function", "content": payload}
            if name is not None:
                msg["name"] = name
        rec = {"conversation_id": conv, "ts": ts}
        rec |= msg if draw(st.booleans()) else {"message": msg}  # bare, or in a logging wrapper
    else:
        if is_call:
            args = draw(
                st.one_of(
                    st.just(orjson.dumps(payload if isinstance(payload, dict) else {"v": payload}).decode()),
                    st.just(json.dumps({"q": 1, "r": [1, 2]})),  # valid JSON orjson would re-space
                    st.just("not json {"),
                    st.just(payload),
                )
            )
            msg = {
                "role": "assistant",
                "tool_calls": [
                    {"id": rid or "", "type": "function", "function": {"name": name, "arguments": args}}
                    for _ in range(draw(st.integers(1, 2)))
                ],
            }
        else:
            msg = {"role": "tool", "tool_call_id": rid or "", "content": payload}
            if name is not None:
                msg["name"] = name
        rec = {"conversation_id": conv, "ts": ts}
        rec |= msg if draw(st.booleans()) else {"message": msg}  # bare, or in a logging wrapper
    encoding = draw(st.sampled_from(["orjson"] * 6 + ["spaced", "ascii", "trailing_nl"]))
    if encoding == "spaced":
        raw = json.dumps(rec, ensure_ascii=False).encode()
    elif encoding == "ascii":
        raw = json.dumps(rec, separators=(",", ":")).encode()  # \uXXXX escapes: not orjson's bytes
    elif encoding == "trailing_nl":
        raw = orjson.dumps(rec) + b"\n"
    else:
        raw = orjson.dumps(rec)
    return raw, key, arrival


@st.composite
def fifo_steal(draw: st.DrawFn, skew: dict[str, int]) -> list[tuple[bytes, str | None, float | None]]:
    """An id-less result, then a call with an id and that call's own result, in one conversation:
    the id-less result FIFO-pairs with the call, so the call's own result is a `fifo_conflict`
    orphan. Random records rarely line the three up (and a small closed-id memory forgets the id),
    so they are drawn together; canonical or Anthropic (whose blank `tool_use_id` is no id)."""
    conv, rid, name = draw(st.sampled_from(CONVS)), draw(st.sampled_from(IDS)), draw(st.sampled_from(NAMES))
    ms = T0 + skew[conv] + draw(st.integers(0, 40)) * 250
    anthropic = draw(st.booleans())
    out: list[tuple[bytes, str | None, float | None]] = []
    for i, (is_call, eid) in enumerate([(False, None), (True, rid), (False, rid)]):
        if anthropic:
            block: dict[str, Any] = (
                {"type": "tool_use", "id": eid, "name": name, "input": {}}
                if is_call
                else {"type": "tool_result", "tool_use_id": eid or "", "content": "ok"}
            )
            msg = {"role": "assistant" if is_call else "user", "content": [block]}
            rec: dict[str, Any] = {"conversation_id": conv, "ts": _iso(ms + i * 250, "Z"), "message": msg}
        else:
            rec = {"conversation_id": conv, "type": "tool_call" if is_call else "tool_result", "name": name}
            if eid is not None:
                rec["id"] = eid
            rec["ts"] = _iso(ms + i * 250, "Z")
        out.append((orjson.dumps(rec), None, None))
    return out


@st.composite
def scenarios(draw: st.DrawFn, *, well_formed_streams: bool = False) -> tuple[EngineConfig, list[Any]]:
    skew = {c: draw(st.integers(-20_000, 20_000)) for c in CONVS}  # per-conversation clocks
    cfg = EngineConfig(
        call_timeout_ms=float(draw(st.sampled_from([1_000, 3_000, 8_000, 600_000]))),
        result_grace_ms=float(draw(st.sampled_from([0, 500, 2_000, 30_000]))),
        conversation_ttl_ms=float(draw(st.sampled_from([1_000, 5_000, 3_600_000]))),
        max_conversations=draw(st.sampled_from([1, 2, 4, 5, 5])),
        max_calls_per_conversation=draw(st.sampled_from([1, 2, 4, 8, 8])),
        max_held_bytes=draw(st.sampled_from([3_000, 12_000, 2**30, 2**30])),
        max_closed_ids_per_conversation=draw(st.integers(0, 4)),
        max_closed_ids=draw(st.integers(0, 6)),
        raw=draw(st.sampled_from(list(RawMode))),  # --raw: the side shapes of every mode
    )
    record = stream_records if well_formed_streams else records
    base = draw(st.lists(record(skew), min_size=1, max_size=40))
    if not well_formed_streams and draw(st.booleans()):
        lo = 0
        for rec in draw(fifo_steal(skew)):  # in order, each at a drawn place after the one before
            lo = draw(st.integers(lo, len(base)))
            base.insert(lo, rec)
            lo += 1
    ops: list[Any] = []
    for rec in base:
        ops.append(("feed", rec))
        roll = draw(st.integers(0, 9))
        if roll == 0:
            ops.append(("feed", draw(st.sampled_from(base))))  # a duplicate, anywhere
        elif roll in (1, 2):  # processing time (the sidecar's tick)
            ops.append(("advance", float(T0 + draw(st.integers(-30_000, 40_000)))))
    return cfg, ops


def _same_step(py: Pipeline, nat: native.NativePipeline, i: int, op: str, arg: Any) -> None:
    """One op of a scenario (`feed` a record or `advance` processing time) on both engines: the
    compiled core's output bytes must be the Python engine's records encoded."""
    if op == "feed":
        raw, key, arrival = arg
        src = {"file": "in.jsonl", "line": i}
        want = [orjson.dumps(r) for r in py.feed(raw, src, key=key, arrival_ms=arrival)]
        got = nat.feed(raw, src, key=key, arrival_ms=arrival)
    else:
        want = [orjson.dumps(r) for r in py.advance(arg)]
        got = nat.advance(arg)
    assert got == want, f"op {i} {op}: {arg!r}"


def _run_both(cfg: EngineConfig, ops: list[Any]) -> native.NativePipeline:
    py = Pipeline(Engine(cfg))
    nat = native.NativePipeline(cfg)
    for i, (op, arg) in enumerate(ops):
        _same_step(py, nat, i, op, arg)
        assert nat.core.held_bytes == py.engine.held_bytes
        assert nat.core.open_conversations == py.engine.open_conversations
        assert nat.core.closed_ids == py.engine.closed_ids
    want = [orjson.dumps(r) for r in py.flush("end_of_input", result_reason="no_call")]
    assert nat.flush("end_of_input", result_reason="no_call") == want
    assert nat.summary.as_dict() == py.summary.as_dict()
    assert dict(nat.core.evictions) == {k: v for k, v in py.engine.evictions.items() if v}
    return nat
