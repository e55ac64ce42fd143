"""stream_pairer.ops.metrics: what each observation counts, bounded labels, and agreement with the
output contract (the closed label sets equal the JSON Schemas' enums; counting the records of a real
engine run conserves events)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from stream_pairer.core.formats import parse_record
from stream_pairer.core.model import output_meta
from stream_pairer.ops.metrics import (
    EVICTION_LIMITS,
    FAILURE_POINTS,
    MAX_RECORD_TYPES,
    ORPHAN_KINDS,
    ORPHAN_REASONS,
    OUTCOMES,
    Metrics,
)
from stream_pairer.ops.names import metric_names
from tests.reference.engine import Engine, EngineConfig

SCHEMAS = Path(__file__).resolve().parents[2] / "stream_pairer" / "schemas"


def value(m: Metrics, name: str, **labels: str) -> float:
    v = m.registry.get_sample_value(name, labels)
    return 0.0 if v is None else v


def series(m: Metrics, name: str) -> list[dict[str, str]]:
    return [s.labels for fam in m.registry.collect() for s in fam.samples if s.name == name]


def pair(**kw: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "kind": "pair",
        "match": "id",
        "fifo_by": None,
        "tool": "search",
        "latency_ms": None,
    }
    rec.update(kw)
    return rec


# ------------------------------------------------------------------------------ registry
def test_each_instance_has_its_own_registry() -> None:
    a, b = Metrics(), Metrics()
    assert a.registry is not b.registry and a.registry is not REGISTRY
    a.observe_skipped()
    assert value(a, "stream_pairer_records_skipped_total") == 1
    assert value(b, "stream_pairer_records_skipped_total") == 0
    assert REGISTRY.get_sample_value("stream_pairer_records_skipped_total") is None


def test_a_given_registry_is_used() -> None:
    reg = CollectorRegistry()
    m = Metrics(reg)
    assert m.registry is reg
    m.observe_commit_error()
    assert reg.get_sample_value("stream_pairer_commit_errors_total") == 1


def test_names_follow_prometheus_conventions() -> None:
    m = Metrics()
    for fam in m.registry.collect():
        assert fam.name.startswith("stream_pairer_"), fam.name
        if fam.type == "histogram":
            assert fam.name.endswith("_seconds"), f"{fam.name}: histograms here measure time, in seconds"
        if fam.type == "gauge":
            assert not fam.name.endswith("_total"), fam.name
        assert fam.documentation, f"{fam.name} has no help text"


def test_exposition_parses_and_has_build_info() -> None:
    m = Metrics(version="9.9.9")
    text = generate_latest(m.registry).decode()
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    assert fams["stream_pairer_build_info"].samples[0].labels == {"version": "9.9.9"}
    assert fams["stream_pairer_build_info"].samples[0].value == 1


# ------------------------------------------------------------------------------ input
def test_record_read_counts_records_and_events_by_format_and_type() -> None:
    m = Metrics()
    m.observe_record_read("anthropic", 2, 0)
    m.observe_record_read("anthropic", 0, 1)
    m.observe_record_read("mcp", 1, 1)
    m.observe_record_read(None, 0, 0)
    m.observe_skipped()
    assert value(m, "stream_pairer_records_read_total", format="anthropic") == 2
    assert value(m, "stream_pairer_events_read_total", format="anthropic", type="tool_call") == 2
    assert value(m, "stream_pairer_events_read_total", format="anthropic", type="tool_result") == 1
    assert value(m, "stream_pairer_events_read_total", format="mcp", type="tool_call") == 1
    assert value(m, "stream_pairer_records_read_total", format="unknown") == 1
    assert value(m, "stream_pairer_records_skipped_total") == 1


# ------------------------------------------------------------------------------ outputs
def test_pairs_by_match_and_fifo_by() -> None:
    m = Metrics()
    m.observe_output(pair())
    m.observe_output(pair(match="fifo", fifo_by="name"))
    m.observe_output(pair(match="fifo", fifo_by="name"))
    m.observe_output(pair(match="fifo", fifo_by="order"))
    assert value(m, "stream_pairer_pairs_total", match="id", fifo_by="none") == 1
    assert value(m, "stream_pairer_pairs_total", match="fifo", fifo_by="name") == 2
    assert value(m, "stream_pairer_pairs_total", match="fifo", fifo_by="order") == 1


def test_orphans_by_kind_and_reason_and_dead_letters_by_reason() -> None:
    m = Metrics()
    m.observe_output({"kind": "orphan_result", "reason": "no_call", "tool": None})
    m.observe_output({"kind": "orphan_result", "reason": "no_call", "tool": "x"})
    m.observe_output({"kind": "orphan_call", "reason": "timeout", "tool": "x"})
    m.observe_output({"kind": "dead_letter", "reason": "invalid_json"})
    assert value(m, "stream_pairer_orphans_total", kind="orphan_result", reason="no_call") == 2
    assert value(m, "stream_pairer_orphans_total", kind="orphan_call", reason="timeout") == 1
    assert value(m, "stream_pairer_dead_letters_total", reason="invalid_json") == 1
    assert value(m, "stream_pairer_pairs_total", match="id", fifo_by="none") == 0


def test_series_that_alerts_divide_by_exist_at_zero_from_the_start() -> None:
    m = Metrics()
    orphans = {(s["kind"], s["reason"]) for s in series(m, "stream_pairer_orphans_total")}
    assert orphans == {(k, r) for k in ORPHAN_KINDS for r in ORPHAN_REASONS}
    assert len(series(m, "stream_pairer_pairs_total")) == 3
    assert {s["limit"] for s in series(m, "stream_pairer_evictions_total")} == set(EVICTION_LIMITS)
    assert value(m, "stream_pairer_pairs_total", match="id", fifo_by="none") == 0


def test_unknown_record_kind_is_an_error() -> None:
    with pytest.raises(ValueError, match="kind"):
        Metrics().observe_output({"kind": "something"})


def test_tool_latency_histogram_in_seconds() -> None:
    m = Metrics()
    m.observe_output(pair(latency_ms=1500.0))
    m.observe_output(pair(latency_ms=20.0))
    m.observe_output(pair(latency_ms=None))
    m.observe_output(pair(latency_ms=-5.0))
    assert value(m, "stream_pairer_tool_latency_seconds_count") == 2
    assert value(m, "stream_pairer_tool_latency_seconds_sum") == pytest.approx(1.52)
    assert value(m, "stream_pairer_tool_latency_seconds_bucket", le="1.0") == 1
    assert value(m, "stream_pairer_tool_latency_seconds_bucket", le="2.5") == 2
    assert value(m, "stream_pairer_tool_latency_negative_total") == 1


def test_emit_latency() -> None:
    m = Metrics()
    m.observe_emit_latency(0.003)
    m.observe_emit_latency(-1.0)  # a clock step backwards is not a negative latency
    assert value(m, "stream_pairer_emit_latency_seconds_count") == 2
    assert value(m, "stream_pairer_emit_latency_seconds_bucket", le="0.0025") == 1
    assert value(m, "stream_pairer_emit_latency_seconds_bucket", le="0.005") == 2


# ------------------------------------------------------------------------------ tagging counters
def test_outcomes_failures_and_calls_by_tool() -> None:
    m = Metrics()
    m.observe_output(pair(tool="search", outcome="ok", failure=None))
    m.observe_output(pair(tool="search", outcome="empty", failure="result_interpretation"))
    m.observe_output(pair(tool="fetch", outcome="error", failure="execution"))
    m.observe_output({"kind": "orphan_call", "reason": "timeout", "tool": "fetch", "failure": "execution"})
    m.observe_output({"kind": "orphan_result", "reason": "no_call", "tool": "fetch", "outcome": "error"})
    m.observe_output(pair(tool="search"))  # no outcome/failure keys at all: counted as a call only
    assert value(m, "stream_pairer_tool_calls_total", tool="search") == 3
    assert value(m, "stream_pairer_tool_calls_total", tool="fetch") == 2  # the orphan result is no call
    assert value(m, "stream_pairer_tool_outcomes_total", tool="search", outcome="ok") == 1
    assert value(m, "stream_pairer_tool_outcomes_total", tool="search", outcome="empty") == 1
    assert value(m, "stream_pairer_tool_outcomes_total", tool="fetch", outcome="error") == 2
    assert value(m, "stream_pairer_tool_failures_total", tool="fetch", point="execution") == 2
    assert value(m, "stream_pairer_tool_failures_total", tool="search", point="result_interpretation") == 1
    assert len(series(m, "stream_pairer_tool_failures_total")) == 2


def test_tool_label_folds_past_the_cap_and_stays_stable() -> None:
    m = Metrics(max_tool_labels=2)
    for tool in ("a", "b", "c", "a", "d", "b"):
        m.observe_output(pair(tool=tool, failure="execution"))
    assert value(m, "stream_pairer_tool_calls_total", tool="a") == 2
    assert value(m, "stream_pairer_tool_calls_total", tool="b") == 2
    assert value(m, "stream_pairer_tool_calls_total", tool="other") == 2
    assert {s["tool"] for s in series(m, "stream_pairer_tool_failures_total")} == {"a", "b", "other"}


def test_missing_tool_name_is_unknown_and_a_tool_named_other_is_folded() -> None:
    m = Metrics(max_tool_labels=5)
    assert m.tool_label(None) == "unknown"
    assert m.tool_label("") == "unknown"
    assert m.tool_label("other") == "other"
    assert m.tool_label("unknown") == "other"
    assert m.tool_label("x" * 500) == "x" * 128


def test_cardinality_is_bounded_under_many_tool_names() -> None:
    m = Metrics(max_tool_labels=10)
    for i in range(2000):
        m.observe_output(pair(tool=f"tool_{i}", outcome="ok", failure="termination"))
    assert len(series(m, "stream_pairer_tool_calls_total")) == 11
    assert len(series(m, "stream_pairer_tool_failures_total")) == 11
    assert value(m, "stream_pairer_tool_calls_total", tool="other") == 1990
    assert len(m._tool_labels) <= 4 * 10


def test_known_tools_mode() -> None:
    m = Metrics(known_tools=["search", "fetch"], max_tool_labels=1)
    assert [m.tool_label(t) for t in ("search", "fetch", "rm_rf", None)] == [
        "search",
        "fetch",
        "other",
        "unknown",
    ]


# ------------------------------------------------------------------------------ state, kafka
def test_state_limits_and_evictions() -> None:
    m = Metrics()
    m.set_state(open_calls=7, open_conversations=3, held_bytes=4096, pending_results=2)
    m.set_limits(max_conversations=100, max_calls_per_conversation=10, max_held_bytes=1 << 20)
    m.observe_eviction(4, "held_bytes")
    m.observe_eviction(1, "conversations")
    assert value(m, "stream_pairer_open_calls") == 7
    assert value(m, "stream_pairer_open_conversations") == 3
    assert value(m, "stream_pairer_held_bytes") == 4096
    assert value(m, "stream_pairer_pending_results") == 2
    assert value(m, "stream_pairer_open_conversations_limit") == 100
    assert value(m, "stream_pairer_calls_per_conversation_limit") == 10
    assert value(m, "stream_pairer_held_bytes_limit") == 1 << 20
    assert value(m, "stream_pairer_evictions_total", limit="held_bytes") == 4
    assert value(m, "stream_pairer_evictions_total", limit="conversations") == 1
    # Per-partition limits published as this instance's capacity, like the summed state gauges.
    m.set_limits(max_conversations=100, max_calls_per_conversation=10, max_held_bytes=1 << 20, partitions=3)
    assert value(m, "stream_pairer_open_conversations_limit") == 300
    assert value(m, "stream_pairer_held_bytes_limit") == 3 << 20
    assert value(m, "stream_pairer_calls_per_conversation_limit") == 10
    with pytest.raises(ValueError):
        m.observe_eviction(1, "memory")


def test_engine_eviction_names_are_metric_limits() -> None:
    """The engine counts evictions under its own names; they must be the metric's `limit` values."""
    engine = Engine(EngineConfig(max_conversations=1, max_calls_per_conversation=1, max_held_bytes=10))
    for n, line in enumerate(
        [
            {
                "conversation_id": "a",
                "type": "tool_call",
                "id": "1",
                "name": "t",
                "arguments": {"q": "x" * 50},
            },
            {"conversation_id": "a", "type": "tool_call", "id": "2", "name": "t", "arguments": {}},
            {"conversation_id": "b", "type": "tool_call", "id": "3", "name": "t", "arguments": {}},
        ]
    ):
        for ev in parse_record(orjson.dumps(line), {"file": "t", "line": n}):
            engine.process(ev, now_ms=0.0)
    assert engine.evictions, "the scenario must evict"
    assert set(engine.evictions) <= set(EVICTION_LIMITS)


