"""The compiled core against the Python engine, its executable specification.

For any input (interleavings, reorderings, drops, duplicates, id-less runs, small limits that force
evictions, conversations whose clocks are skewed against each other, undated records, ticks) both
pipelines must give the same output records as bytes, in the same order, and the same summary.
The inputs mix records the fast path reads with ones it must hand to the Python format layer
(other formats, whitespace, escapes or floats orjson would re-encode, odd ids), so both of the
core's entry points and the hand-over between them are compared.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stream_pairer import _native
from stream_pairer.core import native
from stream_pairer.core.toolschemas import ToolSchemaRegistry
from stream_pairer.core.vocab import RawMode
from tests.engine_helpers import engine_config
from tests.reference import tagging
from tests.reference.engine import Engine, EngineConfig
from tests.reference.pipeline import Pipeline
from tests.reference.tagging import FailureTagger

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


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_same_output_bytes_as_the_python_engine(scenario: tuple[EngineConfig, list[Any]]) -> None:
    _run_both(*scenario)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(well_formed_streams=True))
def test_stream_formats_are_read_by_the_fast_path(scenario: tuple[EngineConfig, list[Any]]) -> None:
    """Bedrock, Gemini and MCP traffic (id-less Gemini calls, MCP `error` and `isError` results,
    Bedrock `status: error`, every envelope): identical bytes, and not one record handed to Python."""
    nat = _run_both(*scenario)
    assert nat.fallthrough == {}
    assert nat.core.fast_records == nat.core.records
    assert set(nat.summary.events_by_format) <= set(STREAM_SHAPES)


@pytest.mark.parametrize("mode", list(RawMode))
def test_bench_data_is_read_by_the_fast_path_and_matches(mode: RawMode) -> None:
    """The benchmark's traffic (bench/datagen.py mix) with limits small enough to evict: identical
    bytes in every --raw mode, and every record read by the fast path (none handed to Python)."""
    import sys  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    import datagen  # noqa: PLC0415

    ds = datagen.generate(60, 3000, drain=True)
    cfg = EngineConfig(
        call_timeout_ms=20_000, max_conversations=40, max_held_bytes=150_000, max_closed_ids=80, raw=mode
    )
    ops = [("feed", (raw, key.decode(), None)) for key, raw in ds.all]
    _run_both(cfg, ops)
    nat = native.NativePipeline(cfg)
    for i, (key, raw) in enumerate(ds.all):
        nat.feed(raw, {"offset": i}, key=key.decode())
    assert nat.fallthrough == {}
    assert nat.core.fast_records == nat.core.records


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_float_encoding_is_orjsons(x: float) -> None:
    assert _native.dumps_float(x) == orjson.dumps(x)


@given(st.text())
def test_string_encoding_is_orjsons(s: str) -> None:
    assert _native.dumps_str(s) == orjson.dumps(s)


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=8,
)


@given(_json, st.sampled_from(["orjson", "spaced", "ascii"]))
def test_canonical_check_agrees_with_an_orjson_round_trip(value: Any, how: str) -> None:
    """The splice rule: bytes are kept as they are only when orjson would write them back unchanged."""
    try:
        raw = {
            "orjson": lambda: orjson.dumps(value),
            "spaced": lambda: json.dumps(value, ensure_ascii=False).encode(),
            "ascii": lambda: json.dumps(value, separators=(",", ":")).encode(),
        }[how]()
        round_trip = orjson.dumps(orjson.loads(raw))
    except (TypeError, ValueError, OverflowError):
        return  # not JSON orjson reads (an integer beyond 64 bits, an infinity): nothing to compare
    assert _native.is_canonical(raw) == (round_trip == raw)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"a":1,"a":2}',  # orjson keeps the last: not the same bytes
        b'{"a":"\\u00e9"}',  # orjson writes the character itself
        b'{"a":"\\/"}',
        b'{"a":1.50}',
        b'{"a":-0}',
        b'{"a":18446744073709551616}',
        b'{"a": 1}',
        orjson.dumps({f"k{i}": i for i in range(40)})[:-1] + b',"k3":0}',  # past the pairwise check
    ],
)
def test_non_canonical_values_are_refused(raw: bytes) -> None:
    assert not _native.is_canonical(raw)


def test_large_objects_without_duplicates_are_canonical() -> None:
    assert _native.is_canonical(orjson.dumps({f"k{i}": [i, {"k1": i}] for i in range(100)}))


FAST = {
    "canonical": {"conversation_id": "c", "type": "tool_call", "id": "a", "name": "n", "arguments": {}},
    "anthropic": {
        "conversation_id": "c",
        "message": {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "a", "name": "n", "input": {}}],
        },
    },
    "claude_code": {
        "type": "user",
        "sessionId": "c",
        "message": {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "a", "content": "ok"}],
        },
    },
    "openai_chat": {
        "conversation_id": "c",
        "message": {
            "role": "assistant",
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "n", "arguments": '{"x":1}'}}
            ],
        },
    },
    "openai_responses": {
        "conversation_id": "c",
        "type": "function_call_output",
        "call_id": "a",
        "output": "ok",
    },
    "openai_legacy": {"conversation_id": "c", "message": {"role": "function", "name": "n", "content": "ok"}},
}


# One record of each stream format and envelope: (record, the format its events are counted under).
STREAM_FAST: dict[str, tuple[dict[str, Any], str]] = {
    "bedrock_bare_call": (
        {
            "conversation_id": "c",
            "role": "assistant",
            "content": [{"text": "x"}, {"toolUse": {"toolUseId": "a", "name": "n", "input": {"q": 1}}}],
        },
        "bedrock",
    ),
    "bedrock_converse_response": (
        {
            "session_id": "c",
            "ts": "2025-02-11T07:30:01.218Z",
            "output": {
                "message": {"role": "assistant", "content": [{"toolUse": {"toolUseId": "a", "name": "n"}}]}
            },
            "stopReason": "tool_use",
        },
        "bedrock",
    ),
    "bedrock_wrapped_error_result": (
        {
            "conversation_id": "c",
            "message": {
                "role": "user",
                "content": [
                    {"toolResult": {"toolUseId": "a", "content": [{"text": "no"}], "status": "error"}}
                ],
            },
        },
        "bedrock",
    ),
    "gemini_idless_call": (
        {"conversation_id": "c", "role": "model", "parts": [{"functionCall": {"name": "n", "args": {}}}]},
        "gemini",
    ),
    "gemini_candidates": (
        {
            "conversation_id": "c",
            "createTime": "2025-06-18T13:21:44.809105Z",
            "candidates": [
                {"content": {"role": "model", "parts": [{"functionCall": {"id": "a", "name": "n"}}]}}
            ],
        },
        "gemini",
    ),
    "gemini_wrapped_snake_error": (
        {
            "conversation_id": "c",
            "message": {
                "role": "user",
                "parts": [{"function_response": {"id": None, "name": "n", "response": {"error": "boom"}}}],
            },
        },
        "gemini",
    ),
    "mcp_wrapped_call": (
        {
            "session_id": "c",
            "ts": "2025-06-20T10:00:03.100Z",
            "message": {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "n", "arguments": {}},
            },
        },
        "mcp",
    ),
    "mcp_bare_is_error": (
        {"conversation_id": "c", "jsonrpc": "2.0", "id": "r", "result": {"content": [], "isError": True}},
        "mcp",
    ),
    "mcp_error_member": (
        {"conversation_id": "c", "message": {"jsonrpc": "2.0", "id": 4, "error": {"code": -32602}}},
        "mcp",
    ),
    "openai_bare_tool_message": (
        {"conversation_id": "c", "role": "tool", "tool_call_id": "a", "content": "ok"},
        "openai_chat",
    ),
}


@pytest.mark.parametrize("case", sorted(STREAM_FAST))
def test_each_stream_shape_is_read_without_python(case: str) -> None:
    rec, fmt = STREAM_FAST[case]
    nat = native.NativePipeline()
    raw = orjson.dumps(rec)
    want = [orjson.dumps(r) for r in Pipeline(Engine()).feed(raw, {"line": 1})]
    assert nat.feed(raw, {"line": 1}) == want
    assert nat.fallthrough == {}
    assert nat.summary.events_by_format == {fmt: 1}


@pytest.mark.parametrize("fmt", sorted(FAST))
def test_each_fast_format_is_read_without_python(fmt: str) -> None:
    nat = native.NativePipeline()
    raw = orjson.dumps(FAST[fmt])
    want = [orjson.dumps(r) for r in Pipeline(Engine()).feed(raw, {"line": 1})]
    assert nat.feed(raw, {"line": 1}) == want
    assert nat.fallthrough == {}
    assert nat.summary.events_by_format == {fmt: 1}


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (json.dumps(FAST["canonical"]).encode(), "not_canonical"),  # spaces orjson would drop
        (b'{"conversation_id":"c","candidates":[{"content":{"parts":[]}}]}', "no_events"),  # Gemini
        (b'{"conversation_id":"c","choices":[{"message":{"role":"assistant"}}]}', "other_format"),
        # a Bedrock block beside an Anthropic one: Python reads both kinds, the fast path neither
        (
            b'{"conversation_id":"c","role":"assistant","content":[{"type":"text","text":"hi"},'
            b'{"toolUse":{"toolUseId":"a","name":"n","input":{}}}]}',
            "mixed_blocks",
        ),
        (
            b'{"conversation_id":"c","role":"assistant","content":[{"toolUse":{"toolUseId":"a"}}]}',
            "missing_name",
        ),
        (b'{"conversation_id":"c","role":"user","content":[{"toolResult":{"status":true}}]}', "field_type"),
        (b'{"conversation_id":"c","role":"user","parts":[{"text":"hi"}]}', "no_events"),  # a request start
        (b'{"conversation_id":"c","role":"model","parts":{"functionCall":{"name":"n"}}}', "field_type"),
        (b'{"conversation_id":"c","jsonrpc":"2.0","method":"notifications/progress"}', "no_events"),
        (
            b'{"conversation_id":"c","jsonrpc":"2.0","id":1,"result":{"content":[],"isError":"no"}}',
            "field_type",
        ),
        (b'{"conversation_id":"c","message":{"jsonrpc":"2.0","id":1}}', "unknown_shape"),
        (
            b'{"conversation_id":"c","message":{"jsonrpc":"2.0","id":1,"method":"tools/call"}}',
            "missing_field",
        ),
        (b'{"conversation_id":"c","jsonrpc":"2.0","id":true,"error":{"code":1}}', "field_type"),
        # a bare message whose time would be read from a wire exchange's request: Python's
        (b'{"conversation_id":"c","request":{"ts":1},"jsonrpc":"2.0","id":1,"error":{}}', "other_format"),
        (b'{"conversation_id":"c","type":"tool_call","name":"n","ts":"15 June 2025"}', "ts"),
        (b"[1]", "not_an_object"),
    ],
)
def test_records_handed_to_python_are_counted_by_reason(raw: bytes, reason: str) -> None:
    nat = native.NativePipeline()
    py = Pipeline(Engine())
    assert nat.feed(raw, {"line": 1}) == [orjson.dumps(r) for r in py.feed(raw, {"line": 1})]
    assert nat.fallthrough == {reason: 1}


def test_time_model_scenarios_match() -> None:
    """The issue-11 time model, step by step: conversations hours apart keep their own clocks (no
    cross-conversation timeout), an id-less result written before its call waits the grace and pairs
    FIFO, a clock moved past a deadline fires it, and the processing-time tick closes a quiet one."""
    hour = 3_600_000

    def rec(conv: str, typ: str, ts: int, **kw: Any) -> tuple[bytes, None, None]:
        body = {"conversation_id": conv, "type": typ, "ts": _iso(T0 + ts, "Z"), **kw}
        return orjson.dumps(body), None, None

    cfg = EngineConfig(call_timeout_ms=60_000, result_grace_ms=10_000)
    ops: list[Any] = [
        ("feed", rec("late", "tool_call", 0, id="a", name="read")),
        ("feed", rec("early", "tool_call", 5 * hour, id="b", name="read")),  # hours ahead: no timeout
        ("feed", rec("late", "tool_result", 1_000, id="a", content="ok")),  # still pairs by id
        ("feed", rec("late", "tool_result", 2_000, name="write", content="x")),  # id-less, no call yet
        ("feed", rec("late", "tool_call", 2_500, name="write")),  # takes it: fifo by name
        ("feed", rec("late", "tool_call", 3_000, id="c", name="read")),
        ("feed", rec("late", "tool_result", 200_000, name="shell", content="y")),  # clock passes c's deadline
        ("advance", float(T0)),  # processing time starts: held events count from here
        ("advance", float(T0 + 120_000)),  # quiet for longer than every timeout: all closed
    ]
    _run_both(cfg, ops)
    py = Pipeline(Engine(cfg))
    reasons = []
    for i, (op, arg) in enumerate(ops):
        out = py.feed(arg[0], {"line": i}) if op == "feed" else py.advance(arg)
        reasons += [(r["kind"], r.get("reason") or r.get("fifo_by") or r["match"]) for r in out]
    assert reasons == [
        ("pair", "id"),
        ("pair", "name"),
        ("orphan_call", "timeout"),  # c: its own conversation's clock passed its deadline
        ("orphan_result", "no_call"),  # the tick, oldest processing deadline first: grace 10 s
        ("orphan_call", "timeout"),  # b: timeout 60 s of processing time
    ]


def test_canonical_result_with_id_and_call_id_reads_alike() -> None:
    """On a result `call_id` wins over `id` in both cores (canonical.py)."""
    nat = native.NativePipeline()
    py = Pipeline(Engine())
    lines = [
        b'{"conversation_id":"c","type":"tool_call","id":"k2","name":"t","arguments":{}}',
        b'{"conversation_id":"c","type":"tool_result","id":"evt-99","call_id":"k2","content":"x"}',
    ]
    for n, raw in enumerate(lines):
        got = nat.feed(raw, {"line": n})
        assert got == [orjson.dumps(r) for r in py.feed(raw, {"line": n})]
    assert nat.fallthrough == {}
    assert b'"match":"id"' in got[0]


@pytest.mark.parametrize(
    "source",
    [
        {"topic": "t", "partition": 3, "offset": 7},  # the usual one: keys out of order
        {'z"q': 1, "z": 2, "a\\b": 3, "\u00e9": 4, "\x01": 5, "ü": 6, "\U0001f600": 7},  # escaped, non-ASCII
        {"b": {"y": [1, {"d": 1, "c": 2.5}], "x": None}, "a": [], "c": {}},  # nested, empty
    ],
)
def test_pair_ids_sort_source_keys_as_orjson_does(source: dict[str, Any]) -> None:
    """`pair_id` hashes the source with its keys sorted (OPT_SORT_KEYS): the core sorts unescaped
    keys by their bytes and decodes escaped ones; both must give the Python engine's id."""
    nat = native.NativePipeline()
    py = Pipeline(Engine())
    lines = [
        b'{"conversation_id":"c","type":"tool_call","id":"k","name":"t","arguments":{}}',
        b'{"conversation_id":"c","type":"tool_result","call_id":"k","content":"x"}',
    ]
    for raw in lines:
        got = nat.feed(raw, source)
        assert got == [orjson.dumps(r) for r in py.feed(raw, source)]
    assert orjson.loads(got[0])["kind"] == "pair"


