"""The sidecar and the audit against a REAL secured broker (scripts/kafka_broker.py SecureKafkaBroker):
SASL_SSL with SCRAM users created by Kafka's StorageTool and a CA + broker certificate made by
openssl at test time, SASL_PLAINTEXT with PLAIN and OAUTHBEARER (unsecured JWS), and mutual TLS.

What this proves: the pairing (exactly-once included) and the audit work through each listener with
the documented options; a wrong password, an unknown mechanism, an untrusted CA, a hostname mismatch
and an unreachable broker each end in one distinct error line (audit: exit 2; sidecar: ERROR lines
and /readyz 503 naming the cause); and a canary password never appears in --help, logs, errors,
/metrics or the start-up configuration line. Test set-up (topics, input, reading outputs) uses the
broker's PLAINTEXT listener, so only the code under test speaks the secured protocols.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from stream_pairer.adapters.kafka.security import FileTokenProvider, KafkaSecurity, Secret
from stream_pairer.analysis.audit import Auditor
from stream_pairer.cli.commands.audit import audit_topics
from stream_pairer.core.formats import DEFAULT_CONFIG

from .conftest import kb, require_kafka
from .sidecar_support import (
    OutputReader,
    SidecarProcess,
    config,
    event,
    expected_identities,
    http_get,
    identities,
    produce,
    started,
    summary,
    two_phase_traffic,
    wait_async,
)

CANARY = "canary-7Hq2-secret-never-shown"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[kb.SecureKafkaBroker]:
    require_kafka(kb.DEFAULT_VERSION)
    broker = kb.SecureKafkaBroker(tmp_path_factory.mktemp("secure-kafka"), users={"alice": CANARY}).start()
    yield broker
    broker.close()


def unsecured_jws(sub: str, lifetime_s: int = 3600) -> str:
    """An unsigned OAUTHBEARER token (alg none), what Kafka's unsecured validator accepts."""

    def part(obj: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    now = int(time.time())
    return f"{part({'alg': 'none'})}.{part({'sub': sub, 'iat': now, 'exp': now + lifetime_s})}."


def scram_args(broker: kb.SecureKafkaBroker, mechanism: str = "SCRAM-SHA-512") -> list[str]:
    return [
        "--security-protocol", "SASL_SSL", "--sasl-mechanism", mechanism,
        "--sasl-username", "alice", "--ssl-cafile", str(broker.pki.ca),
    ]  # fmt: skip


class SecretSidecarProcess(SidecarProcess):
    """`stream-pairer run` with the SASL password in its environment, as a Pod passes a Secret."""

    def __init__(self, *args: str, env: dict[str, str]) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.env = env

    def start(self) -> SecretSidecarProcess:
        env = {k: v for k, v in os.environ.items() if not k.startswith("STREAM_PAIRER_")} | self.env
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT, env=env)
        return self


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("STREAM_PAIRER_")} | (env or {})
    return subprocess.run(
        [sys.executable, "-m", "stream_pairer", *args],
        capture_output=True,
        text=True,
        env=full,
        check=False,
        timeout=120,
    )