def test_lag_per_partition_and_forgetting_a_revoked_partition() -> None:
    m = Metrics()
    m.set_lag("in", 0, 10)
    m.set_lag("in", 1, -3)
    m.set_lag("in", 0, 12)
    assert value(m, "stream_pairer_consumer_lag_messages", topic="in", partition="0") == 12
    assert value(m, "stream_pairer_consumer_lag_messages", topic="in", partition="1") == 0
    m.forget_partition("in", 0)
    m.forget_partition("in", 7)  # never reported: no error
    assert [s["partition"] for s in series(m, "stream_pairer_consumer_lag_messages")] == ["1"]


def test_two_lags_are_separate_gauges() -> None:
    """Committed lag and unprocessed messages: held calls pin the first, never the second."""
    m = Metrics()
    m.set_lag("in", 0, 500, 0)
    m.set_lag("in", 1, 40, 40)
    assert value(m, "stream_pairer_consumer_lag_messages", topic="in", partition="0") == 500
    assert value(m, "stream_pairer_unprocessed_messages", topic="in", partition="0") == 0
    assert value(m, "stream_pairer_unprocessed_messages", topic="in", partition="1") == 40
    m.forget_partition("in", 1)
    assert [s["partition"] for s in series(m, "stream_pairer_unprocessed_messages")] == ["0"]