@pytest.mark.parametrize("field", ["conversation_id", "id", "name"])
def test_an_id_over_max_id_bytes_is_the_same_dead_letter(field: str) -> None:
    """--max-id-bytes (issue 13): the fast path hands such a record to Python, which dead-letters it."""
    rec: dict[str, object] = {
        "conversation_id": "c",
        "type": "tool_call",
        "id": "a",
        "name": "n",
        "arguments": {},
    }
    rec[field] = "x" * 2000
    raw = orjson.dumps(rec)
    nat = native.NativePipeline()
    want = [orjson.dumps(r) for r in Pipeline(Engine()).feed(raw, {"line": 1})]
    assert [orjson.loads(w)["kind"] for w in want] == ["dead_letter"]
    assert nat.feed(raw, {"line": 1}) == want
    assert nat.fallthrough == {"long_id": 1}


# ---------------------------------------------------------------- failure tagging (tagging.py)

# Result payloads covering every rule of tagging.classify_result / input_rejection: ok, empty and
# error in each shape (plain text, JSON in a string, content lists of Anthropic / MCP / OpenAI /
# Bedrock blocks, the canonical status object, MCP CallToolResult, JSON-RPC responses and error
# objects, Gemini's output/error wrappers) and the rejection texts the heuristic knows, Korean too.
RESULT_PAYLOADS: list[Any] = [
    None,
    "",
    "  \n",
    "null",
    "[]",
    "{ }",
    "[ 1 ]",
    "ok",
    "42 files",
    "x" * 250,
    '{"status":"error","hint":"bad path"}',
    '{"status": "ok", "data": []}',
    '{"status":"empty"}',
    '"\\"null\\""',
    '{"output": ""}',
    '{"error": "boom"}',
    '{"result": {"status": "ok", "data": "fine"}}',
    '{"a": ',
    {"status": "ok", "data": "x"},
    {"status": "ok", "data": "  "},
    {"status": "error", "data": "Invalid params: q"},
    {"status": "error", "hint": "y" * 300},
    {"status": "bogus"},
    {"error": {"code": -32602, "message": "Invalid params: path"}},
    {"error": None, "other": 1},
    {"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "bad\nmore"}},
    {"jsonrpc": "2.0", "id": 1, "error": {"code": -32000, "message": "server down"}},
    {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": ""}]}},
    {"content": [{"type": "text", "text": "Input validation error: 'x' is required"}], "isError": True},
    {"content": [{"type": "text", "text": "fine"}], "structuredContent": {"status": "empty"}},
    {"content": [], "_meta": {}},
    {"code": True, "message": "m"},
    {"code": 5, "message": "m", "data": None},
    {"code": 5.0, "message": "m"},
    {"output": {"output": {"output": {"output": {"output": ""}}}}},
    [{"type": "text", "text": "Error: invalid arguments for tool read"}],
    [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
    [{"type": "text", "text": " "}, {"type": "text", "text": "second"}],
    [{"type": "text", "text": " "}, {"type": "image", "source": {}}],
    [{"type": "output_text", "text": '{"status":"empty"}'}],
    [{"text": "bedrock"}],
    [{"json": {"status": "error", "hint": "h"}}],
    [{"json": []}, {"text": "x"}],
    [{"type": "other"}],
    [{"type": None}],
    [1, 2],
    0,
    False,
    1.5,
    "입력이 거부되었다: path는 필수",
    "잘못된 인자: q",
    "인자가 유효하지 않습니다",
    "MCP error -32602: Invalid arguments for tool x",
    "<tool_use_error>InputValidationError: bad</tool_use_error>",
    "Input rejected: missing q",
    "Error - The arguments were rejected",
    "parameters failed schema validation",
    "error: something broke\nsecond line",
    "the result mentions invalid input later",
    "  \u2003INVALID INPUT",
    "\x1cinvalid params",
    "Invalid params: " + "x" * 400,
    "y" * 321 + "\n\t" + "z" * 400,
    "null" + " " * 400,
]

# Call arguments: few enough that identical calls repeat; equal values in another key order or
# spelling (repeats for the tagger), and strings that are JSON of another type or not JSON.
CALL_ARGUMENTS: list[Any] = [
    {"path": "a"},
    {"path": "b"},
    {"a": 1, "b": [1, {"c": None}]},
    {"b": [1, {"c": None}], "a": 1},
    {"q": 1},
    {"q": 1.0},
    {"q": True},
    {"q": "1"},
    None,
    [1, 2],
    "[1,2]",
    "not json {",
    "",
]

TOOL_SCHEMAS: list[Any] = [
    {
        "name": "read",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
    {"type": "function", "function": {"name": "write", "parameters": {"type": "object", "maxProperties": 1}}},
]


@st.composite
def tagged_records(draw: st.DrawFn, skew: dict[str, int]) -> tuple[bytes, str | None, float | None]:
    """A record for the tagging scenarios: the usual mix, a call or result with the payloads above
    (fast path and Python path shapes), or a prompt: a request start (alone, or in a wire exchange
    before the events of the same record)."""
    kind = draw(st.sampled_from(["mix", "call", "call", "result", "result", "prompt"]))
    if kind == "mix":
        return draw(records(skew))
    conv = draw(st.sampled_from(CONVS))
    ms = T0 + skew[conv] + draw(st.integers(0, 40)) * 250
    ts = draw(st.sampled_from([_iso(ms, "Z"), None]))
    rid = draw(st.one_of(st.none(), st.sampled_from(IDS)))
    name = draw(st.sampled_from(NAMES))
    shape = draw(st.sampled_from(["canonical", "canonical", "anthropic", "openai", "responses"]))
    rec: dict[str, Any]
    if kind == "prompt":
        prompt = draw(
            st.sampled_from(
                [
                    {
                        "type": "user",
                        "sessionId": conv,
                        "timestamp": ts,
                        "message": {"role": "user", "content": "go"},
                    },
                    {
                        "type": "user",
                        "sessionId": conv,
                        "timestamp": ts,
                        "message": {"role": "user", "content": [{"type": "text", "text": "go"}]},
                    },
                    {
                        "type": "user",
                        "isSidechain": True,
                        "sessionId": conv,
                        "message": {"role": "user", "content": "subagent"},
                    },
                    {"conversation_id": conv, "ts": ts, "message": {"role": "user", "content": "hello"}},
                    {
                        "conversation_id": conv,
                        "ts": ts,
                        "request": {"body": {"messages": [{"role": "user", "content": "go"}]}},
                        "response": {
                            "body": {
                                "role": "assistant",
                                "content": [
                                    {
                                        "type": "tool_use",
                                        "id": rid or "w",
                                        "name": name,
                                        "input": {"path": "a"},
                                    },
                                    {"type": "tool_use", "id": "w2", "name": name, "input": {"path": "a"}},
                                ],
                            }
                        },
                    },
                ]
            )
        )
        return orjson.dumps(prompt), None, None
    if kind == "call":
        args = draw(st.sampled_from(CALL_ARGUMENTS))
        if shape == "canonical":
            rec = {"conversation_id": conv, "type": "tool_call", "id": rid, "name": name, "arguments": args}
        elif shape == "anthropic":
            block = {"type": "tool_use", "id": rid or "", "name": name, "input": args}
            rec = {"conversation_id": conv, "message": {"role": "assistant", "content": [block]}}
        elif shape == "openai":
            fn = {"name": name, "arguments": args if isinstance(args, str) else orjson.dumps(args).decode()}
            call = {"id": rid or "", "type": "function", "function": fn}
            rec = {"conversation_id": conv, "message": {"role": "assistant", "tool_calls": [call]}}
        else:
            custom = draw(st.booleans())
            rec = {
                "conversation_id": conv,
                "type": "custom_tool_call" if custom else "function_call",
                "name": name,
            }
            rec["input" if custom else "arguments"] = (
                args if isinstance(args, str) else orjson.dumps(args).decode()
            )
            rec["call_id"] = rid or ""
    else:
        content = draw(st.sampled_from(RESULT_PAYLOADS))
        is_error = draw(st.sampled_from([None, None, True, False]))
        if shape == "canonical":
            rec = {"conversation_id": conv, "type": "tool_result", "call_id": rid, "content": content}
            if is_error is not None:
                rec["is_error"] = is_error
        elif shape == "anthropic":
            block = {"type": "tool_result", "tool_use_id": rid or "", "content": content}
            if is_error is not None:
                block["is_error"] = is_error
            rec = {"type": "user", "sessionId": conv, "message": {"role": "user", "content": [block]}}
        elif shape == "openai":
            rec = {
                "conversation_id": conv,
                "message": {"role": "tool", "tool_call_id": rid or "", "content": content},
            }
        else:
            rec = {
                "conversation_id": conv,
                "type": "function_call_output",
                "call_id": rid or "",
                "output": content,
            }
    rec["ts" if "sessionId" not in rec else "timestamp"] = ts
    return orjson.dumps(rec), None, draw(st.one_of(st.none(), st.just(float(ms + 5))))


TaggerSettings = dict[str, Any]


@st.composite
def tagged_scenarios(draw: st.DrawFn) -> tuple[EngineConfig, list[Any], TaggerSettings]:
    skew = {c: draw(st.integers(-20_000, 20_000)) for c in CONVS}
    cfg = engine_config(draw, small_held_bytes=6_000)
    tagger: TaggerSettings = {
        "max_calls_per_conversation": draw(st.sampled_from([0, 1, 2, 12])),
        "max_conversation_ms": float(draw(st.sampled_from([0, 500, 1_500, 600_000]))),
        "max_hashes_per_conversation": draw(st.sampled_from([1, 2, 256])),
        "max_hashes_total": draw(st.sampled_from([1, 3, 200_000])),
        "schemas": draw(st.booleans()),
    }
    base = draw(st.lists(tagged_records(skew), min_size=1, max_size=40))
    ops: list[Any] = []
    for rec in base:
        ops.append(("feed", rec))
        roll = draw(st.integers(0, 9))
        if roll == 0:
            ops.append(("feed", draw(st.sampled_from(base))))
        elif roll in (1, 2):
            ops.append(("advance", float(T0 + draw(st.integers(-30_000, 40_000)))))
    return cfg, ops, tagger


def _tagger(settings: TaggerSettings) -> FailureTagger:
    kw = dict(settings)
    schemas = ToolSchemaRegistry.from_definitions(TOOL_SCHEMAS) if kw.pop("schemas") else None
    return FailureTagger(schemas, **kw)


def _run_both_tagged(cfg: EngineConfig, ops: list[Any], settings: TaggerSettings) -> None:
    py_tagger = _tagger(settings)
    py = Pipeline(Engine(cfg, py_tagger))
    nat = native.NativePipeline(cfg, tagger=_tagger(settings))
    for i, (op, arg) in enumerate(ops):
        _same_step(py, nat, i, op, arg)
        assert nat.remembered_calls == py_tagger.remembered_calls
    want = [orjson.dumps(r) for r in py.flush("end_of_input", result_reason="no_call")]
    assert nat.flush("end_of_input", result_reason="no_call") == want
    assert nat.summary.as_dict() == py.summary.as_dict()
    assert nat.crossings == py_tagger.crossings


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tagged_scenarios())
def test_tagged_output_is_the_python_taggers(
    scenario: tuple[EngineConfig, list[Any], TaggerSettings],
) -> None:
    """Tagging on: the same `outcome`, `failures`, `failure`, `failure_detail` bytes, summary
    counters (outcomes, failures) and loop-cap crossings as the Python tagger, under small caps
    (0 = off), repeats, request starts, schemas, evictions, ticks and the final flush."""
    _run_both_tagged(*scenario)


def test_tagged_bench_data_matches() -> None:
    """The benchmark's traffic with tagging at its defaults: identical bytes, all on the fast path."""
    import sys  # noqa: PLC0415
    from pathlib import Path  # noqa: PLC0415

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    import datagen  # noqa: PLC0415

    ds = datagen.generate(60, 3000, drain=True)
    cfg = EngineConfig(
        call_timeout_ms=20_000, max_conversations=40, max_held_bytes=150_000, max_closed_ids=80
    )
    ops = [("feed", (raw, key.decode(), None)) for key, raw in ds.all]
    settings: TaggerSettings = {
        "max_calls_per_conversation": 3,
        "max_conversation_ms": 5_000.0,
        "schemas": False,
    }
    settings |= {"max_hashes_per_conversation": 256, "max_hashes_total": 50}
    _run_both_tagged(cfg, ops, settings)


# Long text results: the compiled tagger judges a text past 300 characters by its unescaped start
# alone (pytag.rs text_head). Around that cut: escapes split by it, multi-byte and escaped
# characters, refusals, leading blanks, and the whole-text rules the start cannot settle
# (blank, `null`, empty brackets, JSON in the string, the error flag's first line).
LONG_TEXTS: list[str] = [
    "word " * 100,
    "Invalid params: " + "x" * 400,
    "Error - The arguments were rejected" + " " * 300 + "tail",
    "error: something broke " + "e" * 400 + "\nsecond line",
    *("y" * n + '\n\t\x01\\"' + "z" * 400 for n in range(316, 330)),
    *("y" * n + "\u00e9\u2003\U0001f600" + "z" * 400 for n in range(318, 326)),
    "\x01" * 400,
    "\x01" * 299 + "invalid input" + "q" * 300,
    "입력이 거부되었다 " * 60,
    "\u2003" * 310 + "Invalid input" + "x" * 50,
    " \n" * 200 + "invalid arguments" + "x" * 100,
    "null" + " " * 400,
    " " * 400 + "x",
    " " * 400,
    "[" + " " * 400 + "]",
    "[1" + " " * 400 + "]",
    "{" + "\n" * 400 + "}",
    '{"status":"error","hint":"' + "h" * 400 + '"}',
    '"' + "s" * 400 + '"',
    "nul" + "l" * 400,
    "nulls" + " " * 400,
]


@pytest.mark.parametrize("is_error", [None, True, False])
def test_long_text_results_are_judged_as_python_does(is_error: bool | None) -> None:
    """Each long text result, paired with its call, tagged alike by both engines (outcome,
    failures, detail bytes): judging a long text by its start changes no verdict."""
    ops: list[Any] = []
    for i, text in enumerate(LONG_TEXTS):
        ts = _iso(T0 + 10 * i, "Z")
        call = {"conversation_id": "c0", "type": "function_call", "name": "t", "arguments": "{}"}
        result: dict[str, Any] = {"conversation_id": "c0", "type": "tool_result", "content": text}
        if is_error is not None:
            result["is_error"] = is_error
        for rec in (call, result):
            rec |= {"call_id": f"r{i}", "ts": ts}
            ops.append(("feed", (orjson.dumps(rec), None, None)))
    settings: TaggerSettings = {
        "max_calls_per_conversation": 0,
        "max_conversation_ms": 0.0,
        "max_hashes_per_conversation": 256,
        "max_hashes_total": 200_000,
        "schemas": False,
    }
    _run_both_tagged(EngineConfig(), ops, settings)


_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from(["", " ", "null", "ok", "[]", "{}", "status", "error", "text", "json", "content"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "status",
                    "data",
                    "hint",
                    "type",
                    "text",
                    "json",
                    "content",
                    "isError",
                    "error",
                    "code",
                    "message",
                    "result",
                    "output",
                    "jsonrpc",
                    "structuredContent",
                    "_meta",
                ]
            ),
            inner,
            max_size=3,
        )
    ),
    max_leaves=10,
)


