"""Agent framework logs as their producers write them (issue 24): OpenHands, SWE-agent,
OpenTelemetry SDK exporters, OpenInference, MCP stdio transcripts, LangChain, Google ADK,
AutoGen, and recorded HTTP traffic (VCR.py cassettes, nock recordings, saved responses).

Each sample in tests/samples/families/ holds answered calls, at least one unanswered call and
one orphan result (where the family can hold one), shaped from the family's documentation and
source. The real `pair` command reads each file as it is; the test states every pair (by id,
with its tool, error flag and `match` label), every orphan, that nothing is a dead letter, and
that the audit finds every input event in exactly one output record (`run` runs it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_real_logs import run
from tests.core.formats_helpers import SAMPLES
from tests.reference.engines import pair_on

FAMILIES = SAMPLES / "families"

# file -> (format, {call id: (tool, result is_error)}, [unanswered call ids], [orphan result ids]).
# Families that keep no ids (Cohere v1, CrewAI) are keyed by tool name and pair by position.
EXPECTED: dict[str, tuple[str, dict[str, tuple[str, bool | None]], list[str | None], list[str | None]]] = {
    "openhands_trajectory.json": (
        "openhands",
        {"4": ("execute_bash", True), "6": ("str_replace_editor", False), "9": ("str_replace_editor", True)},
        ["7"],
        ["42"],
    ),
    "openhands_v1_events.jsonl": (
        "openhands",
        {
            "call_Jr4pX2mN7qLs9vB3": ("execute_bash", False),
            "call_Hb2nM6vC9xK4jL7s": ("str_replace_editor", True),
        },
        ["call_Ty8qW1eR5tZu3iO6"],
        ["call_Zz0aQ9wS1xE2dC3v"],
    ),
    "swe_agent.traj": (
        "openai_chat",
        {"call_5nVq2Rj8KdXw": ("find_file", None), "call_8TmYp3Lc1ZsE": ("open", None)},
        ["call_2GhKq7Wn4VbX"],
        ["call_0rphAn9Result"],
    ),
    "otel_console_spans.json": (
        "otel",
        {"call_wPar1s": ("get_weather", False), "call_wR0me": ("get_weather", True)},
        ["call_b00k"],
        ["call_st4le"],
    ),
    "otel_flat_spans.jsonl": (
        "otel",
        {
            "toolu_01SrchA": ("search_docs", False),
            "toolu_01TcktB": ("open_ticket", True),
            "call_g0Ord3r": ("lookup_order", False),
        },
        ["toolu_01EmlC"],
        ["toolu_01G0ne"],
    ),
    "openinference_spans.jsonl": (
        "openinference",
        {"call_fL1ght5": ("search_flights", None), "call_w3ath3r": ("get_weather", True)},
        ["call_b00kTP"],
        ["call_h0tel0ld"],
    ),
    "mcp_stdio_transcript.log": (
        "mcp",
        {"7": ("read_file", False), "8": ("list_directory", True)},
        ["9"],
        ["12"],
    ),
    "langchain_messages.jsonl": (
        "langchain",
        {
            "call_m7x2QpLk": ("multiply", False),
            "call_w8e3RsTn": ("get_weather", True),
            "call_br0kenJs": ("get_weather", True),
        },
        ["call_r3p0rtXy"],
        ["call_pr3vT0ol"],
    ),
    "adk_events.jsonl": (
        "adk",
        {"adk-4a5b6c7d-8e9f-4012-a345-6789abcdef01": ("get_weather", False)},
        ["adk-5b6c7d8e-9f01-4123-b456-789abcdef012"],
        ["adk-9e8d7c6b-5a49-4382-9176-5f4e3d2c1b0a"],
    ),
    "autogen_events.jsonl": (
        "autogen",
        {"call_Ly0nP0p1": ("population", False), "call_N4ntesP2": ("population", True)},
        ["call_Gr4phP3"],
        ["call_0ldGe0"],
    ),
    "vcr_openai_cassette.yaml": (
        "wire",
        {"call_Tk1Wthr": ("get_weather", None)},
        ["call_Tk2Time"],
        ["call_0ldSesn"],
    ),
    "nock_anthropic_recording.json": (
        "wire",
        {"toolu_01NkTckt": ("open_ticket", False), "toolu_01NkPage": ("page_oncall", True)},
        ["toolu_01NkRetry"],
        ["toolu_01Nk0ld"],
    ),
    "saved_gemini_response.json": ("gemini", {}, [None], []),
    "vercel_ai_messages.jsonl": (
        "vercel_ai",
        {
            "call_BeR1n": ("weather", False),
            "call_MaDr1d": ("weather", True),
            "call_L0c4t": ("getLocation", False),
            "call_Dyn9": ("mcp_search", True),
            "call_v4Time": ("getTime", False),
        },
        ["call_C0nf1rm", "call_Fx30"],
        ["call_0ldStep"],
    ),
    "openai_agents_items.jsonl": (
        "openai_responses",
        {"call_AgT1": ("lookup_invoice", None), "call_H4nd": ("transfer_to_billing_agent", None)},
        ["call_R3fund"],
        ["call_Pr1or"],
    ),
    "atif_trajectory.json": (
        "atif",
        {"call_3_1": ("bash_command", None), "call_4_1": ("bash_command", None)},
        ["call_4_2"],
        ["call_2_9"],
    ),
    "smolagents_steps.json": (
        "smolagents",
        {"call_fIb20": ("python_interpreter", False), "call_w3bS": ("web_search", True)},
        ["call_w3bS2"],
        [],
    ),
    "litellm_payloads.jsonl": ("wire", {"call_jPy1": ("convert", None)}, ["call_gBp2"], ["call_xX0ld"]),
}

# Families whose records carry no id at all: pairs by position within the tool name, labelled so.
NO_IDS: dict[str, tuple[str, dict[str, bool], list[str], list[str]]] = {
    "cohere_chat.jsonl": (
        "cohere",
        {"query_daily_sales_report": False, "query_product_catalog": True},
        ["send_email"],
        ["archive_report"],
    ),
    "crewai_events.jsonl": (
        "crewai",
        {"Search the internet": False, "Read website content": True},
        ["Delegate work to coworker"],
        ["File Writer Tool"],
    ),
}


def _side_ids(res: dict[str, Any], kind: str) -> list[str | None]:
    return sorted((o["event"]["id"] for o in res["orphans"] if o["kind"] == kind), key=str)


@pytest.mark.parametrize("engine", ["native", "python"])
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_family_log_pairs_exactly_as_written(tmp_path: Path, name: str, engine: str) -> None:
    """The compiled core (which hands these records to the Python readers) and the reference
    model (tests/reference) agree."""
    fmt, pairs, unanswered, orphan_results = EXPECTED[name]
    with pair_on(engine):
        res = run(tmp_path, FAMILIES / name)
    assert res["dead_letter"] == []
    got = {p["call"]["id"]: (p["tool"], p["result"]["is_error"]) for p in res["pairs"]}
    assert got == pairs
    # by id, never by position: every record of these families carries its call's id
    assert {p["match"] for p in res["pairs"]} <= {"id"}
    assert all(p["call"]["id"] == p["result"]["id"] for p in res["pairs"])
    assert _side_ids(res, "orphan_call") == sorted(unanswered, key=str)
    assert _side_ids(res, "orphan_result") == sorted(orphan_results, key=str)
    sides = [s for p in res["pairs"] for s in (p["call"], p["result"])]
    sides += [o["event"] for o in res["orphans"]]
    assert {s["format"] for s in sides} == {fmt}
    summary = res["summary"]
    events = len(pairs) * 2 + len(unanswered) + len(orphan_results)
    assert sum(summary["events"].values()) == events, "each call and result counted once"


@pytest.mark.parametrize("engine", ["native", "python"])
def test_ids_the_client_rewrote_give_one_record_per_call(tmp_path: Path, engine: str) -> None:
    """A local server reuses `call_0` in every response and the client prefixes the response id
    before the next request; a Gemini proxy invents an id for an id-less call. Each call ends in
    one pair, never in a pair plus an orphan_call for the response's own copy."""
    with pair_on(engine):
        res = run(tmp_path, FAMILIES / "wire_rewritten_ids.jsonl")
    assert res["orphans"] == [] and res["dead_letter"] == []
    by_tool = {p["tool"]: p for p in res["pairs"]}
    assert sorted(by_tool) == ["find_flights", "get_time", "get_weather"]
    for tool in ("get_weather", "get_time"):  # two calls, both `call_0`, each with its own result
        pair = by_tool[tool]
        assert pair["match"] == "id" and pair["call"]["id"] == pair["result"]["id"] == "call_0"
        assert pair["conversation_id"] == "local-llm-7"
    assert by_tool["get_weather"]["result"]["content"] == "18 C, cloudy"
    assert by_tool["get_time"]["result"]["content"] == "14:05"
    # the response's call had no id: the pair says it was made by position, within the tool name
    invented = by_tool["find_flights"]
    assert invented["match"] == "fifo" and invented["call"]["id"] is None
    assert res["summary"]["duplicate_copies"] >= 3  # the rewritten history copies, counted once


