"""A pipeline of either implementation, for tests that run the same input through both: the compiled
core (`native`, the one production pipeline) and the reference model (`python`, the oracle).

Why an adapter: the production code receives one output type from the core (encoded bytes, or
`RoutedOutput` tuples when routed); the reference model makes record dicts. `make_pipeline("python",
...)` wraps the reference so that it hands out that same type, so a test can drive a PartitionState
or the file writer with either and compare what comes out.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final, Literal

import orjson
import pytest

from stream_pairer.adapters.files import Oversize, read_line
from stream_pairer.core.config import EngineConfig, TaggingConfig
from stream_pairer.core.formats import DEFAULT_CONFIG, FormatConfig
from stream_pairer.core.model import output_meta
from stream_pairer.core.native import BLOCK_DONE, BLOCK_OVERSIZE, BLOCK_SESSION, BlockOut, NativePipeline
from stream_pairer.core.pipeline import PipelineObserver
from stream_pairer.core.vocab import Record
from tests.reference.engine import Engine, Tagger
from tests.reference.pipeline import Pipeline
from tests.reference.tagging import FailureTagger

EngineName = Literal["native", "python"]
ENGINE_CHOICES: Final = ("native", "python")


def resolve_engine(choice: str, tagger: Any = None) -> EngineName:
    """`native` (the default of the test helpers) or `python` (the reference model)."""
    del tagger
    if choice in ("auto", ""):
        return "native"
    if choice not in ENGINE_CHOICES:
        raise ValueError(f"unknown engine {choice!r}; expected one of {', '.join(ENGINE_CHOICES)}")
    return "native" if choice == "native" else "python"


def encode(rec: Record, routed: bool) -> Any:
    """A reference record in the core's output type."""
    data = orjson.dumps(rec)
    if routed:
        return (data, rec["kind"], rec.get("conversation_id"), output_meta(rec))
    return data


class EncodedReference(Pipeline):
    """The reference pipeline handing out what the core hands out (see the module docstring)."""

    reads_blocks = True  # its `feed_block` feeds each line through `feed`, --map included

    def __init__(self, *args: Any, routed: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.routed = routed

    def _enc(self, recs: list[Record]) -> list[Any]:
        return [encode(r, self.routed) for r in recs]

    def feed(self, *args: Any, **kwargs: Any) -> list[Any]:  # type: ignore[override]
        return self._enc(super().feed(*args, **kwargs))

    def reject(self, *args: Any, **kwargs: Any) -> list[Any]:  # type: ignore[override]
        return self._enc(super().reject(*args, **kwargs))

    def advance(self, now_ms: float) -> list[Any]:  # type: ignore[override]
        return self._enc(super().advance(now_ms))

    def flush(self, *args: Any, **kwargs: Any) -> list[Any]:  # type: ignore[override]
        return self._enc(super().flush(*args, **kwargs))

    def count_dead_letter(self, rec: Record) -> list[Any]:  # type: ignore[override]
        super().count_dead_letter(rec)
        return self._enc([rec])

    def feed_block(
        self, block: bytes, label: str, lineno: int, key: str, limit: int, watch_session: bool
    ) -> BlockOut:
        """The reference of the core's `feed_block` (native/src/batch.rs): each whole line read
        as `read_line` reads it, fed, its outputs grouped per output file; stops before a line
        over the limit and after a record that announced a session id."""
        files: list[list[bytes]] = [[], [], []]
        sizes = [0, 0, 0, 0]
        at, fed, size, status = 0, 0, 0, BLOCK_DONE
        kinds = ("pair", "orphan_call", "orphan_result", "dead_letter")
        while (nl := block.find(b"\n", at)) >= 0:
            rec = read_line(block[at:nl], limit)
            if isinstance(rec, Oversize):
                status = BLOCK_OVERSIZE
                break
            at = nl + 1
            lineno += 1
            if rec is None:
                continue
            size += len(rec)
            fed += 1
            for out in self.feed(rec, {"file": label, "line": lineno}, key=key):
                kind = kinds.index(orjson.loads(out)["kind"])
                sizes[kind] += len(out)
                files[(0, 1, 1, 2)[kind]].append(out + b"\n")
            if watch_session and self.info.session_id is not None:
                status = BLOCK_SESSION
                break
        pairs, orphans, dead = (b"".join(f) for f in files)
        return BlockOut(
            pairs, orphans, dead, (sizes[0], sizes[1], sizes[2], sizes[3]), at, lineno, size, fed, status
        )

    @property
    def crossings(self) -> dict[str, int]:
        """Loop-cap crossings of the reference tagger, as `NativePipeline.crossings` reports them."""
        return dict(getattr(self.engine.tagger, "crossings", {}))


def reference_tagger(tagging: Any) -> Any:
    """The reference model's tagger for the settings the CLI builds (a `TaggingConfig`); a
    reference tagger or None is passed through."""
    if not isinstance(tagging, TaggingConfig):
        return tagging
    return FailureTagger(
        tagging.schemas,
        max_calls_per_conversation=tagging.max_calls,
        max_conversation_ms=tagging.max_ms,
        max_hashes_per_conversation=tagging.max_hashes,
        max_hashes_total=tagging.max_total,
    )


def reference_pipeline(
    config: EngineConfig | None = None,
    format_config: FormatConfig = DEFAULT_CONFIG,
    *,
    tagger: Any = None,
    observer: PipelineObserver | None = None,
    routed: bool = False,
) -> EncodedReference:
    """`NativePipeline`'s constructor, building the reference model instead: monkeypatched over it,
    a whole command (`pair`) runs on the oracle."""
    engine = Engine(config or EngineConfig(), tagger=reference_tagger(tagger))
    return EncodedReference(engine, format_config, observer=observer, routed=routed)


def make_pipeline(
    engine: EngineName,
    config: EngineConfig,
    format_config: FormatConfig = DEFAULT_CONFIG,
    *,
    tagger: Tagger | None = None,
    observer: PipelineObserver | None = None,
    routed: bool = False,
) -> Any:
    """A pipeline of `engine` whose outputs are the core's output type either way."""
    if engine == "native":
        return NativePipeline(config, format_config, tagger=tagger, observer=observer, routed=routed)  # type: ignore[arg-type]
    return reference_pipeline(config, format_config, tagger=tagger, observer=observer, routed=routed)


@contextmanager
def pair_on(engine: str) -> Iterator[None]:
    """Commands run inside on the compiled core (`native`, as shipped) or with the reference model
    in its place (`python`): what `--engine python` did before the model left the package."""
    from stream_pairer import api  # noqa: PLC0415 - the face the commands build their core through

    with pytest.MonkeyPatch.context() as mp:
        if engine == "python":
            mp.setattr(api, "NativePipeline", reference_pipeline)
        yield