@settings(max_examples=500, deadline=None)
@given(
    st.one_of(_json_values, st.sampled_from(RESULT_PAYLOADS)),
    st.sampled_from([None, True, False]),
    st.booleans(),
)
def test_result_verdict_is_classify_results(value: Any, is_error: bool | None, as_text: bool) -> None:
    """The compiled classify_result against tagging.classify_result, on random JSON and on the same
    JSON given as text (JSON in a string)."""
    if as_text:
        value = orjson.dumps(value).decode()
    want = tagging.classify_result(value, is_error)
    got = _native.classify_result(orjson.dumps(value), is_error)
    assert got == (want.outcome, want.why, want.text, None if want.code is None else str(want.code))


@pytest.mark.parametrize("text", [t for t in RESULT_PAYLOADS if isinstance(t, str)] + [
    "입력값이 거부됨", "매개변수가 잘못되었습니다", "유효하지 않은 인수", "Invalid Parameter: x",
    "invalid inputs", "error -32602 : invalid params", "mcp  error: the input is invalid",
    "Input  Validation Error", "invalid", "Error: The parameters are invalid.\nDetails",
    "ERROR:Input rejected - input rejected", "\u00a0Invalid argument", "the argument was rejectedly",
    "arguments failed validation", "invalid paramsx",
    # each first character the compiled check lets through to the patterns, after blanks
    "\u2028invalid input", "\x1f\x1eInvalid params", "Zinvalid input", "\u00a0\u3000잘못된 입력",
    "  매개변수가 잘못됨", "The input was rejected", "PARAMETERS ARE INVALID", "Arguments were rejected",
    "<tool_use_error> error: invalid input", "Mcp Error -1: invalid input", "EError: invalid input",
])  # fmt: skip
def test_rejection_heuristic_is_the_python_patterns(text: str) -> None:
    """The Rust `regex` translation of _PREFIX/_REJECTION (Python's `\\s` and re.I) on the known texts."""
    assert _native.input_rejection(text) == tagging.input_rejection(tagging.Verdict("ok", "", text))