def test_kafka_counters_and_liveness_gauges() -> None:
    m = Metrics()
    m.observe_commit_error()
    m.observe_produce_error()
    m.observe_produce_error()
    m.observe_rebalance()
    m.set_assigned_partitions(6)
    m.set_up(True)
    m.mark_consumed(1_700_000_000.5)
    assert value(m, "stream_pairer_commit_errors_total") == 1
    assert value(m, "stream_pairer_produce_errors_total") == 2
    assert value(m, "stream_pairer_rebalances_total") == 1
    assert value(m, "stream_pairer_assigned_partitions") == 6
    assert value(m, "stream_pairer_up") == 1
    assert value(m, "stream_pairer_last_consumed_timestamp_seconds") == 1_700_000_000.5
    m.set_up(False)
    m.mark_consumed()
    assert value(m, "stream_pairer_up") == 0
    assert value(m, "stream_pairer_last_consumed_timestamp_seconds") > 1_700_000_000.5


# ------------------------------------------------------------------------------ contract
def _enum(schema: str, prop: str) -> set[Any]:
    doc = json.loads((SCHEMAS / schema).read_text(encoding="utf-8"))
    return set(doc["properties"][prop]["enum"])


def test_label_sets_equal_the_output_schemas() -> None:
    """A new orphan reason, outcome or failure point in the contract needs its metric series too."""
    assert _enum("orphan.schema.json", "kind") == set(ORPHAN_KINDS)
    assert _enum("orphan.schema.json", "reason") == set(ORPHAN_REASONS)
    assert _enum("pair.schema.json", "outcome") - {None} == set(OUTCOMES)
    assert _enum("pair.schema.json", "failure") - {None} == set(FAILURE_POINTS)
    assert _enum("pair.schema.json", "match") == {"id", "fifo"}


