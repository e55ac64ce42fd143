"""Connecting to a secured Kafka cluster: TLS, SASL, client pass-through options and masked secrets.

Why a module of its own: every Kafka client the project builds (the sidecar's consumer, producers,
admin client, checkpoint reader, re-keyer, and the audit's readers) must connect the same way, and
the security settings are where secrets live. Keeping them here means one place turns options into
aiokafka keyword arguments, one place decides what may be printed (`Secret` never prints its value),
and one place tells "wrong password" from "untrusted certificate" from "broker unreachable"
(`probe`), which aiokafka's bootstrap folds into a single "Unable to bootstrap" error.
"""

from __future__ import annotations

import asyncio
import difflib
import inspect
import os
import ssl
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from stream_pairer.errors import (
    AuthenticationFailed,
    BrokerUnavailable,
    ConfigError,
    SidecarError,
    TlsFailed,
)

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
MASK = "**********"


class Secret:
    """A string that never shows itself: str(), repr() and format() print a mask, like Quix
    Streams' `SecretStr`. Only `reveal()` returns the value, at the one place that hands it to
    aiokafka, so a secret cannot reach a log line, an error message or a dump by accident."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __str__(self) -> str:
        return MASK

    def __repr__(self) -> str:
        return f"Secret('{MASK}')"

    def __format__(self, spec: str) -> str:
        return MASK

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)

    def __bool__(self) -> bool:
        return bool(self._value)

    def __reduce__(self) -> Any:
        raise TypeError("a Secret is not picklable")  # a pickle would carry the plain value


def read_secret(path: str | None, env: str | None, what: str) -> Secret | None:
    """The secret from a file (a mounted Kubernetes Secret: trailing newline stripped) or, when no
    file is given, from the environment variable `env`. Never from a command-line value: argv is
    visible to every user of the machine (`ps`) and is often logged by process supervisors."""
    if path:
        try:
            text = Path(path).read_text(encoding="utf-8").rstrip("\r\n")
        except OSError as err:
            raise ConfigError(f"cannot read the {what} file {path}: {err.strerror or err}") from None
        if not text:
            raise ConfigError(f"the {what} file {path} is empty")
        return Secret(text)
    if env:
        value = os.environ.get(env)
        if value:
            return Secret(value)
    return None


class FileTokenProvider:
    """OAUTHBEARER token read from a file, re-read whenever the file changes.

    Why a file: token issuers (Kubernetes projected service-account tokens, a Vault agent, an
    OIDC refresher sidecar) write a fresh token to a file before the old one expires; re-reading on
    change (inode, size or mtime differ) picks up the rotation without a restart, and a stat per
    connection is all it costs. Implements aiokafka's `AbstractTokenProvider` protocol (`token()`),
    the documented hook for anything else (pass your own provider to `KafkaSecurity`).
    Registered as a virtual subclass of `AbstractTokenProvider` (aiokafka checks isinstance) when
    client arguments are built, so that importing this module (the `audit` command on files) does
    not import aiokafka."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._stamp: tuple[int, int, int] | None = None
        self._token = ""
        self.reads = 0  # how often the file was actually read (for tests and debug logs)

    def _current(self) -> str:
        try:
            st = self.path.stat()
            stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
            if stamp != self._stamp:
                token = self.path.read_text(encoding="utf-8").strip()
                if not token:
                    raise AuthenticationFailed(f"the OAUTHBEARER token file {self.path} is empty")
                self._token, self._stamp = token, stamp
                self.reads += 1
        except OSError as err:
            raise AuthenticationFailed(
                f"cannot read the OAUTHBEARER token file {self.path}: {err.strerror or err}"
            ) from None
        return self._token

    async def token(self) -> str:
        return self._current()

    def extensions(self) -> dict[str, str]:
        return {}

    def __repr__(self) -> str:
        return f"FileTokenProvider({str(self.path)!r})"


# ------------------------------------------------------------------------------ client pass-through


