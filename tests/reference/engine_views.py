"""The reference engine's views of its held state, by event and by position: what a checkpoint
writes and a replay restores (clocks, changes since a mark) and what the pipeline asks of it.

Why apart: engine.py keeps the pairing rules; these read them back for the sidecar's commit rule
and checkpoint (stream/partition.py), the part the compiled core mirrors in changes.rs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from stream_pairer.core.model import ToolEvent
from tests.reference.state import Conversation, Held

NEG_INF = float("-inf")


class HeldViews:
    """Mixed into `Engine` (engine.py), whose state it reads."""

    _convs: Any
    _held: Any
    _closed: Any
    _dirty: Any
    _mark: Any
    _restored_clocks: Any
    _position_of: Any

    def restore_clock(self, conversation_id: str, clock_ms: float) -> None:
        """A conversation's clock from a checkpoint, set before its held events are replayed, so the
        replay re-derives the same event-time deadlines as the first pass. Fires nothing: at the
        checkpoint, nothing its conversation held was due at that clock."""
        conv = self._convs.get(conversation_id)
        if conv is not None:
            conv.clock_ms = max(conv.clock_ms, clock_ms)
            if self._dirty is not None:
                self._dirty.add(conv)
        else:
            self._restored_clocks[conversation_id] = max(
                self._restored_clocks.get(conversation_id, NEG_INF), clock_ms
            )

    def end_restore(self) -> None:
        """Drop restored clocks no replayed event used (their events were lost to retention)."""
        self._restored_clocks = {}

    def held_clocks(self) -> list[tuple[Held, float]]:
        """What a checkpoint must carry so a replay restores every clock: for each conversation that
        holds events, its first held event (the replay meets it first) and its clock, unless
        replaying the held events alone gives the same clock (its newest event is held)."""
        first: dict[Conversation, Held] = {}
        rebuilt: set[Conversation] = set()  # a held event carries the conversation's clock
        for held in self._held.values():  # arrival order: the first seen is the first replayed
            conv = held.conv
            if conv not in first:
                first[conv] = held
            if held.ts_ms == conv.clock_ms:
                rebuilt.add(conv)
        return [
            (h, conv.clock_ms)
            for conv, h in first.items()
            if conv not in rebuilt and conv.clock_ms != NEG_INF
        ]

    def mark_clocks(self) -> list[tuple[Held, float]]:
        """`held_clocks`, taken as the base of the next `held_changes`: a full checkpoint (a
        snapshot) calls it, and the changes after it are what the next delta writes. O(held)."""
        self.changes = {}
        self._dirty = set()
        self._mark += 1
        mark, position_of = self._mark, self._position_of
        assert position_of is not None, "track_positions first"
        found = self.held_clocks()
        for h, clock in found:
            h.conv.ck = (mark, position_of(h.event), clock)
        return found

    def held_changes(self) -> tuple[list[Any], list[Any], list[tuple[Any, float]], list[Any]]:
        """What changed since the last `mark_clocks` or `held_changes`: (positions now held,
        positions released, (position, clock) of clock entries set, positions of clock entries
        dropped), the same state `held_positions`/`held_clocks` give, as a difference. O(changes):
        only conversations touched since are looked at (each over what it holds)."""
        changes, dirty = self.changes, self._dirty
        assert dirty is not None, "mark_clocks first"
        self.changes, self._dirty = {}, set()
        held = [p for p, on in changes.items() if on]
        released = [p for p, on in changes.items() if not on]
        clocks: list[tuple[Any, float]] = []
        dropped: list[Any] = []
        mark, positions = self._mark, self.positions
        for conv in dirty:
            old = conv.ck if conv.ck is not None and conv.ck[0] == mark else None
            new = self._clock_entry(conv)
            entry = None if new is None else (mark, positions[new[0].seq], new[1])
            if entry == old:
                continue
            if old is not None and (entry is None or entry[1] != old[1]):
                dropped.append(old[1])
            if entry is not None:
                clocks.append((entry[1], entry[2]))
            conv.ck = entry
        return held, released, clocks, dropped

    def _clock_entry(self, conv: Conversation) -> tuple[Held, float] | None:
        """`held_clocks` of one conversation: its first held event and clock, or None."""
        clock = conv.clock_ms
        if clock == NEG_INF:
            return None
        first: Held | None = None
        for h in self._conversation_events(conv):
            if h.ts_ms == clock:
                return None  # replaying the held events rebuilds the clock
            if first is None or h.seq < first.seq:
                first = h
        return None if first is None else (first, clock)

    @staticmethod
    def _conversation_events(conv: Conversation) -> Iterator[Held]:
        yield from conv.open_calls.values()
        for waiting in conv.pending_results.values():
            yield from waiting
        if conv.early_results is not None:
            yield from conv.early_results.values()

    # ------------------------------------------------------------------ introspection

    def oldest_held(self) -> Held | None:
        return next(iter(self._held.values()), None)

    def held(self) -> Iterator[Held]:
        return iter(self._held.values())

    @property
    def tracks_positions(self) -> bool:
        return self._position_of is not None

    def track_positions(self, position_of: Callable[[ToolEvent], Any]) -> None:
        """Keep `position_of(event)` of every held event in `positions` (seq -> position, in arrival
        order), updated as events are held and released. Why: the sidecar's checkpoint needs the
        position of every held event at every commit, and walking the held events for it cost
        ~1.5 µs each (seconds per commit at a million held events); copying this dict does not
        touch the events."""
        self._position_of = position_of
        self.positions = {seq: position_of(h.event) for seq, h in self._held.items()}

    @property
    def open_conversations(self) -> int:
        return len(self._convs)

    @property
    def closed_ids(self) -> int:
        """Exposed for benchmarks and tests: this staying at or under `max_closed_ids` is what
        keeps memory flat once every conversation has closed a few calls."""
        return len(self._closed)