def test_counting_a_real_engine_run_conserves_events() -> None:
    """Events read = pair members + orphans, from the metrics alone, on the engine's own output."""
    lines = [
        {"conversation_id": "c1", "type": "tool_call", "id": "a", "name": "search", "arguments": {"q": 1}},
        {"conversation_id": "c1", "type": "tool_result", "id": "a", "content": "hit"},
        {"conversation_id": "c1", "type": "tool_call", "name": "fetch", "arguments": {}},
        {"conversation_id": "c1", "type": "tool_result", "name": "fetch", "content": []},
        {"conversation_id": "c2", "type": "tool_result", "id": "zz", "content": "lost"},
        {"conversation_id": "c2", "type": "tool_call", "id": "b", "name": "search", "arguments": {}},
    ]
    m = Metrics()
    engine = Engine()
    out: list[dict[str, Any]] = []
    for n, line in enumerate(lines):
        events = parse_record(orjson.dumps(line), {"file": "t.jsonl", "line": n + 1})
        m.observe_record_read(events[0].format if events else None, *_split(events))
        for ev in events:
            out += engine.process(ev, now_ms=float(n))
    out += engine.flush("end_of_input", result_reason="no_call")
    for rec in out:
        m.observe_output(rec)
    read = sum(
        value(m, "stream_pairer_events_read_total", format="canonical", type=t)
        for t in ("tool_call", "tool_result")
    )
    pairs = sum(value(m, "stream_pairer_pairs_total", **s) for s in series(m, "stream_pairer_pairs_total"))
    orphans = sum(
        value(m, "stream_pairer_orphans_total", **s) for s in series(m, "stream_pairer_orphans_total")
    )
    assert read == 6
    assert 2 * pairs + orphans == read
    assert value(m, "stream_pairer_pairs_total", match="fifo", fifo_by="name") == 1
    assert value(m, "stream_pairer_orphans_total", kind="orphan_result", reason="no_call") == 1
    assert value(m, "stream_pairer_orphans_total", kind="orphan_call", reason="end_of_input") == 1