async def test_exactly_once_through_sasl_ssl_scram_and_audit(
    secure_broker: kb.SecureKafkaBroker, tmp_path: Path
) -> None:
    broker = secure_broker
    topic = await kb.create_topic(broker.bootstrap, 2, prefix="sec")
    phase1, phase2 = two_phase_traffic(12, 3, seed=14)
    placed = await produce(broker.bootstrap, topic, phase1)
    proc = SecretSidecarProcess(
        tmp_path / "sidecar.log",
        broker.sasl_ssl_bootstrap,
        topic,
        f"g-{topic}",
        "--exactly-once",
        "--log-level",
        "DEBUG",
        *scram_args(broker),
        env={"STREAM_PAIRER_SASL_PASSWORD": CANARY},
    ).start()
    try:
        await proc.wait_ready()
        placed += await produce(broker.bootstrap, topic, phase2)
        async with OutputReader(broker.bootstrap, topic) as reader:
            await reader.until(lambda recs: set(identities(recs)) >= expected_identities(topic, placed), 60)
            await reader.settle(1.0)
            records = reader.records
        metrics = (await asyncio.to_thread(http_get, proc.http_port, "/metrics"))[1].decode()
        assert await proc.terminate(30) == 0
    finally:
        proc.close()
    seen = identities(records)
    assert set(seen) == expected_identities(topic, placed) and max(seen.values()) == 1
    assert summary(records)["pair"] == len(placed) // 2

    password_file = tmp_path / "password"
    password_file.write_text(CANARY + "\n")
    audit = cli(
        "audit", "--bootstrap-servers", broker.sasl_ssl_bootstrap, "--input-topic", topic, "--exactly-once",
        *scram_args(broker), "--sasl-password-file", str(password_file),
    )  # fmt: skip
    assert audit.returncode == 0, audit.stdout + audit.stderr
    assert "audit OK" in audit.stdout, audit.stdout

    log = proc.log_path.read_text()
    assert "security_protocol=SASL_SSL sasl_mechanism=SCRAM-SHA-512 sasl_username=alice" in log
    assert "sasl_password=**********" in log  # the start-up configuration line, masked
    helps = cli("run", "--help", env={"STREAM_PAIRER_SASL_PASSWORD": CANARY}).stdout
    for name, text in {
        "log": log,
        "metrics": metrics,
        "audit": audit.stdout + audit.stderr,
        "help": helps,
    }.items():
        assert CANARY not in text, f"the password leaked into the {name}"


@pytest.mark.parametrize(
    ("listener", "exactly_once"),
    [("SCRAM-SHA-256", False), ("PLAIN", True), ("OAUTHBEARER", False), ("mTLS", True)],
)
async def test_pairs_and_audits_through_each_listener(
    secure_broker: kb.SecureKafkaBroker, tmp_path: Path, listener: str, exactly_once: bool
) -> None:
    broker, pki = secure_broker, secure_broker.pki
    if listener == "SCRAM-SHA-256":
        bootstrap = broker.sasl_ssl_bootstrap
        security = KafkaSecurity("SASL_SSL", listener, "alice", Secret(CANARY), ssl_cafile=str(pki.ca))
    elif listener == "PLAIN":
        bootstrap = broker.sasl_plaintext_bootstrap
        security = KafkaSecurity("SASL_PLAINTEXT", "PLAIN", "alice", Secret(CANARY))
    elif listener == "OAUTHBEARER":
        bootstrap = broker.sasl_plaintext_bootstrap
        token = tmp_path / "token"
        token.write_text(unsecured_jws("alice"))
        security = KafkaSecurity(
            "SASL_PLAINTEXT", "OAUTHBEARER", sasl_token_provider=FileTokenProvider(token)
        )
    else:
        bootstrap = broker.ssl_bootstrap
        security = KafkaSecurity(
            "SSL",
            ssl_cafile=str(pki.ca),
            ssl_certfile=str(pki.dir / "client.pem"),
            ssl_keyfile=str(pki.dir / "client-encrypted.key"),
            ssl_password=Secret(pki.key_password),
        )
    topic = await kb.create_topic(broker.bootstrap, 2, prefix="sec")
    phase1, phase2 = two_phase_traffic(6, 2, seed=3)
    placed = await produce(broker.bootstrap, topic, phase1 + phase2)
    sidecar = await started(
        config(bootstrap, topic, f"g-{topic}", security=security, exactly_once=exactly_once)
    )
    try:
        async with OutputReader(broker.bootstrap, topic) as reader:
            await reader.until(lambda recs: set(identities(recs)) >= expected_identities(topic, placed), 60)
    finally:
        assert await sidecar.stop(20)
    report = await audit_topics(
        Auditor(DEFAULT_CONFIG, exactly_once=exactly_once),
        bootstrap,
        [topic],
        [f"{topic}.pairs", f"{topic}.orphans", f"{topic}.dead-letter"],
        timeout_s=60,
        security=security,
    )
    assert report.ok and report.lost == 0, report.as_dict()
    if exactly_once:
        assert report.duplicated == 0
    if listener == "OAUTHBEARER":
        assert isinstance(security.sasl_token_provider, FileTokenProvider)
        assert security.sasl_token_provider.reads == 1  # read once, reused by every connection