def test_repeat_check_ignores_key_order_and_tells_values_apart() -> None:
    """The repeat identity of (tool, arguments): object keys in any order, null arguments as {},
    a JSON-string argument as its decoded value are the same call; 1, 1.0, true and "1" are not,
    nor is the same value for another tool. Both cores flag exactly the Python tagger's repeats."""
    calls: list[tuple[str, Any]] = [
        ("read", {"a": 1, "b": [1, {"c": None, "d": 2}]}),
        ("read", {"b": [1, {"d": 2, "c": None}], "a": 1}),  # repeat: key order
        ("read", {"q": 1}),
        ("read", {"q": 1.0}),
        ("read", {"q": True}),
        ("read", {"q": "1"}),
        ("write", {"q": 1}),
        ("read", [1, 2]),
        ("read", "[1, 2]"),  # repeat: a JSON string decodes to the same list
        ("read", None),
        ("read", {}),  # repeat: absent arguments are {}
        ("read", {"q": -0.0}),
        ("read", {"q": 0.0}),
        ("read", {"q": 1}),  # repeat
    ]
    want_repeats = [1, 8, 10, 13]
    lines = [
        orjson.dumps({"conversation_id": "c", "type": "tool_call", "id": f"k{i}", "name": n, "arguments": a})
        for i, (n, a) in enumerate(calls)
    ]
    py = Pipeline(Engine(EngineConfig(), FailureTagger(max_calls_per_conversation=0)))
    nat = native.NativePipeline(tagger=FailureTagger(max_calls_per_conversation=0))
    for i, raw in enumerate(lines):
        assert nat.feed(raw, {"line": i}) == [orjson.dumps(r) for r in py.feed(raw, {"line": i})] == []
    want = [orjson.dumps(r) for r in py.flush()]
    assert nat.flush() == want
    repeats = [i for i, rec in enumerate(want) if b"repeats call" in rec]
    assert repeats == want_repeats


