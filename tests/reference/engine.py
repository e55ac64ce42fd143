"""The reference model of the pairing rules (not a production path: the compiled core in native/src
is the one implementation; tests compare it against this model, the shortest clear statement of
the rules).

The pairing core: ID first, FIFO only as a fallback, and never drop an orphan.

Pure and synchronous on purpose: no I/O, no asyncio, no clock reads. Every entry point takes the
time from its caller, so the same input gives the same output (the Kafka adapter relies on that to
rebuild state by replay, and the tests to be exact). Output records are plain dicts (see model.py).

Rules, per conversation (ids are scoped to a conversation):
* A call is held by id (if it has one) and in the conversation's FIFO queue of open calls.
* A result with an id pairs with the open call of that id (`match: "id"`), however far apart.
* A result with an id that is *unknown* is never FIFO-paired (it would steal another call's partner):
  it waits `result_grace_ms` for its call to arrive late, then becomes an orphan (`no_call`).
  An id already closed here gives `duplicate_result` (it was paired by id), `fifo_conflict` (its
  call was paired by position with an id-less result earlier: that FIFO pair is probably wrong, and
  this result, the first to carry the id, probably the call's real one) or `late_result` (its call
  had already been emitted as an orphan).
* A result with no id at all pairs FIFO (`match: "fifo"`) with the oldest open call of the same tool
  name (`fifo_by: "name"`), else the oldest open call whose name is unknown, else with the oldest
  open call when the result has no name (`fifo_by: "order"`). Names that differ are evidence against
  a pairing, so a named result never pairs with a differently named call. With no such call open, it
  waits `result_grace_ms` for one (its call may be written late), then becomes `no_call`; a call
  that arrives meanwhile takes the oldest waiting id-less result of its name (`fifo_by: "name"`),
  else the oldest one without a name, or any when the call has no name (`fifo_by: "order"`), unless a
  result held for its own id is waiting (an id match always wins). An id-bearing held result is
  never paired with a call of another id.
* A second call with a still-open id supersedes the first, which is emitted (`superseded`).
* Time (see *Time* in the README): two clocks, neither of them global over event time.
  - Event time is per conversation: `Conversation.clock_ms` is the newest event time seen in that
    conversation, and only it fires that conversation's event-time timers (a call unanswered for
    `call_timeout_ms`: `timeout`; a held result after `result_grace_ms`: `no_call`). Conversations
    whose clocks lag each other by hours pair exactly as if each ran alone, and a record dated years
    ahead moves only its own conversation's clock. Timers are checked when the conversation's clock
    moves forward, so an event already past its deadline when it arrives (out of order by more than
    the timeout) still pairs with a partner that follows it.
  - Processing time P is the caller's (`advance`: the sidecar's wall-clock tick; never a record's
    contents). Every held event also has a processing deadline, P when held + the same timeout, so a
    conversation that goes quiet is still closed out; the conversation TTL counts on P too. Without
    `advance` (file mode) there is no processing time: the end of input closes everything (`flush`).
* Limits: conversations (LRU), open calls per conversation, held bytes (an estimate of the memory
  the held events cost, see `held_cost`). Hitting one emits the oldest held events as orphans with
  `evicted`; nothing is dropped or grown silently.
* Closed ids are remembered (to tell a duplicate or late result from an unknown id) up to a limit
  per conversation and one for the whole engine, oldest forgotten first. Forgetting one drops no
  event: a later result for it is an unknown id, so it waits its grace (counted in held bytes) and
  becomes `no_call`, or `evicted` if a limit pushes it out first.
"""

from __future__ import annotations

import heapq
from collections import Counter, OrderedDict
from collections.abc import Callable
from typing import Any, Protocol

from stream_pairer.core import vocab
from stream_pairer.core.config import HELD_BYTES_PER_EVENT, HELD_BYTES_PER_INPUT_BYTE, EngineConfig, held_cost
from stream_pairer.core.model import ToolEvent
from stream_pairer.core.vocab import (
    EvictionLimit,
)
from tests.reference.engine_out import Emitter, pair_id
from tests.reference.engine_views import HeldViews
from tests.reference.names import (
    _TIMERS_REBUILD_OVER,
    BY_ID,
    BY_NAME,
    BY_ORDER,
    DUPLICATE_RESULT,
    EVICTED,
    FIFO,
    FIFO_CONFLICT,
    IDLE_SWEEP_EVERY_MS,
    INF,
    LATE_RESULT,
    NEG_INF,
    NO_CALL,
    PAIRED,
    PAIRED_FIFO,
    SHUTDOWN,
    SUPERSEDED,
    TIMEOUT,
)
from tests.reference.state import Conversation, Held

