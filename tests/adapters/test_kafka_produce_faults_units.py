"""Broker-free pieces of issue 13: topic templates, output fitting, lineage headers, logs, options.

The broker-side behaviour (topic limits, refusals, outages) is proved against real brokers in
tests/integration/test_produce_side_faults.py; these pin the rules those runs depend on.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import orjson
import pytest
from aiokafka import TopicPartition
from aiokafka.producer.message_accumulator import BatchBuilder
from aiokafka.structs import RecordMetadata
from prometheus_client import generate_latest

from stream_pairer.adapters.kafka.checkpoints import CheckpointStore
from stream_pairer.adapters.kafka.clients import KafkaSettings
from stream_pairer.adapters.kafka.delivery import AtLeastOnce, _Open, _Pending, fit_output
from stream_pairer.adapters.kafka.logs import JsonFormatter, RepeatFilter, StateLog, TextFormatter, log_level
from stream_pairer.adapters.kafka.sidecar import Sidecar, SidecarConfig
from stream_pairer.adapters.kafka.topics import check_template, render_template, verify_checkpoint_topics
from stream_pairer.cli.app import main
from stream_pairer.core.config import EngineConfig
from stream_pairer.core.formats import FormatConfig
from stream_pairer.core.native import NativePipeline
from stream_pairer.errors import ConfigError, OutputTooLarge
from stream_pairer.ops.metrics import Metrics
from stream_pairer.stream.partition import (
    H_BYTES,
    OutputTopics,
    PartitionState,
    lineage_from_headers,
    lineage_headers,
)
from tests.engine_helpers import DecodedPartitionState

# ------------------------------------------------------------------------------ templates


@pytest.mark.parametrize(
    "template",
    ["{topic.__class__}", "{topic[0]}", "{topic!r}", "{topic:>40}", "{group}", "{nope}", "{}", "{topic"],
)
def test_topic_templates_accept_only_the_documented_placeholders(template: str) -> None:
    with pytest.raises(ValueError, match="--pairs-topic"):
        check_template("--pairs-topic", template, ("topic",))
    with pytest.raises(ValueError, match="--pairs-topic"):
        SidecarConfig("b:9092", ("in",), "g", pairs_topic=template)


def test_checked_templates_render_plain_placeholders_only() -> None:
    check_template("--checkpoint-topic", "{group}.{topic}.ckpt", ("topic", "group"))
    assert render_template("{group}.{topic}.ckpt", {"topic": "a.b", "group": "g"}) == "g.a.b.ckpt"
    cfg = SidecarConfig("b:9092", ("in",), "g", dead_letter_topic="dlq-{topic}")
    assert cfg.outputs("in").dead_letters == "dlq-in"


# ------------------------------------------------------------------------- output fitting


def _pair(content_bytes: int, ident: str = "c-1") -> dict[str, Any]:
    side = {"id": ident, "name": "t", "block": 0, "source": {"topic": "t", "partition": 0, "offset": 7}}
    return {
        "kind": "pair", "pair_id": "p", "match": "id", "fifo_by": None, "conversation_id": "conv",
        "call": {**side, "arguments": {"q": 1}, "raw": {"x": 1}},
        "result": {**side, "content": "y" * content_bytes, "raw": {"y": "y" * content_bytes}},
    }  # fmt: skip


def test_an_output_is_fitted_under_its_topics_limit_keeping_lineage() -> None:
    rec = _pair(300_000)
    assert len(fit_output(orjson.dumps(rec), 2_000_000)) > 600_000  # under the limit: untouched
    small = orjson.loads(fit_output(orjson.dumps(rec), 100_000))
    assert small["payload_truncated"] is True and small["payload_bytes"] > 600_000
    assert small["result"]["content"] is None and small["result"]["source"] == rec["result"]["source"]
    assert small["call"]["id"] == "c-1" and small["pair_id"] == "p"


def test_an_output_still_too_large_keeps_only_identity_then_is_refused() -> None:
    rec = _pair(10, ident="i" * 5_000)
    rec["tool"] = "t" * 50_000  # only payload-free fields are huge
    value = fit_output(orjson.dumps(rec), 20_000)
    small = orjson.loads(value)
    assert len(value) <= 20_000 and small["output_truncated"] is True
    assert small["call"]["id"] == "i" * 5_000 and small["result"]["source"]["offset"] == 7
    with pytest.raises(OutputTooLarge, match=r"max\.message\.bytes"):
        fit_output(orjson.dumps(rec), 1_000)


def test_a_dead_letter_fitted_keeps_its_reason_and_lineage() -> None:
    source = {"topic": "t", "partition": 1, "offset": 3}
    rec = {"kind": "dead_letter", "reason": "invalid_json", "detail": "d", "raw": "z" * 200_000,
           "raw_bytes": 200_000, "raw_truncated": False, "source": source}  # fmt: skip
    small = orjson.loads(fit_output(orjson.dumps(rec), 50_000))
    assert small["reason"] == "invalid_json" and small["source"]["offset"] == 3
    assert small["raw"] == "" and small["raw_truncated"] is True and small["raw_bytes"] == 200_000


def test_checkpoint_topics_with_broker_defaults_are_refused_with_the_fix() -> None:
    good = {"cleanup.policy": "compact", "max.message.bytes": "16778240"}
    verify_checkpoint_topics({"c": good}, ["c"])
    with pytest.raises(ConfigError, match=r"cleanup.policy=delete \(needs compact\).*kafka-configs"):
        verify_checkpoint_topics({"c": {"cleanup.policy": "delete", "max.message.bytes": "16778240"}}, ["c"])
    with pytest.raises(ConfigError, match=r"max\.message\.bytes=1048588"):
        verify_checkpoint_topics(
            {"c": {"cleanup.policy": "compact,delete", "max.message.bytes": "1048588"}}, ["c"]
        )


# ------------------------------------------------------------------------ lineage headers


def _state() -> PartitionState:
    return DecodedPartitionState(
        "in.by-conversation", 0, NativePipeline(routed=True), OutputTopics("p", "o", "d"),
        start_offset=0, lineage_headers=True,
    )  # fmt: skip


class _Msg:
    def __init__(self, offset: int, value: bytes, headers: list[tuple[str, Any]]) -> None:
        self.offset, self.value, self.headers = offset, value, headers
        self.key, self.timestamp = b"k", 1_000


@pytest.mark.parametrize(
    "headers",
    [
        [("sp-src-topic", b"in"), ("sp-src-partition", None), ("sp-src-offset", b"5")],
        [("sp-src-topic", b"in"), ("sp-src-partition", b"x1"), ("sp-src-offset", b"5")],
        [("sp-src-topic", b"\xff"), ("sp-src-partition", b"1"), ("sp-src-offset", b"5")],
        [("sp-src-topic", b"in"), ("sp-src-offset", b"5")],
    ],
)
def test_unusable_lineage_headers_make_a_dead_letter_not_a_crash(headers: list[tuple[str, Any]]) -> None:
    via = {"topic": "in.by-conversation", "partition": 0, "offset": 9}
    source, problem = lineage_from_headers(headers, via)
    assert source == via and problem
    call = orjson.dumps({"conversation_id": "c", "type": "tool_call", "id": "a", "name": "f"})
    out = _state().feed([_Msg(9, call, headers)], 0.0)
    assert [e.record["kind"] for e in out] == ["dead_letter"]
    assert out[0].record["source"] == via and "lineage" in out[0].record["detail"]


def test_a_record_forwarded_as_a_prefix_is_a_too_large_dead_letter_with_its_original_lineage() -> None:
    headers = [*lineage_headers("in", 2, 40), (H_BYTES, b"5242880")]
    out = _state().feed([_Msg(3, b'{"conversation_id": "c", "x": "aaaa', headers)], 0.0)
    (rec,) = [e.record for e in out]
    assert rec["kind"] == "dead_letter" and rec["reason"] == "too_large"
    assert rec["raw_bytes"] == 5_242_880 and rec["raw_truncated"] is True
    assert rec["source"]["topic"] == "in" and rec["source"]["offset"] == 40
    assert rec["source"]["via"]["offset"] == 3


# -------------------------------------------------------------------------------- logs


def _record(
    msg: str, name: str = "aiokafka.conn", level: int = logging.ERROR, **fields: Any
) -> logging.LogRecord:
    rec = logging.LogRecord(name, level, __file__, 1, msg, (), None)
    if fields:
        rec.fields = fields
    return rec


def test_json_log_lines_are_one_object_with_named_fields() -> None:
    line = JsonFormatter().format(
        _record("kafka: unreachable", "stream_pairer.x", logging.WARNING, attempt=3)
    )
    obj = json.loads(line)
    assert obj["level"] == "WARNING" and obj["logger"] == "stream_pairer.x"
    assert obj["message"] == "kafka: unreachable" and obj["attempt"] == 3 and obj["ts"].endswith("Z")
    assert "\n" not in line
    assert TextFormatter().format(_record("m", attempt=3)).endswith("m attempt=3")


def test_repeated_client_lines_are_folded_into_a_count() -> None:
    now = [0.0]
    f = RepeatFilter(window_s=30.0, clock=lambda: now[0])
    passed = []
    for i in range(100):  # 100 identical lines in 10 s, like an outage's reconnect errors
        now[0] = i * 0.1
        passed.append(f.filter(_record('Unable connect to "%s"')))
    assert passed.count(True) == 1 and f.suppressed == 99
    now[0] = 31.0
    later = _record('Unable connect to "%s"')
    assert f.filter(later) and "99 similar line(s)" in str(later.msg)
    assert all(f.filter(_record("ours", "stream_pairer.kafka")) for _ in range(5))  # ours: never folded


def test_state_lines_only_on_change(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="t.state")
    states = StateLog(logging.getLogger("t.state"))
    assert states.change("kafka", "unreachable", "down", attempt=1)
    assert not states.change("kafka", "unreachable", "down", attempt=2)
    assert states.change("kafka", "connected", "up", attempts=2)
    assert [r.getMessage() for r in caplog.records] == ["kafka: down", "kafka: up"]
    assert caplog.records[1].fields["previous"] == "unreachable"  # type: ignore[attr-defined]


def test_log_level_is_validated(capsys: pytest.CaptureFixture[str]) -> None:
    assert log_level("debug") == "DEBUG"
    with pytest.raises(ValueError, match="LOUD"):
        log_level("LOUD")
    with pytest.raises(SystemExit) as exc:
        main(
            [
                "run",
                "--bootstrap-servers",
                "b:1",
                "--input-topic",
                "t",
                "--group-id",
                "g",
                "--log-level",
                "LOUD",
            ]
        )
    assert exc.value.code == 2 and "unknown log level 'LOUD'" in capsys.readouterr().err


def test_the_sidecar_registry_has_the_standard_process_metrics() -> None:
    text = generate_latest(
        Sidecar(SidecarConfig("b:9092", ("in",), "g", http_port=None)).metrics.registry
    ).decode()
    assert "process_resident_memory_bytes" in text and "process_cpu_seconds_total" in text


# ------------------------------------------------------------------ ids, acknowledgements


def test_ids_longer_than_max_id_bytes_make_a_too_large_dead_letter() -> None:
    pipeline = NativePipeline(EngineConfig(), FormatConfig(max_id_bytes=64))
    ok = orjson.dumps({"conversation_id": "c" * 64, "type": "tool_call", "id": "a", "name": "f"})
    assert pipeline.feed(ok, {"file": "f", "line": 1}) == []  # held: a call
    for field, value in (("conversation_id", "c" * 65), ("id", "é" * 33), ("name", "n" * 100)):
        body = {"conversation_id": "c", "type": "tool_call", "id": "a", "name": "f", field: value}
        (data,) = pipeline.feed(orjson.dumps(body), {"file": "f", "line": 2})
        rec = orjson.loads(data)
        assert rec["kind"] == "dead_letter" and rec["reason"] == "too_large", rec
        assert "--max-id-bytes" in rec["detail"]


async def test_pending_outputs_track_acknowledgement_refusal_and_recreated_topics() -> None:
    loop = asyncio.get_running_loop()
    acked: list[Any] = []
    errors: list[BaseException] = []
    pending = _Pending(on_error=errors.append, on_ack=lambda meta, n: acked.append((meta, n)))
    futs = [loop.create_future() for _ in range(3)]
    for n, f in enumerate(futs, 1):
        pending.add(f, n)
    assert pending.outstanding == 3 and pending.since is not None
    futs[0].set_result("m0")
    futs[1].set_exception(RuntimeError("refused"))
    await asyncio.sleep(0)
    assert pending.outstanding == 1 and acked == [("m0", 1)] and isinstance(pending.error, RuntimeError)
    futs[2].set_result("m2")
    await asyncio.sleep(0)
    assert pending.outstanding == 0 and pending.since is None and len(errors) == 1

    settings = KafkaSettings("127.0.0.1:9")
    d = AtLeastOnce(settings, "g", CheckpointStore(settings, "g", "{topic}.c"), Metrics())

    def meta(offset: int) -> RecordMetadata:
        return RecordMetadata("out", 0, None, offset, -1, -1, 0)

    for offset in (5, 6, 9):
        d._acked(meta(offset))
    assert d.recreated == set()
    d._acked(meta(0))  # the topic's offsets started again: it was deleted and re-created
    assert d.recreated == {"out"}

    # Batches: the offsets a batch took are base .. base + n - 1; a re-created topic whose first
    # batch starts at the base of the only batch the old one had is still seen (issue 15).
    d.recreated.clear()
    d._acked(RecordMetadata("dlq", 0, None, 0, -1, -1, 0), 15)
    d._acked(RecordMetadata("dlq", 0, None, 15, -1, -1, 0), 4)  # the next batch: offsets 15..18
    d._acked(RecordMetadata("dlq", 1, None, 0, -1, -1, 0), 15)  # partition 1: one batch, 0..14
    assert d.recreated == set()
    d._acked(RecordMetadata("dlq", 1, None, 0, -1, -1, 0), 3)  # the re-created topic's first batch
    assert d.recreated == {"dlq"}


async def test_a_batch_shared_by_input_partitions_reaches_each_and_is_acknowledged_once() -> None:
    """At-least-once batches hold the outputs of several input partitions (issue 15): each must see
    a refusal (none may commit past it), and the offset check must see each batch once."""
    loop = asyncio.get_running_loop()
    acked: list[tuple[Any, int]] = []
    errors: list[BaseException] = []
    p0 = _Pending(on_error=errors.append, on_ack=lambda meta, n: acked.append((meta, n)))
    p1 = _Pending(on_error=errors.append, on_ack=lambda meta, n: acked.append((meta, n)))
    ok, refused = loop.create_future(), loop.create_future()
    for fut in (ok, refused):
        p0.add(fut, 5, acks=True)
        p1.add(fut, 5, acks=False)
    ok.set_result("m")
    refused.set_exception(RuntimeError("refused"))
    await asyncio.sleep(0)
    assert acked == [("m", 5)]  # once, with the batch's size
    assert isinstance(p0.error, RuntimeError) and isinstance(p1.error, RuntimeError)
    assert p0.outstanding == p1.outstanding == 0 and len(errors) == 2


async def test_closing_a_partition_leaves_the_open_batches_of_the_others() -> None:
    settings = KafkaSettings("127.0.0.1:9")
    d = AtLeastOnce(settings, "g", CheckpointStore(settings, "g", "{topic}.c"), Metrics())
    tp0, tp1 = TopicPartition("in", 0), TopicPartition("in", 1)

    def batch(*owners: TopicPartition) -> _Open:
        b = _Open(BatchBuilder(16384, 0))
        b.builder.append(key=b"k", value=b"v", timestamp=None)
        b.owners.update(dict.fromkeys(owners))
        return b

    d._open = {("out", 0): batch(tp0, tp1), ("out", 1): batch(tp0), ("out", 2): batch(tp1)}
    await d.close_partition(tp0)  # rebuilt by replay: its outputs are produced again
    assert set(d._open) == {("out", 0), ("out", 2)}
    assert list(d._open[("out", 0)].owners) == [tp1]  # tp1's outputs in it still go out
