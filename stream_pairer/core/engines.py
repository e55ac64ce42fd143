"""Which pairing engine runs: the compiled core (`native`) or the Python engine (`python`).

Why a choice at all: the compiled core is the fast one, the Python engine the executable
specification, and both give the same output records (the differential tests). `auto` takes the
compiled core when it is built and runs this configuration (`native.supports(tagger)`: no tagger,
or the built-in `FailureTagger`, which the core runs itself), else the Python engine; `native`
insists, and a configuration the core cannot run is refused at start (`NativeUnavailable`, one
line), never silently run in Python.
"""

from __future__ import annotations

from typing import Final, Literal

from stream_pairer.core import native
from stream_pairer.core.engine import Engine, EngineConfig, Tagger
from stream_pairer.core.formats import DEFAULT_CONFIG, FormatConfig
from stream_pairer.core.native import NativePipeline
from stream_pairer.core.pipeline import Pipeline, PipelineObserver
from stream_pairer.errors import NativeUnavailable

EngineName = Literal["native", "python"]
ENGINE_CHOICES: Final = ("auto", "native", "python")


def resolve_engine(choice: str, tagger: Tagger | None) -> EngineName:
    """The engine `choice` (auto, native, python) means for this tagger; raises NativeUnavailable
    (with the reason) when `native` is asked for and cannot run."""
    if choice == "python":
        return "python"
    if choice not in ENGINE_CHOICES:
        raise ValueError(f"unknown engine {choice!r}; expected one of {', '.join(ENGINE_CHOICES)}")
    if native.supports(tagger):
        return "native"
    if choice == "auto":
        return "python"
    if not native.available():
        raise NativeUnavailable(
            "--engine native: the compiled core (stream_pairer._native) is not built in this install "
            "(see README, Compiled core)"
        )
    raise NativeUnavailable(
        f"--engine native: the compiled core runs only the built-in failure tagger (FailureTagger), "
        f"not {type(tagger).__name__} (use --engine auto or python)"
    )


def make_pipeline(
    engine: EngineName,
    config: EngineConfig,
    format_config: FormatConfig = DEFAULT_CONFIG,
    *,
    tagger: Tagger | None = None,
    observer: PipelineObserver | None = None,
    routed: bool = False,
) -> Pipeline | NativePipeline:
    """A pipeline of the resolved engine. `routed` (the sidecar): the compiled core returns each
    output with its kind, key and OutputMeta (see StreamPipeline); the Python engine's dicts carry
    all of that already."""
    if engine == "native":
        return NativePipeline(config, format_config, tagger=tagger, observer=observer, routed=routed)
    return Pipeline(Engine(config, tagger=tagger), format_config, observer=observer)
