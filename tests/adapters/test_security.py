"""Kafka security settings without a broker: secrets stay masked, options are validated with
clear errors, the OAUTHBEARER token file is re-read when it changes, TLS contexts verify by default,
and aiokafka's TLS/SASL exceptions are classified as such (not as "broker unreachable").
The same paths against a real secured broker: tests/integration/test_secure_cluster.py."""

from __future__ import annotations

import asyncio
import os
import pickle
import ssl
import subprocess
import sys
from pathlib import Path

import pytest
from aiokafka import errors as ak

from stream_pairer.adapters.kafka.errors import classify
from stream_pairer.adapters.kafka.security import (
    FileTokenProvider,
    KafkaSecurity,
    Secret,
    check_client_config,
    parse_client_config,
    read_secret,
)
from stream_pairer.errors import AuthenticationFailed, BrokerUnavailable, ConfigError, TlsFailed

CANARY = "canary-Zq9-do-not-print"
ROOT = Path(__file__).resolve().parents[2]


def test_secret_never_prints_its_value() -> None:
    s = Secret(CANARY)
    shown = [str(s), repr(s), f"{s}", f"{s!r}", "%s" % s, str([s]), str({"p": s})]  # noqa: UP031
    assert all(CANARY not in text for text in shown), shown
    assert s.reveal() == CANARY
    with pytest.raises(TypeError):
        pickle.dumps(s)
    sec = KafkaSecurity("SASL_PLAINTEXT", "PLAIN", "alice", s)
    assert CANARY not in repr(sec) and CANARY not in sec.describe()
    assert "sasl_password=**********" in sec.describe()
    assert sec.client_kwargs()["sasl_plain_password"] == CANARY  # only handed to aiokafka


def test_read_secret_from_file_or_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "pw"
    f.write_text(CANARY + "\n")
    assert read_secret(str(f), "STREAM_PAIRER_TEST_PW", "x") == Secret(CANARY)  # newline stripped
    monkeypatch.setenv("STREAM_PAIRER_TEST_PW", "from-env")
    assert read_secret(None, "STREAM_PAIRER_TEST_PW", "x") == Secret("from-env")
    assert read_secret(str(f), "STREAM_PAIRER_TEST_PW", "x") == Secret(CANARY)  # the file wins
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(ConfigError, match="is empty"):
        read_secret(str(tmp_path / "empty"), None, "SASL password")
    with pytest.raises(ConfigError, match="cannot read the SASL password file"):
        read_secret(str(tmp_path / "missing"), None, "SASL password")


def test_reloaded_reads_rotated_password_files(tmp_path: Path) -> None:
    pw = tmp_path / "pw"
    pw.write_text("first\n")
    sec = KafkaSecurity(
        "SASL_PLAINTEXT", "PLAIN", "alice", read_secret(str(pw), None, "x"), sasl_password_file=str(pw)
    )
    pw.write_text("second\n")  # the kubelet updated the mounted Secret
    assert sec.reloaded().client_kwargs()["sasl_plain_password"] == "second"
    assert sec.client_kwargs()["sasl_plain_password"] == "first"  # the settings object is immutable
    fixed = KafkaSecurity("SASL_PLAINTEXT", "PLAIN", "alice", Secret("env"))
    assert fixed.reloaded() is fixed  # from the environment: nothing to re-read
    pw.unlink()
    with pytest.raises(ConfigError, match="cannot read the SASL password file"):
        sec.reloaded()


def test_token_file_is_reread_only_when_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("token-one\n")
    provider = FileTokenProvider(path)
    assert asyncio.run(provider.token()) == "token-one"
    assert asyncio.run(provider.token()) == "token-one"
    assert provider.reads == 1  # unchanged file: not read again
    # Same size, new content: a rotation by rename (new inode), as Kubernetes projected volumes do.
    fresh = tmp_path / "token.new"
    fresh.write_text("token-two\n")
    fresh.replace(path)
    assert asyncio.run(provider.token()) == "token-two"
    assert provider.reads == 2
    # In-place rewrite with another length (mtime and size change).
    path.write_text("token-three-longer\n")
    assert asyncio.run(provider.token()) == "token-three-longer"
    path.unlink()
    with pytest.raises(AuthenticationFailed, match="cannot read the OAUTHBEARER token file"):
        asyncio.run(provider.token())


