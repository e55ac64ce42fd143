"""Which pairing engine the unit tests that build their own pipeline run on.

`STREAM_PAIRER_ENGINE=native python3 -m pytest ...` runs them against the compiled core (the CLI
and SidecarConfig read the same variable); unset, they keep the Python engine, the specification.
Outputs of the compiled core are encoded bytes; `decoded` turns them back into the records the
assertions read, and checks on the way that what the core sent beside each record (kind, key,
OutputMeta) is what the record itself says.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import orjson

from stream_pairer.core.engine import EngineConfig
from stream_pairer.core.engines import EngineName, make_pipeline, resolve_engine
from stream_pairer.core.formats import DEFAULT_CONFIG, FormatConfig
from stream_pairer.core.model import output_meta
from stream_pairer.core.pipeline import PipelineObserver, StreamPipeline
from stream_pairer.stream.partition import Emitted, InputRecord, PartitionState

TEST_ENGINE: EngineName = resolve_engine(os.environ.get("STREAM_PAIRER_ENGINE", "python"), None)


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
