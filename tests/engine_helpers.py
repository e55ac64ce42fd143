"""The pipeline the unit tests that build their own run on: the compiled core by default.

Outputs are encoded (bytes, or routed tuples); `decoded` turns them back into the records the
assertions read, and checks on the way that what the core sent beside each record (kind, key,
OutputMeta) is what the record itself says.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson
from hypothesis import strategies as st

from stream_pairer.core.formats import DEFAULT_CONFIG, FormatConfig
from stream_pairer.core.model import output_meta
from stream_pairer.core.pipeline import PipelineObserver, StreamPipeline
from stream_pairer.core.vocab import RawMode
from stream_pairer.stream.partition import Emitted, InputRecord, PartitionState
from tests.reference.engine import EngineConfig
from tests.reference.engines import EngineName, make_pipeline, resolve_engine

# The compiled core, the one production pipeline; `STREAM_PAIRER_TEST_ENGINE=python` (test-only)
# runs these tests against the reference model instead, to tell a rule from a port.
TEST_ENGINE: EngineName = resolve_engine(os.environ.get("STREAM_PAIRER_TEST_ENGINE", "native"), None)


def stream_pipeline(
    config: EngineConfig | None = None,
    format_config: FormatConfig = DEFAULT_CONFIG,
    observer: PipelineObserver | None = None,
    engine: EngineName | None = None,
) -> StreamPipeline:
    """A partition's pipeline (no tagger) on `engine`, by default the one the run is pointed at."""
    return make_pipeline(
        engine or TEST_ENGINE, config or EngineConfig(), format_config, observer=observer, routed=True
    )


def decoded(out: Iterable[Emitted]) -> list[Emitted]:
    """Emitted with record dicts; an encoded record's meta and key are checked against it."""
    result = []
    for e in out:
        if isinstance(e.record, bytes):
            rec: dict[str, Any] = orjson.loads(e.record)
            assert e.meta == output_meta(rec), (e.meta, rec)
            if rec["kind"] != "dead_letter":
                assert e.key == rec["conversation_id"].encode()
            result.append(Emitted(e.topic, e.key, rec, None))
        else:
            result.append(e)
    return result


class DecodedPartitionState(PartitionState):
    """PartitionState whose outputs come back as dicts whatever the engine (see `decoded`)."""

    def feed(self, records: Iterable[InputRecord], wall_ms: float) -> list[Emitted]:
        return decoded(super().feed(records, wall_ms))

    def tick(
        self, wall_ms: float, *, caught_up: bool, seen_end_ms: float | None = None,
        max_blind_ms: float = float("inf"),
    ) -> list[Emitted]:  # fmt: skip
        return decoded(
            super().tick(wall_ms, caught_up=caught_up, seen_end_ms=seen_end_ms, max_blind_ms=max_blind_ms)
        )

    def flush(self, reason: str) -> list[Emitted]:
        return decoded(super().flush(reason))


@dataclass(frozen=True)
class Msg:
    """A consumed Kafka message, as PartitionState reads it (the fields it uses)."""

    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: tuple[tuple[str, bytes], ...] = ()


class OneByOne:
    """A pipeline without its batch entry point (`feed_messages`): a PartitionState then feeds it
    record by record, the path the batch must match."""

    def __init__(self, pipeline: Any) -> None:
        self._p = pipeline

    def __getattr__(self, name: str) -> Any:
        if name == "feed_messages":
            raise AttributeError(name)
        return getattr(self._p, name)


class Recorder:
    """A PipelineObserver that keeps every call, in order (to compare with the summary, or one
    engine's observations with the other's)."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def observe_record_read(self, fmt: str | None, n_calls: int, n_results: int) -> None:
        self.calls.append(("read", fmt, n_calls, n_results))

    def observe_skipped(self, record_type: str | None = None) -> None:
        self.calls.append(("skipped", record_type))

    def observe_history_copies(self, n: int) -> None:
        self.calls.append(("copies", n))

    def observe_eviction(self, n: int, limit: str) -> None:
        self.calls.append(("evicted", n, limit))


def engine_config(draw: st.DrawFn, *, small_held_bytes: int) -> EngineConfig:
    """A random EngineConfig for the engine-against-engine tests: timeouts short and long, limits
    that evict often and never, every --raw mode (`small_held_bytes`: the tight byte limit)."""
    return EngineConfig(
        call_timeout_ms=float(draw(st.sampled_from([1_000, 8_000, 600_000]))),
        result_grace_ms=float(draw(st.sampled_from([0, 2_000, 30_000]))),
        conversation_ttl_ms=float(draw(st.sampled_from([1_000, 3_600_000]))),
        max_conversations=draw(st.sampled_from([1, 2, 5, 5])),
        max_calls_per_conversation=draw(st.sampled_from([1, 4, 8])),
        max_held_bytes=draw(st.sampled_from([small_held_bytes, 2**30, 2**30])),
        max_closed_ids_per_conversation=draw(st.integers(0, 4)),
        max_closed_ids=draw(st.integers(0, 6)),
        raw=draw(st.sampled_from(list(RawMode))),  # a custom tool call is told by its raw block
    )