def test_json_rpc_ids_7_and_string_7_are_one_id(tmp_path: Path) -> None:
    res = run(tmp_path, FAMILIES / "mcp_stdio_transcript.log")
    pair = next(p for p in res["pairs"] if p["tool"] == "read_file")
    assert pair["call"]["raw"]["id"] == 7 and pair["result"]["raw"]["id"] == "7"


@pytest.mark.parametrize("engine", ["native", "python"])
@pytest.mark.parametrize("name", sorted(NO_IDS))
def test_family_log_without_ids_pairs_by_position_and_says_so(tmp_path: Path, name: str, engine: str) -> None:
    fmt, pairs, unanswered, orphan_results = NO_IDS[name]
    with pair_on(engine):
        res = run(tmp_path, FAMILIES / name)
    assert res["dead_letter"] == []
    mine = [p for p in res["pairs"] if p["call"]["format"] == fmt]
    assert {p["tool"]: p["result"]["is_error"] for p in mine} == pairs
    assert all(p["match"] == "fifo" and p["call"]["id"] is None for p in mine)
    orphans = [o for o in res["orphans"] if o["event"]["format"] == fmt]
    assert sorted(o["tool"] for o in orphans if o["kind"] == "orphan_call") == unanswered
    assert sorted(o["event"]["name"] for o in orphans if o["kind"] == "orphan_result") == orphan_results