def test_pending_request_starts_are_bounded_as_in_python() -> None:
    """Request starts of conversations the engine does not hold yet are kept up to
    tagging.MAX_PENDING_REQUESTS, oldest forgotten first: the first prompt's start is forgotten
    (its call counts time from itself), the second's is kept (its call crosses the time cap)."""
    n = tagging.MAX_PENDING_REQUESTS + 1
    prompts = [
        orjson.dumps(
            {"conversation_id": f"p{i}", "ts": _iso(T0, "Z"), "message": {"role": "user", "content": "go"}}
        )
        for i in range(n)
    ]
    calls = [
        orjson.dumps(
            {
                "conversation_id": c,
                "type": "tool_call",
                "id": "a",
                "name": "read",
                "ts": _iso(T0 + 5_000, "Z"),
            }
        )
        for c in ("p0", "p1")
    ]
    settings: dict[str, Any] = {"max_conversation_ms": 1_000.0}
    py = Pipeline(Engine(EngineConfig(), FailureTagger(**settings)))
    nat = native.NativePipeline(tagger=FailureTagger(**settings))
    for i, raw in enumerate(prompts + calls):
        assert nat.feed(raw, {"line": i}) == [orjson.dumps(r) for r in py.feed(raw, {"line": i})]
    want = [orjson.dumps(r) for r in py.flush()]
    assert nat.flush() == want
    details = [orjson.loads(r)["failure_detail"] for r in want]
    assert details[0] is None
    assert details[1] is not None and details[1].startswith("call at +5.0 s after the start of this request")
    assert nat.crossings == {"time": 1}