def test_client_config_is_typed_and_validated_against_aiokafka() -> None:
    got = parse_client_config("consumer", ["fetch.min.bytes=1024", "check_crcs=false", "client_rack=eu-1a"])
    assert got == {"fetch_min_bytes": 1024, "check_crcs": False, "client_rack": "eu-1a"}
    assert parse_client_config("producer", ["compression_type=gzip"]) == {"compression_type": "gzip"}
    with pytest.raises(
        ConfigError, match="not a parameter of aiokafka's AIOKafkaConsumer; did you mean fetch_min_bytes"
    ):
        parse_client_config("consumer", ["fetch_min_byte=1"])
    with pytest.raises(ConfigError, match="isolation_level: set by stream-pairer"):
        parse_client_config("consumer", ["isolation_level=read_uncommitted"])
    with pytest.raises(ConfigError, match="acks: set by stream-pairer"):
        parse_client_config("producer", ["acks=1"])
    with pytest.raises(ConfigError, match="sasl_plain_password: set by stream-pairer"):
        parse_client_config("producer", [f"sasl_plain_password={CANARY}"])
    with pytest.raises(ConfigError, match="wants an integer") as err:
        parse_client_config("consumer", [f"fetch_min_bytes={CANARY}"])
    assert CANARY not in str(err.value)
    with pytest.raises(ConfigError, match="wants key=value"):
        parse_client_config("consumer", ["fetch_min_bytes"])
    # A value of the right type that aiokafka's constructor refuses: a start-up error too.
    check_client_config({"fetch_min_bytes": 1024}, {"compression_type": "gzip"})
    with pytest.raises(ConfigError, match="--producer-config: aiokafka refused it: ValueError"):
        check_client_config({}, parse_client_config("producer", ["compression_type=nope"]))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"security_protocol": "TLS"}, "not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
        ({"security_protocol": "SASL_SSL"}, "needs --sasl-mechanism"),
        ({"security_protocol": "SASL_SSL", "sasl_mechanism": CANARY}, "not one of PLAIN.*value not shown"),
        ({"security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN"}, "needs --sasl-username"),
        (
            {"security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "sasl_username": "a"},
            "--sasl-password-file or STREAM_PAIRER_SASL_PASSWORD",
        ),
        ({"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "OAUTHBEARER"}, "--sasl-oauth-token-file"),
        ({"sasl_mechanism": "PLAIN"}, "needs --security-protocol SASL_SSL"),
        ({"ssl_cafile": "/ca.pem"}, "--ssl-\\* options need --security-protocol SSL"),
    ],
)
def test_inconsistent_security_options_are_refused(kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as err:
        KafkaSecurity(**kwargs)  # type: ignore[arg-type]
    assert CANARY not in str(err.value)  # a misplaced secret is not echoed


def test_tls_context_verifies_chain_and_hostname_by_default(tmp_path: Path) -> None:
    ctx = KafkaSecurity("SSL").ssl_context()
    assert ctx is not None and ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    loose = KafkaSecurity("SSL", ssl_check_hostname=False).ssl_context()
    assert loose is not None and loose.verify_mode == ssl.CERT_REQUIRED and not loose.check_hostname
    assert KafkaSecurity().ssl_context() is None
    with pytest.raises(ConfigError, match="no such file"):
        KafkaSecurity("SSL", ssl_cafile=str(tmp_path / "nope.pem")).ssl_context()


def test_encrypted_client_key_needs_its_password(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    from kafka_broker import TestPki  # noqa: PLC0415 - a script: made importable just above

    pki = TestPki(tmp_path / "pki", key_password=CANARY)
    base = {"ssl_cafile": str(pki.ca), "ssl_certfile": str(pki.dir / "client.pem")}
    key = str(pki.dir / "client-encrypted.key")
    ok = KafkaSecurity("SSL", ssl_keyfile=key, ssl_password=Secret(CANARY), **base).ssl_context()
    assert ok is not None
    with pytest.raises(ConfigError, match="wrong --ssl-password-file") as err:
        KafkaSecurity("SSL", ssl_keyfile=key, ssl_password=Secret("wrong"), **base).ssl_context()
    assert CANARY not in str(err.value) and "wrong" not in str(err.value).replace("wrong --ssl", "")


def test_classify_names_tls_and_sasl_causes() -> None:
    verify = ssl.SSLCertVerificationError(1, "certificate verify failed")
    verify.verify_message = "self-signed certificate in certificate chain"
    assert isinstance(classify(verify, during="connect"), TlsFailed)
    assert "TLS verify failed" in str(classify(verify, during="connect"))
    assert isinstance(classify(ssl.SSLError(1, "wrong version number"), during="connect"), TlsFailed)
    auth = classify(ak.SaslAuthenticationFailed("invalid credentials"), during="connect")
    assert isinstance(auth, AuthenticationFailed) and "authentication failed" in str(auth)
    assert isinstance(classify(ak.UnsupportedSaslMechanismError("x"), during="connect"), AuthenticationFailed)
    assert isinstance(classify(ConnectionRefusedError(111, "refused"), during="connect"), BrokerUnavailable)


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("STREAM_PAIRER_")} | env
    full["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [sys.executable, "-m", "stream_pairer", *args], capture_output=True, text=True, env=full, check=False
    )


def test_help_and_config_errors_never_show_secrets(tmp_path: Path) -> None:
    """--help used to print every STREAM_PAIRER_* value as a default; the secret-bearing ones must
    not appear in it, nor in a configuration error."""
    env = {
        "STREAM_PAIRER_SASL_PASSWORD": CANARY,
        "STREAM_PAIRER_SSL_PASSWORD": CANARY,
        "STREAM_PAIRER_CONSUMER_CONFIG": f"client_rack={CANARY}",
        "STREAM_PAIRER_PRODUCER_CONFIG": f"compression_type={CANARY}",
    }
    for command in ("run", "audit"):
        done = _cli(command, "--help", env=env)
        assert done.returncode == 0
        assert "--sasl-password-file" in done.stdout and "--security-protocol" in done.stdout
        assert CANARY not in done.stdout + done.stderr
    # A wrong configuration ends with one line naming the option, exit 2, and no secret.
    done = _cli(
        "run", "--bootstrap-servers", "127.0.0.1:9", "--input-topic", "t", "--group-id", "g",
        "--security-protocol", "SASL_SSL", "--sasl-mechanism", "SCRAM-SHA-512",
        env=env,
    )  # fmt: skip
    assert done.returncode == 2
    assert "needs --sasl-username" in done.stderr and CANARY not in done.stdout + done.stderr
    done = _cli(
        "run", "--bootstrap-servers", "127.0.0.1:9", "--input-topic", "t", "--group-id", "g",
        "--consumer-config", "no_such_param=1", env=env,
    )  # fmt: skip
    assert done.returncode == 2
    assert "no_such_param: not a parameter of aiokafka's AIOKafkaConsumer" in done.stderr
    assert CANARY not in done.stdout + done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    done = _cli(
        "run", "--bootstrap-servers", "127.0.0.1:9", "--input-topic", "t", "--group-id", "g",
        "--security-protocol", "SSL", "--ssl-cafile", str(tmp_path / "no-such-ca.pem"), env=env,
    )  # fmt: skip
    assert done.returncode == 2 and "no-such-ca.pem: no such file" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_sensitive_option_never_echoes_its_environment_value(monkeypatch: pytest.MonkeyPatch) -> None:
    import argparse  # noqa: PLC0415

    from stream_pairer.cli.options import add_option  # noqa: PLC0415

    monkeypatch.setenv("STREAM_PAIRER_SOME_LIMIT", CANARY)
    parser = argparse.ArgumentParser()
    with pytest.raises(SystemExit) as err:
        add_option(parser, "--some-limit", type=int, help="a number", sensitive=True)
    assert "STREAM_PAIRER_SOME_LIMIT is not valid" in str(err.value) and CANARY not in str(err.value)
    monkeypatch.setenv("STREAM_PAIRER_SOME_LIMIT", "12345")
    add_option(parser, "--some-limit", type=int, help="a number", sensitive=True)
    text = parser.format_help()
    assert "set from STREAM_PAIRER_SOME_LIMIT" in text and "12345" not in text
    assert parser.parse_args([]).some_limit == 12345
