"""Logs an operator can live with: one line per state change, the client's repeats rate-limited, JSON.

During a broker outage aiokafka logs every reconnect attempt of every client at ERROR (70-118 lines
a second were measured), while what an operator needs is one line saying the broker became
unreachable, with the counts, and one when it is back. So:

* `StateLog` logs a line only when a named state changes (`broker: unreachable -> reachable`), with
  the counts that matter attached as fields (`extra={"fields": ...}`, rendered by both formats);
* `RepeatFilter` passes the first of a run of identical client lines (same logger, level and
  message template) per window and folds the rest into a count reported on the next one passed;
* `--log-format json` prints one JSON object per line: `ts`, `level`, `logger`, `message`, then the
  line's fields by name.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Callable
from typing import Any, Final

import orjson

LOG_LEVELS: Final = ("DEBUG", "INFO", "WARNING", "ERROR")
LOG_FORMATS: Final = ("text", "json")
CLIENT_LOGGERS: Final = ("aiokafka", "kafka")
REPEAT_WINDOW_S: Final = 30.0

log = logging.getLogger("stream_pairer.kafka")


def log_level(value: str) -> str:
    """argparse type for --log-level: a known level name (any case), else a clear error (an unknown
    name used to become INFO silently)."""
    name = value.strip().upper()
    if name not in LOG_LEVELS:
        raise ValueError(f"unknown log level {value!r}: use one of {', '.join(LOG_LEVELS)}")
    return name


class JsonFormatter(logging.Formatter):
    """One JSON object per line; the fields of `extra={"fields": {...}}` become top-level keys."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            for k, v in fields.items():
                out.setdefault(str(k), v)
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(out, default=str).decode()


class TextFormatter(logging.Formatter):
    """The classic line, with the record's fields appended as `key=value`."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict) and fields:
            line += " " + " ".join(f"{k}={v}" for k, v in fields.items())
        return line


class RepeatFilter(logging.Filter):
    """Let the first line of a kind through per window; count the others and say how many were
    folded on the next line of that kind that passes."""

    def __init__(
        self,
        window_s: float = REPEAT_WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
        prefixes: tuple[str, ...] = CLIENT_LOGGERS,
    ) -> None:
        super().__init__()
        self.prefixes = prefixes  # only these loggers (and their children) are rate-limited
        self.window_s = window_s
        self.clock = clock
        self._seen: dict[tuple[str, int, str], tuple[float, int]] = {}  # kind -> (passed at, folded)
        self.suppressed = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if not any(record.name == p or record.name.startswith(p + ".") for p in self.prefixes):
            return True
        kind = (record.name, record.levelno, str(record.msg))
        now = self.clock()
        passed_at, folded = self._seen.get(kind, (float("-inf"), 0))
        if now - passed_at < self.window_s:
            self._seen[kind] = (passed_at, folded + 1)
            self.suppressed += 1
            return False
        if folded:
            record.msg = (
                f"{record.msg} [{folded} similar line(s) in the last {now - passed_at:.0f}s not shown]"
            )
        if record.exc_info and record.levelno > logging.DEBUG:
            # The client's tracebacks (one per reconnect) say nothing an operator can act on; the
            # exception's type and text stay on the line. --log-level DEBUG keeps them whole.
            exc = record.exc_info[1]
            if exc is not None:
                record.msg = f"{record.msg} ({type(exc).__name__}: {exc})"
            record.exc_info = None
            record.exc_text = None
        self._seen[kind] = (now, 0)
        if len(self._seen) > 1000:  # bounded: forget the oldest kinds
            for key in sorted(self._seen, key=lambda k: self._seen[k][0])[:500]:
                del self._seen[key]
        return True


class StateLog:
    """One log line per change of a named state, with counts: `change("broker", "unreachable", ...)`
    logs when the broker's state was something else (or unknown) and is silent otherwise."""

    def __init__(self, logger: logging.Logger = log) -> None:
        self.logger = logger
        self.states: dict[str, str] = {}

    def change(
        self, what: str, state: str, message: str, *, level: int = logging.INFO, **fields: Any
    ) -> bool:
        before = self.states.get(what)
        if before == state:
            return False
        self.states[what] = state
        self.logger.log(
            level, "%s: %s", what, message,
            extra={"fields": {"state": state, "previous": before or "unknown", "what": what, **fields}},
        )  # fmt: skip
        return True

    def forget(self, what: str) -> None:
        self.states.pop(what, None)


def asyncio_exception_handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """One line, no traceback, for what asyncio reports on its own: "Unclosed AIOKafkaProducer" and
    "Future exception was never retrieved" from client internals abandoned by a shutdown that had
    to give up on an unreachable broker (the stop already said what it could not commit)."""
    exc = context.get("exception")
    detail = f" ({type(exc).__name__}: {exc})" if exc is not None else ""
    logging.getLogger("stream_pairer.asyncio").info("%s%s", context.get("message", "asyncio error"), detail)


def setup_logging(level: str, fmt: str = "text") -> None:
    """Root handler on stderr in the chosen format; the Kafka client's own lines kept to warnings
    and above and rate-limited (our state lines say what happened, with the error)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    # On the handler, not the loggers: a logger's filter does not see its children's records
    # (aiokafka.conn, aiokafka.consumer.group_coordinator, ...), a handler's does.
    handler.addFilter(RepeatFilter())
    root.addHandler(handler)
    root.setLevel(getattr(logging, log_level(level)))
    for name in CLIENT_LOGGERS:
        logging.getLogger(name).setLevel(max(logging.WARNING, root.level))
