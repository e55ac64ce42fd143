"""The short fault trials (the CI version of scripts/fault_trials.py): kill -9 of a real
`stream-pairer run` process at random points, and the broker going away mid-run, each followed by
`stream-pairer audit` over the real topics. At-least-once: nothing lost; exactly-once: nothing lost
and nothing duplicated; and the sidecar never exits by itself.

The kill points are random on purpose; the seed is printed in every failure message, and
STREAM_PAIRER_TRIAL_SEED=N reproduces a run.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import fault_trials as ft  # scripts/ is on sys.path (see conftest.py)
import kafka_broker as kb
import orjson
import pytest
from aiokafka import AIOKafkaProducer
from kafka_broker import KafkaBroker

from stream_pairer.cli.app import main
from tests.integration.conftest import require_kafka
from tests.integration.trial_support import SEED, check
from tests.reference.engine import Engine
from tests.reference.pipeline import Pipeline


@pytest.mark.parametrize(("exactly_once", "trial"), [(False, 0), (False, 1), (True, 0), (True, 1)])
async def test_kill_9_and_restart(
    kafka_broker: KafkaBroker, tmp_path: Path, exactly_once: bool, trial: int
) -> None:
    seed = SEED + 10 * trial + int(exactly_once)
    ctx = ft.Context(tmp_path, kafka_broker)
    kind = "kill-eos" if exactly_once else "kill-alo"
    result = await ft.trial_kill(ctx, random.Random(seed), exactly_once, kind)
    check(result, exactly_once, seed)


@pytest.mark.parametrize(
    ("hard", "exactly_once"), [(False, True), (True, False)], ids=["stop-eos", "kill-alo"]
)
async def test_broker_restart_with_the_sidecar_kept_running(
    tmp_path: Path, hard: bool, exactly_once: bool
) -> None:
    """SIGTERM (controlled shutdown) or SIGKILL of the broker, down for 3-8 s, same port and data."""
    require_kafka(kb.DEFAULT_VERSION)
    seed = SEED + int(hard)
    rng = random.Random(seed)
    result = await ft.trial_broker_restart(ft.Context(tmp_path), rng, hard, "broker-restart", exactly_once)
    check(result, exactly_once, seed)


async def test_audit_on_topics_reads_committed_outputs_and_names_the_lost_offset(
    kafka_broker: KafkaBroker, topic_factory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """The audit in topic mode, on outputs written by hand: a clean set passes; a duplicate inside an
    aborted transaction is invisible (read_committed); a missing output is named by topic[p]@offset."""
    bootstrap = kafka_broker.bootstrap
    topic = await topic_factory(2)
    records = [
        (b"c1", {"conversation_id": "c1", "type": "tool_call", "id": "a", "name": "f"}),
        (b"c2", {"conversation_id": "c2", "type": "tool_call", "id": "b", "name": "g"}),
        (b"c1", {"conversation_id": "c1", "type": "tool_result", "id": "a", "content": "ok"}),
        (b"c2", b"{broken"),
        (b"c2", {"conversation_id": "c2", "type": "tool_result", "id": "b", "content": "ok"}),
    ]
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        sent = []
        for key, body in records:
            value = body if isinstance(body, bytes) else orjson.dumps(body)
            meta = await (await producer.send(topic, value, key=key))
            sent.append((key, value, meta.partition, meta.offset))
    finally:
        await producer.stop()
    # The outputs the sidecar would write, made by the same pipeline from the same lineage.
    pipeline = Pipeline(Engine())
    outputs: list[dict[str, Any]] = []
    for key, value, partition, offset in sent:
        source = {"topic": topic, "partition": partition, "offset": offset}
        outputs += pipeline.feed(value, source, key=key.decode())
    outputs += pipeline.flush()
    assert len(outputs) == 3  # two pairs and a dead letter
    names = {"pair": "pairs", "dead_letter": "dead-letter"}
    txn = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", transactional_id=f"t-{topic}")
    await txn.start()
    try:
        async with txn.transaction():
            for rec in outputs[1:]:
                await txn.send(f"{topic}.{names[rec['kind']]}", orjson.dumps(rec))
        await txn.begin_transaction()
        await txn.send(f"{topic}.pairs", orjson.dumps(outputs[1]))  # a duplicate, then aborted
        await txn.abort_transaction()
    finally:
        await txn.stop()
    args = ["audit", "--bootstrap-servers", bootstrap, "--input-topic", topic, "--exactly-once"]
    assert await asyncio.to_thread(main, args) == 1
    text = capsys.readouterr().out
    lost = outputs[0]
    for side in (lost["call"], lost["result"]):
        src = side["source"]
        assert f"{topic}[{src['partition']}]@{src['offset']} block 0" in text
    # Exactly 2 problems: with --exactly-once the aborted duplicate would add 2 more if it were read.
    assert "audit FAILED: 2 problems (2 lost)" in text
