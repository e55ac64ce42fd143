"""Types of the compiled core, `stream_pairer._native` (Rust, native/src/lib.rs, probes.rs).

Why a stub: the extension carries no type information, so without it every call across the boundary
is `Any` and mypy checks none of them. tests/core/test_native_stub.py keeps this file and the built
module in step (every name here exists there and the other way round, and the signatures agree)."""

from collections.abc import Callable, Mapping
from typing import Any, TypeAlias, TypedDict

from stream_pairer.core.model import OutputMeta, Source
from stream_pairer.core.pipeline import PipelineObserver

# One output record: its encoded bytes, or, once `set_routing` was called, (bytes, kind,
# conversation id, OutputMeta) so the sidecar routes and counts it without decoding it.
Routed: TypeAlias = tuple[bytes, str, str | None, OutputMeta]
Output: TypeAlias = bytes | Routed
# (consumed offset, block) of a held event; with the conversation's clock: `held_clocks`.
Position: TypeAlias = tuple[int | None, int]
ClockAt: TypeAlias = tuple[int | None, int, float]
# `set_fallback`'s callable: (raw, source, key, arrival_ms, encoded source, replay_blocks,
# replay_clocks) -> what `feed` returns.
Fallback: TypeAlias = Callable[
    [bytes, Source, str | None, float | None, bytes, frozenset[int] | None, Mapping[int, float] | None],
    list[Output],
]

class _Vocabulary(TypedDict):
    """What `vocabulary()` returns: the sets and constants of stream_pairer/core/vocab.json as
    this build of the core holds them."""

    sets: dict[str, list[str]]
    constants: dict[str, int | float | str | list[str]]

class Core:
    info_dirty: bool

    def __init__(
        self,
        *,
        call_timeout_ms: float,
        result_grace_ms: float,
        conversation_ttl_ms: float,
        max_conversations: int,
        max_calls_per_conversation: int,
        max_held_bytes: int,
        max_closed_ids_per_conversation: int,
        max_closed_ids: int,
        conversation_fields: list[str],
        max_record_bytes: int,
        held_cost: tuple[float, int],
        max_id_bytes: int = ...,
        raw_sides: tuple[bool, bool] = (True, True),
    ) -> None: ...
    def feed(
        self,
        raw: bytes,
        source: Source,
        *,
        key: str | None = None,
        arrival_ms: float | None = None,
        replay_blocks: frozenset[int] | None = None,
        replay_clocks: Mapping[int, float] | None = None,
    ) -> list[Output]: ...
    def set_fallback(self, fallback: Fallback) -> None: ...
    def set_routing(self, meta_cls: type[OutputMeta]) -> None: ...
    def set_observer(self, observer: PipelineObserver) -> None: ...
    def set_info(self, info: object) -> None: ...
    def take_evictions(self) -> list[tuple[int, str]]: ...
    def restore_clock(self, conversation_id: str, clock_ms: float) -> None: ...
    def end_restore(self) -> None: ...
    def oldest_held_offset(self) -> int | None: ...
    def held_positions(self) -> list[Position]: ...
    def held_clocks(self) -> list[ClockAt]: ...
    def mark_clocks(self) -> list[ClockAt]: ...
    def held_changes(self) -> tuple[list[Position], list[Position], list[ClockAt], list[Position]]: ...
    def process(
        self,
        is_call: bool,
        conversation_id: str,
        id: str | None,
        name: str | None,
        ts_ms: float | None,
        format: str,
        block: int,
        is_error: bool | None,
        size: int,
        payload: bytes,
        raw: bytes,
        source: bytes,
        arrival_ms: float | None = None,
        count: bool = True,
    ) -> list[Output]: ...
    def advance(self, now_ms: float) -> list[Output]: ...
    def flush(self, reason: str = ..., result_reason: str | None = None) -> list[Output]: ...
    def set_tagging(
        self,
        *,
        max_calls: int,
        max_ms: float,
        max_hashes: int,
        max_total: int,
        decode_arguments: Callable[[str], tuple[bytes | None, str | None]],
        schema_check: Callable[[str | None, bytes | None], list[tuple[str, str]]] | None = None,
    ) -> None: ...
    def mark_request(self, conversation_id: str, ts_ms: float | None = None) -> None: ...
    def memory(self) -> list[tuple[str, int, int, int]]: ...
    def discard(self) -> int: ...
    @property
    def crossings(self) -> dict[str, int]: ...
    @property
    def outcomes(self) -> dict[str, int]: ...
    @property
    def failures(self) -> dict[str, int]: ...
    @property
    def remembered_calls(self) -> int: ...
    @property
    def held_bytes(self) -> int: ...
    @property
    def open_calls(self) -> int: ...
    @property
    def pending_results(self) -> int: ...
    @property
    def open_conversations(self) -> int: ...
    @property
    def closed_ids(self) -> int: ...
    @property
    def held_count(self) -> int: ...
    @property
    def processing_ms(self) -> float: ...
    @property
    def records(self) -> int: ...
    @property
    def fast_records(self) -> int: ...
    @property
    def evictions(self) -> dict[str, int]: ...
    @property
    def outputs(self) -> dict[str, int]: ...
    @property
    def fallthrough(self) -> dict[str, int]: ...
    @property
    def events(self) -> dict[str, int]: ...
    @property
    def events_by_format(self) -> dict[str, int]: ...

def dumps_float(x: float) -> bytes: ...
def dumps_str(s: str) -> bytes: ...
def is_canonical(raw: bytes) -> bool: ...
def classify_result(
    content: bytes, is_error: bool | None = None
) -> tuple[str, str, str | None, str | None]: ...
def input_rejection(text: str) -> str | None: ...
def vocabulary() -> _Vocabulary: ...

# native/src/batch.rs: batches across the boundary (issue 23, item 4).
BlockResult: TypeAlias = tuple[bytes, bytes, bytes, tuple[int, int, int, int], int, int, int, int, int]

def feed_block(
    core: Core, block: bytes, label: str, lineno: int, key: str, limit: int, watch_session: bool
) -> BlockResult: ...
def feed_messages(
    core: Core, msgs: list[Any], topic: str, partition: int
) -> list[tuple[Routed, bytes | None]]: ...

# pair --state (native/src/pycarry.rs): the engine's memory besides its held events, as JSON bytes.
def export_memory(core: Core) -> bytes: ...
def import_memory(core: Core, data: bytes) -> list[Output]: ...

# readers.rs: a shape's compiled reader for the Python format layer (formats/compiled.py).
# (is_call, id, name, payload path, is_error, block path, format); a path: keys and indexes from
# the object read (`()`: the object itself; a payload path of None: an absent member, null).
Path: TypeAlias = tuple[str | int, ...]
FoundPart: TypeAlias = tuple[bool, str | None, str | None, Path | None, bool | None, Path, str]

def read_parts(
    shape: str, data: bytes, prefix: str, index: int | None = None
) -> list[FoundPart] | tuple[str, str]: ...