# Re-exported: the tests read the shared settings where they read the model.
__all__ = [
    "HELD_BYTES_PER_EVENT",
    "HELD_BYTES_PER_INPUT_BYTE",
    "Engine",
    "EngineConfig",
    "held_cost",
    "pair_id",
]

Record = vocab.Record  # here too, where most callers have always imported it from


class Tagger(Protocol):
    """Failure-point tagging hook (see tagging.py). Called in arrival order, so it can count."""

    def on_call(self, call: ToolEvent, conv: Any) -> None: ...

    def on_request(self, conv: Any, ts_ms: float | None) -> None: ...

    def on_pending_request(self, conversation_id: str, ts_ms: float | None) -> None: ...

    def tag(self, record: Record, call: ToolEvent | None, result: ToolEvent | None) -> None: ...


class Engine(HeldViews, Emitter):
    """Pairing state for one stream (one Kafka partition, or one file run)."""

    def __init__(self, config: EngineConfig | None = None, tagger: Tagger | None = None) -> None:
        self.config = config or EngineConfig()
        self.tagger = tagger
        self._convs: OrderedDict[str, Conversation] = OrderedDict()  # LRU order: oldest touch first
        self._held: dict[int, Held] = {}  # seq -> held, in arrival order: first is the oldest
        # seq -> position of each held event, kept in step with _held once track_positions is called
        self.positions: dict[int, Any] = {}
        self._position_of: Callable[[ToolEvent], Any] | None = None
        # Changes since the last checkpoint mark (see held_changes), kept from the first mark:
        # position -> held (True) or released (False), the last change winning; and the
        # conversations whose clock entry may have changed (touched, or one of its events released).
        self.changes: dict[Any, bool] = {}
        self._dirty: set[Conversation] | None = None
        self._mark = 0
        # Processing-time timers (p_deadline, seq); stale entries skipped lazily. Empty until the
        # first `advance`: no processing time, no processing timers.
        self._heap: list[tuple[float, int]] = []
        # Every remembered closed id of every conversation, oldest closed first: the engine-wide
        # bound forgets from the front. Mirrors the union of the conversations' `closed` maps.
        self._closed: OrderedDict[tuple[Conversation, str], None] = OrderedDict()
        self._seq = 0
        self.processing_ms = NEG_INF  # P: the latest processing time given to `advance`
        self._p_origin_ms = NEG_INF  # the first P given: what "held before P was known" counts from
        self._next_sweep_ms = NEG_INF
        # Conversation clocks from a checkpoint, applied when the conversation is first seen again.
        self._restored_clocks: dict[str, float] = {}
        self.held_bytes = 0
        # Bytes of the conversation ids and closed call ids kept (input can make them large: they
        # outlive their events). Counted against max_held_bytes with held_bytes (see _enforce_bytes).
        self.id_bytes = 0
        self.open_calls = 0
        self.pending_results = 0
        self.evictions: Counter[str] = Counter()  # by limit name, for metrics
        # Told of each eviction as it happens, (events, limit): how the pipeline reports evictions to
        # its observer (the sidecar's metrics) without diffing `evictions` afterwards.
        self.on_evict: Callable[[int, str], None] | None = None
        # Whether call / result sides carry `raw` (EngineConfig.raw), read once per output record.
        self._raw_call = self.config.raw.keeps(True)
        self._raw_result = self.config.raw.keeps(False)

    # ------------------------------------------------------------------ entry points

    def process(self, event: ToolEvent, now_ms: float | None = None) -> list[Record]:
        """Take one event. `now_ms` is its arrival time, the event time of a record that had none
        (without it, an undated event takes its conversation's clock and does not move it)."""
        out: list[Record] = []
        ts = event.ts_ms if event.ts_ms is not None else now_ms
        conv = self._conversation(event.conversation_id, out)
        if self._dirty is not None:
            self._dirty.add(conv)
        if ts is None and conv.clock_ms != NEG_INF:
            ts = conv.clock_ms
        if event.is_call:
            self._on_call(conv, event, ts, out)
        else:
            self._on_result(conv, event, ts, out)
        self._enforce_bytes(out)
        if ts is not None and ts > conv.clock_ms:
            conv.clock_ms = ts
            timers = conv.timers
            if timers and timers[0][0] <= ts:
                self._fire_conversation(conv, ts, out)
        return out

    def mark_request(self, conversation_id: str, ts_ms: float | None) -> None:
        """A new request (agent turn) starts in this conversation: the tagger's loop caps count
        calls and time from here. A conversation the engine does not hold yet (the prompt of its
        first request) has no tagger state: the tagger keeps the start until its first call."""
        tagger = self.tagger
        if tagger is None:
            return
        conv = self._convs.get(conversation_id)
        if conv is not None:
            tagger.on_request(conv, ts_ms)
        else:
            tagger.on_pending_request(conversation_id, ts_ms)

    def advance(self, now_ms: float) -> list[Record]:
        """Move processing time P forward (the sidecar's wall-clock tick, never a record's time) and
        emit what has been held for its timeout in processing time. The first call starts the
        processing timers of everything already held, counted from this P."""
        out: list[Record] = []
        self._advance(now_ms, out)
        return out

    def flush(self, reason: str = SHUTDOWN, result_reason: str | None = None) -> list[Record]:
        """Emit everything still held, oldest first, as orphans with `reason` (held results get
        `result_reason` when given: at the end of a finite input their call is known never to come,
        which is `no_call`); the state is empty after."""
        out: list[Record] = []
        for held in list(self._held.values()):
            is_result = not held.event.is_call
            self._emit_orphan(held, result_reason if is_result and result_reason else reason, out)
        self._convs.clear()
        self._closed.clear()
        self._heap.clear()
        self._restored_clocks = {}
        self.id_bytes = 0
        return out

    def discard(self) -> int:
        """Forget all state without emitting (the Kafka adapter's rebalance: the new owner rebuilds it
        by replaying from the committed offset, which never passes the oldest held event)."""
        n = len(self._held)
        self._held.clear()
        self.positions.clear()
        self._convs.clear()
        self._closed.clear()
        self._heap.clear()
        self._restored_clocks = {}
        self.held_bytes = self.open_calls = self.pending_results = self.id_bytes = 0
        return n

    # ------------------------------------------------------------------ rules

    def _on_call(self, conv: Conversation, call: ToolEvent, ts: float | None, out: list[Record]) -> None:
        if self.tagger is not None:
            self.tagger.on_call(call, conv)
        cid = call.id
        if cid is not None:
            old = conv.calls_by_id.get(cid)
            if old is not None:
                self._emit_orphan(old, SUPERSEDED, out)
            waiting = conv.pending_results.get(cid)
            if waiting:
                # The call arrived after its result: still an id match, and any further results
                # held for the same id are duplicates of an already-paired id.
                first = waiting[0]
                self._release(first)
                call_held = Held(call, self._next_seq(), ts, INF, conv)
                self._emit_pair(call_held, first, BY_ID, None, out)
                for dup in list(conv.pending_results.get(cid, ())):
                    self._emit_orphan(dup, DUPLICATE_RESULT, out)
                return
            if cid in conv.closed:
                self._drop_closed(conv, cid)
        if conv.early_results is not None:
            early, fifo_by = self._early_candidate(conv.early_results, call.name)
            if early is not None:
                # Its id-less result came first (written late, or reordered): a FIFO pair.
                self._emit_pair(Held(call, self._next_seq(), ts, INF, conv), early, FIFO, fifo_by, out)
                return
        if len(conv.open_calls) >= self.config.max_calls_per_conversation:
            self._evicted(1, EvictionLimit.CALLS_PER_CONVERSATION.value)
            self._emit_orphan(next(iter(conv.open_calls.values())), EVICTED, out)
        held = self._hold(call, conv, ts, self.config.call_timeout_ms)
        conv.open_calls[held.seq] = held
        if cid is not None:
            conv.calls_by_id[cid] = held
        self.open_calls += 1

    def _on_result(self, conv: Conversation, result: ToolEvent, ts: float | None, out: list[Record]) -> None:
        rid = result.id
        if rid is not None:
            call = conv.calls_by_id.get(rid)
            if call is not None:
                self._emit_pair(call, Held(result, self._next_seq(), ts, INF, conv), BY_ID, None, out)
                return
            how = conv.closed.get(rid)
            if how is not None:
                res = Held(result, self._next_seq(), ts, INF, conv)
                if how == PAIRED:
                    reason = DUPLICATE_RESULT
                elif how == PAIRED_FIFO:
                    reason = FIFO_CONFLICT
                else:
                    reason = LATE_RESULT
                self._emit_orphan(res, reason, out)
                return
            held = self._hold(result, conv, ts, self.config.result_grace_ms)
            conv.pending_results.setdefault(rid, []).append(held)
            self.pending_results += 1
            return
        call, fifo_by = self._fifo_candidate(conv, result.name)
        if call is not None:
            self._emit_pair(call, Held(result, self._next_seq(), ts, INF, conv), FIFO, fifo_by, out)
            return
        # No call it could pair with yet: wait the grace for one, as a result with an unknown id does.
        held = self._hold(result, conv, ts, self.config.result_grace_ms)
        if conv.early_results is None:
            conv.early_results = {}
        conv.early_results[held.seq] = held
        self.pending_results += 1

    @staticmethod
    def _fifo_candidate(conv: Conversation, name: str | None) -> tuple[Held | None, str | None]:
        if not conv.open_calls:
            return None, None
        if name is None:
            return next(iter(conv.open_calls.values())), BY_ORDER
        unnamed: Held | None = None
        for held in conv.open_calls.values():
            call_name = held.event.name
            if call_name == name:
                return held, BY_NAME
            if call_name is None and unnamed is None:
                unnamed = held
        return unnamed, (BY_ORDER if unnamed is not None else None)

    @staticmethod
    def _early_candidate(early: dict[int, Held], name: str | None) -> tuple[Held | None, str | None]:
        """The held id-less result a new call takes: the mirror of `_fifo_candidate`."""
        if name is None:
            return next(iter(early.values())), BY_ORDER
        unnamed: Held | None = None
        for held in early.values():
            result_name = held.event.name
            if result_name == name:
                return held, BY_NAME
            if result_name is None and unnamed is None:
                unnamed = held
        return unnamed, (BY_ORDER if unnamed is not None else None)

    # ------------------------------------------------------------------ state keeping

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _conversation(self, conversation_id: str, out: list[Record]) -> Conversation:
        conv = self._convs.get(conversation_id)
        if conv is None:
            if len(self._convs) >= self.config.max_conversations:
                _, lru = self._convs.popitem(last=False)
                self._evict_conversation(lru, out)
                self._forget_closed(lru)
            conv = Conversation(conversation_id)
            if self._restored_clocks:
                conv.clock_ms = self._restored_clocks.pop(conversation_id, NEG_INF)
            self._convs[conversation_id] = conv
            self.id_bytes += len(conversation_id)
        else:
            self._convs.move_to_end(conversation_id)
        conv.last_p_ms = self.processing_ms
        return conv

    def _evict_conversation(self, conv: Conversation, out: list[Record]) -> None:
        """Emit what an LRU-evicted conversation held; `evictions` counts events, not conversations,
        so the metric equals the number of `evicted` orphans it explains."""
        held_events = list(conv.open_calls.values())
        for waiting in conv.pending_results.values():
            held_events.extend(waiting)
        if conv.early_results is not None:
            held_events.extend(conv.early_results.values())
        held_events.sort(key=_by_seq)
        self._evicted(len(held_events), EvictionLimit.CONVERSATIONS.value)
        for held in held_events:
            self._emit_orphan(held, EVICTED, out)

    def _evicted(self, n: int, limit: str) -> None:
        self.evictions[limit] += n
        if self.on_evict is not None and n:
            self.on_evict(n, limit)

    def _hold(self, event: ToolEvent, conv: Conversation, ts: float | None, timeout: float) -> Held:
        """Keep an event, on two timers of `timeout`: its conversation's event time, from its own
        event time, and processing time, from now (or from the first P when P is not known yet)."""
        seq = self._next_seq()
        deadline = INF if ts is None else ts + timeout
        p_now = self.processing_ms
        p_deadline = INF if p_now == NEG_INF else p_now + timeout
        held = Held(event, seq, ts, deadline, conv, p_deadline_ms=p_deadline)
        self._held[seq] = held
        if self._position_of is not None:
            position = self.positions[seq] = self._position_of(event)
            if self._dirty is not None:  # after the first mark_clocks: a delta checkpoint may ask
                self.changes[position] = True
                self._dirty.add(conv)
        self.held_bytes += held_cost(event.size)
        if deadline != INF:
            timers = conv.timers
            if len(timers) > _TIMERS_REBUILD_OVER and len(timers) > 2 * conv.held_count() + 8:
                # Stale entries dominate (events paired since): keep the heap proportional to
                # what the conversation holds. In place: a caller may be iterating it.
                timers[:] = [(h.deadline_ms, h.seq) for h in self._conversation_held(conv)]
                heapq.heapify(timers)
            heapq.heappush(timers, (deadline, seq))
        if p_deadline != INF:
            heapq.heappush(self._heap, (p_deadline, seq))
        return held

    @staticmethod
    def _conversation_held(conv: Conversation) -> list[Held]:
        held = [h for h in conv.open_calls.values() if h.deadline_ms != INF]
        for waiting in conv.pending_results.values():
            held.extend(h for h in waiting if h.deadline_ms != INF)
        if conv.early_results is not None:
            held.extend(h for h in conv.early_results.values() if h.deadline_ms != INF)
        return held

    def _release(self, held: Held) -> None:
        """Remove a held event from every structure that references it."""
        if self._held.pop(held.seq, None) is None:
            return
        position = self.positions.pop(held.seq, None)
        if position is not None and self._dirty is not None:
            self.changes[position] = False
            self._dirty.add(held.conv)
        ev = held.event
        conv = held.conv
        self.held_bytes -= held_cost(ev.size)
        # A dict keeps its table when its entries are deleted, so each container below is cleared
        # (which frees the table) the moment it empties: otherwise every idle conversation would
        # keep tables sized for the busiest moment of its past, and the process would grow with
        # the number of conversations that ever had one (the RSS creep of BENCHMARKS.md part 4:
        # +2-3 MiB a minute at 100k conversations, long after held bytes were flat).
        if ev.is_call:
            open_calls = conv.open_calls
            open_calls.pop(held.seq, None)
            if not open_calls:
                open_calls.clear()
            by_id = conv.calls_by_id
            if ev.id is not None and by_id.get(ev.id) is held:
                del by_id[ev.id]
                if not by_id:
                    by_id.clear()
            self.open_calls -= 1
        elif ev.id is not None:
            pending = conv.pending_results
            waiting = pending[ev.id]
            waiting.remove(held)
            if not waiting:
                del pending[ev.id]
                if not pending:
                    pending.clear()
            self.pending_results -= 1
        else:
            early = conv.early_results
            assert early is not None
            del early[held.seq]
            if not early:
                conv.early_results = None
            self.pending_results -= 1
        if conv.timers and not conv.open_calls and not conv.pending_results and conv.early_results is None:
            conv.timers.clear()  # all stale: the conversation holds nothing

    def _close_id(self, conv: Conversation, cid: str | None, how: str) -> None:
        if cid is None:
            return
        closed = conv.closed
        everywhere = self._closed
        key = (conv, cid)
        if closed.pop(cid, None) is None:  # re-inserted last: a plain dict keeps insertion order
            self.id_bytes += len(cid)
        closed[cid] = how
        everywhere[key] = None
        everywhere.move_to_end(key)
        if len(closed) > self.config.max_closed_ids_per_conversation:
            self._drop_closed(conv, next(iter(closed)))
        while len(everywhere) > self.config.max_closed_ids:
            self._drop_closed(*next(iter(everywhere)))

    def _drop_closed(self, conv: Conversation, cid: str) -> None:
        """Forget one closed id, in the conversation's map and in the engine-wide order together."""
        del conv.closed[cid]
        del self._closed[(conv, cid)]
        self.id_bytes -= len(cid)
        if not conv.closed:
            # A dict never shrinks its table on deletion: under the engine-wide bound each
            # conversation's map keeps refilling and emptying, and its table would ratchet up to
            # its busiest moment ever (measured: +7 MiB per 600k records at 100k conversations).
            # An empty replacement has no table at all.
            conv.closed = {}

    def _forget_closed(self, conv: Conversation) -> None:
        """Drop a departing conversation's closed ids from the engine-wide order, so that order
        never keeps a dead conversation (and its tagger state) alive; uncharge its ids."""
        everywhere = self._closed
        for cid in conv.closed:
            del everywhere[(conv, cid)]
            self.id_bytes -= len(cid)
        self.id_bytes -= len(conv.conversation_id)

    def _enforce_bytes(self, out: list[Record]) -> None:
        limit = self.config.max_held_bytes
        while self.held_bytes + self.id_bytes > limit and self._held:
            self._evicted(1, EvictionLimit.HELD_BYTES.value)
            self._emit_orphan(next(iter(self._held.values())), EVICTED, out)
        # Nothing held and still over: the ids of idle conversations are what is left; forget the
        # least recently used ones (a later result for them is then an unknown id, not a duplicate).
        convs = self._convs
        while self.id_bytes > limit and convs:
            _, idle = convs.popitem(last=False)
            self._forget_closed(idle)

    def _fire_conversation(self, conv: Conversation, clock: float, out: list[Record]) -> None:
        """Emit what this conversation's clock has passed the event-time deadline of, oldest deadline
        first (ties: arrival order)."""
        timers = conv.timers
        held_map = self._held
        while timers and timers[0][0] <= clock:
            deadline, seq = heapq.heappop(timers)
            held = held_map.get(seq)
            if held is None or held.deadline_ms != deadline:
                continue  # already paired or emitted: a stale timer
            self._emit_orphan(held, TIMEOUT if held.event.is_call else NO_CALL, out)

    def _advance(self, now_ms: float, out: list[Record]) -> None:
        if now_ms <= self.processing_ms:
            return
        if self.processing_ms == NEG_INF:
            # The first processing time: what is already held counts its timeout from here.
            self._p_origin_ms = now_ms
            call_timeout, grace = self.config.call_timeout_ms, self.config.result_grace_ms
            for h in self._held.values():
                h.p_deadline_ms = now_ms + (call_timeout if h.event.is_call else grace)
            self._heap = [(h.p_deadline_ms, h.seq) for h in self._held.values()]
            heapq.heapify(self._heap)
        self.processing_ms = now_ms
        heap = self._heap
        while heap and heap[0][0] <= now_ms:
            deadline, seq = heapq.heappop(heap)
            held = self._held.get(seq)
            if held is None or held.p_deadline_ms != deadline:
                continue  # already paired or emitted: a stale timer
            self._emit_orphan(held, TIMEOUT if held.event.is_call else NO_CALL, out)
        # Lazy deletion leaves stale timers behind; rebuild when they dominate, so the heap stays
        # proportional to what is held rather than to everything ever seen within a timeout.
        if len(heap) > 2 * len(self._held) + 1024:
            self._heap = [(h.p_deadline_ms, h.seq) for h in self._held.values()]
            heapq.heapify(self._heap)
        if now_ms >= self._next_sweep_ms:
            self._next_sweep_ms = now_ms + IDLE_SWEEP_EVERY_MS
            self._expire_idle(now_ms)

    def _expire_idle(self, now_ms: float) -> None:
        """Forget idle conversations whose last event is older than the TTL in processing time. The
        LRU order is the order of last events, hence of their processing times: stop at the first
        conversation still fresh."""
        ttl = self.config.conversation_ttl_ms
        origin = self._p_origin_ms
        convs = self._convs
        while convs:
            conv = next(iter(convs.values()))
            if max(conv.last_p_ms, origin) + ttl > now_ms:
                return
            if not conv.is_idle():
                return
            del convs[conv.conversation_id]
            self._forget_closed(conv)


def _by_seq(held: Held) -> int:
    return held.seq