@pytest.mark.parametrize("raw", list(RawMode))
def test_raw_modes_shape_the_sides_alike(raw: RawMode) -> None:
    """--raw on examples/mixed.jsonl (every format, most through the Python format layer): the same
    bytes from both engines, and `raw` on exactly the sides the mode keeps it on."""
    from pathlib import Path  # noqa: PLC0415

    lines = (Path(__file__).resolve().parents[2] / "examples" / "mixed.jsonl").read_bytes().splitlines()
    cfg = EngineConfig(raw=raw)
    py, nat = Pipeline(Engine(cfg)), native.NativePipeline(cfg)
    got: list[bytes] = []
    for i, line in enumerate(lines):
        if line.strip():
            src = {"file": "mixed.jsonl", "line": i + 1}
            want = [orjson.dumps(r) for r in py.feed(line, src, key="k")]
            out = nat.feed(line, src, key="k")
            assert out == want, i
            got += out
    want = [orjson.dumps(r) for r in py.flush("end_of_input", result_reason="no_call")]
    assert nat.flush("end_of_input", result_reason="no_call") == want
    got += want
    sides = 0
    for rec in map(orjson.loads, got):
        pairs = [(True, rec["call"]), (False, rec["result"])] if rec["kind"] == "pair" else []
        if rec["kind"].startswith("orphan"):
            pairs = [(rec["kind"] == "orphan_call", rec["event"])]
        for is_call, side in pairs:
            sides += 1
            assert ("raw" in side) == raw.keeps(is_call)
    assert sides >= 30 and nat.core.fast_records > 0