def _split(events: list[Any]) -> tuple[int, int]:
    calls = sum(1 for e in events if e.is_call)
    return calls, len(events) - calls


def test_metric_names_lists_suffixed_series_only() -> None:
    names = metric_names(Metrics().registry)
    assert "stream_pairer_pairs_total" in names and "stream_pairer_pairs" not in names
    assert {"stream_pairer_tool_latency_seconds_bucket", "stream_pairer_tool_latency_seconds_count"} <= names
    assert "stream_pairer_open_calls" in names


def _documented_rows() -> set[str]:
    """Metric names in the first column of the operator docs' metrics table (README or docs/)."""
    root = SCHEMAS.parent.parent
    text = "".join(
        p.read_text(encoding="utf-8")
        for p in (root / "README.md", root / "docs" / "OPERATIONS.md")
        if p.exists()
    )
    return set(re.findall(r"^\| `(stream_pairer_[a-z_]+)` \|", text, re.M))


def test_every_metric_is_documented_and_every_documented_metric_exists() -> None:
    families = {
        fam.name + ("_total" if fam.type == "counter" else ""): fam.type
        for fam in Metrics().registry.collect()
    }
    documented = _documented_rows()
    assert set(families) - documented == set(), "undocumented metrics"
    assert documented - set(families) == set(), "documented metrics the code does not export"


def test_unknown_record_types_have_a_bounded_label_set() -> None:
    m = Metrics()
    for i in range(MAX_RECORD_TYPES + 5):
        m.observe_skipped(f"type-{i}")
    m.observe_skipped("type-0")
    m.observe_skipped()  # a known record without events: not an unknown type
    assert value(m, "stream_pairer_records_skipped_total") == MAX_RECORD_TYPES + 7
    assert value(m, "stream_pairer_records_unknown_type_total", type="type-0") == 2
    assert value(m, "stream_pairer_records_unknown_type_total", type="other") == 5
    series = [
        s for fam in m.registry.collect() if fam.name == "stream_pairer_records_unknown_type"
        for s in fam.samples if s.name.endswith("_total")
    ]  # fmt: skip
    assert len(series) == MAX_RECORD_TYPES + 1


# ------------------------------------------------------------------ batched counting (issue 15)


def _samples(m: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in m.registry.collect()
        for s in fam.samples
        if not s.name.endswith("_created")
    }