def test_each_failure_names_its_cause(secure_broker: kb.SecureKafkaBroker, tmp_path: Path) -> None:
    """`stream-pairer audit` through a misconfigured connection: exit 2, one line, the cause."""
    broker, pki = secure_broker, secure_broker.pki
    wrong = tmp_path / "wrong"
    wrong.write_text("not-the-password\n")
    good = tmp_path / "good"
    good.write_text(CANARY + "\n")
    port = broker.sasl_ssl_port
    cases = {
        "authentication failed": [*scram_args(broker), "--sasl-password-file", str(wrong)],
        "does not enable SASL mechanism SCRAM-SHA-256": [
            "--security-protocol", "SASL_PLAINTEXT", "--sasl-mechanism", "SCRAM-SHA-256",
            "--sasl-username", "alice", "--sasl-password-file", str(good),
        ],
        "TLS verify failed for 127.0.0.1": [
            *scram_args(broker)[:-1], str(pki.other_ca), "--sasl-password-file", str(good),
        ],
        "Hostname mismatch": [*scram_args(broker), "--sasl-password-file", str(good)],
        "broker unreachable": [],
    }  # fmt: skip
    servers = {
        "does not enable SASL mechanism SCRAM-SHA-256": broker.sasl_plaintext_bootstrap,
        "Hostname mismatch": f"localhost:{port}",
        "broker unreachable": f"127.0.0.1:{kb.free_ports(1)[0]}",
    }
    seen = []
    for cause, args in cases.items():
        done = cli(
            "audit", "--bootstrap-servers", servers.get(cause, broker.sasl_ssl_bootstrap),
            "--input-topic", "whatever", "--audit-timeout", "30", *args,
        )  # fmt: skip
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2, (cause, done.stderr)
        assert len(lines) == 1 and cause in lines[0], (cause, done.stderr)
        assert CANARY not in done.stdout + done.stderr and "not-the-password" not in done.stderr
        seen.append(lines[0])
    assert len(set(seen)) == len(cases)
    # Only the unreachable broker reads as "unreachable".
    assert [line for line in seen if "unreachable" in line] == [seen[-1]]


async def test_sidecar_with_wrong_password_is_not_ready_says_why_and_recovers_on_rotation(
    secure_broker: kb.SecureKafkaBroker, tmp_path: Path
) -> None:
    """`run` with a wrong password in its (mounted) password file: /readyz 503 naming the
    authentication failure, ERROR log lines saying so (not "Unable to bootstrap"), alive; then the
    Secret is rotated to the right password (the file rewritten in place) and the same process
    becomes ready and pairs, without a restart."""
    broker = secure_broker
    topic = await kb.create_topic(broker.bootstrap, 1, prefix="sec")
    password_file = tmp_path / "sasl-password"
    password_file.write_text("not-the-password\n")
    proc = SecretSidecarProcess(
        tmp_path / "sidecar.log",
        broker.sasl_ssl_bootstrap,
        topic,
        f"g-{topic}",
        *scram_args(broker),
        "--sasl-password-file",
        str(password_file),
        env={},
    ).start()
    try:

        async def explained() -> bool:
            try:
                status, body = await asyncio.to_thread(http_get, proc.http_port, "/readyz")
            except OSError:
                return False
            return status == 503 and b"authentication failed" in body

        await wait_async(explained, 30, "/readyz naming the authentication failure")
        status, _ = await asyncio.to_thread(http_get, proc.http_port, "/healthz")
        assert status == 200  # alive and retrying
        password_file.write_text(CANARY + "\n")  # the Secret rotated
        await proc.wait_ready(30)
        placed = await produce(broker.bootstrap, topic, [(b"c", event("c", "tool_call", "x")),
                                                         (b"c", event("c", "tool_result", "x"))])  # fmt: skip
        async with OutputReader(broker.bootstrap, topic) as reader:
            await reader.until(lambda recs: set(identities(recs)) >= expected_identities(topic, placed), 30)
        assert await proc.terminate(30) == 0
    finally:
        proc.close()
    log = proc.log_path.read_text()
    errors = [line for line in log.splitlines() if " ERROR " in line and "authentication failed" in line]
    assert errors, log
    assert "Unable to bootstrap" not in "\n".join(errors)
    assert CANARY not in log and "not-the-password" not in log
