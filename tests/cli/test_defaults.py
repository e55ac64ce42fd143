"""Each default is defined once: the command-line options read theirs from the config classes, so a
run with no options configures exactly what the classes' own defaults say."""

from __future__ import annotations

import dataclasses
import os

import pytest

from stream_pairer.adapters.kafka.sidecar import SidecarConfig
from stream_pairer.cli.app import build_parser
from stream_pairer.cli.commands.run import config_from_args
from stream_pairer.cli.options import engine_config_from_args, format_config_from_args, tagger_from_args
from stream_pairer.core.config import TaggingConfig
from stream_pairer.core.formats import DEFAULT_CONFIG
from stream_pairer.stream.partition import OutputTopics
from tests.reference.engine import EngineConfig
from tests.reference.tagging import FailureTagger

REQUIRED = ["--bootstrap-servers", "127.0.0.1:9092", "--input-topic", "t", "--group-id", "g"]


@pytest.fixture(autouse=True)
def no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The environment is a source of option values too; these tests want the bare defaults."""
    for name in list(os.environ):
        if name.startswith("STREAM_PAIRER_"):
            monkeypatch.delenv(name)


def tagger_limits(t: FailureTagger | TaggingConfig) -> tuple[object, ...]:
    return (t.max_calls, t.max_ms, t.max_hashes, t.max_total, t.schemas)


def test_run_without_options_is_the_sidecar_config_defaults() -> None:
    got = config_from_args(build_parser("run").parse_args(["run", *REQUIRED]))
    want = SidecarConfig(bootstrap_servers="127.0.0.1:9092", input_topics=("t",), group_id="g")
    own = {"client_id"}  # built from --instance-id (the host name) on purpose
    compared = [f.name for f in dataclasses.fields(SidecarConfig) if f.name not in own | {"tagger"}]
    assert len(compared) > 30
    assert {n: getattr(got, n) for n in compared} == {n: getattr(want, n) for n in compared}
    assert got.engine == EngineConfig() and got.formats == DEFAULT_CONFIG
    assert isinstance(got.tagger, TaggingConfig)
    assert got.tagger == TaggingConfig()
    assert tagger_limits(got.tagger) == tagger_limits(FailureTagger())  # the reference model's too


def test_pair_without_options_is_the_engine_format_and_tagger_defaults() -> None:
    args = build_parser("pair").parse_args(["pair", "in.jsonl", "--out", "o"])
    assert engine_config_from_args(args) == EngineConfig()
    assert format_config_from_args(args) == DEFAULT_CONFIG
    assert tagger_limits(tagger_from_args(args)) == tagger_limits(FailureTagger())


def test_output_topic_templates_have_one_definition() -> None:
    cfg = SidecarConfig(bootstrap_servers="b", input_topics=("t",), group_id="g")
    assert (
        cfg.outputs("t")
        == OutputTopics.for_input("t")
        == OutputTopics("t.pairs", "t.orphans", "t.dead-letter")
    )


def test_an_option_default_moves_with_its_config_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """The counter-check: change a class default and the option follows (nothing is copied)."""
    field = SidecarConfig.__dataclass_fields__["max_records"]
    monkeypatch.setattr(field, "default", 7)
    assert build_parser("run").parse_args(["run", *REQUIRED]).max_records == 7


# `--prefetch-backoff` (issue 25): fetching.py applies it to the consumer; tests/integration/
# test_sidecar_fetch_handoff.py checks that on a real broker.
def run_config(*argv: str) -> SidecarConfig:
    return config_from_args(build_parser("run").parse_args(["run", *REQUIRED, *argv]))


def test_prefetch_backoff_flag_and_variable_set_the_config(monkeypatch: pytest.MonkeyPatch) -> None:
    assert run_config().prefetch_backoff_s == 0.1  # aiokafka's own (0 measured slower, fetching.py)
    assert run_config("--prefetch-backoff", "0").prefetch_backoff_s == 0.0
    monkeypatch.setenv("STREAM_PAIRER_PREFETCH_BACKOFF", "0.02")
    assert run_config().prefetch_backoff_s == 0.02


def test_a_negative_prefetch_backoff_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        run_config("--prefetch-backoff", "-1")
    assert exc.value.code == 2
    assert "--prefetch-backoff" in capsys.readouterr().err
    with pytest.raises(ValueError, match="prefetch_backoff_s"):
        SidecarConfig(bootstrap_servers="b", input_topics=("t",), group_id="g", prefetch_backoff_s=-0.5)


def test_no_fetch_ahead_turns_the_hand_off_off() -> None:
    assert run_config().fetch_ahead is True
    assert run_config("--no-fetch-ahead").fetch_ahead is False
