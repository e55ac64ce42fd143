"""The one exception tree of stream-pairer, rooted at `StreamPairerError`, with aiokafka's `retriable` idea.

Why one root: a caller that wants "anything stream-pairer raised on purpose" catches one class, and
every reaction the code takes is read from the class and its `retriable` flag, never from a message.
Why a tree of our own for the Kafka sidecar: its loop decides between three reactions (retry the same
step after a backoff, rebuild a partition by replay, give the partition up) and should not have to
know the 90 aiokafka error classes to do so. `stream_pairer.adapters.kafka.errors.classify()` maps
whatever the client raised onto this tree once, at the boundary; everything above it reads
`err.retriable` and the class.

Pure on purpose (no imports from the package or from aiokafka): every layer may import it, which the
import-linter contracts in pyproject.toml enforce.
"""

from __future__ import annotations

from typing import ClassVar


class StreamPairerError(Exception):
    """Base class. `retriable`: the same operation may succeed later (the broker came back, a leader
    was elected); otherwise retrying it unchanged cannot help."""

    retriable: ClassVar[bool] = False


# ---------------------------------------------------------------------------------------------- input


class FormatError(StreamPairerError, ValueError):
    """A record that cannot be read. `reason` is a short stable code (a metric label value);
    `detail` is the human sentence that says exactly what was wrong. Still a ValueError, which is
    what it was before the tree had a root."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


class ToolSchemaError(StreamPairerError, ValueError):
    """A tool definition file that cannot be used. The message names the file and the tool."""


class MappingError(StreamPairerError, ValueError):
    """A `--map` program that cannot be used (does not compile). The message names the file and
    line; the commands print it as their one-line reason and exit 2."""


class NativeUnavailable(StreamPairerError, ImportError):
    """The compiled core (`stream_pairer._native`) is not built in this install (a source install
    without a Rust toolchain). It is required: the message says how to get it."""


class InputError(StreamPairerError):
    """An input file that cannot be opened or read: the one case where the job exits non-zero."""


class PartialInput(InputError):
    """An input that failed partway through the public API's `Pairer.feed_file` (a truncated gzip
    file, a file that became unreadable): `outputs` holds the records produced before the failure,
    which the pairer's counts already include, so a caller loses none of them."""

    def __init__(self, message: str, outputs: list[bytes]) -> None:
        super().__init__(message)
        self.outputs = outputs


class OutputRefused(InputError):
    """An output location that could destroy data (a directory holding an input, a symlink at an
    output path): refused before anything is written (`pair` exits 2)."""


class Stopped(StreamPairerError):
    """A stop signal (SIGTERM, SIGINT) arrived during a file-mode run: raised where the run is,
    so its `with` blocks remove the temporary outputs (adapters/outlock.py). `signum` gives the
    exit status, 128 + signum. Nothing in file mode catches `Exception` broadly, so it unwinds."""

    def __init__(self, signum: int, name: str) -> None:
        super().__init__(name)
        self.signum = signum


class EnvOptionError(StreamPairerError):
    """A STREAM_PAIRER_* environment variable holds a value its option refuses. Raised while the
    command line parser is built (before any argument is parsed, even for `--help`); the CLI prints
    the message (which names the variable, and never a sensitive option's value) as one line and
    exits 2, as for a bad flag."""


class AuditReadError(StreamPairerError):
    """Topics that cannot be read to their end (missing input topic, broker gone, timeout)."""


# ---------------------------------------------------------------------------------------- the sidecar


class SidecarError(StreamPairerError):
    """Base class of what the Kafka sidecar raises and reacts to."""


class ConfigError(SidecarError):
    """Bad options or topic layout (e.g. a missing input topic with creation disabled)."""


class AuthenticationFailed(ConfigError):
    """SASL authentication failed (wrong user or password, expired token) or the broker does not
    enable the mechanism. Retrying with the same credentials cannot help; a rotated Secret can."""


class TlsFailed(ConfigError):
    """TLS verification or handshake failed (untrusted certificate, hostname mismatch, a TLS client
    on a plaintext listener). Not "broker unreachable": the broker answered, we refused it."""


class AuthorizationFailed(ConfigError):
    """Authenticated, but the principal lacks an ACL (topic, group, cluster or transactional id)."""


class BrokerUnavailable(SidecarError):
    """The cluster cannot be reached or has no leader for what we need; wait and try again."""

    retriable = True


class DeliveryFailed(SidecarError):
    """Output records were not acknowledged (acks=all). The offsets they depend on are not committed;
    the partition is rebuilt by replay from its last commit, so nothing is lost."""

    retriable = True


class OutputTooLarge(SidecarError):
    """The broker refused an output as too large for its topic: the topic's limit changed since it
    was read (or even an output's identity alone is over it). Not retriable as is: the limits are
    read again and the partition is rebuilt after a backoff, so the outputs are fitted anew."""


class SessionEnded(SidecarError):
    """Control flow inside the sidecar: drop every partition and rejoin after a backoff (a fenced
    producer, a fatal consumer error, a stop that interrupts a broker call)."""


class CommitFailed(SidecarError):
    """An offset commit (or a transaction commit) failed. Outputs may be written already; the next
    commit or a replay covers it."""

    retriable = True


class Fenced(SidecarError):
    """Another producer with our transactional id took over (a newer owner of the partition, or a
    restarted instance). Retrying would fence it back and break exactly-once: give the partition up."""


class CheckpointError(SidecarError):
    """A replay checkpoint could not be decoded; the partition falls back to a plain replay."""
