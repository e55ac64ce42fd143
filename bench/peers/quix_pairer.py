#!/usr/bin/env python3
"""The peer: the same pairing job written the way a Quix Streams user would write it.

Quix Streams (confluent-kafka/librdkafka underneath, RocksDB state store per partition, state scoped
to the message key) is what a Python team would otherwise reach for. The job:
* reads the same input topic (key = conversation id), parses each record with stream-pairer's own
  format layer (so the comparison is about streaming and state, not about parsing),
* keeps open calls in the framework's state store, per conversation: `call:<id>` for calls with an
  id, a `fifo` list for id-less calls,
* on a result: pairs by id, else FIFO by tool name, else emits an orphan result,
* writes pairs (the same record shape: pair_id, sides, timestamps, latency) to `<topic>.quix-pairs`,
  orphan results to `<topic>.quix-orphans`.

It does *less* than the sidecar, which favours the peer: no failure tagging, no call timeouts (Quix
has no per-key timers; open calls stay in the store), no memory limits, no late-result grace.

    python bench/peers/quix_pairer.py --bootstrap-servers H:P --input-topic T [--exactly-once]
"""

from __future__ import annotations

import argparse
import logging
import uuid
from typing import Any

from quixstreams import Application, State, message_context

from stream_pairer.core.formats import parse_record
from stream_pairer.core.model import FormatError, ToolEvent, format_ts
from tests.reference.engine import pair_id


def _pair(conv: str, call: dict[str, Any], ev: ToolEvent, match: str, fifo_by: str | None) -> dict[str, Any]:
    result_side = ev.to_side()
    latency = ev.ts_ms - call["ts_ms"] if ev.ts_ms is not None and call["ts_ms"] is not None else None
    return {
        "kind": "pair",
        "pair_id": call["pair_id"],
        "match": match,
        "fifo_by": fifo_by,
        "conversation_id": conv,
        "tool": call["side"]["name"] or ev.name,
        "call": call["side"],
        "result": result_side,
        "call_ts": format_ts(call["ts_ms"]),
        "result_ts": format_ts(ev.ts_ms),
        "latency_ms": latency,
    }


def pair_record(raw: bytes, key: str, timestamp: int, headers: Any, state: State) -> list[dict[str, Any]]:
    ctx = message_context()
    source = {"topic": ctx.topic, "partition": ctx.partition, "offset": ctx.offset}
    try:
        events = parse_record(raw, source, key=key)
    except FormatError as err:
        return [{"kind": "dead_letter", "reason": err.reason, "detail": err.detail, "source": source}]
    out: list[dict[str, Any]] = []
    for ev in events:
        conv = ev.conversation_id
        if ev.is_call:
            entry = {"side": ev.to_side(), "ts_ms": ev.ts_ms, "pair_id": pair_id(conv, ev)}
            if ev.id is not None:
                state.set(f"call:{ev.id}", entry)
            else:
                fifo = state.get("fifo", [])
                fifo.append(entry)
                state.set("fifo", fifo)
            continue
        if ev.id is not None:
            call = state.get(f"call:{ev.id}")
            if call is not None:
                state.delete(f"call:{ev.id}")
                out.append(_pair(conv, call, ev, "id", None))
                continue
        else:
            fifo = state.get("fifo", [])
            for i, call in enumerate(fifo):
                if ev.name is None or call["side"]["name"] == ev.name:
                    del fifo[i]
                    state.set("fifo", fifo)
                    out.append(_pair(conv, call, ev, "fifo", "name" if ev.name else "order"))
                    break
            else:
                out.append({"kind": "orphan_result", "reason": "no_call", "event": ev.to_side()})
            continue
        out.append({"kind": "orphan_result", "reason": "no_call", "event": ev.to_side()})
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bootstrap-servers", required=True)
    p.add_argument("--input-topic", required=True)
    p.add_argument("--group-id", default=f"quix-pairer-{uuid.uuid4().hex[:6]}")
    p.add_argument("--state-dir", default="/tmp/quix-pairer-state")
    p.add_argument("--exactly-once", action="store_true")
    args = p.parse_args()
    app = Application(
        broker_address=args.bootstrap_servers,
        consumer_group=args.group_id,
        auto_offset_reset="earliest",
        processing_guarantee="exactly-once" if args.exactly_once else "at-least-once",
        state_dir=args.state_dir,
        commit_interval=1.0,  # the sidecar's at-least-once commit interval (Quix's default is 5 s)
        loglevel=logging.WARNING,
        use_changelog_topics=True,  # the framework's fault tolerance, as deployed
    )
    src = app.topic(args.input_topic, key_deserializer="str", value_deserializer="bytes")
    pairs = app.topic(f"{args.input_topic}.quix-pairs", key_serializer="str", value_serializer="json")
    orphans = app.topic(f"{args.input_topic}.quix-orphans", key_serializer="str", value_serializer="json")
    sdf = app.dataframe(src)
    sdf = sdf.apply(pair_record, stateful=True, expand=True, metadata=True)
    sdf[sdf["kind"] == "pair"].to_topic(pairs)
    sdf[sdf["kind"] != "pair"].to_topic(orphans)
    app.run()


if __name__ == "__main__":
    main()
