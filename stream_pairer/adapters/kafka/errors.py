"""aiokafka's errors mapped onto stream-pairer's tree (`stream_pairer.errors`), once, at the boundary.

Here and not in `stream_pairer.errors` because it imports aiokafka: the exception tree itself must
stay importable by the pure layers (core, stream), which never see a Kafka client.
"""

from __future__ import annotations

import ssl

from aiokafka import errors as ak

from stream_pairer.errors import (
    AuthenticationFailed,
    AuthorizationFailed,
    BrokerUnavailable,
    CommitFailed,
    DeliveryFailed,
    Fenced,
    SidecarError,
    TlsFailed,
)


def classify(err: BaseException, *, during: str) -> SidecarError:
    """Map an aiokafka (or OS) error raised `during` an operation onto the sidecar's tree."""
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
    # Before OSError below: ssl.SSLError is an OSError, yet not "unreachable".
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
