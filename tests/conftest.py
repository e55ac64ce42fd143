"""Suite-wide switches for running the tests against one engine (see tests/engine_helpers.py).

`STREAM_PAIRER_TEST_UNTAGGED=1` (test-only) makes the `pair` and `run` commands build no failure
tagger in this process ; tests about tagging itself then fail, which is how a run with it tells
a pairing difference from a tagging one.
"""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _untagged_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    if os.environ.get("STREAM_PAIRER_TEST_UNTAGGED") != "1":
        return
    from stream_pairer.cli.commands import pair, run  # noqa: PLC0415 - only for this switch

    monkeypatch.setattr(pair, "tagger_from_args", lambda _args: None)
    monkeypatch.setattr(run, "tagger_from_args", lambda _args: None)
