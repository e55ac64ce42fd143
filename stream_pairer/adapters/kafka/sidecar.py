"""The Kafka sidecar: consume, pair per partition, produce outputs, commit, tick, and survive.

One `AIOKafkaConsumer` in a consumer group; one `PartitionState` (a Pipeline over an Engine) per
assigned partition. The loop is: fetch a batch (`getmany`) -> feed each partition's records ->
send their outputs -> every `tick_interval` advance quiet partitions by the wall clock -> every
`commit_interval` make the outputs durable and commit each partition's offset (never past its
oldest held event) with a replay checkpoint. Delivery details live in kafka_io.py, the per-partition
rules in partition.py; this module is orchestration: rebalances, failures, readiness, shutdown.

Rebalance: rebuild by replay (see docs/DELIVERY.md). On revoke, the partition's outputs are made
durable and its offset committed; its state is parked. If the same partition comes back (the sticky
assignor's usual outcome) and nobody committed it in between, the parked state is reused as is;
otherwise it is dropped and the new owner rebuilds it by replaying from the committed offset,
guided by the checkpoint. Nothing is flushed as a fake orphan, nothing is paired twice.

Failures: a partition whose outputs could not be delivered (or whose transaction failed) is reset
and rebuilt from its last commit; opening a partition retries with capped exponential backoff; a
fenced transactional producer (another instance owns the partition now), or a consumer error that
is not retriable, ends the session: all partitions are dropped and the group is rejoined after a
backoff. Every attempt is logged with its error; the loop never exits on its own except on stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
from aiokafka.errors import KafkaError
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from stream_pairer.adapters.kafka.errors import classify
from stream_pairer.adapters.kafka.io import (
    AtLeastOnce,
    CheckpointStore,
    Delivery,
    ExactlyOnce,
    KafkaSettings,
    TopicSpec,
    committed_offsets,
    ensure_topics,
    make_admin,
    topic_partitions,
    tp_key,
)
from stream_pairer.adapters.kafka.rekeyer import Rekeyer
from stream_pairer.adapters.kafka.security import PLAINTEXT, KafkaSecurity, probe
from stream_pairer.core.engine import Engine, EngineConfig, Tagger
from stream_pairer.core.formats import DEFAULT_CONFIG, FormatConfig
from stream_pairer.core.pipeline import Pipeline
from stream_pairer.core.vocab import OrphanReason
from stream_pairer.errors import BrokerUnavailable, CommitFailed, ConfigError, Fenced, SidecarError
from stream_pairer.ops.http import HttpServer, Response
from stream_pairer.ops.metrics import Metrics
from stream_pairer.stream.checkpoint import Checkpoint, new_token
from stream_pairer.stream.clock import TickSchedule
from stream_pairer.stream.partition import (
    DEAD_LETTER_TOPIC,
    ORPHANS_TOPIC,
    PAIRS_TOPIC,
    Emitted,
    OutputTopics,
    PartitionState,
)

log = logging.getLogger("stream_pairer.adapters.kafka.sidecar")


def partition_tagger(tagger: Tagger | None) -> Tagger | None:
    """Each partition's engine gets a tagger of its own when the tagger can make one: its bounded
    state must depend on the partition's own input only, like the engine's limits, or a replay on
    another instance (sharing the process with other partitions) could tag differently."""
    fresh = getattr(tagger, "fresh", None)
    return fresh() if callable(fresh) else tagger


@dataclass(frozen=True, slots=True)
class SidecarConfig:
    bootstrap_servers: str
    input_topics: tuple[str, ...]
    group_id: str
    exactly_once: bool = False
    pairs_topic: str = PAIRS_TOPIC
    orphans_topic: str = ORPHANS_TOPIC
    dead_letter_topic: str = DEAD_LETTER_TOPIC
    checkpoint_topic: str = "{topic}.pairer-checkpoints"
    create_topics: bool = True
    replication_factor: int = 1
    transactional_id_prefix: str = "stream-pairer"
    client_id: str = "stream-pairer"
    engine: EngineConfig = field(default_factory=EngineConfig)
    formats: FormatConfig = DEFAULT_CONFIG
    tagger: Tagger | None = None
    max_records: int = 1000
    poll_timeout_s: float = 0.2
    tick_interval_s: float = 1.0
    commit_interval_s: float | None = None  # None: 1 s at-least-once, 0.1 s exactly-once
    shutdown_timeout_s: float = 30.0
    flush_on_shutdown: bool = False
    auto_offset_reset: str = "earliest"
    isolation_level: str = "read_committed"
    session_timeout_ms: int = 10_000
    heartbeat_interval_ms: int = 1_000
    request_timeout_ms: int = 30_000
    max_output_bytes: int = 1_000_000
    http_host: str = "0.0.0.0"
    http_port: int | None = 9464  # None: no HTTP server; 0: an ephemeral port
    ready_timeout_s: float = 15.0
    backoff_initial_s: float = 0.5
    backoff_max_s: float = 30.0
    checkpoint_match_wait_s: float = 5.0
    repartition: bool = False
    repartition_topic: str = "{topic}.by-conversation"
    security: KafkaSecurity = PLAINTEXT  # TLS/SASL and client pass-through (security.py)

    def __post_init__(self) -> None:
        if not self.input_topics:
            raise ValueError("at least one input topic is needed")
        if not self.group_id:
            raise ValueError("a consumer group id is needed")
        for name in ("poll_timeout_s", "tick_interval_s", "shutdown_timeout_s", "ready_timeout_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0")
        if self.commit_interval_s is not None and self.commit_interval_s < 0:
            raise ValueError("commit_interval_s must be >= 0")
        if self.auto_offset_reset not in ("earliest", "latest"):
            raise ValueError("auto_offset_reset must be earliest or latest")
        if self.isolation_level not in ("read_committed", "read_uncommitted"):
            raise ValueError("isolation_level must be read_committed or read_uncommitted")

    @property
    def commit_every_s(self) -> float:
        if self.commit_interval_s is not None:
            return self.commit_interval_s
        return 0.1 if self.exactly_once else 1.0

    def consumed_topic(self, input_topic: str) -> str:
        """The topic the pairing loop reads for an input topic (its re-keyed copy under --repartition)."""
        return self.repartition_topic.format(topic=input_topic) if self.repartition else input_topic

    def outputs(self, topic: str) -> OutputTopics:
        return OutputTopics.for_input(topic, self.pairs_topic, self.orphans_topic, self.dead_letter_topic)


class Backoff:
    """Capped exponential backoff with a deterministic 0.75-1.0 spread per attempt number."""

    def __init__(self, initial_s: float, max_s: float) -> None:
        self.initial_s = initial_s
        self.max_s = max_s
        self.attempt = 0

    def next(self) -> float:
        self.attempt += 1
        base = min(self.initial_s * 2.0 ** (self.attempt - 1), self.max_s)
        return base * (0.75 + 0.25 * ((self.attempt * 0.618034) % 1.0))

    def reset(self) -> None:
        self.attempt = 0


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, sidecar: Sidecar) -> None:
        self.sidecar = sidecar

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        await self.sidecar._on_revoked(set(revoked))

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.sidecar._on_assigned(set(assigned))


class _SessionEnded(Exception):
    """Raised inside a session to drop every partition and rejoin (after a backoff)."""


class Sidecar:
    """The streaming service, usable in-process (`await start()` / `await stop()`, both idempotent)
    and from `stream-pairer run`."""

    def __init__(
        self, config: SidecarConfig, metrics: Metrics | None = None, *, wall: Callable[[], float] = time.time
    ) -> None:
        self.config = config
        self.metrics = metrics or Metrics()
        self._wall = wall
        self.settings = KafkaSettings(
            config.bootstrap_servers,
            client_id=config.client_id,
            request_timeout_ms=config.request_timeout_ms,
            max_output_bytes=config.max_output_bytes,
            # Security (issue 14): one ssl context and the SASL settings shared by every client.
            extra=config.security.client_kwargs(),
            consumer_extra=dict(config.security.consumer_config),
            producer_extra=dict(config.security.producer_config),
        )
        self.last_error = ""  # why the last session ended (for /readyz), never a secret
        self.states: dict[TopicPartition, PartitionState] = {}
        self._parked: dict[TopicPartition, tuple[PartitionState, Checkpoint | None]] = {}
        self._last_commit: dict[TopicPartition, Checkpoint] = {}
        self._unopened: set[TopicPartition] = set()
        self._open_backoff = Backoff(config.backoff_initial_s, config.backoff_max_s)
        self._open_retry_at = 0.0
        self._lock = asyncio.Lock()
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._http: HttpServer | None = None
        self._consumer: AIOKafkaConsumer | None = None
        self._admin: AIOKafkaAdminClient | None = None
        self._delivery: Delivery | None = None
        self._store: CheckpointStore | None = None
        self._rekeyer: asyncio.Task[None] | None = None
        self._origin: dict[str, str] = {t: t for t in config.input_topics}  # consumed topic -> input topic
        self._last_loop_s = time.monotonic()
        self._connected = False
        self.sessions = 0  # sessions started (1 + reconnects), for tests and logs
        self.clean_exit = False
        self._publish_assignment()

    # ================================================================== lifecycle

    @property
    def http_port(self) -> int | None:
        return self._http.bound_port if self._http is not None else None

    async def start(self) -> None:
        """Start the HTTP endpoint and the consume loop in the background; returns at once."""
        if self._task is not None:
            return
        if self.config.http_port is not None and self._http is None:
            self._http = HttpServer(
                {"/metrics": self._metrics_page, "/healthz": self._healthz, "/readyz": self._readyz},
                self.config.http_host,
                self.config.http_port,
            )
            port = await self._http.start()
            log.info("HTTP /metrics /healthz /readyz on %s:%d", self.config.http_host, port)
        self._task = asyncio.create_task(self._run(), name="stream-pairer-sidecar")

    async def stop(self, timeout_s: float | None = None) -> bool:
        """Stop fetching, finish the batch, make outputs durable, commit, leave the group. Returns
        False when that did not finish within the timeout (uncommitted work is then replayed)."""
        self._stopping.set()
        done = True
        task = self._task
        if task is not None and not task.done():
            try:
                await asyncio.wait_for(asyncio.shield(task), timeout_s or self.config.shutdown_timeout_s)
            except TimeoutError:
                log.error(
                    "shutdown did not finish within %.1fs; abandoning it",
                    timeout_s or self.config.shutdown_timeout_s,
                )
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
                done = False
        if self._http is not None:
            await self._http.stop()
            self._http = None
        return done and self.clean_exit

    async def wait(self) -> None:
        if self._task is not None:
            await asyncio.shield(self._task)

    # ================================================================== health

    @property
    def alive(self) -> bool:
        """The loop task runs and, while connected, goes round (a consume loop stuck in one call for
        longer than two request timeouts is not coming back; a restart is the remedy). Waiting for
        an unreachable broker is alive: restarting the process would not bring the broker back."""
        task = self._task
        if task is None or task.done():
            return False
        limit = max(30.0, 10 * self.config.poll_timeout_s, 2 * self.config.request_timeout_ms / 1000)
        return not self._connected or time.monotonic() - self._last_loop_s <= limit

    @property
    def ready(self) -> bool:
        """Assigned partitions, all opened, and a fetch response from the broker recently."""
        consumer = self._consumer
        if not self._connected or consumer is None or not self.states or self._unopened:
            return False
        newest = 0
        for tp in self.states:
            with contextlib.suppress(Exception):
                newest = max(newest, consumer.last_poll_timestamp(tp) or 0)
        return self._wall() * 1000 - newest <= self.config.ready_timeout_s * 1000

    def _metrics_page(self) -> Response:
        return 200, CONTENT_TYPE_LATEST, generate_latest(self.metrics.registry)

    def _healthz(self) -> Response:
        return (200, "text/plain", b"ok\n") if self.alive else (503, "text/plain", b"loop not running\n")

    def _readyz(self) -> Response:
        ready = self.ready
        self.metrics.set_up(ready)
        if ready:
            return 200, "text/plain", f"ready: {len(self.states)} partitions\n".encode()
        why = "not connected" if not self._connected else "no partitions assigned or not consuming"
        if not self._connected and self.last_error:
            why += f" ({self.last_error})"
        return 503, "text/plain", f"not ready: {why}\n".encode()

    # ================================================================== sessions

    async def _run(self) -> None:
        backoff = Backoff(self.config.backoff_initial_s, self.config.backoff_max_s)
        try:
            while not self._stopping.is_set():
                self._last_loop_s = time.monotonic()
                self.sessions += 1
                try:
                    await self._session(backoff)
                    self.clean_exit = True
                    return
                except (SidecarError, KafkaError, OSError, _SessionEnded) as err:
                    error = (
                        err
                        if isinstance(err, SidecarError | _SessionEnded)
                        else classify(err, during="session")
                    )
                    delay = backoff.next()
                    self.last_error = f"{type(error).__name__}: {error}"
                    log.log(
                        logging.ERROR if isinstance(error, ConfigError) else logging.WARNING,
                        "Kafka session %d ended (attempt %d): %s: %s; reconnecting in %.1fs",
                        self.sessions, backoff.attempt, type(error).__name__, error, delay,
                    )  # fmt: skip
                finally:
                    self._connected = False
                    self.metrics.set_up(False)
                    await self._close_session()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), delay)
            self.clean_exit = True
        except Exception:
            log.exception("sidecar loop crashed")
            raise

    async def _session(self, backoff: Backoff) -> None:
        cfg = self.config
        security = cfg.security.reloaded()  # a rotated password file is read again (security.py)
        self.settings = replace(self.settings, extra=security.client_kwargs())
        await probe(cfg.bootstrap_servers, security)  # names a TLS/SASL cause (security.py)
        admin = self._admin = make_admin(self.settings)
        await admin.start()
        counts = await topic_partitions(admin, cfg.input_topics)
        missing = [t for t in cfg.input_topics if t not in counts]
        if missing:
            raise BrokerUnavailable(f"input topic(s) {', '.join(missing)} do not exist (yet)")
        store = self._store = CheckpointStore(self.settings, cfg.group_id, cfg.checkpoint_topic)
        # What the pairing loop consumes: the input topics, or (--repartition) their re-keyed copies.
        self._origin = {cfg.consumed_topic(t): t for t in cfg.input_topics}
        specs = []
        for topic, n in counts.items():
            consumed = cfg.consumed_topic(topic)
            if consumed != topic:
                specs.append(TopicSpec(consumed, n))
            specs += [TopicSpec(name, n) for name in cfg.outputs(topic).all()]
            specs.append(TopicSpec(store.topic_for(consumed), n, compacted=True))
        if cfg.create_topics:
            have = await ensure_topics(admin, specs, replication_factor=cfg.replication_factor)
        else:
            have = await topic_partitions(admin, [s.name for s in specs])
            absent = [s.name for s in specs if s.name not in have]
            if absent:
                raise ConfigError(f"topics missing and --no-create-topics given: {', '.join(absent)}")
        store.partitions = {s.name: have[s.name] for s in specs if s.compacted}
        await store.start()
        delivery: Delivery
        if cfg.exactly_once:
            delivery = ExactlyOnce(
                self.settings, cfg.group_id, store, self.metrics, cfg.transactional_id_prefix
            )
        else:
            delivery = AtLeastOnce(self.settings, cfg.group_id, store, self.metrics)
        self._delivery = delivery
        await delivery.start()
        consumer = self._consumer = AIOKafkaConsumer(
            client_id=f"{cfg.client_id}-consumer",
            group_id=cfg.group_id,
            enable_auto_commit=False,
            auto_offset_reset=cfg.auto_offset_reset,
            isolation_level=cfg.isolation_level,
            max_poll_records=cfg.max_records,
            session_timeout_ms=cfg.session_timeout_ms,
            heartbeat_interval_ms=cfg.heartbeat_interval_ms,
            partition_assignment_strategy=(StickyPartitionAssignor, RoundRobinPartitionAssignor),
            **self.settings.common(),
            **self.settings.consumer_extra,
        )
        consumer.subscribe(list(self._origin), listener=_Listener(self))
        await consumer.start()
        if cfg.repartition:
            rekeyer = Rekeyer(
                self.settings,
                f"{cfg.group_id}.repartition",
                {t: cfg.consumed_topic(t) for t in cfg.input_topics},
                cfg.formats,
                exactly_once=cfg.exactly_once,
                transactional_id_prefix=cfg.transactional_id_prefix,
                max_records=cfg.max_records,
                poll_timeout_s=cfg.poll_timeout_s,
                auto_offset_reset=cfg.auto_offset_reset,
                isolation_level=cfg.isolation_level,
            )
            self._rekeyer = asyncio.create_task(rekeyer.run(self._stopping), name="stream-pairer-repartition")
        self._connected = True
        mode = "exactly-once" if cfg.exactly_once else "at-least-once"
        if cfg.repartition:
            mode += ", input re-keyed by conversation"
        log.info("consuming %s as group %s (%s)", ", ".join(self._origin), cfg.group_id, mode)
        await self._loop(consumer, backoff)

    async def _close_session(self) -> None:
        """Release every client; unflushed state is dropped (it is rebuilt by replay)."""
        for tp, st in list(self.states.items()):
            st.discard()
            self.metrics.forget_partition(tp.topic, tp.partition)
        for st, _ in self._parked.values():
            st.discard()
        self.states.clear()
        self._parked.clear()
        self._unopened.clear()
        self._last_commit.clear()
        self._publish_assignment()
        consumer, self._consumer = self._consumer, None
        delivery, self._delivery = self._delivery, None
        store, self._store = self._store, None
        admin, self._admin = self._admin, None
        rekeyer, self._rekeyer = self._rekeyer, None
        if rekeyer is not None:
            if not rekeyer.done() and not self._stopping.is_set():
                rekeyer.cancel()  # a failed session; on a graceful stop it finishes its batch and commits
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(rekeyer, 15.0)
        for closer in (
            consumer.stop if consumer else None,
            delivery.stop if delivery else None,
            store.stop if store else None,
            admin.close if admin else None,
        ):
            if closer is not None:
                try:
                    await asyncio.wait_for(closer(), 10.0)
                except Exception as err:
                    log.debug("closing a Kafka client failed: %s", err)

    # ================================================================== the loop

    async def _loop(self, consumer: AIOKafkaConsumer, backoff: Backoff) -> None:
        cfg = self.config
        now_s = time.monotonic()
        ticks = TickSchedule(cfg.tick_interval_s, now_s)
        commits = TickSchedule(cfg.commit_every_s, now_s) if cfg.commit_every_s > 0 else None
        poll_ms = int(cfg.poll_timeout_s * 1000)
        while not self._stopping.is_set():
            self._last_loop_s = time.monotonic()
            if self._rekeyer is not None and self._rekeyer.done():
                err = self._rekeyer.exception() if not self._rekeyer.cancelled() else None
                raise _SessionEnded(f"the repartition stage stopped: {err}")
            if self._unopened or self._parked:
                await self._open_assigned(consumer)
            # The state objects the fetch is for: a partition reset, reopened or moved meanwhile gets
            # a new object (and a seek), so records fetched for the old one are not fed to it.
            fetching_for = dict(self.states)
            try:
                batch = await consumer.getmany(timeout_ms=poll_ms, max_records=cfg.max_records)
            except KafkaError as err:
                if not getattr(err, "retriable", False):
                    raise _SessionEnded(f"consumer error: {type(err).__name__}: {err}") from err
                log.warning("fetch failed (retrying): %s", err)
                await asyncio.sleep(backoff.next())
                continue
            fetched_at = time.monotonic()
            async with self._lock:
                wall_ms = self._wall() * 1000
                if batch:
                    self.metrics.mark_consumed()
                for tp, msgs in batch.items():
                    st = self.states.get(tp)
                    if st is None or not msgs or fetching_for.get(tp) is not st:
                        continue
                    assert isinstance(st, PartitionState)
                    await self._send(tp, st.feed(msgs, wall_ms), fetched_at)
                    if st.missed:
                        self._report_missed(tp, st)
                if ticks.due(time.monotonic()):
                    await self._tick(consumer, wall_ms)
                if commits is None or commits.due(time.monotonic()):
                    await self._commit(consumer, self.states)
                self._update_gauges(consumer)
            backoff.reset()
        await self._shutdown(consumer)

    async def _send(self, tp: TopicPartition, items: list[Emitted], arrival: float | None) -> None:
        if not items:
            return
        assert self._delivery is not None
        try:
            await self._delivery.send(tp, items, arrival)
        except Fenced as err:
            raise _SessionEnded(str(err)) from err
        except SidecarError as err:
            await self._reset(tp, err)

    async def _tick(self, consumer: AIOKafkaConsumer, wall_ms: float) -> None:
        """Wall-clock tick: a partition whose position reached the end of its log, as of the last
        fetch response, has its processing time advanced by the wall time elapsed up to that
        response (see stream/clock.py), which emits what quiet conversations held past a timeout."""
        max_blind_ms = 2000 * self.config.tick_interval_s + 2000
        for tp, st in list(self.states.items()):
            if st.restoring:
                continue
            try:
                position = await consumer.position(tp)
                end = consumer.highwater(tp)
                if self.config.isolation_level == "read_committed":
                    lso = consumer.last_stable_offset(tp)
                    if lso is not None and lso >= 0:
                        end = lso
                seen = consumer.last_poll_timestamp(tp)
            except Exception:  # not fetchable right now (being reassigned): no tick for it
                continue
            caught_up = end is not None and seen is not None and position >= end
            items = st.tick(wall_ms, caught_up=caught_up, seen_end_ms=seen, max_blind_ms=max_blind_ms)
            await self._send(tp, items, None)

    async def _commit(
        self, consumer: AIOKafkaConsumer, states: dict[TopicPartition, PartitionState], *, force: bool = False
    ) -> None:
        """Commit every partition with something new (or all of `states` when forced)."""
        assert self._delivery is not None
        todo: dict[TopicPartition, Checkpoint] = {}
        for tp, st in states.items():
            if not (st.dirty or force):
                continue
            cp = st.checkpoint(self.config.group_id, new_token())
            if cp is not None:
                todo[tp] = cp
        if not todo:
            return
        failed = await self._delivery.commit(consumer, todo)
        for tp, cp in todo.items():
            err = failed.get(tp)
            if err is None:
                self._last_commit[tp] = cp
                done = states.get(tp)
                if done is not None:
                    done.dirty = False
                continue
            if isinstance(err, Fenced):
                raise _SessionEnded(str(err))
            if not self.config.exactly_once and isinstance(err, CommitFailed):
                # At-least-once: outputs are acknowledged, only the offset commit failed; no replay needed.
                log.warning(
                    "offset commit of %s failed (outputs delivered; next commit retries): %s", tp_key(tp), err
                )
            else:
                await self._reset(tp, err)

    async def _reset(self, tp: TopicPartition, err: SidecarError) -> None:
        """Rebuild a partition from its last commit: what was not made durable is produced again."""
        log.error("partition %s: %s; rebuilding it from its last commit by replay", tp_key(tp), err)
        st = self.states.pop(tp, None)
        if st is not None:
            st.discard()
        self._last_commit.pop(tp, None)
        if self._delivery is not None:
            await self._delivery.close_partition(tp)
        if self._consumer is not None:
            with contextlib.suppress(Exception):
                self._consumer.pause(tp)
        self._unopened.add(tp)

    def _report_missed(self, tp: TopicPartition, st: PartitionState) -> None:
        missed, st.missed = st.missed, []
        log.error(
            "partition %s: %d held event(s) were deleted from the log before they could be replayed "
            "(retention shorter than call timeout + downtime?): %s",
            tp_key(tp), len(missed), missed[:20],
        )  # fmt: skip

    def _update_gauges(self, consumer: AIOKafkaConsumer) -> None:
        m = self.metrics
        calls = convs = held = pending = 0
        for tp, st in self.states.items():
            e = st.engine
            calls += e.open_calls
            convs += e.open_conversations
            held += e.held_bytes
            pending += e.pending_results
            with contextlib.suppress(Exception):
                hw = consumer.highwater(tp)
                if hw is not None and st.next_offset is not None:
                    m.set_lag(tp.topic, tp.partition, hw - st.next_offset)
        m.set_state(open_calls=calls, open_conversations=convs, held_bytes=held, pending_results=pending)
        self._publish_assignment()
        m.set_up(self.ready)

    def _publish_assignment(self) -> None:
        """Partition count and the limits scaled to it: the limits apply per partition (each
        partition's engine has the whole EngineConfig, so replay rebuilds its state from its own
        input alone), but the state gauges are sums over `self.states`, so the limit gauges must be
        the same sums for a gauge / limit ratio (StreamPairerStateNearLimit) to mean anything."""
        n = len(self.states)
        engine = self.config.engine
        self.metrics.set_assigned_partitions(n)
        self.metrics.set_limits(
            max_conversations=engine.max_conversations,
            max_calls_per_conversation=engine.max_calls_per_conversation,
            max_held_bytes=engine.max_held_bytes,
            partitions=n,
        )

    async def _shutdown(self, consumer: AIOKafkaConsumer) -> None:
        """SIGTERM path: finish, (optionally flush), make durable, commit; then leave the group."""
        async with self._lock:
            if self.config.flush_on_shutdown:
                for tp, st in list(self.states.items()):
                    await self._send(tp, st.flush(OrphanReason.SHUTDOWN.value), None)
            dirty = sum(1 for st in self.states.values() if st.dirty)
            await self._commit(consumer, self.states)
            flushed = " (held events flushed as orphans)" if self.config.flush_on_shutdown else ""
            log.info("stopping: %d of %d partition(s) had work to commit%s", dirty, len(self.states), flushed)

    # ================================================================== rebalance

    async def _on_revoked(self, revoked: set[TopicPartition]) -> None:
        """Before the group rebalances: commit what was processed, park the state (not flushed)."""
        async with self._lock:
            mine = {tp: st for tp, st in self.states.items() if tp in revoked}
            if mine and self._consumer is not None and self._delivery is not None:
                try:
                    await self._commit(self._consumer, mine)
                except Exception as err:  # the new owner replays from the last successful commit
                    log.warning("commit on revocation failed: %s", err)
            for tp, st in mine.items():
                del self.states[tp]
                self._parked[tp] = (st, None if st.dirty else self._last_commit.get(tp))
                self.metrics.forget_partition(tp.topic, tp.partition)
            self._unopened -= revoked
            self._publish_assignment()
            if mine:
                log.info("revoked %s", ", ".join(sorted(tp_key(tp) for tp in mine)))

    def _on_assigned(self, assigned: set[TopicPartition]) -> None:
        """After the rebalance: pause the new partitions until the loop has opened them."""
        self.metrics.observe_rebalance()
        consumer = self._consumer
        for tp in assigned:
            if tp in self.states:
                continue
            self._unopened.add(tp)
            if consumer is not None:
                consumer.pause(tp)
        self._open_retry_at = 0.0
        self._open_backoff.reset()
        log.info("assigned %s", ", ".join(sorted(tp_key(tp) for tp in assigned)) or "nothing")

    async def _open_assigned(self, consumer: AIOKafkaConsumer) -> None:
        """Open the partitions assigned but not yet opened; drop parked states no longer ours."""
        if time.monotonic() < self._open_retry_at:
            return
        async with self._lock:
            assigned = consumer.assignment()
            for tp in [tp for tp in self._parked if tp not in assigned or tp not in self._unopened]:
                if tp in self.states:
                    continue
                st, _ = self._parked.pop(tp)
                st.discard()
                if tp not in assigned and self._delivery is not None:
                    await self._delivery.close_partition(tp)
            todo = sorted((tp for tp in self._unopened if tp in assigned), key=tp_key)
            self._unopened &= set(assigned)
            if not todo:
                return
            try:
                await self._open(consumer, todo)
                self._open_backoff.reset()
            except Exception as err:
                if isinstance(err, Fenced):
                    raise _SessionEnded(str(err)) from err
                delay = self._open_backoff.next()
                self._open_retry_at = time.monotonic() + delay
                log.warning(
                    "opening %s failed (attempt %d): %s; retrying in %.1fs",
                    ", ".join(tp_key(tp) for tp in todo), self._open_backoff.attempt,
                    classify(err, during="open partitions"), delay,
                )  # fmt: skip

    async def _open(self, consumer: AIOKafkaConsumer, todo: list[TopicPartition]) -> None:
        assert self._delivery is not None and self._admin is not None and self._store is not None
        cfg = self.config
        committed = await committed_offsets(self._admin, cfg.group_id, todo)
        fresh: list[TopicPartition] = []
        for tp in todo:
            parked = self._parked.pop(tp, None)
            if parked is not None:
                st, last = parked
                if last is not None and last.matches(*committed[tp]):
                    # Nobody committed this partition since we did: our state is still its state.
                    self._activate(consumer, tp, st, None)
                    log.info("partition %s kept its state (reassigned to this instance)", tp_key(tp))
                    continue
                st.discard()
                await self._delivery.close_partition(tp)
            fresh.append(tp)
        if not fresh:
            return
        for tp in fresh:
            await self._delivery.open_partition(tp)  # exactly-once: fence the previous owner first
        committed = await committed_offsets(self._admin, cfg.group_id, fresh)
        checkpoints = await self._store.latest(fresh)
        for tp in fresh:
            offset, metadata = committed[tp]
            cp = checkpoints[tp]
            if cp is not None and not cp.matches(offset, metadata) and cfg.exactly_once:
                offset, metadata, cp = await self._await_stable(tp, cp, offset, metadata)
            if cp is not None and not cp.matches(offset, metadata):
                log.info(
                    "partition %s: checkpoint (offset %d) does not match the committed offset %s: "
                    "plain replay",
                    tp_key(tp), cp.committed, offset,
                )  # fmt: skip
                cp = None
            pipeline = Pipeline(
                Engine(cfg.engine, tagger=partition_tagger(cfg.tagger)), cfg.formats, observer=self.metrics
            )
            st = PartitionState(
                tp.topic, tp.partition, pipeline, cfg.outputs(self._origin.get(tp.topic, tp.topic)),
                start_offset=offset, restore=cp, wall_ms=self._wall() * 1000,
                lineage_headers=cfg.repartition,
            )  # fmt: skip
            if cp is not None:
                self._last_commit[tp] = cp
            self._activate(consumer, tp, st, offset)
            if cp is None:
                how = "plain replay" if offset is not None else "no commit yet"
            elif st.restoring:
                how = f"replaying {len(cp.held)} held event(s) up to offset {cp.processed}"
            else:
                how = "nothing to replay"
            log.info("partition %s opened at offset %s (%s)", tp_key(tp), offset, how)

    async def _await_stable(
        self, tp: TopicPartition, cp: Checkpoint, offset: int | None, metadata: str
    ) -> tuple[int | None, str, Checkpoint | None]:
        """Exactly-once: the checkpoint and the offset were committed in one transaction, but the
        group coordinator may serve the previous offset for a moment after the commit marker (our
        client predates KIP-447's stable offset fetch). Wait briefly for them to agree."""
        assert self._admin is not None
        deadline = time.monotonic() + self.config.checkpoint_match_wait_s
        while time.monotonic() < deadline:
            await asyncio.sleep(0.2)
            offset, metadata = (await committed_offsets(self._admin, self.config.group_id, [tp]))[tp]
            if cp.matches(offset, metadata):
                return offset, metadata, cp
        return offset, metadata, None

    def _activate(
        self, consumer: AIOKafkaConsumer, tp: TopicPartition, st: PartitionState, offset: int | None
    ) -> None:
        self.states[tp] = st
        self._unopened.discard(tp)
        if offset is not None:
            consumer.seek(tp, offset)
        elif st.next_offset is not None:
            consumer.seek(tp, st.next_offset)
        consumer.resume(tp)
        self._publish_assignment()
