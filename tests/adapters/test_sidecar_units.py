"""Broker-free pieces of the Kafka sidecar: error mapping, HTTP endpoint, output size guard, options."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
from aiokafka import TopicPartition
from aiokafka import errors as ak
from prometheus_client import CollectorRegistry

from stream_pairer.adapters.kafka.delivery import Backoff, encode_output
from stream_pairer.adapters.kafka.errors import classify
from stream_pairer.adapters.kafka.sidecar import Sidecar, SidecarConfig
from stream_pairer.cli.app import build_parser
from stream_pairer.cli.commands.run import config_from_args
from stream_pairer.errors import (
    AuthorizationFailed,
    BrokerUnavailable,
    CommitFailed,
    DeliveryFailed,
    Fenced,
    SidecarError,
)
from stream_pairer.ops.http import HttpServer
from stream_pairer.ops.metrics import Metrics
from tests.reference.engine import EngineConfig


@pytest.mark.parametrize(
    ("err", "during", "expected", "retriable"),
    [
        (ak.ProducerFenced(), "commit the transaction", Fenced, False),
        (ak.KafkaConnectionError("down"), "session", BrokerUnavailable, True),
        (ak.KafkaTimeoutError(), "deliver t[0]", BrokerUnavailable, True),
        (ak.CommitFailedError("rebalanced"), "commit offsets", CommitFailed, True),
        (ak.MessageSizeTooLargeError(), "deliver t[0]", DeliveryFailed, True),
        (ak.NotLeaderForPartitionError(), "open partitions", BrokerUnavailable, True),
        (ak.TopicAuthorizationFailedError(), "open partitions", AuthorizationFailed, False),
        (ConnectionRefusedError(), "session", BrokerUnavailable, True),
    ],
)
def test_classify_maps_client_errors_onto_one_tree(
    err: Exception, during: str, expected: type[SidecarError], retriable: bool
) -> None:
    mapped = classify(err, during=during)
    assert type(mapped) is expected
    assert mapped.retriable is retriable
    assert during in str(mapped)
    assert classify(mapped, during="again") is mapped


def test_backoff_grows_exponentially_and_is_capped() -> None:
    b = Backoff(0.5, 8.0)
    delays = [b.next() for _ in range(10)]
    assert all(0.75 * min(0.5 * 2**i, 8.0) <= d <= min(0.5 * 2**i, 8.0) for i, d in enumerate(delays))
    assert max(delays) <= 8.0 and delays[-1] >= 6.0
    b.reset()
    assert b.next() <= 0.5


async def _get(port: int, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    writer.write_eof()  # an incomplete request then ends at once instead of waiting out the read timeout
    data = await reader.read()
    writer.close()
    return data


async def test_http_server_routes_status_codes_and_errors() -> None:
    def broken() -> tuple[int, str, bytes]:
        raise RuntimeError("boom")

    server = HttpServer(
        {
            "/ok": lambda: (200, "text/plain", b"fine\n"),
            "/down": lambda: (503, "text/plain", b"no\n"),
            "/x": broken,
        },
        host="127.0.0.1",
        port=0,
    )
    port = await server.start()
    try:
        assert port > 0 and server.bound_port == port
        ok = await _get(port, b"GET /ok?verbose=1 HTTP/1.1\r\nHost: x\r\n\r\n")
        assert ok.startswith(b"HTTP/1.1 200 OK\r\n") and ok.endswith(b"\r\n\r\nfine\n")
        assert b"Content-Length: 5\r\n" in ok
        assert (await _get(port, b"GET /down HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 503 ")
        assert (await _get(port, b"GET /nope HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 404 ")
        assert (await _get(port, b"POST /ok HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 405 ")
        assert (await _get(port, b"garbage\r\n\r\n")).startswith(b"HTTP/1.1 400 ")
        assert (await _get(port, b"GET /x HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 503 ")
        assert await _get(port, b"GET /ok HTTP/1.1\r\n") == b""  # incomplete request: closed, no answer
    finally:
        await server.stop()
    assert server.bound_port is None


def _pair(payload: str) -> dict[str, Any]:
    side = {"id": "a", "name": "t", "source": {"topic": "in", "partition": 0, "offset": 7}, "block": 0}
    return {
        "kind": "pair",
        "pair_id": "p",
        "conversation_id": "c",
        "call": side | {"arguments": {"q": payload}, "raw": {"q": payload}},
        "result": side | {"content": payload, "is_error": False, "raw": payload},
    }


def test_an_output_over_the_size_limit_keeps_identity_and_loses_payloads() -> None:
    small = _pair("x" * 10)
    assert orjson.loads(encode_output(orjson.dumps(small), 10_000)) == small
    big = _pair("x" * 50_000)
    out = orjson.loads(encode_output(orjson.dumps(big), 10_000))
    assert len(encode_output(orjson.dumps(big), 10_000)) < 10_000
    assert out["payload_truncated"] is True and out["payload_bytes"] > 100_000
    assert out["call"]["arguments"] is None and out["result"]["content"] is None
    assert out["call"]["source"] == big["call"]["source"] and out["pair_id"] == "p"


def test_run_options_come_from_flags_or_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAM_PAIRER_BOOTSTRAP_SERVERS", "h:1")
    monkeypatch.setenv("STREAM_PAIRER_INPUT_TOPIC", "a,b")
    monkeypatch.setenv("STREAM_PAIRER_GROUP_ID", "g")
    monkeypatch.setenv("STREAM_PAIRER_EXACTLY_ONCE", "true")
    monkeypatch.setenv("STREAM_PAIRER_HTTP_PORT", "0")
    cfg = config_from_args(build_parser().parse_args(["run"]))
    assert (cfg.bootstrap_servers, cfg.input_topics, cfg.group_id) == ("h:1", ("a", "b"), "g")
    assert cfg.exactly_once and cfg.http_port == 0 and cfg.commit_every_s == 0.05
    flags = ["run", "--input-topic", "c", "--bootstrap-servers", "x:2", "--commit-interval", "0", "--no-http"]
    cfg = config_from_args(build_parser().parse_args(flags))
    assert (cfg.bootstrap_servers, cfg.input_topics) == ("x:2", ("c",))  # a flag wins over the environment
    assert cfg.commit_every_s == 0 and cfg.http_port is None
    assert cfg.outputs("c").all() == ("c.pairs", "c.orphans", "c.dead-letter")


def test_run_without_required_options_says_which(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("BOOTSTRAP_SERVERS", "INPUT_TOPIC", "GROUP_ID"):
        monkeypatch.delenv(f"STREAM_PAIRER_{name}", raising=False)
    with pytest.raises(ValueError, match="--bootstrap-servers, --input-topic, --group-id"):
        config_from_args(build_parser().parse_args(["run"]))
    assert build_parser().parse_args(["run"])._run(build_parser().parse_args(["run"])) == 2


@pytest.mark.parametrize(
    "bad",
    [
        {"input_topics": ()},
        {"group_id": ""},
        {"tick_interval_s": 0},
        {"commit_interval_s": -1},
        {"auto_offset_reset": "middle"},
        {"isolation_level": "dirty"},
    ],
)
def test_sidecar_config_rejects_nonsense(bad: dict[str, Any]) -> None:
    base: dict[str, Any] = {"bootstrap_servers": "h:1", "input_topics": ("t",), "group_id": "g"}
    with pytest.raises(ValueError):
        SidecarConfig(**(base | bad))


def test_max_closed_ids_comes_from_a_flag_or_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    base = ["run", "--input-topic", "c", "--bootstrap-servers", "x:2", "--group-id", "g", "--no-http"]
    monkeypatch.delenv("STREAM_PAIRER_MAX_CLOSED_IDS", raising=False)
    assert config_from_args(build_parser().parse_args(base)).engine.max_closed_ids == 100_000
    monkeypatch.setenv("STREAM_PAIRER_MAX_CLOSED_IDS", "5000")
    assert config_from_args(build_parser().parse_args(base)).engine.max_closed_ids == 5000
    cfg = config_from_args(build_parser().parse_args([*base, "--max-closed-ids", "0"]))
    assert cfg.engine.max_closed_ids == 0


def test_limit_gauges_scale_with_the_assigned_partitions() -> None:
    """The state gauges sum over the assigned partitions while each partition has the whole limit:
    the limit gauges must be the same sums, or StreamPairerStateNearLimit compares a sum of four
    partitions against one partition's limit (BENCHMARKS.md part 4)."""
    engine = EngineConfig(max_conversations=1000, max_calls_per_conversation=7, max_held_bytes=1 << 20)
    metrics = Metrics(CollectorRegistry())
    sc = Sidecar(
        SidecarConfig(
            bootstrap_servers="h:1", input_topics=("t",), group_id="g", engine=engine, http_port=None
        ),
        metrics,
    )

    def gauge(name: str) -> float | None:
        return metrics.registry.get_sample_value(name)

    assert gauge("stream_pairer_held_bytes_limit") == 0  # nothing assigned: no capacity
    sc.states = {TopicPartition("t", p): object() for p in range(4)}  # type: ignore[misc]
    sc._publish_assignment()
    assert gauge("stream_pairer_assigned_partitions") == 4
    assert gauge("stream_pairer_held_bytes_limit") == 4 << 20
    assert gauge("stream_pairer_open_conversations_limit") == 4000
    assert gauge("stream_pairer_calls_per_conversation_limit") == 7  # per conversation: not summed
    del sc.states[TopicPartition("t", 3)]
    sc._publish_assignment()
    assert gauge("stream_pairer_held_bytes_limit") == 3 << 20