def _varied_outputs() -> list[dict[str, Any]]:
    """Every branch of the counting: pairs by id / fifo by name and order, orphans of each kind and
    reason, dead letters, tool names past the label cap and missing, outcomes, failures, latencies
    in several buckets, negative and missing ones."""
    recs: list[dict[str, Any]] = []
    for i in range(300):
        tool = None if i % 17 == 0 else f"tool{i % 7}"
        if i % 5 == 0:
            recs.append({"kind": "dead_letter", "reason": ("invalid_json", "too_large", None)[i % 3]})
        elif i % 5 == 1:
            kind = ORPHAN_KINDS[i % len(ORPHAN_KINDS)]
            recs.append({"kind": kind, "reason": ORPHAN_REASONS[i % len(ORPHAN_REASONS)], "tool": tool,
                         "outcome": OUTCOMES[i % len(OUTCOMES)] if i % 3 else None})  # fmt: skip
        else:
            match, fifo_by = (("id", None), ("fifo", "name"), ("fifo", "order"))[i % 3]
            recs.append({
                "kind": "pair", "match": match, "fifo_by": fifo_by, "tool": tool,
                "latency_ms": (None, -5.0, 3.0, 250.0, 7_000.0, 2e6)[i % 6],
                "outcome": OUTCOMES[i % len(OUTCOMES)] if i % 2 else None,
                "failure": FAILURE_POINTS[i % len(FAILURE_POINTS)] if i % 4 == 0 else None,
            })  # fmt: skip
    return recs


def test_observe_outputs_counts_exactly_what_per_record_observation_counts() -> None:
    recs = _varied_outputs()
    one, batched = (
        Metrics(CollectorRegistry(), max_tool_labels=4),
        Metrics(CollectorRegistry(), max_tool_labels=4),
    )
    for rec in recs:
        one.observe_output(rec)
    batched.observe_outputs([output_meta(r) for r in recs[:123]])  # two batches: the label cap
    batched.observe_outputs([output_meta(r) for r in recs[123:]])  # state carries across them
    a, b = _samples(one), _samples(batched)
    assert a.keys() == b.keys()
    for k, v in a.items():
        assert b[k] == pytest.approx(v, rel=1e-12), k  # sums may differ in the last bits, counts not
    assert value(batched, "stream_pairer_pairs_total", match="fifo", fifo_by="order") > 0
    negative = sum(1 for r in recs if r["kind"] == "pair" and (r.get("latency_ms") or 0) < 0)
    assert negative > 0 and value(batched, "stream_pairer_tool_latency_negative_total") == negative
    with pytest.raises(ValueError, match="not an output record kind"):
        batched.observe_outputs([output_meta({"kind": "nonsense"})])


def test_emit_latency_of_n_outputs_is_n_observations() -> None:
    one, batched = Metrics(CollectorRegistry()), Metrics(CollectorRegistry())
    for seconds, n in ((0.003, 7), (0.2, 1), (-1.0, 2), (40.0, 3)):
        for _ in range(n):
            one.observe_emit_latency(seconds)
        batched.observe_emit_latency(seconds, n)
    batched.observe_emit_latency(1.0, 0)  # nothing
    a, b = _samples(one), _samples(batched)
    assert a.keys() == b.keys()
    for k, v in a.items():
        assert b[k] == pytest.approx(v, rel=1e-12), k
    assert value(batched, "stream_pairer_emit_latency_seconds_count") == 13


def test_input_and_output_bytes() -> None:
    """Output bytes per input byte (issue 15): input bytes unlabelled, output bytes by record kind,
    every kind's series at zero from the start (a ratio needs its denominator before traffic)."""
    m = Metrics()
    kinds = {s["kind"] for s in series(m, "stream_pairer_output_bytes_total")}
    assert kinds == {"pair", "orphan_call", "orphan_result", "dead_letter"}
    m.observe_input_bytes(1000)
    m.observe_input_bytes(24)
    m.observe_output_bytes("pair", 3900)
    m.observe_output_bytes("pair", 100)
    m.observe_output_bytes("dead_letter", 50)
    assert value(m, "stream_pairer_input_bytes_total") == 1024
    assert value(m, "stream_pairer_output_bytes_total", kind="pair") == 4000
    assert value(m, "stream_pairer_output_bytes_total", kind="dead_letter") == 50
    assert value(m, "stream_pairer_output_bytes_total", kind="orphan_call") == 0
    with pytest.raises(ValueError, match="output record kind"):
        m.observe_output_bytes("pairs", 1)
