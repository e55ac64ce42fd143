"""The compiled core's failure tagging against the Python tagger (tests/reference/tagging.py).

Whole tagged runs (small loop caps, repeats, request starts, schemas, evictions, ticks) must give
the same bytes, summary and cap crossings; the verdict functions (result outcome, rejection
heuristic, repeat identity) must agree value by value. Split from test_native_differential.py,
whose scenario strategies it draws from (tests/core/differential_helpers.py).
"""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stream_pairer import _native
from stream_pairer.core import native
from stream_pairer.core.toolschemas import ToolSchemaRegistry
from stream_pairer.core.vocab import RawMode
from tests.core.differential_helpers import CONVS, IDS, NAMES, T0, _iso, _same_step, records
from tests.engine_helpers import engine_config
from tests.reference import tagging
from tests.reference.engine import Engine, EngineConfig
from tests.reference.pipeline import Pipeline
from tests.reference.tagging import FailureTagger

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
