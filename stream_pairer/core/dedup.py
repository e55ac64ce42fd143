"""Re-sent history counted once: each call and each result of a wire log or an OTel export by id.

Every HTTP request of a conversation repeats the whole history, and every chat span repeats its
input messages: the same call (same id) is read once per later exchange. Only its first
occurrence is an event; a later copy is counted as a `duplicate_copies` of the summary and goes
nowhere else (it is the same event, not a new one, so conservation counts it once).

Memory is bounded by configuration: per conversation, at most `max_ids_per_conversation` ids
are remembered (the oldest is forgotten first); at most `max_conversations` conversations are
remembered (the least recently used is forgotten first). Forgetting an id only means that a
later copy of it is admitted again as an event: the engine then treats it as it treats any
repeated id (a `superseded` orphan for a call, a `duplicate_result` orphan for a result), so the
copy is visible in the output with a reason, never silently lost. `forgotten` counts those ids.

A first occurrence is never dropped: only an id already admitted in the same conversation, with
the same event type, is a copy. Events without an id are always admitted (nothing tells two
copies apart; the format parsers keep id-less events only where they are new).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Final

from stream_pairer.core.model import ToolEvent

# The defaults of FormatConfig.max_history_ids / max_history_conversations (the options
# --max-history-ids / --max-history-conversations): both the run and its audit build their
# HistoryDedup from the same format configuration, so they forget the same ids.
DEFAULT_MAX_IDS_PER_CONVERSATION: Final = 10_000
DEFAULT_MAX_CONVERSATIONS: Final = 10_000


class HistoryDedup:
    __slots__ = ("_convs", "copies", "forgotten", "max_conversations", "max_ids")

    def __init__(
        self,
        max_ids_per_conversation: int = DEFAULT_MAX_IDS_PER_CONVERSATION,
        max_conversations: int = DEFAULT_MAX_CONVERSATIONS,
    ) -> None:
        if max_ids_per_conversation < 1 or max_conversations < 1:
            raise ValueError("history dedup limits must be >= 1")
        self.max_ids = max_ids_per_conversation
        self.max_conversations = max_conversations
        # conversation -> {(type, id): None}, both insertion-ordered (oldest first).
        self._convs: OrderedDict[str, dict[tuple[str, str], None]] = OrderedDict()
        self.copies = 0
        self.forgotten = 0

    def admit(self, ev: ToolEvent) -> bool:
        """True for the first occurrence of (conversation, type, id); False for a repeated copy."""
        if ev.id is None:
            return True
        seen = self._convs.get(ev.conversation_id)
        if seen is None:
            if len(self._convs) >= self.max_conversations:
                _, dropped = self._convs.popitem(last=False)
                self.forgotten += len(dropped)
            seen = self._convs[ev.conversation_id] = {}
        else:
            self._convs.move_to_end(ev.conversation_id)
        key = (ev.type, ev.id)
        if key in seen:
            self.copies += 1
            return False
        if len(seen) >= self.max_ids:
            del seen[next(iter(seen))]
            self.forgotten += 1
        seen[key] = None
        return True

    @property
    def remembered(self) -> int:
        return sum(len(s) for s in self._convs.values())
