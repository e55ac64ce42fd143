"""The Kafka sidecar: consume, pair per partition, produce outputs, commit, tick, and survive.

One `AIOKafkaConsumer` in a consumer group; one `PartitionState` (a Pipeline over an Engine) per
assigned partition. The loop is: fetch a batch (`getmany`) -> feed each partition's records ->
send their outputs -> every `tick_interval` advance quiet partitions by the wall clock -> every
`commit_interval` make the outputs durable and commit each partition's offset (never past its
oldest held event) with a replay checkpoint. This module is the orchestration: sessions, the loop,
commits and shutdown. The rest of adapters/kafka: clients.py (client construction), topics.py
(explicit creation, config checks, size limits, templates), delivery.py (the two delivery modes,
output fitting, backoff), checkpoints.py, partitions.py (assignment, opening, rebuilding),
health.py (readiness, gauges), logs.py (state lines, rate limits, JSON), rekeyer.py.

Failures: a partition whose outputs could not be delivered (a send refused, a transaction that
failed) is rebuilt from its last commit after a backoff that only a successful commit resets, so a
record the broker refuses cannot make it replay in a tight loop; outputs are fitted under their
topic's `max.message.bytes` so that refusal does not happen in the first place. A fenced
transactional producer, or a consumer error that is not retriable, ends the session: all
partitions are dropped and the group is rejoined after a backoff (kept across sessions too). The
loop never exits on its own except on stop; one log line per state change says what happened.
Shutdown is bounded by --shutdown-timeout: what cannot be committed in time is named and left to
replay.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
from aiokafka.errors import KafkaError
from prometheus_client import ProcessCollector

from stream_pairer.adapters.kafka.acks import OutputWatch
from stream_pairer.adapters.kafka.checkpoints import CheckpointStore
from stream_pairer.adapters.kafka.clients import (
    KafkaSettings,
    make_admin,
    make_consumer,
)
from stream_pairer.adapters.kafka.committer import BackgroundCommit, CommitterMixin
from stream_pairer.adapters.kafka.config import SidecarConfig
from stream_pairer.adapters.kafka.delivery import Backoff, Delivery
from stream_pairer.adapters.kafka.errors import classify
from stream_pairer.adapters.kafka.fetching import caught_up, hand_off, set_prefetch_backoff
from stream_pairer.adapters.kafka.health import HealthMixin
from stream_pairer.adapters.kafka.logs import StateLog
from stream_pairer.adapters.kafka.partitions import Listener, PartitionsMixin
from stream_pairer.adapters.kafka.security import probe
from stream_pairer.adapters.kafka.setup import SetupMixin
from stream_pairer.adapters.kafka.shared import SessionEnded, cancelling
from stream_pairer.adapters.kafka.shutdown import ShutdownMixin
from stream_pairer.adapters.kafka.topics import (
    ensure_topics,
    topic_partitions,
)
from stream_pairer.errors import (
    BrokerUnavailable,
    ConfigError,
    Fenced,
    OutputTooLarge,
    SidecarError,
)
from stream_pairer.ops.heap import HeapTrimmer
from stream_pairer.ops.http import HttpServer
from stream_pairer.ops.metrics import Metrics
from stream_pairer.stream.checkpoint import Checkpoint
from stream_pairer.stream.clock import TickSchedule
from stream_pairer.stream.partition import Emitted, PartitionState

__all__ = ["Sidecar", "SidecarConfig"]

log = logging.getLogger("stream_pairer.adapters.kafka.sidecar")


class Sidecar(SetupMixin, ShutdownMixin, HealthMixin, PartitionsMixin, CommitterMixin):
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
        self._committed: dict[
            TopicPartition, int
        ] = {}  # the group's committed offset (lag is measured from it)
        self._unopened: set[TopicPartition] = set()
        # Where a partition without a committed offset started (the --auto-offset-reset position, as
        # the consumer found it): a rebuild before its first commit must seek back there.
        self._start_position: dict[TopicPartition, int] = {}
        self._open_backoff = Backoff(config.backoff_initial_s, config.backoff_max_s)
        self._open_retry_at = 0.0
        # Kept across session restarts, reset only by a commit that succeeded: a session or a
        # partition that fails again right after each restart waits longer each time.
        self._session_backoff = Backoff(config.backoff_initial_s, config.backoff_max_s)
        self._partition_backoff: dict[TopicPartition, Backoff] = {}
        self._hold_until: dict[TopicPartition, float] = {}  # partitions waiting out their backoff
        self._rekey_backoff = Backoff(config.backoff_initial_s, config.backoff_max_s)
        self.states_log = StateLog(log)
        self._lock = asyncio.Lock()
        self._stopping = asyncio.Event()
        self._stop_deadline: float | None = None
        self._task: asyncio.Task[None] | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._http: HttpServer | None = None
        self._consumer: AIOKafkaConsumer | None = None
        self._admin: AIOKafkaAdminClient | None = None
        self._delivery: Delivery | None = None
        self._outputs_watch = OutputWatch()  # kept across rebuilds and sessions: /readyz (acks.py)
        self._store: CheckpointStore | None = None
        self._rekeyer: asyncio.Task[None] | None = None
        self._origin: dict[str, str] = {t: t for t in config.input_topics}  # consumed topic -> input topic
        self._output_topics: list[str] = []
        self._last_loop_s = time.monotonic()
        self._connected = False
        self.sessions = 0  # sessions started (1 + reconnects), for tests and logs
        self.clean_exit = False
        self.refused: str | None = None  # why the last session refused to start (bad topic settings)
        self.uncommitted: list[str] = []
        self._committer = BackgroundCommit(config.commit_every_s, time.monotonic())  # committer.py
        self._said_abandoned = False  # partitions a stop could not commit (said in the log too)
        with contextlib.suppress(ValueError):  # standard process_* metrics, once per registry
            ProcessCollector(registry=self.metrics.registry)
        self.stages = self.metrics.stages  # where latency goes (ops/stages.py)
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
        self._watcher = asyncio.create_task(self._watch(), name="stream-pairer-health")

    async def _watch(self) -> None:
        """Readiness state lines from a task of their own: the loop itself can be stuck in a
        broker call for a request timeout exactly when the state changes."""
        while not self._stopping.is_set():
            if self._connected:
                self._watch_health()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), 1.0)

    async def _stop_watcher(self) -> None:
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.cancel()
            with contextlib.suppress(BaseException):
                await watcher

    async def stop(self, timeout_s: float | None = None) -> bool:
        """Stop fetching, finish the batch, make outputs durable, commit, leave the group, all within
        the timeout: what cannot be committed in time (the broker is down) is abandoned, said in the
        log (`self.uncommitted`) and replayed by the next owner. Returns False only when the loop
        had failed or could not be stopped."""
        timeout = timeout_s or self.config.shutdown_timeout_s
        self._stop_deadline = time.monotonic() + timeout
        self._stopping.set()
        done = True
        task = self._task
        if task is not None and not task.done():
            # The loop bounds its own commit and client closes by the deadline; this is the backstop
            # for a step that ignores it (a metadata request to a dead broker).
            try:
                await asyncio.wait_for(asyncio.shield(task), max(0.1, timeout - 0.5))
            except TimeoutError:
                self._abandon("the shutdown steps did not finish in time")
                task.cancel()
                with contextlib.suppress(BaseException):
                    await asyncio.wait_for(task, 0.4)
                self.clean_exit = True
            except asyncio.CancelledError:
                if cancelling():
                    raise
                self.clean_exit = True  # the loop ended by a client's stray cancellation, after its work
            except Exception:
                done = False
        await self._stop_watcher()
        if self._http is not None:
            await self._http.stop()
            self._http = None
        return done and self.clean_exit

    async def wait(self) -> None:
        if self._task is not None:
            await asyncio.shield(self._task)

    # ================================================================== sessions

    async def _run(self) -> None:
        backoff = self._session_backoff
        try:
            while not self._stopping.is_set():
                self._last_loop_s = time.monotonic()
                self.sessions += 1
                try:
                    await self._session()
                    self.clean_exit = True
                    return
                except (SidecarError, KafkaError, OSError, SessionEnded) as err:
                    error = (
                        err
                        if isinstance(err, SidecarError | SessionEnded)
                        else classify(err, during="session")
                    )
                    delay = backoff.next()
                    self._session_failed(error, backoff.attempt, delay)
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

    def _session_failed(self, error: BaseException, attempt: int, delay: float) -> None:
        """One state line when the broker becomes unreachable (or the config is refused); the
        retries after it are DEBUG, with the attempt count in the next state line."""
        fields = {"session": self.sessions, "attempt": attempt, "retry_in_s": round(delay, 1)}
        self.last_error = f"{type(error).__name__}: {error}"
        if isinstance(error, ConfigError):
            state, level = "refused", logging.ERROR
        elif isinstance(error, BrokerUnavailable):
            state, level = "unreachable", logging.WARNING
        else:
            state, level = f"failing: {type(error).__name__}", logging.WARNING
        self.refused = str(error) if isinstance(error, ConfigError) else None
        cap = self.config.backoff_max_s
        message = f"{state}: {type(error).__name__}: {error}; retrying every <= {cap:.0f}s"
        if not self.states_log.change("kafka", state, message, level=level, **fields):
            log.debug(
                "Kafka session %d ended (attempt %d): %s; reconnecting in %.1fs",
                self.sessions,
                attempt,
                error,
                delay,
            )

    async def _session(self) -> None:
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
        specs = self._topic_specs(counts, store)
        have = await ensure_topics(
            admin, specs, replication_factor=cfg.replication_factor, create=cfg.create_topics
        )
        store.partitions = {s.name: have[s.name] for s in specs if s.compacted}
        sizes = await self._check_topics(admin, specs)
        await store.start()
        delivery = self._make_delivery(store, sizes)
        await delivery.start()
        consumer = self._consumer = make_consumer(
            self.settings,
            "consumer",
            group_id=cfg.group_id,
            auto_offset_reset=cfg.auto_offset_reset,
            isolation_level=cfg.isolation_level,
            max_poll_records=cfg.max_records,
            session_timeout_ms=cfg.session_timeout_ms,
            heartbeat_interval_ms=cfg.heartbeat_interval_ms,
            partition_assignment_strategy=(StickyPartitionAssignor, RoundRobinPartitionAssignor),
            # A deleted or re-created input topic is noticed within 30 s, not aiokafka's 300 s.
            metadata_max_age_ms=30_000,
        )
        consumer.subscribe(list(self._origin), listener=Listener(self))
        await consumer.start()
        set_prefetch_backoff(consumer, cfg.prefetch_backoff_s)  # the fetcher exists from start() on
        if cfg.repartition:
            self._start_rekeyer(sizes)
        self._connected = True
        mode = "exactly-once" if cfg.exactly_once else "at-least-once"
        if cfg.repartition:
            mode += ", input re-keyed by conversation"
        self.refused = None
        topics = ", ".join(self._origin)
        self.states_log.change(
            "kafka", "connected", f"connected; consuming {topics} as group {cfg.group_id} ({mode})",
            session=self.sessions, attempts=self._session_backoff.attempt,
        )  # fmt: skip
        await self._loop(consumer)

    # ================================================================== the loop

    async def _loop(self, consumer: AIOKafkaConsumer) -> None:
        cfg = self.config
        fetch_backoff = Backoff(cfg.backoff_initial_s, cfg.backoff_max_s)
        now_s = time.monotonic()
        ticks = TickSchedule(cfg.tick_interval_s, now_s)
        heap = HeapTrimmer(cfg.heap_trim_interval_s, now_s)  # RSS not crept up by fragmentation
        # Every --commit-interval, beside the loop, one at a time (committer.py).
        self._committer = BackgroundCommit(cfg.commit_every_s, now_s)
        poll_ms = int(cfg.poll_timeout_s * 1000)
        while not self._stopping.is_set():
            self._last_loop_s = time.monotonic()
            if self._rekeyer is not None and self._rekeyer.done():
                err = self._rekeyer.exception() if not self._rekeyer.cancelled() else None
                raise SessionEnded(f"the repartition stage stopped: {err}")
            if self._unopened or self._parked:
                await self._open_assigned(consumer)
            # The state objects the fetch is for: a partition reset, reopened or moved meanwhile gets
            # a new object (and a seek), so records fetched for the old one are not fed to it.
            fetching_for = dict(self.states)
            try:
                batch = await consumer.getmany(timeout_ms=poll_ms, max_records=cfg.max_records)
            except KafkaError as err:
                if not getattr(err, "retriable", False):
                    raise SessionEnded(f"consumer error: {type(err).__name__}: {err}") from err
                log.warning("fetch failed (retrying): %s", err)
                await asyncio.sleep(fetch_backoff.next())
                continue
            if batch and cfg.fetch_ahead and caught_up(consumer, batch):
                # The next fetch goes out now, not after this turn; only when caught up: behind, the
                # next records already wait at the broker and an early fetch is a smaller one.
                await hand_off(consumer)
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
                    await self._process(tp, st, msgs, wall_ms, fetched_at)
                await self._reset_refused()
                if ticks.due(time.monotonic()):
                    await self._tick(consumer, wall_ms)
                    heap.maybe_trim(time.monotonic())
                if self._delivery is not None:
                    flushing = time.monotonic()
                    await self._delivery.flush()  # this turn's output batches (delivery.py)
                    if batch:
                        self.stages.observe("produce", time.monotonic() - flushing)
                await self._settle_commit()  # the outcome of one that has finished (committer.py)
                await self._commit_in_background(consumer)  # those due
                self._update_gauges(consumer)
            fetch_backoff.reset()
        await self._shutdown(consumer)

    async def _process(
        self, tp: TopicPartition, st: PartitionState, msgs: list[Any], wall_ms: float, fetched_at: float
    ) -> None:
        """One partition's records of a fetch: pair them and send the outputs, timing each stage."""
        stages = self.stages
        self.metrics.observe_input_bytes(sum(len(m.value) for m in msgs if m.value is not None))
        self._start_position.setdefault(tp, msgs[0].offset)
        stages.observe("fetch_wait", (wall_ms - msgs[0].timestamp) / 1000)
        started = time.monotonic()
        items = st.feed(msgs, wall_ms)
        fed = time.monotonic()
        stages.observe("engine", fed - started)
        stages.observe("linger", fed - fetched_at)
        await self._send(tp, items, fetched_at)
        stages.observe("produce", time.monotonic() - fed)
        if st.missed:
            self._report_missed(tp, st)

    async def _send(self, tp: TopicPartition, items: list[Emitted], arrival: float | None) -> None:
        if not items:
            return
        assert self._delivery is not None
        try:
            await self._delivery.send(tp, items, arrival)
        except Fenced as err:
            raise SessionEnded(str(err)) from err
        except SidecarError as err:
            if isinstance(err, OutputTooLarge):
                await self._refresh_limits()
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
