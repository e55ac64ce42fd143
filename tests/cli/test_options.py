"""cli/options.py: option values from flags and from STREAM_PAIRER_* variables are checked alike.

A value the option refuses gives one line that names the option (or the variable) and exit 2, never
a traceback, never exit 1, and never the value of a sensitive option."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from stream_pairer.cli.app import main
from stream_pairer.cli.options import (
    add_option,
    dotted_path,
    non_negative_float,
    positive_float,
)
from stream_pairer.errors import EnvOptionError

ROOT = Path(__file__).resolve().parents[2]
CANARY = "canary-Zq9-do-not-print"


def _cli(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real entry point in a child process: what an operator sees, traceback or not."""
    import os  # noqa: PLC0415

    full = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "stream_pairer", *argv],
        check=False,
        capture_output=True,
        text=True,
        env=full,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("variable", "value", "argv"),
    [
        ("STREAM_PAIRER_MAX_CONVERSATIONS", "0", ["pair", "--help"]),
        ("STREAM_PAIRER_MAX_CONVERSATIONS", "0", ["pair", "x.jsonl", "-o", "out"]),
        ("STREAM_PAIRER_CALL_TIMEOUT", "abc", ["pair", "x.jsonl", "-o", "out"]),
        ("STREAM_PAIRER_CALL_TIMEOUT", "nan", ["run", "--help"]),
        ("STREAM_PAIRER_HTTP_PORT", "70000", ["run", "--help"]),
        ("STREAM_PAIRER_AUTO_OFFSET_RESET", "sometimes", ["run", "--help"]),
        ("STREAM_PAIRER_QUIET", "maybe", ["pair", "x.jsonl", "-o", "out"]),
        ("STREAM_PAIRER_CONVERSATION_FIELD", "a..b", ["pair", "x.jsonl", "-o", "out"]),
        ("STREAM_PAIRER_AUDIT_TIMEOUT", "-1", ["audit", "--help"]),
    ],
)
def test_bad_environment_value_is_one_line_naming_the_variable_and_exit_2(
    variable: str, value: str, argv: list[str]
) -> None:
    done = _cli(*argv, env={variable: value})
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and variable in lines[0], done.stderr
    assert "ArgumentTypeError" not in lines[0] and "positive_" not in lines[0]


def test_bad_environment_value_in_process_returns_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("STREAM_PAIRER_MAX_CONVERSATIONS", "0")
    assert main(["pair", "x.jsonl", "-o", "out"]) == 2
    err = capsys.readouterr().err
    assert "STREAM_PAIRER_MAX_CONVERSATIONS='0' is not valid: must be >= 1" in err


def test_sensitive_option_value_and_reason_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    """The parser's own message may quote the value (`expected a number, got '...'`): for a
    sensitive option neither the value nor that message is shown."""
    monkeypatch.setenv("STREAM_PAIRER_SOME_SECONDS", CANARY)
    with pytest.raises(EnvOptionError) as err:
        add_option(argparse.ArgumentParser(), "--some-seconds", type=positive_float, help="x", sensitive=True)
    assert "STREAM_PAIRER_SOME_SECONDS is not valid (value not shown)" in str(err.value)
    assert CANARY not in str(err.value)


def test_switch_and_list_variables_are_checked_like_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    parser = argparse.ArgumentParser()
    monkeypatch.setenv("STREAM_PAIRER_FLAG", "Off")
    add_option(parser, "--flag", action="store_true", default=True, help="x")
    assert parser.parse_args([]).flag is False
    monkeypatch.setenv("STREAM_PAIRER_LIMITS", "1,0")
    with pytest.raises(EnvOptionError, match="STREAM_PAIRER_LIMITS='1,0' is not valid: must be > 0"):
        add_option(parser, "--limits", action="append", type=positive_float, help="x")


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "infinity", "1e308"])
def test_float_parsers_refuse_non_finite_and_huge_values(value: str) -> None:
    for parse in (positive_float, non_negative_float):
        with pytest.raises(argparse.ArgumentTypeError) as err:
            parse(value)
        assert "positive_float" not in str(err.value) and value in str(err.value)


def test_float_parsers_still_take_ordinary_values() -> None:
    assert positive_float("0.5") == 0.5 and non_negative_float("0") == 0.0
    assert positive_float("1e9") == 1e9


@pytest.mark.parametrize(
    "argv",
    [
        ["pair", "x.jsonl", "-o", "out", "--call-timeout", "nan"],
        ["pair", "x.jsonl", "-o", "out", "--result-grace", "nan"],
        ["pair", "x.jsonl", "-o", "out", "--conversation-ttl", "nan"],
        ["pair", "x.jsonl", "-o", "out", "--max-conversation-seconds", "nan"],
        ["run", "--tick-interval", "nan"],
        ["run", "--commit-interval", "nan"],
        ["run", "--poll-timeout", "nan"],
        ["run", "--prefetch-backoff", "nan"],
        ["run", "--shutdown-timeout", "nan"],
        ["run", "--backoff-max", "nan"],
        ["run", "--ready-timeout", "nan"],
        ["run", "--request-timeout", "inf"],
        ["run", "--session-timeout", "1e308"],
    ],
)
def test_non_finite_flag_values_are_usage_errors(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {argv[-2]}:" in err and ("finite" in err or "at most" in err)


def test_conversation_field_must_name_a_field(capsys: pytest.CaptureFixture[str]) -> None:
    for bad in ("", " ", "a..b", ".a", "a."):
        with pytest.raises(argparse.ArgumentTypeError):
            dotted_path(bad)
    assert dotted_path("metadata.session_id") == "metadata.session_id"
    with pytest.raises(SystemExit) as exc:
        main(["pair", "x.jsonl", "-o", "out", "--conversation-field", ""])
    assert exc.value.code == 2 and "--conversation-field" in capsys.readouterr().err
