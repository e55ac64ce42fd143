"""The vocabulary (core/vocab.py) and the reference engine's own constants as plain `str` / number
globals, shared by the reference engine's modules."""

from __future__ import annotations

from typing import Final

from stream_pairer.core.vocab import FifoBy, Match, OrphanReason, RecordKind

# The vocabulary (vocab.py) as plain `str` globals: records hold exact strings, and the hot path reads
# a global instead of an enum attribute.
PAIR: Final = RecordKind.PAIR.value
ORPHAN_CALL: Final = RecordKind.ORPHAN_CALL.value
ORPHAN_RESULT: Final = RecordKind.ORPHAN_RESULT.value
BY_ID: Final = Match.ID.value
FIFO: Final = Match.FIFO.value
BY_NAME: Final = FifoBy.NAME.value
BY_ORDER: Final = FifoBy.ORDER.value
NO_CALL: Final = OrphanReason.NO_CALL.value
DUPLICATE_RESULT: Final = OrphanReason.DUPLICATE_RESULT.value
FIFO_CONFLICT: Final = OrphanReason.FIFO_CONFLICT.value
LATE_RESULT: Final = OrphanReason.LATE_RESULT.value
SUPERSEDED: Final = OrphanReason.SUPERSEDED.value
TIMEOUT: Final = OrphanReason.TIMEOUT.value
EVICTED: Final = OrphanReason.EVICTED.value
SHUTDOWN: Final = OrphanReason.SHUTDOWN.value
# How a closed id ended when it was not an orphan (engine-internal): paired by id, or by position
# (FIFO, with an id-less result), so a later result carrying the id is named for what it is.
PAIRED: Final = "paired"
PAIRED_FIFO: Final = "paired_fifo"

# The idle-conversation sweep runs when processing time moved at least this much since the last
# one: running it on every event cost ~3 % of the engine loop, and a TTL is minutes, not milliseconds.
IDLE_SWEEP_EVERY_MS = 1_000.0

# A conversation's timer heap is rebuilt from what it holds when stale entries dominate it.
_TIMERS_REBUILD_OVER = 32

NEG_INF = float("-inf")
INF = float("inf")
