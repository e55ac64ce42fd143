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
    """One event the engine is keeping: an open call, or a result waiting for a late call.

    `seq` orders everything the engine ever held: the global `held` map is keyed by it, so its first
    entry is the oldest held event (the one the Kafka adapter must not commit past, and the first
    to go when the byte limit is hit). `deadline_ms` is when a timer turns it into an orphan.
    """

    __slots__ = ("conv", "deadline_ms", "event", "seq", "ts_ms")

    def __init__(self, event: ToolEvent, seq: int, ts_ms: float, deadline_ms: float, conv: Conversation):
        self.event = event
        self.seq = seq
        self.ts_ms = ts_ms
        self.deadline_ms = deadline_ms
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
    # Ids already closed here -> how ("paired", "timeout", ...): tells a duplicate from a late result.
    # Oldest closed first (insertion order); a plain dict, as the engine replaces it when it empties
    # and an OrderedDict costs twice the memory per entry for an order a dict already keeps.
    closed: dict[str, str] = field(default_factory=dict)
    last_ts_ms: float = 0.0
    # Reserved for the tagger's per-conversation state; dropped with the conversation.
    tags: Any = None

    def is_idle(self) -> bool:
        return not self.open_calls and not self.pending_results
