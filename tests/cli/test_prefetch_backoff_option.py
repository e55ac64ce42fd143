"""`--prefetch-backoff` reaches the sidecar's config (issue 25; fetching.py applies it to the consumer,
tests/integration/test_sidecar_fetch_handoff.py checks that on a real broker)."""

from __future__ import annotations

import os

import pytest

from stream_pairer.adapters.kafka.sidecar import SidecarConfig
from stream_pairer.cli.app import build_parser
from stream_pairer.cli.commands.run import config_from_args

REQUIRED = ["--bootstrap-servers", "127.0.0.1:9092", "--input-topic", "t", "--group-id", "g"]


@pytest.fixture(autouse=True)
def no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("STREAM_PAIRER_"):
            monkeypatch.delenv(name)


def parsed(*argv: str) -> SidecarConfig:
    return config_from_args(build_parser("run").parse_args(["run", *REQUIRED, *argv]))


def test_the_flag_and_its_variable_set_the_config(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parsed().prefetch_backoff_s == 0.1  # aiokafka's own (0 measured slower, fetching.py)
    assert parsed("--prefetch-backoff", "0").prefetch_backoff_s == 0.0
    monkeypatch.setenv("STREAM_PAIRER_PREFETCH_BACKOFF", "0.02")
    assert parsed().prefetch_backoff_s == 0.02


def test_a_negative_value_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parsed("--prefetch-backoff", "-1")
    assert exc.value.code == 2
    assert "--prefetch-backoff" in capsys.readouterr().err
    with pytest.raises(ValueError, match="prefetch_backoff_s"):
        SidecarConfig(bootstrap_servers="b", input_topics=("t",), group_id="g", prefetch_backoff_s=-0.5)