# Parameters stream-pairer sets itself (correctness or a dedicated flag), or the security options
# own: a pass-through value for them would either be silently overridden or break a guarantee.
_RESERVED_COMMON = {
    "loop": "internal",
    "bootstrap_servers": "--bootstrap-servers",
    "client_id": "--instance-id",
    "request_timeout_ms": "--request-timeout",
    "api_version": "deprecated in aiokafka",
    "security_protocol": "--security-protocol",
    "ssl_context": "--ssl-cafile/--ssl-certfile/--ssl-keyfile",
    "sasl_mechanism": "--sasl-mechanism",
    "sasl_plain_username": "--sasl-username",
    "sasl_plain_password": "--sasl-password-file or STREAM_PAIRER_SASL_PASSWORD",
    "sasl_oauth_token_provider": "--sasl-oauth-token-file",
}
_RESERVED_CONSUMER = {
    "topics": "--input-topic",
    "group_id": "--group-id",
    "enable_auto_commit": "offsets are committed only after outputs are durable",
    "auto_offset_reset": "--auto-offset-reset",
    "isolation_level": "--isolation-level",
    "max_poll_records": "--max-records",
    "session_timeout_ms": "--session-timeout",
    "heartbeat_interval_ms": "--session-timeout",
    "partition_assignment_strategy": "sticky assignment keeps partitions' state in place",
    "key_deserializer": "records are read as bytes",
    "value_deserializer": "records are read as bytes",
    "fetch_max_wait_ms": "set per reader",
    "max_partition_fetch_bytes": "set per reader",
    "fetch_max_bytes": "set per reader",
}
_RESERVED_PRODUCER = {
    "acks": "outputs need acks=all",
    "enable_idempotence": "outputs need idempotence",
    "transactional_id": "--exactly-once and --transactional-id-prefix",
    "key_serializer": "records are written as bytes",
    "value_serializer": "records are written as bytes",
    "linger_ms": "set by stream-pairer",
    "max_batch_size": "set by stream-pairer (1 MiB, see BENCHMARKS.md)",
    "max_request_size": "derived from --max-output-bytes",
    "partitioner": "outputs follow their conversation key",
}


def _parameters(kind: str) -> dict[str, inspect.Parameter]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # noqa: PLC0415 - only when used

    cls = AIOKafkaConsumer if kind == "consumer" else AIOKafkaProducer
    return dict(inspect.signature(cls).parameters)


def _convert(key: str, raw: str, default: Any) -> Any:
    """The value typed like aiokafka's default for the parameter (a None default: an integer when
    it looks like one, else the text)."""
    text = raw.strip()
    if isinstance(default, bool):
        low = text.lower()
        if low in ("true", "1", "yes", "on"):
            return True
        if low in ("false", "0", "no", "off"):
            return False
        raise ConfigError(f"{key} wants true or false (value not shown)")
    if isinstance(default, int):
        try:
            return int(text)
        except ValueError:
            raise ConfigError(f"{key} wants an integer (value not shown)") from None
    if isinstance(default, float):
        try:
            return float(text)
        except ValueError:
            raise ConfigError(f"{key} wants a number (value not shown)") from None
    if default is None and text.lstrip("-").isdigit():
        return int(text)
    return text


def parse_client_config(kind: str, items: Iterable[str]) -> dict[str, Any]:
    """`key=value` items for an aiokafka consumer or producer, validated against the constructor's
    parameters (`inspect.signature`), so a typo is a clear error at start-up instead of a
    TypeError deep in a reconnect loop; keys in Java-client spelling (`fetch.min.bytes`) are
    accepted as aiokafka's (`fetch_min_bytes`)."""
    params = _parameters(kind)
    reserved = {**_RESERVED_COMMON, **(_RESERVED_CONSUMER if kind == "consumer" else _RESERVED_PRODUCER)}
    out: dict[str, Any] = {}
    for item in items:
        if not item.strip():
            continue
        key, sep, raw = item.partition("=")
        key = key.strip().replace(".", "_").replace("-", "_")
        if not sep or not key:
            raise ConfigError(f"--{kind}-config wants key=value, got {item.split('=', 1)[0]!r} without '='")
        if key in reserved:
            raise ConfigError(f"--{kind}-config {key}: set by stream-pairer ({reserved[key]})")
        if key not in params:
            near = difflib.get_close_matches(key, [p for p in params if p not in reserved], n=3)
            hint = f"; did you mean {', '.join(near)}?" if near else ""
            raise ConfigError(
                f"--{kind}-config {key}: not a parameter of aiokafka's "
                f"{'AIOKafkaConsumer' if kind == 'consumer' else 'AIOKafkaProducer'}{hint}"
            )
        out[key] = _convert(key, raw, params[key].default)
    return out


