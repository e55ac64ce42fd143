"""Prometheus metrics for stream-pairer: what an operator pages on and what the warehouse team graphs.

Why this module is shaped the way it is:

* One `Metrics` object owns one `CollectorRegistry` (a fresh one by default), so tests and several
  pipelines in one process never collide on the global registry. The HTTP server serves
  `metrics.registry`.
* `observe_outputs` runs once per delivered batch (issue 15): it groups the batch's `OutputMeta`s by
  label set and adds each group's count once, and fills the histograms bucket by bucket, so the cost
  per output is a tuple count, not a locked add per counter. `observe_output` (one record dict)
  goes through it too. Every labelled child is resolved once and cached in a plain dict.
* Labels are bounded: `match`, `kind`, `reason`, `outcome`, `point` and `limit` come from closed
  sets in the code; `tool` comes from the data, so it is folded to `other` after `max_tool_labels`
  distinct names (or to `other` for any name outside `known_tools` when a tool registry is given).
  `format` and dead-letter `reason` are codes chosen by the format readers, not free text.
* Series that alerts divide by (pairs, orphans by reason, evictions by limit) are created at zero
  up front, so the first orphan after a restart is a visible increase to `rate()`/`increase()`
  instead of a series that silently appears already at 1.
* Times are event time for the tool latency (call ts -> result ts, from the records) and wall time
  for the emit latency (the adapter measures it); nothing here reads a clock except
  `mark_consumed`, which is called by adapters, never by the pure core.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter as Tally
from collections.abc import Iterable, Mapping, Sequence
from operator import itemgetter
from typing import Any, Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from stream_pairer.core import vocab
from stream_pairer.core.model import OutputMeta, output_meta
from stream_pairer.core.vocab import (
    EventType,
    EvictionLimit,
    FailurePoint,
    FifoBy,
    Match,
    OrphanReason,
    Outcome,
    RecordKind,
)
from stream_pairer.ops.histograms import observe_many
from stream_pairer.ops.reads import ReadTally
from stream_pairer.ops.stages import StageMetrics

# Closed label sets: the record vocabulary (core/vocab.py) as plain strings.
MATCHES: Final = (
    (Match.ID.value, "none"),
    (Match.FIFO.value, FifoBy.NAME.value),
    (Match.FIFO.value, FifoBy.ORDER.value),
)
ORPHAN_KINDS: Final = tuple(k.value for k in vocab.ORPHAN_KINDS)
ORPHAN_REASONS: Final = tuple(r.value for r in OrphanReason)
OUTCOMES: Final = tuple(o.value for o in Outcome)
FAILURE_POINTS: Final = tuple(p.value for p in FailurePoint)
EVICTION_LIMITS: Final = tuple(limit.value for limit in EvictionLimit)
EVENT_TYPES: Final = tuple(t.value for t in EventType)
RECORD_KINDS: Final = tuple(k.value for k in RecordKind)
_PAIR: Final = RecordKind.PAIR.value
_ORPHAN_CALL: Final = RecordKind.ORPHAN_CALL.value
_DEAD_LETTER: Final = RecordKind.DEAD_LETTER.value

OTHER_TOOL: Final = "other"  # folded tool names (past the cap, or outside the registry)
UNKNOWN_TOOL: Final = "unknown"  # the record carried no tool name at all
NONE_LABEL: Final = "none"  # a null field (fifo_by on an id match, no outcome)
MAX_TOOL_NAME_CHARS: Final = 128
# Distinct values of the `type` label of stream_pairer_records_unknown_type_total; the rest are
# folded into OTHER (a producer writing a fresh type per record must not grow the series count).
MAX_RECORD_TYPES: Final = 20
OTHER: Final = "other"

# Event-time latency of a tool call: from fast lookups to multi-minute jobs.
TOOL_LATENCY_BUCKETS: Final = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
)  # fmt: skip
# Wall time from a result's arrival to the commit that made its output durable: up to the commit
# interval (1 s at-least-once, 0.05 s exactly-once by default) normally, seconds when backed up.
EMIT_LATENCY_BUCKETS: Final = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip


# OutputMeta minus its latency: what the counters are labelled by (the latency goes to a histogram).
_LABELS_OF: Final = itemgetter(0, 1, 2, 3, 4, 5)


class Metrics:
    """All stream-pairer metrics, registered in `self.registry`.

    Callers: the delivery calls `observe_outputs` for every batch it sends and `set_state` /
    `observe_eviction` from the engine's bookkeeping; the Kafka adapter calls `set_lag`,
    `observe_commit_error`, `observe_produce_error`, `set_assigned_partitions`, `mark_consumed`,
    `observe_input_bytes` (per fetched batch), `observe_output_bytes` (per output sent),
    `set_up`; the readers call `observe_record_read` / `observe_skipped`.
    """

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        max_tool_labels: int = 50,
        known_tools: Iterable[str] | None = None,
        version: str | None = None,
    ) -> None:
        if max_tool_labels < 0:
            raise ValueError("max_tool_labels must be >= 0")
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self.max_tool_labels = max_tool_labels
        self._known_tools: frozenset[str] | None = frozenset(known_tools) if known_tools is not None else None
        self._tool_labels: dict[str | None, str] = {}
        self._distinct_tools = 0
        r = self.registry
        # Registered first: its collection moves the reads counted since into the counters below.
        self._reads = ReadTally(r, lambda: (self.records_read, self.events_read))

        # --- input ---
        self.records_read = Counter(
            "stream_pairer_records_read",
            "Input records (lines, messages) that decoded, by detected log format.",
            ["format"],
            registry=r,
        )
        self.events_read = Counter(
            "stream_pairer_events_read",
            "Tool events read, by log format and event type (tool_call, tool_result).",
            ["format", "type"],
            registry=r,
        )
        self.records_skipped = Counter(
            "stream_pairer_records_skipped",
            "Readable input records that held no tool call or tool result (plain chat messages).",
            registry=r,
        )
        self.records_unknown_type = Counter(
            "stream_pairer_records_unknown_type",
            "Skipped input records of a type no format knows (a producer upgrade, a new line type), "
            "by type: the first MAX_RECORD_TYPES types seen, the rest as 'other'.",
            ["type"],
            registry=r,
        )
        self.history_copies = Counter(
            "stream_pairer_history_copies",
            "Repeated copies of an already-read call or result in re-sent history (wire logs, OTel "
            "spans): not events, so they produce no output.",
            registry=r,
        )
        # --- outputs ---
        self.pairs = Counter(
            "stream_pairer_pairs",
            "Call/result pairs emitted, by how they were matched (match=id|fifo; fifo_by=name|order|none).",
            ["match", "fifo_by"],
            registry=r,
        )
        self.orphans = Counter(
            "stream_pairer_orphans",
            "Orphan records emitted, by kind (orphan_call, orphan_result) and reason.",
            ["kind", "reason"],
            registry=r,
        )
        self.dead_letters = Counter(
            "stream_pairer_dead_letters",
            "Input records that could not be read, by reason code.",
            ["reason"],
            registry=r,
        )
        self._init_size_metrics(r)
        # --- failure-point tagging (issue 4) ---
        self.tool_calls = Counter(
            "stream_pairer_tool_calls",
            "Tool calls that reached an output (paired or orphaned), by tool: denominator of failure shares.",
            ["tool"],
            registry=r,
        )
        self.tool_outcomes = Counter(
            "stream_pairer_tool_outcomes",
            "Tool results by outcome (ok, empty, error), by tool; from pairs and orphan results.",
            ["tool", "outcome"],
            registry=r,
        )
        self.tool_failures = Counter(
            "stream_pairer_tool_failures",
            "Failure points tagged on pairs and orphans, by tool and point.",
            ["tool", "point"],
            registry=r,
        )
        # --- latency ---
        self.tool_latency = Histogram(
            "stream_pairer_tool_latency_seconds",
            "Event-time latency of paired tool calls: result timestamp minus call timestamp.",
            buckets=TOOL_LATENCY_BUCKETS,
            registry=r,
        )
        self.tool_latency_negative = Counter(
            "stream_pairer_tool_latency_negative",
            "Pairs whose result timestamp precedes the call timestamp (clock skew); not in the histogram.",
            registry=r,
        )
        self.emit_latency = Histogram(
            "stream_pairer_emit_latency_seconds",
            "Wall time from a tool result's arrival to the commit that made its output record durable "
            "(at-least-once: the commit step after the send was acknowledged; exactly-once: the "
            "transaction commit); includes the wait for the next commit (--commit-interval).",
            buckets=EMIT_LATENCY_BUCKETS,
            registry=r,
        )
        # --- state and limits ---
        self.open_calls = Gauge(
            "stream_pairer_open_calls",
            "Calls waiting for their result, held in memory, summed over the assigned partitions.",
            registry=r,
        )
        self.open_conversations = Gauge(
            "stream_pairer_open_conversations",
            "Conversations held in memory (open, or idle within the conversation TTL), summed over "
            "the assigned partitions.",
            registry=r,
        )
        self.held_bytes = Gauge(
            "stream_pairer_held_bytes",
            "Estimate of the memory held by open calls and pending results (about 5x their raw "
            "size, see engine.held_cost), summed over the assigned partitions.",
            registry=r,
        )
        self.pending_results = Gauge(
            "stream_pairer_pending_results",
            "Results held back waiting for a possible call (reordering window).",
            registry=r,
        )
        self.open_conversations_limit = Gauge(
            "stream_pairer_open_conversations_limit",
            "Conversations this instance can hold: STREAM_PAIRER_MAX_CONVERSATIONS (a per-partition "
            "limit) x assigned partitions, comparable with stream_pairer_open_conversations.",
            registry=r,
        )
        self.calls_per_conversation_limit = Gauge(
            "stream_pairer_calls_per_conversation_limit",
            "Configured maximum of open calls per conversation (STREAM_PAIRER_MAX_CALLS_PER_CONVERSATION); "
            "per conversation, so not multiplied by partitions.",
            registry=r,
        )
        self.held_bytes_limit = Gauge(
            "stream_pairer_held_bytes_limit",
            "Held bytes this instance can hold: STREAM_PAIRER_MAX_HELD_BYTES (a per-partition limit) "
            "x assigned partitions, comparable with stream_pairer_held_bytes.",
            registry=r,
        )
        self.evictions = Counter(
            "stream_pairer_evictions",
            "Open events emitted early as orphans (reason=evicted) because a state limit was hit, by limit.",
            ["limit"],
            registry=r,
        )
        # --- Kafka consumer / producer ---
        self._init_kafka_metrics(r)
        self.commit_errors = Counter(
            "stream_pairer_commit_errors", "Failed Kafka offset commits.", registry=r
        )
        self.produce_errors = Counter(
            "stream_pairer_produce_errors", "Failed Kafka produces of output records.", registry=r
        )
        self.rebalances = Counter(
            "stream_pairer_rebalances", "Consumer-group rebalances seen by this instance.", registry=r
        )
        self.assigned_partitions = Gauge(
            "stream_pairer_assigned_partitions",
            "Input partitions currently assigned to this instance.",
            registry=r,
        )
        self.up = Gauge(
            "stream_pairer_up",
            "1 while the pipeline runs and is ready (what /readyz reports), 0 otherwise.",
            registry=r,
        )
        self.last_consumed = Gauge(
            "stream_pairer_last_consumed_timestamp_seconds",
            "Unix time (wall clock) at which the last input record was consumed.",
            registry=r,
        )
        self.build_info = Gauge(
            "stream_pairer_build_info", "Always 1; the version label says what runs.", ["version"], registry=r
        )
        self.build_info.labels(version or _package_version()).set(1)

        # --- cached children for the hot path ---
        self._pair_children = {m: self.pairs.labels(*m) for m in MATCHES}
        self._orphan_children = {
            (k, reason): self.orphans.labels(k, reason) for k in ORPHAN_KINDS for reason in ORPHAN_REASONS
        }
        self._eviction_children = {lim: self.evictions.labels(lim) for lim in EVICTION_LIMITS}
        self._dead_children: dict[str, Counter] = {}
        self._call_children: dict[str, Counter] = {}
        self._outcome_children: dict[tuple[str, str], Counter] = {}
        self._failure_children: dict[tuple[str, str], Counter] = {}
        self._lag_children: dict[tuple[str, int], Gauge] = {}
        self._type_children: dict[str, Counter] = {}

    def _init_kafka_metrics(self, r: CollectorRegistry) -> None:
        """Two lags (README, "Two lags"): committed (what Burrow / kafka_exporter compute) and
        unprocessed (what this instance has not read and paired yet); and the consume loop's
        stages (stages.py)."""
        self.stages = StageMetrics(r)
        self.consumer_lag = Gauge(
            "stream_pairer_consumer_lag_messages",
            "Committed lag: messages between the group's committed offset and the high watermark.",
            ["topic", "partition"],
            registry=r,
        )
        self.unprocessed = Gauge(
            "stream_pairer_unprocessed_messages",
            "Messages between the next offset to process and the high watermark (not yet paired).",
            ["topic", "partition"],
            registry=r,
        )

    def _init_size_metrics(self, r: CollectorRegistry) -> None:
        """Output size (issue 15): output bytes per input byte = rate(output) / rate(input); every
        kind's series starts at zero, so the ratio has its terms before the first record."""
        self.input_bytes = Counter(
            "stream_pairer_input_bytes",
            "Bytes of the input records consumed (Kafka message values, as the client hands them "
            "over: after decompression), replays after a rebuild included.",
            registry=r,
        )
        self.output_bytes = Counter(
            "stream_pairer_output_bytes",
            "Bytes of the output records sent to the output topics (message values, before the "
            "producer's compression; keys, headers and checkpoints not counted), by record kind: "
            "what --raw all|call|omit changes.",
            ["kind"],
            registry=r,
        )
        self._output_bytes_children = {k: self.output_bytes.labels(k) for k in RECORD_KINDS}

    # ------------------------------------------------------------------ input
    def observe_record_read(self, fmt: str | None, n_calls: int, n_results: int) -> None:
        """One decoded input record holding `n_calls` tool calls and `n_results` tool results.

        Call it for every readable record, also for those with no events (then also call
        `observe_skipped`); dead letters are counted from their output record instead. The core
        calls it for every record: it adds to plain integers, which reach the counters when the
        registry is collected (ops/reads.py)."""
        self._reads.add(fmt, n_calls, n_results)

    def observe_skipped(self, record_type: str | None = None) -> None:
        """A readable record with no tool events (it produces no output record, by design);
        `record_type` when it was skipped for being of a type no format knows."""
        self.records_skipped.inc()
        if record_type is not None:
            self.observe_unknown_type(record_type)

    def observe_unknown_type(self, record_type: str) -> None:
        """Count by type with a bounded label set: type values come from the input, so only the
        first MAX_RECORD_TYPES distinct values get a series of their own."""
        child = self._type_children.get(record_type)
        if child is None:
            if len(self._type_children) >= MAX_RECORD_TYPES:
                record_type = OTHER
                child = self._type_children.get(OTHER)
            if child is None:
                child = self._type_children[record_type] = self.records_unknown_type.labels(record_type)
        child.inc()

    def observe_history_copies(self, n: int) -> None:
        if n:
            self.history_copies.inc(n)

    # ----------------------------------------------------------------- output
    def observe_outputs(self, metas: Sequence[OutputMeta]) -> None:
        """Count a batch of output records (pairs, orphans, dead letters) as emitted, by their
        OutputMeta (read by the core while encoding): one add per distinct label set."""
        if not metas:
            return
        for (kind, label, fifo_by, tool, outcome, failure), n in Tally(map(_LABELS_OF, metas)).items():
            if kind == _PAIR:
                match = (label or NONE_LABEL, fifo_by or NONE_LABEL)
                child = self._pair_children.get(match)
                if child is None:
                    child = self._pair_children[match] = self.pairs.labels(*match)
                child.inc(n)
                self._observe_tags(tool, outcome, failure, n, is_call=True)
            elif kind in ORPHAN_KINDS:
                key = (kind, label or NONE_LABEL)
                child = self._orphan_children.get(key)
                if child is None:
                    child = self._orphan_children[key] = self.orphans.labels(*key)
                child.inc(n)
                self._observe_tags(tool, outcome, failure, n, is_call=kind == _ORPHAN_CALL)
            elif kind == _DEAD_LETTER:
                reason = label or NONE_LABEL
                child = self._dead_children.get(reason)
                if child is None:
                    child = self._dead_children[reason] = self.dead_letters.labels(reason)
                child.inc(n)
            else:
                raise ValueError(f"not an output record kind: {kind!r}")
        latencies = [m[6] for m in metas if m[6] is not None and m[0] == _PAIR]
        if latencies:
            negative = sum(1 for v in latencies if v < 0)
            if negative:
                self.tool_latency_negative.inc(negative)
            observe_many(self.tool_latency, [v / 1000.0 for v in latencies if not v < 0])

    def _observe_tags(
        self, tool_name: str | None, outcome: str | None, point: str | None, n: int, *, is_call: bool
    ) -> None:
        tool = self.tool_label(tool_name)
        if is_call:
            child = self._call_children.get(tool)
            if child is None:
                child = self._call_children[tool] = self.tool_calls.labels(tool)
            child.inc(n)
        if outcome is not None:
            key = (tool, outcome)
            child = self._outcome_children.get(key)
            if child is None:
                child = self._outcome_children[key] = self.tool_outcomes.labels(tool, outcome)
            child.inc(n)
        if point is not None:
            key = (tool, point)
            child = self._failure_children.get(key)
            if child is None:
                child = self._failure_children[key] = self.tool_failures.labels(tool, point)
            child.inc(n)

    def observe_output(self, record: Mapping[str, Any]) -> None:
        """Count one output record given as a dict (a test, an embedding caller): its OutputMeta
        through `observe_outputs`, the one counting path (the core hands metas, never dicts)."""
        kind = record.get("kind")
        if kind not in RECORD_KINDS:
            raise ValueError(f"not an output record kind: {kind!r}")
        self.observe_outputs([output_meta(dict(record))])

    def observe_input_bytes(self, n: int) -> None:
        """`n` bytes of input records consumed (one call per fetched partition batch)."""
        self.input_bytes.inc(n)

    def observe_output_bytes(self, kind: str, n: int) -> None:
        """`n` bytes of output records of `kind` (pair, orphan_call, orphan_result, dead_letter) sent:
        per record or summed per batch, as the producer sends them."""
        child = self._output_bytes_children.get(kind)
        if child is None:
            raise ValueError(f"not an output record kind: {kind!r}")
        child.inc(n)

    def tool_label(self, name: str | None) -> str:
        """The `tool` label value for a tool name: bounded, stable for the life of the process.

        The first `max_tool_labels` distinct names keep their own label (in arrival order); later
        ones become `other`. With `known_tools`, only registered names get a label. A missing
        name is `unknown`. The decision is cached so a name never moves between labels.
        """
        label = self._tool_labels.get(name)
        if label is not None:
            return label
        if name is None or name == "":
            label = UNKNOWN_TOOL
        elif name in (OTHER_TOOL, UNKNOWN_TOOL):
            label = OTHER_TOOL  # a tool literally named "other" must not look like a real label
        elif self._known_tools is not None:
            label = name[:MAX_TOOL_NAME_CHARS] if name in self._known_tools else OTHER_TOOL
        elif self._distinct_tools < self.max_tool_labels:
            self._distinct_tools += 1
            label = name[:MAX_TOOL_NAME_CHARS]
        else:
            label = OTHER_TOOL
        # Bound the cache too: past the cap every new name maps to `other` without being stored.
        if label != OTHER_TOOL or len(self._tool_labels) < 4 * max(self.max_tool_labels, 1):
            self._tool_labels[name] = label
        return label

    def observe_emit_latency(self, seconds: float, n: int = 1) -> None:
        """Wall seconds from a result's arrival to the commit that made its output durable, for `n`
        outputs that arrived together (one fetch) and were made durable by the same commit: the
        histogram counts each of them, as `n` calls with one output each would."""
        if n == 1:
            self.emit_latency.observe(max(seconds, 0.0))
        elif n > 1:
            observe_many(self.emit_latency, (max(seconds, 0.0),), weight=n)

    # ------------------------------------------------------------ state/limits
    def set_state(
        self, *, open_calls: int, open_conversations: int, held_bytes: int, pending_results: int
    ) -> None:
        self.open_calls.set(open_calls)
        self.open_conversations.set(open_conversations)
        self.held_bytes.set(held_bytes)
        self.pending_results.set(pending_results)

    def set_limits(
        self,
        *,
        max_conversations: int,
        max_calls_per_conversation: int,
        max_held_bytes: int,
        partitions: int = 1,
    ) -> None:
        """The limits are per partition (each partition's engine gets the whole configuration, so
        that its state depends on its own input only and replay rebuilds it exactly), while the
        state gauges are sums over the assigned partitions: the summable limits are published
        multiplied by `partitions`, so that gauge / limit is the instance's fill ratio. Call it
        again whenever the assignment changes; with no partition the capacity is 0, which the
        alerts treat as "no limit to be near"."""
        self.open_conversations_limit.set(max_conversations * partitions)
        self.calls_per_conversation_limit.set(max_calls_per_conversation)
        self.held_bytes_limit.set(max_held_bytes * partitions)

    def observe_eviction(self, n: int, limit: str) -> None:
        """`n` open events evicted because `limit` was hit.

        `limit` is one of conversations, calls_per_conversation, held_bytes.
        """
        child = self._eviction_children.get(limit)
        if child is None:
            raise ValueError(f"unknown eviction limit {limit!r}; expected one of {EVICTION_LIMITS}")
        child.inc(n)

    # ------------------------------------------------------------------ kafka
    def set_lag(self, topic: str, partition: int, lag: int, unprocessed: int | None = None) -> None:
        """Committed lag and (when known) the unprocessed messages of one partition."""
        key = (topic, partition)
        child = self._lag_children.get(key)
        if child is None:
            child = self._lag_children[key] = self.consumer_lag.labels(topic, str(partition))
        child.set(max(lag, 0))
        if unprocessed is not None:
            self.unprocessed.labels(topic, str(partition)).set(max(unprocessed, 0))

    def forget_partition(self, topic: str, partition: int) -> None:
        """Drop the lag series of a revoked partition, so two instances never both report it."""
        if self._lag_children.pop((topic, partition), None) is not None:
            self.consumer_lag.remove(topic, str(partition))
            with contextlib.suppress(KeyError):
                self.unprocessed.remove(topic, str(partition))

    def observe_rebalance(self) -> None:
        self.rebalances.inc()

    def observe_commit_error(self) -> None:
        self.commit_errors.inc()

    def observe_produce_error(self) -> None:
        self.produce_errors.inc()

    def set_assigned_partitions(self, n: int) -> None:
        self.assigned_partitions.set(n)

    def set_up(self, up: bool) -> None:
        """Mirror of /readyz: 1 while consuming is possible (connected, running), 0 otherwise."""
        self.up.set(1 if up else 0)

    def mark_consumed(self, unix_seconds: float | None = None) -> None:
        """Record that input was consumed now (or at `unix_seconds`); feeds the not-consuming alert.

        Adapters call it once per fetched batch, not per record: the alert works at minute scale.
        """
        self.last_consumed.set(time.time() if unix_seconds is None else unix_seconds)


def _package_version() -> str:
    try:
        from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415
    except ImportError:  # pragma: no cover
        return "unknown"
    try:
        return version("stream-pairer")
    except PackageNotFoundError:
        return "unknown"
