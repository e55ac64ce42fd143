"""The start-up GC tuning: collections rarer, never off, applied once per process."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from stream_pairer.ops import gctune


@pytest.fixture
def fresh_gc_state(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts as a new process would (nothing applied yet) and leaves the test
    process's collector as it found it."""
    before = gc.get_threshold()
    enabled = gc.isenabled()
    monkeypatch.setattr(gctune, "_applied", [])
    yield
    gc.set_threshold(*before)
    if enabled:
        gc.enable()
    else:
        gc.disable()


@pytest.mark.usefixtures("fresh_gc_state")
def test_thresholds_raised_and_collector_stays_enabled() -> None:
    gc.set_threshold(700, 10, 10)
    gc.disable()
    assert gctune.tune_gc(freeze=False) == (700, 10, 10)
    assert gc.isenabled()  # rarer collections, never none: cycles must still be freed
    assert gc.get_threshold() == gctune.THRESHOLDS
    assert gctune.THRESHOLDS[0] > 700


@pytest.mark.usefixtures("fresh_gc_state")
def test_applied_once_per_process() -> None:
    gc.set_threshold(700, 10, 10)
    gctune.tune_gc((5000, 20, 30), freeze=False)
    gc.set_threshold(1, 2, 3)  # whatever happens later in the process ...
    assert gctune.tune_gc(freeze=False) == (700, 10, 10)  # ... a second call changes nothing
    assert gc.get_threshold() == (1, 2, 3)


@pytest.mark.usefixtures("fresh_gc_state")
def test_freeze_moves_startup_objects_out_of_the_collector() -> None:
    frozen = gc.get_freeze_count()
    try:
        gctune.tune_gc()
        assert gc.get_freeze_count() > frozen
    finally:
        gc.unfreeze()  # back to the collector, as they were for the rest of the test session


@pytest.mark.usefixtures("fresh_gc_state")
def test_cycles_are_still_collected() -> None:
    gctune.tune_gc(freeze=False)

    class Node:
        def __init__(self) -> None:
            self.me = self

    for _ in range(10):
        Node()
    assert gc.collect() >= 10