def check_client_config(consumer: Mapping[str, Any], producer: Mapping[str, Any]) -> None:
    """Let aiokafka's constructors judge the pass-through values now (they connect nothing): a
    value they refuse (say a compression codec whose library is not installed) is a start-up error
    naming the flag, not a crash inside the first session."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # noqa: PLC0415

    async def build(kind: str, cfg: Mapping[str, Any]) -> None:
        client: AIOKafkaConsumer | AIOKafkaProducer
        if kind == "consumer":
            client = AIOKafkaConsumer(bootstrap_servers="127.0.0.1:9", enable_auto_commit=False, **cfg)
        else:
            client = AIOKafkaProducer(
                bootstrap_servers="127.0.0.1:9", acks="all", enable_idempotence=True, **cfg
            )
        await client.stop()  # never started: releases what the constructor made

    for kind, cfg in (("consumer", consumer), ("producer", producer)):
        if not cfg:
            continue
        try:
            asyncio.run(build(kind, cfg))
        except Exception as err:
            raise ConfigError(f"--{kind}-config: aiokafka refused it: {type(err).__name__}: {err}") from None


# ------------------------------------------------------------------------------ the security settings


@dataclass(frozen=True)
class KafkaSecurity:
    """How every client connects. `repr()` and `describe()` are safe to log: secrets are `Secret`s."""

    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: Secret | None = None
    sasl_token_provider: Any = None  # an aiokafka AbstractTokenProvider (FileTokenProvider)
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_password: Secret | None = None
    ssl_check_hostname: bool = True
    consumer_config: Mapping[str, Any] = field(default_factory=dict)
    producer_config: Mapping[str, Any] = field(default_factory=dict)
    # Where the passwords came from, so that `reloaded()` can read a rotated Secret again.
    sasl_password_file: str | None = None
    ssl_password_file: str | None = None

    def __post_init__(self) -> None:
        proto, mech = self.security_protocol, self.sasl_mechanism
        if proto not in PROTOCOLS:
            # The value is not echoed: a misplaced secret (swapped variables) must not reach a log.
            raise ConfigError(f"--security-protocol: not one of {', '.join(PROTOCOLS)} (value not shown)")
        sasl = proto.startswith("SASL_")
        if sasl and mech is None:
            raise ConfigError(f"--security-protocol {proto} needs --sasl-mechanism ({', '.join(MECHANISMS)})")
        if mech is not None and mech not in MECHANISMS:
            raise ConfigError(f"--sasl-mechanism: not one of {', '.join(MECHANISMS)} (value not shown)")
        if mech is not None and not sasl:
            raise ConfigError(f"--sasl-mechanism {mech} needs --security-protocol SASL_SSL or SASL_PLAINTEXT")
        if sasl and mech in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
            if not self.sasl_username:
                raise ConfigError(f"--sasl-mechanism {mech} needs --sasl-username")
            if not self.sasl_password:
                raise ConfigError(
                    f"--sasl-mechanism {mech} needs a password: --sasl-password-file "
                    "or STREAM_PAIRER_SASL_PASSWORD"
                )
        if sasl and mech == "OAUTHBEARER" and self.sasl_token_provider is None:
            raise ConfigError("--sasl-mechanism OAUTHBEARER needs --sasl-oauth-token-file")
        tls = proto in ("SSL", "SASL_SSL")
        if not tls and (self.ssl_cafile or self.ssl_certfile or self.ssl_keyfile):
            raise ConfigError(f"--ssl-* options need --security-protocol SSL or SASL_SSL, not {proto}")
        if self.ssl_keyfile and not self.ssl_certfile:
            raise ConfigError("--ssl-keyfile needs --ssl-certfile")

    def reloaded(self) -> KafkaSecurity:
        """The same settings with the password files read again: the sidecar calls this before
        every (re)connection, so a rotated Kubernetes Secret (the kubelet updates mounted files in
        place) is used by the next attempt without a restart. Certificate and key files are read
        again anyway: `client_kwargs()` builds a fresh TLS context each time."""
        if not (self.sasl_password_file or self.ssl_password_file):
            return self
        return replace(
            self,
            sasl_password=read_secret(self.sasl_password_file, None, "SASL password")
            if self.sasl_password_file
            else self.sasl_password,
            ssl_password=read_secret(self.ssl_password_file, None, "TLS key password")
            if self.ssl_password_file
            else self.ssl_password,
        )

    @property
    def tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    def ssl_context(self) -> ssl.SSLContext | None:
        """A verifying client context: the CA file (else the system's trust store), an optional
        client certificate for mutual TLS, hostname verification unless explicitly turned off."""
        if not self.tls:
            return None
        try:
            ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=self.ssl_cafile)
        except FileNotFoundError:
            raise ConfigError(f"--ssl-cafile {self.ssl_cafile}: no such file") from None
        except (ssl.SSLError, OSError) as err:
            raise ConfigError(f"--ssl-cafile {self.ssl_cafile}: not a PEM CA certificate ({err})") from None
        if not self.ssl_check_hostname:
            ctx.check_hostname = False  # still verifies the chain; only the name check is skipped
        if self.ssl_certfile:
            password = self.ssl_password.reveal() if self.ssl_password else None
            try:
                ctx.load_cert_chain(self.ssl_certfile, self.ssl_keyfile, password=password)
            except FileNotFoundError:
                raise ConfigError(
                    f"--ssl-certfile {self.ssl_certfile} or --ssl-keyfile {self.ssl_keyfile}: no such file"
                ) from None
            except (ssl.SSLError, OSError) as err:
                why = str(err)
                if _encrypted(self.ssl_keyfile or self.ssl_certfile):
                    why = "the key cannot be decrypted with it: wrong --ssl-password-file?"
                    if not self.ssl_password:
                        why = "the key is encrypted: give --ssl-password-file or STREAM_PAIRER_SSL_PASSWORD"
                raise ConfigError(
                    f"TLS client certificate {self.ssl_certfile} / key {self.ssl_keyfile} "
                    f"cannot be loaded ({why})"
                ) from None
        return ctx

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for every aiokafka client (consumer, producer and admin client)."""
        kw: dict[str, Any] = {"security_protocol": self.security_protocol}
        ctx = self.ssl_context()
        if ctx is not None:
            kw["ssl_context"] = ctx
        if self.sasl_mechanism is not None:
            kw["sasl_mechanism"] = self.sasl_mechanism
            if self.sasl_mechanism == "OAUTHBEARER":
                from aiokafka.abc import AbstractTokenProvider  # noqa: PLC0415 - see FileTokenProvider

                AbstractTokenProvider.register(FileTokenProvider)
                kw["sasl_oauth_token_provider"] = self.sasl_token_provider
            else:
                kw["sasl_plain_username"] = self.sasl_username
                kw["sasl_plain_password"] = self.sasl_password.reveal() if self.sasl_password else None
        return kw

    def describe(self) -> str:
        """One loggable line: what is configured, never a secret (only whether it is set)."""
        parts = [f"security_protocol={self.security_protocol}"]
        if self.sasl_mechanism:
            parts.append(f"sasl_mechanism={self.sasl_mechanism}")
        if self.sasl_username:
            parts.append(f"sasl_username={self.sasl_username}")
        if self.sasl_password:
            parts.append(f"sasl_password={self.sasl_password}")
        if self.sasl_token_provider is not None:
            parts.append(f"sasl_oauth_token={self.sasl_token_provider!r}")
        if self.tls:
            parts.append(f"ssl_cafile={self.ssl_cafile or '(system trust store)'}")
            if self.ssl_certfile:
                parts.append(f"ssl_certfile={self.ssl_certfile}")
            if self.ssl_password:
                parts.append(f"ssl_password={self.ssl_password}")
            parts.append(f"ssl_check_hostname={str(self.ssl_check_hostname).lower()}")
        for kind, cfg in (("consumer", self.consumer_config), ("producer", self.producer_config)):
            if cfg:
                parts.append(f"{kind}_config={','.join(f'{k}={v}' for k, v in sorted(cfg.items()))}")
        return " ".join(parts)


PLAINTEXT = KafkaSecurity()


def _encrypted(key_path: str) -> bool:
    """Whether a PEM key file holds an encrypted key (PKCS#8 or legacy OpenSSL headers)."""
    try:
        text = Path(key_path).read_text(encoding="ascii", errors="replace")
    except OSError:
        return False
    return "ENCRYPTED PRIVATE KEY" in text or "Proc-Type: 4,ENCRYPTED" in text


# ------------------------------------------------------------------------------ diagnosing a connection


def _hosts(bootstrap: str) -> list[tuple[str, int]]:
    out = []
    for raw in bootstrap.split(","):
        item = raw.strip()
        if not item:
            continue
        host, _, port = item.rpartition(":")
        if not host or not port.isdigit():
            raise ConfigError(f"--bootstrap-servers {item!r}: want host:port")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ConfigError("--bootstrap-servers is empty")
    return out


def explain(err: BaseException, where: str, mechanism: str | None = None) -> SidecarError:
    """One error naming the cause: TLS verification, TLS handshake, authentication, mechanism,
    unreachable or not answering; for `where` (host:port)."""
    from aiokafka.errors import KafkaConnectionError, UnsupportedSaslMechanismError  # noqa: PLC0415

    from stream_pairer.adapters.kafka.errors import classify  # noqa: PLC0415 - imports aiokafka

    if isinstance(err, TimeoutError | asyncio.TimeoutError):
        return BrokerUnavailable(
            f"broker unreachable or not answering: {where}: no Kafka response in time (a firewall "
            "dropping packets, an overloaded broker, or a TLS listener spoken to without "
            "--security-protocol SSL/SASL_SSL?)"
        )
    if isinstance(err, ssl.SSLCertVerificationError):
        return TlsFailed(f"TLS verify failed for {where}: {err.verify_message or err.reason}")
    if isinstance(err, ssl.SSLError):
        return TlsFailed(f"TLS handshake with {where} failed: {err.reason or err}")
    if isinstance(err, UnsupportedSaslMechanismError):
        return AuthenticationFailed(
            f"authentication failed: {where} does not enable SASL mechanism {mechanism} "
            "(see the broker's sasl.enabled.mechanisms)"
        )
    if isinstance(err, ConnectionResetError | BrokenPipeError) or (
        isinstance(err, KafkaConnectionError) and "closed" in str(err)
    ):
        return BrokerUnavailable(
            f"{where} closed the connection before answering: does this listener want another "
            "--security-protocol, or a client certificate (--ssl-certfile)?"
        )
    out = classify(err, during=f"connect to {where}")
    if type(out) is BrokerUnavailable:
        return BrokerUnavailable(f"broker unreachable: {out}")
    return out


async def probe(bootstrap: str, security: KafkaSecurity, timeout_s: float = 10.0) -> None:
    """Open one connection like aiokafka's bootstrap does (TLS handshake, ApiVersions, SASL
    authentication) and raise the *cause* when no bootstrap server accepts it. aiokafka's own
    bootstrap logs each cause and raises only "Unable to bootstrap", which reads like "broker down"
    for a wrong password or an untrusted certificate; this is the check that tells them apart.
    Returns quietly when a server accepted the connection."""
    from aiokafka.conn import create_conn  # noqa: PLC0415 - aiokafka only when connecting

    kw = security.client_kwargs()
    errors: list[SidecarError] = []
    for host, port in _hosts(bootstrap):
        try:
            conn = await asyncio.wait_for(
                create_conn(
                    host,
                    port,
                    client_id="stream-pairer-probe",
                    request_timeout_ms=int(timeout_s * 1000),
                    ssl_context=kw.get("ssl_context"),
                    security_protocol=kw["security_protocol"],
                    sasl_mechanism=kw.get("sasl_mechanism"),
                    sasl_plain_username=kw.get("sasl_plain_username"),
                    sasl_plain_password=kw.get("sasl_plain_password"),
                    sasl_oauth_token_provider=kw.get("sasl_oauth_token_provider"),
                ),
                timeout_s,
            )
        except SidecarError as err:
            errors.append(err)
            continue
        except Exception as err:
            errors.append(explain(err, f"{host}:{port}", security.sasl_mechanism))
            continue
        conn.close()
        return
    # A cause about credentials or certificates outranks "unreachable" on another server.
    errors.sort(key=lambda e: isinstance(e, BrokerUnavailable))
    raise errors[0]
