"""Issue 13: the sidecar under produce-side faults, each case run as its fault trial
(scripts/fault_trials.py) against a real broker, with `stream-pairer audit` over the real topics as
the judge: 0 lost, and 0 duplicated in exactly-once mode; plus each trial's own checks (no
produce errors or rebuild loops, a refusal that says why, a clean exit within the timeout).

What each proves is in its trial's docstring. STREAM_PAIRER_TRIAL_SEED=N reproduces a run.
"""

from __future__ import annotations

import random
from pathlib import Path

import fault_trials as ft  # scripts/ is on sys.path (see conftest.py)
import kafka_broker as kb
import pytest
from kafka_broker import KafkaBroker

from tests.integration.conftest import require_kafka
from tests.integration.trial_support import SEED, check


async def test_a_deleted_dead_letter_topic_on_a_fresh_group_loses_nothing(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    ctx = ft.Context(tmp_path, kafka_broker)
    result = await ft.trial_dead_letter_topic_deleted(ctx, random.Random(SEED), "dlq-deleted")
    check(result, False, SEED)


async def test_ids_that_inflate_memory_are_dead_lettered(kafka_broker: KafkaBroker, tmp_path: Path) -> None:
    ctx = ft.Context(tmp_path, kafka_broker)
    result = await ft.trial_long_ids(ctx, random.Random(SEED), "long-ids")
    check(result, False, SEED)


@pytest.mark.parametrize("exactly_once", [False, True], ids=["alo", "eos"])
async def test_outputs_fit_a_topic_with_a_small_max_message_bytes(
    kafka_broker: KafkaBroker, tmp_path: Path, exactly_once: bool
) -> None:
    ctx = ft.Context(tmp_path, kafka_broker)
    result = await ft.trial_small_output_limit(ctx, random.Random(SEED), exactly_once, "small-limit")
    check(result, exactly_once, SEED)
    assert result.duplicated == 0  # nothing refused, so nothing replayed, even at-least-once


async def test_a_partition_rebuilt_before_its_first_commit_starts_from_the_reset_position(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    ctx = ft.Context(tmp_path, kafka_broker)
    result = await ft.trial_limit_lowered_before_first_commit(ctx, random.Random(SEED), "limit-before-commit")
    check(result, False, SEED)


@pytest.mark.parametrize("exactly_once", [False, True], ids=["alo", "eos"])
async def test_repartition_with_a_record_over_the_internal_topics_limit(
    kafka_broker: KafkaBroker, tmp_path: Path, exactly_once: bool
) -> None:
    ctx = ft.Context(tmp_path, kafka_broker)
    result = await ft.trial_repartition_big_record(ctx, random.Random(SEED), exactly_once, "repartition-big")
    check(result, exactly_once, SEED)


@pytest.mark.parametrize("exactly_once", [False, True], ids=["alo", "eos"])
async def test_a_null_lineage_header_is_dead_lettered_not_fatal(
    kafka_broker: KafkaBroker, tmp_path: Path, exactly_once: bool
) -> None:
    ctx = ft.Context(tmp_path, kafka_broker)
    result = await ft.trial_bad_lineage_header(ctx, random.Random(SEED), exactly_once, "bad-header")
    check(result, exactly_once, SEED)


async def test_a_checkpoint_topic_with_broker_defaults_is_refused_until_fixed(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    ctx = ft.Context(tmp_path, kafka_broker)
    result = await ft.trial_checkpoint_topic_wrong(ctx, random.Random(SEED), "checkpoint-topic-wrong")
    check(result, False, SEED)


@pytest.mark.parametrize("exactly_once", [False, True], ids=["alo", "eos"])
async def test_sigterm_during_a_broker_outage_exits_0_in_time(tmp_path: Path, exactly_once: bool) -> None:
    require_kafka(kb.DEFAULT_VERSION)
    ctx = ft.Context(tmp_path)
    result = await ft.trial_sigterm_broker_down(ctx, random.Random(SEED), exactly_once, "sigterm-broker-down")
    check(result, exactly_once, SEED)
