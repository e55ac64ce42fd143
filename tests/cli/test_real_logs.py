"""Logs as they are on disk (issue 16): Codex rollouts, gemini-cli sessions (JSONL and the JSON
document), HTTP wire logs, OpenTelemetry GenAI exports, Inspect AI eval logs, JSON documents.

The samples in tests/samples/ were written from each format's public documentation. Every test
runs the real `pair` command on them and checks each call, result, error flag, id and
conversation, and that the run conserves every event (the audit agrees)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from stream_pairer.cli.app import main
from stream_pairer.core.formats import RecordInfo, parse_record
from stream_pairer.core.formats.otel import NOT_RECORDED
from tests.cli.test_pair_command import _validators
from tests.core.formats_helpers import SAMPLES, sample_lines
from tests.reference.tagging import classify_result

DOCS = SAMPLES / "documents"


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def run(tmp_path: Path, *inputs: Path | str, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """`pair` on the inputs, then `audit` on its outputs; the outputs and the summary JSON."""
    out = tmp_path / "out"
    summary = tmp_path / "summary.json"
    names = [str(i) for i in inputs]
    assert main(["pair", *names, "--out", str(out), "-q", "--summary-json", str(summary), *extra]) == 0
    audit = ["audit", "--input", *names, "--outputs", str(out), "-q"]
    if "--conversation-id" in extra:
        audit += ["--conversation-id", extra[extra.index("--conversation-id") + 1]]
    assert main(audit) == 0, "the audit finds every input event in exactly one output record"
    res = {name: read_jsonl(out / f"{name}.jsonl") for name in ("pairs", "orphans", "dead_letter")}
    validators = _validators()
    for name in ("pairs", "orphans", "dead_letter"):
        for rec in res[name]:
            validators[rec["kind"]].validate(rec)  # the published output contract holds
    res["summary"] = json.loads(summary.read_text())
    return res


def pairs_by_call(res: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["call"]["id"]: p for p in res["pairs"]}


def info_of(raw: bytes) -> tuple[list[Any], RecordInfo]:
    info = RecordInfo()
    return parse_record(raw, {"file": "t", "line": 1}, key="k", info=info), info


# ---------------------------------------------------------------------------------------------- Codex


CODEX_SESSION = "0199a5c2-4b1e-7d30-9f52-3c1e8a7b6d40"


def test_codex_rollout_pairs_by_call_id_in_the_session_of_session_meta(tmp_path: Path) -> None:
    res = run(tmp_path, SAMPLES / "codex.jsonl")
    pairs = pairs_by_call(res)
    assert sorted(pairs) == [
        "call_Ap7Lm3Xc9Vb1Nz5Qw2Er8Ty0",
        "call_Ls4Hg6Jk8Df0Sa2Pq1Wo9Ie7",
        "call_Qw9rTt5Hn2mVb7cX1dZ0kLp3",
        "call_Yp2mKq8Vd0bC3rT1nZ6sLw4e",
    ]
    assert res["orphans"] == [] and res["dead_letter"] == []
    # the session id is only on the session_meta line: carried to every later line of the file
    assert {p["conversation_id"] for p in res["pairs"]} == {CODEX_SESSION}
    assert all(p["match"] == "id" and p["call"]["format"] == "codex" for p in res["pairs"])
    shell = pairs["call_Yp2mKq8Vd0bC3rT1nZ6sLw4e"]
    assert shell["tool"] == "shell"
    assert shell["call"]["arguments"]["command"] == ["bash", "-lc", "pytest tests/test_refunds.py -q"]
    assert shell["result"]["is_error"] is True  # metadata.exit_code 1
    assert shell["call_ts"] == "2025-10-29T00:59:43.611Z"  # the wrapper's timestamp
    assert shell["result_ts"] == "2025-10-29T00:59:49.204Z"
    assert pairs["call_Qw9rTt5Hn2mVb7cX1dZ0kLp3"]["result"]["is_error"] is False
    assert pairs["call_Ap7Lm3Xc9Vb1Nz5Qw2Er8Ty0"]["tool"] == "apply_patch"  # custom_tool_call
    local = pairs["call_Ls4Hg6Jk8Df0Sa2Pq1Wo9Ie7"]
    assert local["tool"] == "local_shell" and local["call"]["arguments"]["command"] == [
        "bash",
        "-lc",
        "pytest -q",
    ]
    # turn_context, event_msg, reasoning, compacted: known lines without events, not unknown types
    assert res["summary"]["skipped_types"] == {}
    assert res["summary"]["skipped"] == 19 - 8


def test_codex_turn_markers_start_requests() -> None:
    lines = sample_lines("codex.jsonl")
    starts = [n for n, raw in enumerate(lines, 1) if info_of(raw)[1].requests]
    # the two user messages (environment context, the prompts) and Codex's own user_message events
    assert starts == [2, 3, 4, 15, 16]
    _, info = info_of(lines[0])
    assert info.session_id == CODEX_SESSION


# ---------------------------------------------------------------------------------------------- gemini-cli

GEMINI_SESSION = "477739d0-1b78-4aa7-9116-02d08c952344"


def _check_gemini_cli(res: dict[str, Any]) -> None:
    pairs = pairs_by_call(res)
    assert sorted(pairs) == [
        "list_directory-1764743751334-8b1c2d3e4f5a6",
        "read_file-1764743751335-1a2b3c4d5e6f7",
        "read_file-1764743830000-9f8e7d6c5b4a3",
    ]
    assert {p["conversation_id"] for p in res["pairs"]} == {GEMINI_SESSION}
    failed = pairs["read_file-1764743751335-1a2b3c4d5e6f7"]
    assert failed["result"]["is_error"] is True and failed["outcome"] == "error"
    assert failed["result"]["content"] == {"error": "File not found: /home/dev/app/settings.py"}
    ok = pairs["list_directory-1764743751334-8b1c2d3e4f5a6"]
    assert ok["result"]["is_error"] is False and ok["outcome"] == "ok"
    assert ok["call"]["arguments"] == {"path": "/home/dev/app"}
    # a cancelled call has no result: it ends as an orphan, never with an invented result
    (orphan,) = res["orphans"]
    assert orphan["event"]["id"] == "run_shell_command-1764743830001-0a9b8c7d6e5f4"
    assert orphan["reason"] == "end_of_input"
    assert res["dead_letter"] == []


def test_gemini_cli_jsonl(tmp_path: Path) -> None:
    _check_gemini_cli(run(tmp_path, SAMPLES / "gemini_cli.jsonl"))


def test_gemini_cli_session_document_reads_like_its_jsonl(tmp_path: Path) -> None:
    res = run(tmp_path, DOCS / "gemini_cli_session.json")
    _check_gemini_cli(res)
    # each message is a record: its source is its place in the document
    call = pairs_by_call(res)["read_file-1764743830000-9f8e7d6c5b4a3"]["call"]
    assert call["source"]["item"] == "messages[3]" and call["source"]["line"] == 4


# ---------------------------------------------------------------------------------------------- wire logs


def test_wire_log_counts_resent_history_once(tmp_path: Path) -> None:
    res = run(tmp_path, SAMPLES / "wire_anthropic.jsonl")
    pairs = pairs_by_call(res)
    assert sorted(pairs) == [
        "toolu_01London8Kd4",
        "toolu_01Paris7Hq2",
        "toolu_01Tokyo3Xw9",
        "toolu_01TokyoRetry5",
    ]
    assert res["orphans"] == [] and res["dead_letter"] == []
    s = res["summary"]
    assert s["events"] == {"tool_call": 4, "tool_result": 4}
    assert s["duplicate_copies"] == (2 + 5 + 6 + 6 + 8) - 8  # every later copy, counted apart
    # calls come from the response that made them, results from the request that carried them
    assert pairs["toolu_01Paris7Hq2"]["call"]["source"]["line"] == 1
    assert pairs["toolu_01Paris7Hq2"]["result"]["source"]["line"] == 2
    tokyo = pairs["toolu_01Tokyo3Xw9"]
    assert tokyo["result"]["is_error"] is True and tokyo["outcome"] == "error"
    # the streamed (SSE) response of line 4 is not readable: its call is found, once, in the
    # history of the next request
    london = pairs["toolu_01London8Kd4"]
    assert london["call"]["source"]["line"] == 5 and london["result"]["source"]["line"] == 5
    assert {p["conversation_id"] for p in res["pairs"]} == {"wire_anthropic.jsonl"}


def test_wire_request_starts() -> None:
    starts = [n for n, raw in enumerate(sample_lines("wire_anthropic.jsonl"), 1) if info_of(raw)[1].requests]
    assert starts == [1, 4]  # the requests that end with a user prompt, not with tool results


def test_wire_openai_chat_and_responses(tmp_path: Path) -> None:
    res = run(tmp_path, SAMPLES / "wire_openai.jsonl")
    pairs = pairs_by_call(res)
    assert sorted(pairs) == ["call_8xQmP2vL0kR4", "call_Rs7Cancel01"]
    assert pairs["call_8xQmP2vL0kR4"]["call"]["arguments"] == {"order_id": "ORD-20250611"}
    assert pairs["call_8xQmP2vL0kR4"]["outcome"] == "ok"
    assert pairs["call_Rs7Cancel01"]["outcome"] == "error"  # {"status": "error", ...}
    assert res["summary"]["duplicate_copies"] == 1


def test_wire_bodies_without_an_envelope_read_as_with_one(tmp_path: Path) -> None:
    """Recorders that log the provider bodies themselves under `request` / `response` (objects or
    JSON text, no `body` key) give the same pairs as the enveloped sample."""
    lines = []
    for raw in sample_lines("wire_anthropic.jsonl"):
        d = json.loads(raw)
        for n, side in enumerate(("request", "response")):
            body = d[side].get("body") if type(d[side]) is dict else None
            if body is None:
                continue
            d[side] = body if n == 0 or type(body) is not dict else json.dumps(body)
        lines.append(json.dumps(d))
    bare = tmp_path / "wire_bare.jsonl"
    bare.write_text("\n".join(lines) + "\n")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    want = run(tmp_path / "a", SAMPLES / "wire_anthropic.jsonl")
    got = run(tmp_path / "b", bare)
    assert sorted(pairs_by_call(got)) == sorted(pairs_by_call(want))
    assert got["orphans"] == [] and got["dead_letter"] == []
    assert got["summary"]["duplicate_copies"] == want["summary"]["duplicate_copies"]


# ---------------------------------------------------------------------------------------------- OpenTelemetry


def test_otel_spans_and_log_records(tmp_path: Path) -> None:
    res = run(tmp_path, SAMPLES / "otel.jsonl")
    pairs = pairs_by_call(res)
    assert sorted(pairs) == ["call_Fx20eur", "call_VLook01", "call_VRefund02", "call_Wx0slo9"]
    assert res["orphans"] == [] and res["dead_letter"] == []
    s = res["summary"]
    assert s["events"] == {"tool_call": 4, "tool_result": 4}
    # execute_tool spans repeat their calls (2), the second chat span its history (2 + 2), the
    # assistant event of line 4 its call (1), the second OpenLLMetry span its history (1)
    assert s["duplicate_copies"] == 8
    convs = {cid: p["conversation_id"] for cid, p in pairs.items()}
    assert convs["call_VLook01"] == convs["call_VRefund02"] == "conv_6f1b2e7c"  # gen_ai.conversation.id
    assert convs["call_Wx0slo9"] == "0af7651916cd43dd8448eb211c80319c"  # else the trace id
    assert convs["call_Fx20eur"] == "4bf92f3577b34da6a3ce929d0e0e4736"
    refund = pairs["call_VRefund02"]
    assert refund["result"]["is_error"] is True and refund["outcome"] == "error"  # span status ERROR
    assert refund["result_ts"] == "2025-06-11T10:00:03.950Z"  # the execute_tool span's end
    look = pairs["call_VLook01"]
    assert look["result"]["content"] == {"status": "shipped", "carrier": "DHL"}
    assert look["call"]["arguments"] == {"order_id": "ORD-20250611"}
    assert pairs["call_Wx0slo9"]["result"]["content"] == "3°C, snow"
    assert pairs["call_Fx20eur"]["call"]["arguments"] == {"amount": 20, "from": "EUR", "to": "USD"}


def test_otel_request_starts() -> None:
    lines = sample_lines("otel.jsonl")
    marks = [(n, [(i, c) for i, c, _ in info_of(raw)[1].requests]) for n, raw in enumerate(lines, 1)]
    assert marks == [
        (1, [(0, "conv_6f1b2e7c")]),  # the chat span's input ends with the user prompt
        (2, []),  # its input ends with tool results: the same request goes on
        (3, [(0, "0af7651916cd43dd8448eb211c80319c")]),  # gen_ai.user.message
        (4, []),
        (5, [(0, "4bf92f3577b34da6a3ce929d0e0e4736")]),  # OpenLLMetry: last prompt is the user's
    ]


# ---------------------------------------------------------------------------------------------- documents


def test_inspect_eval_log_one_conversation_per_sample(tmp_path: Path) -> None:
    path = DOCS / "inspect_eval.json"
    res = run(tmp_path, path)
    pairs = pairs_by_call(res)
    assert sorted(pairs) == ["call_a1Search", "call_a2Search", "call_b1Bash"]
    timeout = pairs["call_a1Search"]
    # Inspect's ChatMessageTool: `error: {type, message}` is an error outcome; `function` names it
    assert timeout["result"]["is_error"] is True and timeout["outcome"] == "error"
    assert timeout["result"]["name"] == "web_search" and timeout["failure"] == "execution"
    assert pairs["call_a2Search"]["outcome"] == "ok"
    assert pairs["call_a1Search"]["conversation_id"] == f"{path.name}#sample=task-17,epoch=1"
    assert pairs["call_b1Bash"]["conversation_id"] == f"{path.name}#sample=task-18,epoch=1"
    assert pairs["call_b1Bash"]["call"]["source"]["item"] == "samples[1].messages[1]"


def test_array_and_pretty_printed_documents(tmp_path: Path) -> None:
    res = run(tmp_path, DOCS / "chat_array.json", DOCS / "anthropic_request.json")
    pairs = pairs_by_call(res)
    assert sorted(pairs) == ["call_R0me1", "toolu_01Notes"]
    assert pairs["call_R0me1"]["conversation_id"] == "chat_array.json"
    assert pairs["toolu_01Notes"]["result"]["content"] == "buy milk"
    assert res["dead_letter"] == []


def test_conversation_id_option_overrides_the_file_default(tmp_path: Path) -> None:
    res = run(tmp_path, DOCS / "chat_array.json", extra=("--conversation-id", "rome-chat"))
    assert [p["conversation_id"] for p in res["pairs"]] == ["rome-chat"]


# ------------------------------------------------------------------------------------- skip vs dead letter


def test_unknown_types_are_skipped_by_type_and_a_role_without_content_is_a_dead_letter(
    tmp_path: Path,
) -> None:
    log = tmp_path / "session.jsonl"
    lines = [
        {"type": "custom-title", "customTitle": "refund bug", "sessionId": "s1"},
        {"type": "agent-name", "sessionId": "s1"},
        {"type": "custom-title", "customTitle": "renamed", "sessionId": "s1"},
        {"sessionId": "s1", "type": "assistant", "message": {"role": "assistant", "contnet": "hi"}},
        {"conversation_id": "c", "role": "user", "text": "a prompt in the wrong field"},
        {"conversation_id": "c", "type": "tool_call", "id": "x", "name": "n"},
    ]
    log.write_text("".join(json.dumps(x) + "\n" for x in lines))
    res = run(tmp_path, log)
    assert res["summary"]["skipped_types"] == {"custom-title": 2, "agent-name": 1}
    dead = sorted((d["source"]["line"], d["reason"]) for d in res["dead_letter"])
    assert dead == [(4, "missing_field"), (5, "missing_field")]
    assert "message.content is missing" in res["dead_letter"][0]["detail"]
    assert "contnet" in res["dead_letter"][0]["detail"]  # the misspelling is shown to the operator


def test_otel_execute_tool_without_captured_content_is_not_an_empty_result() -> None:
    """Content capture is opt-in: a span without gen_ai.tool.call.result still ran its tool."""
    span = {
        "traceId": "t1",
        "spanId": "s1",
        "name": "execute_tool get_time",
        "startTimeUnixNano": "1749636000000000000",
        "endTimeUnixNano": "1749636000100000000",
        "attributes": [
            {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
            {"key": "gen_ai.tool.name", "value": {"stringValue": "get_time"}},
            {"key": "gen_ai.tool.call.id", "value": {"stringValue": "call_T1"}},
        ],
        "status": {},
    }
    raw = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode()
    call, result = parse_record(raw, {"file": "t", "line": 1})
    assert (call.id, call.name, call.payload, call.conversation_id) == ("call_T1", "get_time", None, "t1")
    assert result.id == "call_T1" and result.is_error is False
    assert result.payload == NOT_RECORDED
    assert classify_result(result.payload, result.is_error).outcome == "ok"
    failed = dict(span, status={"code": 2, "message": "clock unavailable"})
    raw = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [failed]}]}]}).encode()
    _, result = parse_record(raw, {"file": "t", "line": 1})
    assert result.is_error is True and result.payload == "clock unavailable"


def test_claude_code_prompts_start_requests_but_not_a_subagent_prompt() -> None:
    lines = sample_lines("claude_code.jsonl")
    starts = [n for n, raw in enumerate(lines, 1) if info_of(raw)[1].requests]
    assert starts and all(b'"isSidechain":false' in lines[n - 1] for n in starts)
    prompt = {
        "sessionId": "s",
        "type": "user",
        "isSidechain": True,
        "message": {"role": "user", "content": "search"},
    }
    assert info_of(json.dumps(prompt).encode())[1].requests == []
    prompt["isSidechain"] = False
    assert info_of(json.dumps(prompt).encode())[1].requests == [(0, "s", None)]
    results = {"sessionId": "s", "type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}}  # fmt: skip
    assert info_of(json.dumps(results).encode())[1].requests == []  # tool results continue a request
