"""What the compiled core is configured with: pairing limits and timers, held-memory costs, and
the failure tagger's settings.

Why a module of its own: the settings are what the CLI, the sidecar, the public API and the
reference model (tests/reference) share, and none of them needs an engine to read them. The
compiled core (core/native.py) takes them as they are; the rules they parameterise live once, in
the core (native/src), and as a reference model under tests/.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from stream_pairer.core.vocab import (
    DEFAULT_RAW_MODE,
    HELD_BYTES_PER_EVENT,
    HELD_BYTES_PER_INPUT_BYTE,
    RawMode,
)

if TYPE_CHECKING:  # a registry is built (loading jsonschema_rs) only when --tool-schemas asks for one
    from stream_pairer.core.toolschemas import ToolSchemaRegistry

# HELD_BYTES_PER_INPUT_BYTE / HELD_BYTES_PER_EVENT (what one held event costs in memory) are the
# vocabulary's (core/vocab.json, shared with the compiled core): defined there, with why.


def held_cost(size: int) -> int:
    """Estimated bytes of memory held for an event of `size` input bytes. A pure function of the
    size, so charging and releasing an event always move `held_bytes` by the same amount."""
    return int(size * HELD_BYTES_PER_INPUT_BYTE) + HELD_BYTES_PER_EVENT


@dataclass(frozen=True, slots=True)
class EngineConfig:
    # Both timers count twice: in the event time of the held event's conversation, and in processing
    # time (see the module docstring); whichever expires first emits the event.
    call_timeout_ms: float = 10 * 60_000.0
    result_grace_ms: float = 30_000.0
    # Idle conversation state (closed ids, tagging counters) is kept this long (processing time)
    # after its last event, so that a duplicate result or a repeated call is still recognised; the
    # LRU limit bounds it too, and alone in file mode.
    conversation_ttl_ms: float = 60 * 60_000.0
    max_conversations: int = 100_000
    max_calls_per_conversation: int = 1_000
    # Estimated bytes (see `held_cost`), not raw input bytes.
    max_held_bytes: int = 256 * 1024 * 1024
    max_closed_ids_per_conversation: int = 256
    # Closed ids remembered in all conversations together: the per-conversation limit alone let
    # them grow to max_conversations x 256 entries (~160 B each: gigabytes at the defaults), the
    # RSS creep of BENCHMARKS.md part 4. ~0.2 KB each with the engine-wide index.
    max_closed_ids: int = 100_000
    # Which output sides carry `raw` (the original block): vocab.RawMode says what each mode keeps.
    # Output shape only: pairing, limits and held-bytes accounting are the same in every mode.
    raw: RawMode = DEFAULT_RAW_MODE

    def __post_init__(self) -> None:
        object.__setattr__(self, "raw", RawMode(self.raw))  # "call" given as a plain str is checked too
        for name in ("max_conversations", "max_calls_per_conversation", "max_held_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if self.max_closed_ids < 0 or self.max_closed_ids_per_conversation < 0:
            raise ValueError("max_closed_ids and max_closed_ids_per_conversation must be >= 0")
        if self.call_timeout_ms <= 0 or self.result_grace_ms < 0:
            raise ValueError("call_timeout_ms must be > 0 and result_grace_ms >= 0")


# Defaults of the tagger's limits (the command-line options read them from here).
MAX_CALLS_PER_CONVERSATION: Final = 12  # the article's loop brake: calls before `termination`
MAX_CONVERSATION_MS: Final = 10 * 60_000.0  # and wall time from a conversation's first call
MAX_HASHES_PER_CONVERSATION: Final = 256  # repeat-check memory per conversation
MAX_HASHES_TOTAL: Final = 200_000  # and per engine (partition)


@dataclass(frozen=True, slots=True)
class TaggingConfig:
    """The failure tagger's settings (docs/FAILURES.md): the loop caps, counted per request (0
    disables one), the repeat check's memory per conversation and per partition, and the
    `--tool-schemas` registry (None: no argument check). The core keeps the tagger's state; this
    is only what it is told at start, so a partition's tagging depends on its own input alone."""

    schemas: ToolSchemaRegistry | None = None
    max_calls: int = MAX_CALLS_PER_CONVERSATION
    max_ms: float = MAX_CONVERSATION_MS
    max_hashes: int = MAX_HASHES_PER_CONVERSATION
    max_total: int = MAX_HASHES_TOTAL

    def __post_init__(self) -> None:
        if self.max_calls < 0 or self.max_ms < 0 or self.max_hashes < 1 or self.max_total < 1:
            raise ValueError("tagger limits must be >= 0 (hashes >= 1)")
