"""`run` refuses, before connecting, a topic layout that reads back its own output and an HTTP
port it cannot bind: one line, exit 2. The bootstrap address is a closed port on 127.0.0.1, so a
check that let the run start would hang in reconnects instead of returning 2 at once."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from stream_pairer.cli.app import main

ROOT = Path(__file__).resolve().parents[2]
BASE = ["run", "--bootstrap-servers", "127.0.0.1:1", "--group-id", "g", "--no-http"]


@pytest.mark.parametrize(
    ("extra", "flag"),
    [
        (["--input-topic", "loop1", "--dead-letter-topic", "{topic}"], "--dead-letter-topic"),
        (["--input-topic", "loop1", "--pairs-topic", "loop1"], "--pairs-topic"),
        (["--input-topic", "loop1", "--orphans-topic", "{topic}"], "--orphans-topic"),
        (["--input-topic", "a", "--checkpoint-topic", "{topic}"], "--checkpoint-topic"),
        (["--input-topic", "a", "--input-topic", "a.pairs"], "--pairs-topic"),  # default template
        (["--input-topic", "a", "--repartition", "--repartition-topic", "{topic}"], "--repartition-topic"),
        (
            ["--input-topic", "a", "--repartition", "--dead-letter-topic", "{topic}.by-conversation"],
            "--dead-letter-topic",
        ),
        (["--input-topic", ""], "--input-topic"),
    ],
)
def test_output_topic_that_is_read_back_is_refused_before_connecting(
    extra: list[str], flag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*BASE, *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and flag in err[0], err


def test_same_topic_from_the_environment_is_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("STREAM_PAIRER_INPUT_TOPIC", "events")
    monkeypatch.setenv("STREAM_PAIRER_DEAD_LETTER_TOPIC", "events")
    assert main(BASE) == 2
    assert "--dead-letter-topic 'events' is 'events'" in capsys.readouterr().err


def test_http_port_in_use_is_one_line_naming_the_port_and_exit_2() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [
                sys.executable, "-m", "stream_pairer", "run", "--bootstrap-servers", "127.0.0.1:1",
                "--input-topic", "a", "--group-id", "g", "--http-host", "127.0.0.1",
                "--http-port", str(port), "--log-level", "ERROR",
            ],
            check=False, capture_output=True, text=True, timeout=60,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"127.0.0.1:{port}" in lines[0] and "--http-port" in lines[0], lines
