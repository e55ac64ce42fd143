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

Ids the client rewrote (issue 24). Some servers scope call ids to one response (`call_0` in
every response) or give none, and the client invents its own before the next request (it
prefixes the response id: `resp_8f2_call_0`; or makes one up for an id-less call). The history
copy then carries another id than the response's call, and would be read as a second call,
leaving the response's own as an unanswered orphan: one call counted twice. So a new call is a
copy of an earlier one when that earlier call (same conversation, same tool name, same
arguments) was never seen again under its own id and had no id, or an id the new one ends with
after a separator (`resp_8f2_call_0` ends with `_call_0`). The copy is counted as a duplicate,
and results that name the rewritten id are given the id of the call they answer (their `raw`
keeps the id as written): one call, one output record. The response's id is then free again, so
the next response's `call_0` is a new call, as it is.

Ids reused and kept. Where the client sends `call_0` back as it is, every response's call has
the same id: a call under an id already read is a new call when that id's earlier call was
answered and the tool name or arguments differ, and from then on a result under the id is a new
one when its content differs from every earlier result under it (a copy repeats its content).
Anything else under a known id stays a copy, as before.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from typing import Any, Final

import orjson

from stream_pairer.core.model import CALL, RESULT, ToolEvent

# The defaults of FormatConfig.max_history_ids / max_history_conversations (the options
# --max-history-ids / --max-history-conversations): both the run and its audit build their
# HistoryDedup from the same format configuration, so they forget the same ids.
DEFAULT_MAX_IDS_PER_CONVERSATION: Final = 10_000
DEFAULT_MAX_CONVERSATIONS: Final = 10_000
_Seen = dict[tuple[str, str], "int | set[int]"]
_NONE: Final = object()  # `_copy_of` found no earlier call (None is an id-less call)


def _hash(ev: ToolEvent) -> int:
    """What a copy repeats: a call's tool name and arguments, a result's content. A keyless
    digest, not `hash()`: Python salts that per process, and `pair --state` carries these
    values to the next run (`export`), which must compare them with its own."""
    name, args = _signature(ev)
    if ev.type == CALL:
        args = (b"\0" if name is None else b"\1" + name.encode(errors="surrogatepass") + b"\0") + args
    return int.from_bytes(hashlib.blake2b(args, digest_size=8).digest())


