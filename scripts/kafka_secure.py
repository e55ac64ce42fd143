"""Secured listeners for tests: a throwaway PKI (`TestPki`) and `SecureKafkaBroker`.

Why apart: certificates and the listener/JAAS properties are a concern of their own, needed only by
the security tests (tests/integration/test_secure_cluster.py, tests/adapters/test_security.py);
kafka_broker.py re-exports both names, where those tests import them from.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from kafka_jars import KafkaToolError
from kafka_node import KafkaBroker, free_ports


def _openssl(*args: str, cwd: Path) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise KafkaToolError("openssl not found: it makes the test CA and certificates")
    done = subprocess.run([openssl, *args], cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise KafkaToolError(f"openssl {args[0]} failed: {done.stderr[-2000:]}")


class TestPki:
    """A throwaway CA, a broker certificate for IP 127.0.0.1, a client certificate with an
    encrypted key (mutual TLS) and a second, unrelated CA (the "untrusted" case), made with
    openssl at test time: nothing secret is checked in, and nothing outlives the test directory."""

    def __init__(self, directory: Path, key_password: str = "client-key-pass") -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.key_password = key_password
        d = self.dir
        days = "2"
        for ca in ("ca", "other-ca"):
            _openssl(
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", days, "-keyout", f"{ca}.key",
                "-out", f"{ca}.pem", "-subj", f"/CN=stream-pairer test {ca}", cwd=d,
            )  # fmt: skip
        for name, san in (("broker", "IP:127.0.0.1"), ("client", "DNS:stream-pairer-client")):
            _openssl(
                "req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
                "-subj", f"/CN={name}", cwd=d,
            )  # fmt: skip
            (d / f"{name}.ext").write_text(f"subjectAltName={san}\n")
            _openssl(
                "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                "-days", days, "-out", f"{name}.pem", "-extfile", f"{name}.ext", cwd=d,
            )  # fmt: skip
        # The broker's PEM key store: its unencrypted PKCS#8 key, its certificate, then the CA.
        (d / "broker-keystore.pem").write_text(
            (d / "broker.key").read_text() + (d / "broker.pem").read_text() + (d / "ca.pem").read_text()
        )
        _openssl(
            "pkey", "-in", "client.key", "-aes256", "-passout", f"pass:{key_password}",
            "-out", "client-encrypted.key", cwd=d,
        )  # fmt: skip

    @property
    def ca(self) -> Path:
        return self.dir / "ca.pem"

    @property
    def other_ca(self) -> Path:
        return self.dir / "other-ca.pem"


class SecureKafkaBroker(KafkaBroker):
    """A single KRaft node with secured client listeners next to the PLAINTEXT one (which stays for
    inter-broker traffic, the controller and test set-up):

    * SASL_SSL: SCRAM-SHA-256 and SCRAM-SHA-512; the users are created by Kafka's own StorageTool
      (`format --add-scram`), the way a KRaft cluster bootstraps its first credentials;
    * SASL_PLAINTEXT: PLAIN (users in the JAAS config) and OAUTHBEARER with unsecured JWS tokens
      (Kafka's OAuthBearerUnsecuredValidatorCallbackHandler: for tests only);
    * SSL: mutual TLS (the client must present a certificate signed by the test CA).

    The broker's certificate names IP 127.0.0.1 only, so a client connecting to "localhost" meets a
    hostname mismatch."""

    def __init__(
        self, directory: str | Path | None = None, *, users: dict[str, str] | None = None, **kw: Any
    ) -> None:
        super().__init__(directory, **kw)
        self.users = dict(users or {"alice": "alice-secret"})
        saved = self._load_state()
        ports = free_ports(3)
        self.sasl_ssl_port: int = saved.get("sasl_ssl_port") or ports[0]
        self.sasl_plaintext_port: int = saved.get("sasl_plaintext_port") or ports[1]
        self.ssl_port: int = saved.get("ssl_port") or ports[2]
        pki_dir = self.dir / "pki"
        self.pki = TestPki(pki_dir) if not (pki_dir / "client-encrypted.key").exists() else _load_pki(pki_dir)

    @property
    def sasl_ssl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.sasl_ssl_port}"

    @property
    def sasl_plaintext_bootstrap(self) -> str:
        return f"127.0.0.1:{self.sasl_plaintext_port}"

    @property
    def ssl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.ssl_port}"

    def _properties(self) -> dict[str, Any]:
        props = super()._properties()
        listeners = {
            "PLAINTEXT": self.port,
            "SASL_SSL": self.sasl_ssl_port,
            "SASL_PLAINTEXT": self.sasl_plaintext_port,
            "SSL": self.ssl_port,
        }
        props["listeners"] = ",".join(
            [
                *(f"{n}://127.0.0.1:{p}" for n, p in listeners.items()),
                f"CONTROLLER://127.0.0.1:{self.controller_port}",
            ]
        )
        props["advertised.listeners"] = ",".join(f"{n}://127.0.0.1:{p}" for n, p in listeners.items())
        props["listener.security.protocol.map"] = (
            ",".join(f"{n}:{n}" for n in [*listeners, "CONTROLLER"] if n != "CONTROLLER")
            + ",CONTROLLER:PLAINTEXT"
        )
        keystore = self.pki.dir / "broker-keystore.pem"
        scram = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
        plain_users = " ".join(f'user_{u}="{p}"' for u, p in self.users.items())
        unsecured = "org.apache.kafka.common.security.oauthbearer.internals.unsecured"
        for name in ("sasl_ssl", "ssl"):
            props[f"listener.name.{name}.ssl.keystore.type"] = "PEM"
            props[f"listener.name.{name}.ssl.keystore.location"] = keystore
        props |= {
            "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
            "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": scram,
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": scram,
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": (
                f"org.apache.kafka.common.security.plain.PlainLoginModule required {plain_users};"
            ),
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": (
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                'unsecuredLoginStringClaim_sub="broker";'
            ),
            "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": (
                f"{unsecured}.OAuthBearerUnsecuredValidatorCallbackHandler"
            ),
            "listener.name.ssl.ssl.truststore.type": "PEM",
            "listener.name.ssl.ssl.truststore.location": self.pki.ca,
            "listener.name.ssl.ssl.client.auth": "required",
        }
        return props

    def _format_args(self) -> list[str]:
        out = []
        for user, password in self.users.items():
            for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                out += ["--add-scram", f"{mech}=[name={user},password={password}]"]
        return out

    def _write_files(self) -> None:
        super()._write_files()
        state = self._load_state() | {
            "sasl_ssl_port": self.sasl_ssl_port,
            "sasl_plaintext_port": self.sasl_plaintext_port,
            "ssl_port": self.ssl_port,
        }
        (self.dir / "broker.json").write_text(json.dumps(state))


def _load_pki(directory: Path) -> TestPki:
    pki = TestPki.__new__(TestPki)
    pki.dir, pki.key_password = directory, "client-key-pass"
    return pki