@pytest.mark.parametrize("raw", list(RawMode))
@pytest.mark.parametrize("spelling", ["orjson", "spaced"])
def test_custom_tool_input_is_never_undecodable_json(raw: RawMode, spelling: str) -> None:
    """A custom (free-form) tool's input is text, told by its raw block's type, also where the
    side omits that block (--raw) and on the Python read path (spaced JSON); a function call's
    undecodable arguments are an argument_construction failure in both engines."""
    recs = [
        {"conversation_id": "c", "type": t, "call_id": f"k{i}", "name": "sh", arg: "not json {"}
        for i, (t, arg) in enumerate([("custom_tool_call", "input"), ("function_call", "arguments")])
    ]
    lines = [orjson.dumps(r) if spelling == "orjson" else json.dumps(r).encode() for r in recs]
    cfg = EngineConfig(raw=raw)
    py = Pipeline(Engine(cfg, FailureTagger()))
    nat = native.NativePipeline(cfg, tagger=FailureTagger())
    for i, line in enumerate(lines):
        assert nat.feed(line, {"line": i}) == [orjson.dumps(r) for r in py.feed(line, {"line": i})]
    want = [orjson.dumps(r) for r in py.flush()]
    assert nat.flush() == want
    assert [orjson.loads(r)["failure"] for r in want] == [None, "argument_construction"]
    # The custom call's text is read by the fast path; undecodable arguments go to Python.
    assert nat.fallthrough == ({"arguments": 1} if spelling == "orjson" else {"not_canonical": 2})
