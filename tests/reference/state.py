"""In-memory pairing state: what the engine holds between a call and its result.

Kept apart from the rules in `engine.py` so that the rules read as rules and the data structures can
be reasoned about (and bounded) on their own. Every container here is either bounded by a limit in
`EngineConfig` or emptied by a timer; the engine enforces those limits, this module only holds.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from stream_pairer.core.model import ToolEvent


class Held:
    """One event the engine is keeping: an open call, or a result waiting for its call.

    `seq` orders everything the engine ever held: the global `held` map is keyed by it, so its first
    entry is the oldest held event (the one the Kafka adapter must not commit past, and the first
    to go when the byte limit is hit). Two timers turn it into an orphan, whichever fires first:
    `deadline_ms`, event time, fired by its own conversation's clock (`Conversation.clock_ms`), and
    `p_deadline_ms`, processing time, fired by `Engine.advance` (infinite while the engine has no
    processing time: file mode). `ts_ms` is its event time (its own, else its arrival, else its
    conversation's clock), None when none is known; it is then on no event-time timer.
    """

    __slots__ = ("conv", "deadline_ms", "event", "p_deadline_ms", "seq", "ts_ms")

    def __init__(
        self, event: ToolEvent, seq: int, ts_ms: float | None, deadline_ms: float, conv: Conversation,
        *, p_deadline_ms: float = float("inf"),
    ) -> None:  # fmt: skip
        self.event = event
        self.seq = seq
        self.ts_ms = ts_ms
        self.deadline_ms = deadline_ms
        self.p_deadline_ms = p_deadline_ms
        self.conv = conv


@dataclass(slots=True, eq=False)
class Conversation:
    """Per-conversation state. Ids are only meaningful inside one conversation (a resumed Claude Code
    session reuses the same tool_use_id under a new sessionId), so every lookup is scoped here."""

    conversation_id: str
    # Open calls with an id, by id.
    calls_by_id: dict[str, Held] = field(default_factory=dict)
    # All open calls (with or without id) in arrival order, by seq: the FIFO queue.
    open_calls: OrderedDict[int, Held] = field(default_factory=OrderedDict)
    # Results whose id is not (yet) known, waiting out the grace period, by referenced id.
    pending_results: dict[str, list[Held]] = field(default_factory=dict)
    # Id-less results that came before any call they could FIFO-pair with, waiting out the grace
    # period for it, by seq (arrival order). None when there are none: most conversations never
    # have one, and an empty dict would cost 64 B each.
    early_results: dict[int, Held] | None = None
    # Ids already closed here -> how ("paired", "timeout", ...): tells a duplicate from a late result.
    # Oldest closed first (insertion order); a plain dict, as the engine replaces it when it empties
    # and an OrderedDict costs twice the memory per entry for an order a dict already keeps.
    closed: dict[str, str] = field(default_factory=dict)
    # Event time of this conversation: the newest event time seen in it (-inf before the first).
    # It alone fires this conversation's event-time timers: another conversation's clock never does.
    clock_ms: float = float("-inf")
    # This conversation's event-time timers, a min-heap of (deadline_ms, seq); stale entries (the
    # event was paired or emitted since) are skipped when popped, and the heap is emptied when the
    # conversation holds nothing any more.
    timers: list[tuple[float, int]] = field(default_factory=list)
    # Processing time of its last event (-inf when it came before the engine had one): the
    # conversation TTL counts from it.
    last_p_ms: float = float("-inf")
    # Reserved for the tagger's per-conversation state; dropped with the conversation.
    tags: Any = None
    # The clock entry the last checkpoint carries for this conversation, (mark, position, clock),
    # valid while `mark` is the engine's current checkpoint mark (see Engine.held_changes).
    ck: Any = None

    def held_count(self) -> int:
        early = len(self.early_results) if self.early_results is not None else 0
        return len(self.open_calls) + sum(len(v) for v in self.pending_results.values()) + early

    def is_idle(self) -> bool:
        return not self.open_calls and not self.pending_results and self.early_results is None
