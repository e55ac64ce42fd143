#!/usr/bin/env python3
"""Ceiling (a): the least a Python Kafka service can do: consume, produce the same bytes, commit.

This is the sidecar minus everything stream-pairer adds (parsing, pairing, serialization of new
records): the same aiokafka client, the same batching (`getmany`), the same delivery discipline
(at-least-once: offsets committed only after the batch's sends are acknowledged with acks=all;
exactly-once: a transaction per batch with `send_offsets_to_transaction`). Whatever rate this
reaches is the most the sidecar could reach on this machine with this client.

    python bench/passthrough_aiokafka.py --bootstrap-servers H:P --input-topic T --output-topic O \
        [--exactly-once] [--send-batch]

`--send-batch` is the client's fastest Python path (issue 15's reference): per output partition one
`create_batch()` filled with `append()` and sent with `send_batch()` (one future per batch), the
partition chosen by aiokafka's murmur2 rule (the Java client's), instead of one `send()` per message.

Runs until SIGTERM/SIGINT (the harness stops it once the output topic holds every message).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import uuid
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.partitioner import murmur2
from aiokafka.structs import OffsetAndMetadata


async def send_batched(producer: AIOKafkaProducer, topic: str, n_parts: int, msgs: list[Any]) -> list[Any]:
    """Send `msgs` to `topic` as one batch per partition (a new batch when one is full); the
    futures of the batches."""
    by_part: dict[int, Any] = {}
    futs = []
    for m in msgs:
        key = m.key
        part = (murmur2(key) & 0x7FFFFFFF) % n_parts if key is not None else 0
        batch = by_part.get(part)
        if batch is None:
            batch = by_part[part] = producer.create_batch()
        if batch.append(key=key, value=m.value, timestamp=None) is None:
            futs.append(await producer.send_batch(batch, topic, partition=part))
            batch = by_part[part] = producer.create_batch()
            batch.append(key=key, value=m.value, timestamp=None)
    for part, batch in by_part.items():
        futs.append(await producer.send_batch(batch, topic, partition=part))
    return futs


async def main(args: argparse.Namespace) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    consumer = AIOKafkaConsumer(
        args.input_topic,
        bootstrap_servers=args.bootstrap_servers,
        group_id=args.group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        max_partition_fetch_bytes=args.fetch_bytes,
    )
    producer_kw: dict[str, object] = {
        "bootstrap_servers": args.bootstrap_servers,
        "acks": "all",
        "linger_ms": args.linger_ms,
        "max_batch_size": args.batch_bytes,
        "enable_idempotence": True,
    }
    # Producer settings default to the sidecar's own (acks=all, idempotent, linger 5 ms, a commit a
    # second); the fetch is the fastest found for this ceiling (issue 23: a ceiling must be the
    # fastest passthrough one can write): 10,000 records per getmany from 4 MiB partition fetches
    # ran at 86-91k records/s where the sidecar's 1,000 from 1 MiB ran at 57k (BENCHMARKS.md).
    if args.exactly_once:
        producer_kw["transactional_id"] = f"passthrough-{uuid.uuid4().hex[:8]}"
    producer = AIOKafkaProducer(**producer_kw)  # type: ignore[arg-type]
    await producer.start()
    await consumer.start()
    out = args.output_topic
    n_parts = len(await producer.partitions_for(out)) if args.send_batch else 0
    n = 0
    futs: list[asyncio.Future[object]] = []
    pending: dict[TopicPartition, int] = {}
    last_commit = loop.time()
    try:
        while not stop.is_set():
            batches = await consumer.getmany(timeout_ms=200, max_records=args.max_records)
            if not batches:
                continue
            offsets = {tp: msgs[-1].offset + 1 for tp, msgs in batches.items()}
            if args.exactly_once:
                async with producer.transaction():
                    for msgs in batches.values():
                        if args.send_batch:
                            await send_batched(producer, out, n_parts, msgs)
                            continue
                        for m in msgs:
                            await producer.send(out, m.value, key=m.key)
                    await producer.send_offsets_to_transaction(
                        {tp: OffsetAndMetadata(o, "") for tp, o in offsets.items()}, args.group
                    )
            else:
                send = producer.send
                for msgs in batches.values():
                    if args.send_batch:
                        futs.extend(await send_batched(producer, out, n_parts, msgs))
                        continue
                    for m in msgs:
                        futs.append(await send(out, m.value, key=m.key))
                pending.update(offsets)
                now = loop.time()
                if now - last_commit >= args.commit_interval:
                    await asyncio.gather(*futs)  # acknowledged (acks=all) before the offsets move
                    futs.clear()
                    await consumer.commit(
                        {TopicPartition(tp.topic, tp.partition): o for tp, o in pending.items()}
                    )
                    pending.clear()
                    last_commit = now
            n += sum(len(m) for m in batches.values())
    finally:
        await consumer.stop()
        await producer.stop()
        print(f"passthrough: {n} messages", file=sys.stderr)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap-servers", required=True)
    p.add_argument("--input-topic", required=True)
    p.add_argument("--output-topic", required=True)
    p.add_argument("--group", default=f"passthrough-{uuid.uuid4().hex[:8]}")
    p.add_argument("--exactly-once", action="store_true")
    p.add_argument("--send-batch", action="store_true", help="create_batch/send_batch per partition")
    p.add_argument("--linger-ms", type=int, default=5)
    p.add_argument("--batch-bytes", type=int, default=16384)
    p.add_argument("--fetch-bytes", type=int, default=4 << 20)
    p.add_argument("--max-records", type=int, default=10000)
    p.add_argument(
        "--commit-interval", type=float, default=1.0, help="at-least-once: seconds between commits"
    )
    asyncio.run(main(p.parse_args()))