def test_cohere_v2_beside_v1_pairs_by_its_id(tmp_path: Path) -> None:
    res = run(tmp_path, FAMILIES / "cohere_chat.jsonl")
    v2 = [p for p in res["pairs"] if p["conversation_id"] == "cohere-v2-b"]
    assert [(p["match"], p["call"]["id"], p["tool"]) for p in v2] == [
        ("id", "get_weather_k3x9f2m1abcd", "get_weather")
    ]


@pytest.mark.parametrize("engine", ["native", "python"])
def test_ids_reused_by_every_response_and_kept_by_the_client(tmp_path: Path, engine: str) -> None:
    """A local server writes `call_0` in every response and the client sends it back as it is:
    each response's call is its own call (a new name or arguments under an answered id), each
    result its own result (new content under the reused id), and the re-sent history is copies."""
    with pair_on(engine):
        res = run(tmp_path, FAMILIES / "wire_reused_ids.jsonl")
    assert res["dead_letter"] == []
    got = sorted(
        (p["tool"], p["call"]["arguments"], p["result"]["content"], p["match"]) for p in res["pairs"]
    )
    assert got == [
        ("get_time", {"tz": "Europe/Paris"}, "14:05", "id"),
        ("get_weather", {"city": "Paris"}, "18 C, cloudy", "id"),
    ]
    [unanswered] = res["orphans"]  # the third response's call_0: never answered
    assert (unanswered["kind"], unanswered["event"]["id"]) == ("orphan_call", "call_0")
    assert unanswered["event"]["arguments"] == {"tz": "Asia/Tokyo"}
