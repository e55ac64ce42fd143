"""stream-pairer: pairs AI tool calls with their results, in files or as a Kafka sidecar."""

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["EngineConfig", "FormatConfig", "Pairer", "TaggingConfig", "__version__"]

if TYPE_CHECKING:
    from stream_pairer.api import EngineConfig, FormatConfig, Pairer, TaggingConfig


def __getattr__(name: str) -> Any:
    """`Pairer` and its config types, imported on first use: `stream-pairer --help` and the
    commands that do not pair must not load the compiled core (and fail where it is not built)."""
    if name in ("EngineConfig", "FormatConfig", "Pairer", "TaggingConfig"):
        from stream_pairer import api  # noqa: PLC0415 - lazy on purpose

        return getattr(api, name)
    raise AttributeError(f"module 'stream_pairer' has no attribute {name!r}")
