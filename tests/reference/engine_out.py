"""The reference engine's output records: pairs and orphans as dicts, with their ids.

Why apart: engine.py keeps the pairing rules; this is what a rule's outcome looks like (the
compiled core writes the same records in out.rs and pairid.rs).
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from stream_pairer.core.model import ToolEvent, format_ts
from stream_pairer.core.vocab import Record
from tests.reference.names import (
    BY_ID,
    ORPHAN_CALL,
    ORPHAN_RESULT,
    PAIR,
    PAIRED,
    PAIRED_FIFO,
)
from tests.reference.state import Held


def pair_id(conversation_id: str, call: ToolEvent) -> str:
    """Deterministic from conversation + call identity + where the call was read: the same input
    always gives the same id, so a replayed or reprocessed pair can be deduplicated downstream by
    this key. The call's lineage (source, block) is part of it even when the call has an id:
    ids are reused inside one conversation (JSON-RPC ids restart per connection, a resumed session
    re-sends them), and two real pairs with one key would make a downstream dedup drop one."""
    head = (
        f"{conversation_id}\x1fsrc\x1f"
        if call.id is None
        else f"{conversation_id}\x1fid\x1f{call.id}\x1fsrc\x1f"
    )
    ident = (
        head.encode() + orjson.dumps(call.source, option=orjson.OPT_SORT_KEYS) + f"\x1f{call.block}".encode()
    )
    return hashlib.blake2b(ident, digest_size=12).hexdigest()


class Emitter:
    """Mixed into `Engine` (engine.py), whose state and helpers it uses."""

    config: Any
    tagger: Any

    def _emit_pair(
        self, call: Held, result: Held, match: str, fifo_by: str | None, out: list[Record]
    ) -> None:
        self._release(call)
        self._release(result)
        conv = call.conv
        cev, rev = call.event, result.event
        self._close_id(conv, cev.id, PAIRED if match == BY_ID else PAIRED_FIFO)
        latency = None
        if cev.ts_ms is not None and rev.ts_ms is not None:
            latency = rev.ts_ms - cev.ts_ms
        rec: Record = {
            "kind": PAIR,
            "pair_id": pair_id(conv.conversation_id, cev),
            "match": match,
            "fifo_by": fifo_by,
            "conversation_id": conv.conversation_id,
            "tool": cev.name if cev.name is not None else rev.name,
            "call": cev.to_side(self._raw_call),
            "result": rev.to_side(self._raw_result),
            "call_ts": format_ts(call.ts_ms),
            "result_ts": format_ts(result.ts_ms),
            "latency_ms": latency,
        }
        if self.tagger is not None:
            self.tagger.tag(rec, cev, rev)
        out.append(rec)

    def _emit_orphan(self, held: Held, reason: str, out: list[Record]) -> None:
        self._release(held)
        ev = held.event
        if ev.is_call:
            self._close_id(held.conv, ev.id, reason)
        rec: Record = {
            "kind": ORPHAN_CALL if ev.is_call else ORPHAN_RESULT,
            "reason": reason,
            "conversation_id": held.conv.conversation_id,
            "tool": ev.name,
            "ts": format_ts(held.ts_ms),
            "event": ev.to_side(self._raw_call if ev.is_call else self._raw_result),
            "source": ev.source,
        }
        if self.tagger is not None:
            if ev.is_call:
                self.tagger.tag(rec, ev, None)
            else:
                self.tagger.tag(rec, None, ev)
        out.append(rec)


def _by_seq(held: Held) -> int:
    return held.seq