def _signature(ev: ToolEvent) -> tuple[str | None, bytes]:
    """A call's tool name and arguments, the same for its copies whatever their id."""
    try:
        args = orjson.dumps(ev.payload, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        args = repr(ev.payload).encode()
    return ev.name, args


class HistoryDedup:
    __slots__ = ("_aliases", "_convs", "_lone", "copies", "forgotten", "max_conversations", "max_ids")

    def __init__(
        self,
        max_ids_per_conversation: int = DEFAULT_MAX_IDS_PER_CONVERSATION,
        max_conversations: int = DEFAULT_MAX_CONVERSATIONS,
    ) -> None:
        if max_ids_per_conversation < 1 or max_conversations < 1:
            raise ValueError("history dedup limits must be >= 1")
        self.max_ids = max_ids_per_conversation
        self.max_conversations = max_conversations
        # conversation -> {(type, id): what was read under it}, both insertion-ordered (oldest
        # first): the hash of a call's tool name and arguments, or of a result's content; a set of
        # them once the id was reused (see `_reused`).
        self._convs: OrderedDict[str, _Seen] = OrderedDict()
        # conversation -> {(tool name, arguments): [ids of calls not seen again under their id]}
        self._lone: dict[str, dict[tuple[str | None, bytes], list[str | None]]] = {}
        # conversation -> {rewritten id: id of the call it is a copy of (None: an id-less call)}
        self._aliases: dict[str, dict[str, str | None]] = {}
        self.copies = 0
        self.forgotten = 0

    def admit(self, ev: ToolEvent) -> bool:
        """True for the first occurrence of (conversation, type, id); False for a repeated copy
        (a copy under a rewritten id included). An admitted result whose id the client rewrote
        gets the id of its call (`ev.id` is set in place)."""
        conv = ev.conversation_id
        if ev.id is None:
            if ev.type == CALL:
                self._remember_lone(conv, ev, None)
            return True
        seen = self._convs.get(conv)
        if seen is None:
            if len(self._convs) >= self.max_conversations:
                gone, dropped = self._convs.popitem(last=False)
                self.forgotten += len(dropped)
                self._lone.pop(gone, None)
                self._aliases.pop(gone, None)
            seen = self._convs[conv] = {}
        else:
            self._convs.move_to_end(conv)
        key = (ev.type, ev.id)
        known = seen.get(key)
        if known is not None:
            if self._reused_id(seen, key, known, ev):
                return True
            self.copies += 1
            if ev.type == CALL:
                self._forget_lone(conv, ev)
            return False
        if len(seen) >= self.max_ids:
            del seen[next(iter(seen))]
            self.forgotten += 1
        seen[key] = _hash(ev)
        if ev.type == CALL:
            original = self._copy_of(conv, ev)
            if original is not _NONE:
                aliases = self._aliases.setdefault(conv, {})
                if len(aliases) >= self.max_ids:
                    del aliases[next(iter(aliases))]
                aliases[ev.id] = original
                if original is not None:
                    seen.pop((CALL, original), None)  # the response's id is free for its next call
                self.copies += 1
                return False
            self._remember_lone(conv, ev, ev.id)
        else:
            rewritten = self._aliases.get(conv)
            if rewritten is not None and ev.id in rewritten:
                ev.id = rewritten[ev.id]
        return True

    @staticmethod
    def _reused_id(seen: _Seen, key: tuple[str, str], known: int | set[int], ev: ToolEvent) -> bool:
        """Whether `ev`, under an id already read, is a new event rather than a copy: the server
        scoped its ids to one response (`call_0` in every response) and the client kept them. A
        call is new when its id's earlier call was answered and its name or arguments differ;
        a result under such a reused id is new when its content differs from every earlier one
        (a copy repeats its content). Anything else under a known id stays a copy."""
        if ev.type != CALL and type(known) is not set:
            return False  # no call under this id was reused: a result copy (no hashing needed)
        answered = seen.get((RESULT, key[1])) if ev.type == CALL else None
        if ev.type == CALL and answered is None:
            return False  # the first call is still open: a copy
        h = _hash(ev)
        if known == h or (type(known) is set and h in known):
            return False
        if isinstance(known, set):
            known.add(h)
        else:
            seen[key] = {known, h}
        if answered is not None and not isinstance(answered, set):
            seen[(RESULT, key[1])] = {answered}  # the id is reused: its results are told by content
        return True

    def _remember_lone(self, conv: str, ev: ToolEvent, call_id: str | None) -> None:
        lone = self._lone.setdefault(conv, {})
        if len(lone) >= self.max_ids:
            del lone[next(iter(lone))]
        ids = lone.setdefault(_signature(ev), [])
        if len(ids) >= self.max_ids:
            del ids[0]  # one call repeated past the id limit: its oldest copy is forgotten
        ids.append(call_id)

    def _forget_lone(self, conv: str, ev: ToolEvent) -> None:
        lone = self._lone.get(conv)
        ids = lone.get(_signature(ev)) if lone is not None else None
        if ids is not None and ev.id in ids:
            ids.remove(ev.id)

    def _copy_of(self, conv: str, ev: ToolEvent) -> Any:
        """The id of the earlier call `ev` (a new id) is a rewritten copy of, or _NONE."""
        lone = self._lone.get(conv)
        ids = lone.get(_signature(ev)) if lone is not None else None
        if not ids or ev.id is None:
            return _NONE
        new = ev.id
        for i, old in enumerate(ids):
            if old is None or (
                len(new) > len(old) and new.endswith(old) and not new[-len(old) - 1].isalnum()
            ):
                del ids[i]
                return old
        return _NONE

    def export(self) -> dict[str, Any]:
        """Everything remembered, as JSON-ready lists in their orders (oldest first), for
        `pair --state` to carry to the next run (`load`); the counters are the run's own."""
        return {
            "convs": [
                [conv, [[t, i, sorted(v) if isinstance(v, set) else v] for (t, i), v in seen.items()]]
                for conv, seen in self._convs.items()
            ],
            "lone": [
                [conv, [[name, args.decode(), ids] for (name, args), ids in lone.items()]]
                for conv, lone in self._lone.items()
            ],
            "aliases": [[conv, list(aliases.items())] for conv, aliases in self._aliases.items()],
        }

    def load(self, data: dict[str, Any]) -> None:
        """What `export` wrote, into an empty dedup: the newest entries within this run's limits
        (the same as the last run's unless they were lowered)."""
        n, m = self.max_ids, self.max_conversations
        for conv, seen in data["convs"][-m:]:
            self._convs[conv] = {(t, i): set(v) if isinstance(v, list) else v for t, i, v in seen[-n:]}
        for conv, lone in data["lone"]:
            self._lone[conv] = {(name, args.encode()): ids[-n:] for name, args, ids in lone[-n:]}
        for conv, aliases in data["aliases"]:
            self._aliases[conv] = dict((k, v) for k, v in aliases[-n:])

    @property
    def remembered(self) -> int:
        return sum(len(s) for s in self._convs.values())
