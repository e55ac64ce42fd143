"""One exception tree for the Kafka sidecar, with a `retriable` flag like aiokafka's own errors.

Why a tree of our own: the sidecar's loop decides between three reactions (retry the same step after
a backoff, rebuild a partition by replay, give the partition up) and should not have to know the 90
aiokafka error classes to do so. `classify()` maps whatever the client raised onto this tree once,
at the boundary; everything above it reads `err.retriable` and the class.
"""

from __future__ import annotations

import ssl
from typing import ClassVar


class SidecarError(Exception):
    """Base class. `retriable`: the same operation may succeed later (the broker came back, a leader
    was elected); otherwise retrying it unchanged cannot help."""

    retriable: ClassVar[bool] = False


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


class CommitFailed(SidecarError):
    """An offset commit (or a transaction commit) failed. Outputs may be written already; the next
    commit or a replay covers it."""

    retriable = True


class Fenced(SidecarError):
    """Another producer with our transactional id took over (a newer owner of the partition, or a
    restarted instance). Retrying would fence it back and break exactly-once: give the partition up."""


class CheckpointError(SidecarError):
    """A replay checkpoint could not be decoded; the partition falls back to a plain replay."""


def classify(err: BaseException, *, during: str) -> SidecarError:
    """Map an aiokafka (or OS) error raised `during` an operation onto the sidecar's tree."""
    from aiokafka import errors as ak  # noqa: PLC0415 - keep this module importable without aiokafka

    if isinstance(err, SidecarError):
        return err
    text = str(err)
    name = type(err).__name__
    detail = f"{during}: {text}" if text.startswith(name) else f"{during}: {name}: {text}"
    if isinstance(err, ak.ProducerFenced | ak.InvalidProducerEpoch | ak.TransactionalIdAuthorizationFailed):
        return Fenced(detail)
    if isinstance(
        err,
        ak.SaslAuthenticationFailed
        | ak.AuthenticationFailedError
        | ak.UnsupportedSaslMechanismError
        | ak.IllegalSaslStateError
        | ak.AuthenticationMethodNotSupported,
    ):
        return AuthenticationFailed(f"authentication failed: {detail}")
    if isinstance(err, ssl.SSLCertVerificationError):
        return TlsFailed(f"TLS verify failed: {during}: {err.verify_message or err.reason}")
    if isinstance(err, ssl.SSLError):
        return TlsFailed(f"TLS handshake failed: {detail}")
    if isinstance(err, ak.CommitFailedError | ak.RebalanceInProgressError | ak.IllegalGenerationError):
        return CommitFailed(detail)
    if isinstance(err, ak.KafkaConnectionError | ak.NoBrokersAvailable | ak.KafkaTimeoutError | OSError):
        return BrokerUnavailable(detail)
    if during.startswith("deliver"):
        return DeliveryFailed(detail)
    if during.startswith("commit"):
        return CommitFailed(detail)
    if isinstance(
        err,
        ak.TopicAuthorizationFailedError
        | ak.GroupAuthorizationFailedError
        | ak.ClusterAuthorizationFailedError,
    ):
        return AuthorizationFailed(f"not authorized: {detail}")  # an ACL: retrying unchanged cannot help
    out = SidecarError(detail)
    if bool(getattr(err, "retriable", False)):
        out = BrokerUnavailable(detail)
    return out
