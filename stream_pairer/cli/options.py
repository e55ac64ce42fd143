"""Command-line options shared by every command that pairs (file mode and the Kafka sidecar).

Every option can also come from an environment variable `STREAM_PAIRER_<OPTION>` (dashes become
underscores, upper case), so the same image runs as a sidecar configured only by its Pod spec.
An explicit flag wins over the environment; the environment wins over the default.
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from stream_pairer.core import config as core_config
from stream_pairer.core.config import EngineConfig, TaggingConfig
from stream_pairer.core.formats import DEFAULT_CONFIG as DEFAULT_FORMAT_CONFIG
from stream_pairer.core.formats import FormatConfig
from stream_pairer.core.vocab import RawMode
from stream_pairer.errors import EnvOptionError

ENV_PREFIX = "STREAM_PAIRER_"


def env_name(option: str) -> str:
    return ENV_PREFIX + option.lstrip("-").replace("-", "_").upper()


def add_option(
    parser: argparse.ArgumentParser | Any,
    option: str,
    *,
    type: Callable[[str], Any] = str,
    default: Any = None,
    help: str,
    short: str | None = None,
    sensitive: bool = False,
    **kwargs: Any,
) -> None:
    """Add `--option` (and its `short` alias) whose default is read from its environment variable
    when set.

    `sensitive`: the environment value is never echoed (neither as the default `--help` shows nor
    in the error for an invalid value), because `--help` output and start-up errors end up in
    terminals, CI logs and bug reports. Secrets themselves never come from a flag value at all
    (see adapters/kafka/security.py); this covers options whose values may embed one."""
    env = env_name(option)
    raw = os.environ.get(env)
    if raw is not None:
        default = _env_default(env, raw, type, kwargs, sensitive=sensitive)
    if sensitive and raw is not None:
        shown = f" (set from {env})"
    else:
        shown = "" if default is None else f" (default: {default})"
    names = (short, option) if short else (option,)
    if kwargs.get("action") == "store_true":  # argparse's store_true takes no type
        parser.add_argument(*names, default=default, help=f"{help} [env {env}]", **kwargs)
        return
    parser.add_argument(*names, type=type, default=default, help=f"{help}{shown} [env {env}]", **kwargs)


_TRUE: Final = frozenset({"1", "true", "yes", "on"})
_FALSE: Final = frozenset({"", "0", "false", "no", "off"})


def _env_default(
    env: str, raw: str, type: Callable[[str], Any], kwargs: dict[str, Any], *, sensitive: bool
) -> Any:
    """The value of an option's environment variable, checked as a flag value would be (its type,
    its choices; a switch's yes/no). Raises EnvOptionError naming the variable; the value is echoed
    only when the option is not `sensitive`, and the reason never for a sensitive one (a parser's
    message may quote the value)."""
    action = kwargs.get("action")

    def refuse(reason: str) -> EnvOptionError:
        if sensitive:
            return EnvOptionError(f"stream-pairer: {env} is not valid (value not shown)")
        return EnvOptionError(f"stream-pairer: {env}={raw!r} is not valid: {reason}")

    def convert(text: str) -> Any:
        try:
            value = type(text)
        except (TypeError, ValueError, argparse.ArgumentTypeError) as err:
            raise refuse(str(err)) from None
        choices = kwargs.get("choices")
        if choices is not None and value not in choices:
            raise refuse(f"expected one of {', '.join(map(str, choices))}")
        return value

    if action == "store_true":
        word = raw.strip().lower()
        if word not in _TRUE | _FALSE:
            raise refuse("expected 1/true/yes/on or 0/false/no/off")
        return word in _TRUE
    if action == "append":
        return [convert(v) for v in raw.split(",") if v]
    return convert(raw)


# Argument types. argparse names the function in its message when one raises ValueError
# ("invalid positive_float value"), so each raises ArgumentTypeError with a sentence instead.


# Every float option is a number of seconds, multiplied into integer milliseconds (Kafka client
# settings, engine deadlines). NaN compares false with everything, so a NaN timeout never fires
# (--call-timeout nan silently disabled timeouts) and inf overflows the conversion: both are
# refused, and so is anything past MAX_SECONDS (about 31 years, beyond any useful timeout), which
# keeps every conversion finite.
MAX_SECONDS: Final = 1e9


def _number(value: str, kind: type[int] | type[float]) -> Any:
    try:
        number = kind(value)
    except ValueError:
        what = "a whole number" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"expected {what}, got {value!r}") from None
    if kind is float:
        if not math.isfinite(number):
            raise argparse.ArgumentTypeError(f"expected a finite number, got {value!r}")
        if abs(number) > MAX_SECONDS:
            raise argparse.ArgumentTypeError(f"must be at most {MAX_SECONDS:g} seconds, got {value}")
    return number


def positive_float(value: str) -> float:
    f = _number(value, float)
    if not f > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return float(f)


def non_negative_float(value: str) -> float:
    f = _number(value, float)
    if not f >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return float(f)


def positive_int(value: str) -> int:
    i = _number(value, int)
    if i < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return int(i)


def non_negative_int(value: str) -> int:
    i = _number(value, int)
    if i < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return int(i)


def dotted_path(value: str) -> str:
    """A field path such as `metadata.session_id`: an empty path (or an empty part, `a..b`) names
    no field, so every record would miss it and be dead-lettered; refused instead."""
    if not value.strip() or any(not part.strip() for part in value.split(".")):
        raise argparse.ArgumentTypeError(f"expected a field name or dotted path (a.b.c), got {value!r}")
    return value


def add_engine_arguments(parser: argparse.ArgumentParser) -> None:
    d = EngineConfig()
    g = parser.add_argument_group("pairing and state limits")
    add_option(
        g,
        "--call-timeout",
        type=positive_float,
        default=d.call_timeout_ms / 1000,
        help="seconds a call waits for its result before it is an orphan (timeout): event time of its own "
        "conversation (newest timestamp seen in it), or, in the sidecar, processing time of its partition "
        "(wall time while caught up), whichever passes first",
    )
    add_option(
        g,
        "--result-grace",
        type=non_negative_float,
        default=d.result_grace_ms / 1000,
        help="seconds a result with an unknown id, or an id-less result with no call to pair with yet, "
        "waits for its call to arrive late (measured like --call-timeout)",
    )
    add_option(
        g,
        "--conversation-ttl",
        type=positive_float,
        default=d.conversation_ttl_ms / 1000,
        help="seconds an idle conversation's memory (closed ids, counters) is kept (sidecar: processing "
        "time since its last event; file mode: bounded by --max-conversations and --max-closed-ids only)",
    )
    add_option(
        g,
        "--max-conversations",
        type=positive_int,
        default=d.max_conversations,
        help="conversations held at once, per input partition; the least recently used is evicted past it",
    )
    add_option(
        g,
        "--max-calls-per-conversation",
        type=positive_int,
        default=d.max_calls_per_conversation,
        help="open calls held per conversation; the oldest is evicted past it",
    )
    add_option(
        g,
        "--max-held-bytes",
        type=positive_int,
        default=d.max_held_bytes,
        help="estimated bytes of memory held by open calls and pending results (about 5x their "
        "raw size, see config.held_cost), per input partition; the oldest held event is evicted past it",
    )
    add_option(
        g,
        "--max-closed-ids",
        type=non_negative_int,
        default=d.max_closed_ids,
        help="closed call ids remembered in all conversations, per input partition, to tell a duplicate "
        "or late result from an unknown id; the oldest is forgotten past it (a later result for a "
        "forgotten id waits --result-grace as an unknown id, then is an orphan with reason no_call)",
    )
    f = parser.add_argument_group("input records")
    add_option(
        f,
        "--conversation-field",
        action="append",
        type=dotted_path,
        default=None,
        help="dotted path of the conversation id in a record; repeat to try several in order "
        f"(default: {', '.join(DEFAULT_FORMAT_CONFIG.conversation_fields)})",
    )
    add_map_option(f)
    add_option(
        f,
        "--max-record-bytes",
        type=positive_int,
        default=DEFAULT_FORMAT_CONFIG.max_record_bytes,
        help="a larger record is dead-lettered (too_large); a longer input line is never read whole",
    )
    add_option(
        f,
        "--max-history-ids",
        type=positive_int,
        default=DEFAULT_FORMAT_CONFIG.max_history_ids,
        help="per conversation: call/result ids remembered to count history re-sent by wire logs and "
        "OTel spans once (the oldest is forgotten past it; a later copy of a forgotten id is then "
        "an orphan, superseded or duplicate_result)",
    )
    add_option(
        f,
        "--max-history-conversations",
        type=positive_int,
        default=DEFAULT_FORMAT_CONFIG.max_history_conversations,
        help="conversations whose history ids are remembered (least recently used forgotten first)",
    )
    add_option(
        g,
        "--max-id-bytes",
        type=positive_int,
        default=DEFAULT_FORMAT_CONFIG.max_id_bytes,
        help="a record whose conversation id, call id or tool name is longer is dead-lettered "
        "(too_large): ids are kept in memory after their events are emitted",
    )
    o = parser.add_argument_group("output records")
    add_option(
        o,
        "--raw",
        choices=[m.value for m in RawMode],
        default=d.raw.value,
        help="which sides of pairs and orphans carry `raw`, the original block: all (every side), "
        "call (call sides only: results, the large side, keep their content once), omit (none; "
        "`source` still points at the input record). Dead letters always keep theirs. Output bytes "
        "per input byte: README, Output size",
    )
    t = parser.add_argument_group("failure tagging")
    add_option(
        t,
        "--tool-schemas",
        default=None,
        help="JSON file or directory of tool definitions (Anthropic input_schema / OpenAI parameters)",
    )
    add_option(
        t,
        "--max-tool-calls",
        type=non_negative_int,
        default=core_config.MAX_CALLS_PER_CONVERSATION,
        help="calls per request (from a user prompt, or the format's turn marker, to the next); the "
        "call that crosses it is tagged termination; 0 disables the cap",
    )
    add_option(
        t,
        "--max-conversation-seconds",
        type=non_negative_float,
        default=core_config.MAX_CONVERSATION_MS / 1000,
        help="seconds of event time (record timestamps) from the start of a request (its prompt, else "
        "its first call); the first call past it is tagged termination; 0 disables the cap",
    )
    add_option(
        t,
        "--max-repeat-hashes",
        type=positive_int,
        default=core_config.MAX_HASHES_TOTAL,
        help="per partition: remembered (tool, arguments) hashes of the repeat check across all "
        "conversations, oldest forgotten first (~0.2 KB each)",
    )


def engine_config_from_args(args: argparse.Namespace) -> EngineConfig:
    return EngineConfig(
        call_timeout_ms=args.call_timeout * 1000,
        result_grace_ms=args.result_grace * 1000,
        conversation_ttl_ms=args.conversation_ttl * 1000,
        max_conversations=args.max_conversations,
        max_calls_per_conversation=args.max_calls_per_conversation,
        max_held_bytes=args.max_held_bytes,
        max_closed_ids=args.max_closed_ids,
        raw=RawMode(args.raw),
    )


def format_config_from_args(args: argparse.Namespace) -> FormatConfig:
    fields = (
        tuple(args.conversation_field)
        if args.conversation_field
        else DEFAULT_FORMAT_CONFIG.conversation_fields
    )
    return FormatConfig(
        conversation_fields=fields,
        max_record_bytes=args.max_record_bytes,
        max_history_ids=args.max_history_ids,
        max_history_conversations=args.max_history_conversations,
        max_id_bytes=args.max_id_bytes,
        mapping=mapping_from_args(args),
    )


def add_map_option(parser: argparse.ArgumentParser | Any) -> None:
    """`--map FILE` (pair, run, audit: the audit must read records as the run did)."""
    add_option(
        parser,
        "--map",
        help="jq program that turns each input record into zero or more canonical events (README, "
        "Mappings); it reads every record in place of the built-in readers; events are format `mapped`",
    )


def mapping_from_args(args: argparse.Namespace) -> Any:
    """The compiled `--map` program, or None. Raises MappingError (a ValueError: the commands print
    its one line and exit 2) when it does not compile, OSError when it cannot be read."""
    path = getattr(args, "map", None)
    if not path:
        return None
    from stream_pairer.core.mapping import compile_mapping  # noqa: PLC0415 - jq only for --map

    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise OSError(
            f"--map {path}: cannot read the mapping: {getattr(err, 'strerror', None) or err}"
        ) from None
    return compile_mapping(text, path)


def tagger_from_args(args: argparse.Namespace) -> TaggingConfig:
    """The failure tagger's settings from the tagging options."""
    schemas = None
    if args.tool_schemas:  # jsonschema_rs is loaded only for a run that validates arguments
        from stream_pairer.core.toolschemas import ToolSchemaRegistry  # noqa: PLC0415

        schemas = ToolSchemaRegistry.load(args.tool_schemas)
    return TaggingConfig(
        schemas,
        max_calls=args.max_tool_calls,
        max_ms=args.max_conversation_seconds * 1000,
        max_total=args.max_repeat_hashes,
    )
