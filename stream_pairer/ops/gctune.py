"""Cyclic-GC settings for a long-running pairing process (`stream-pairer run` and `pair`).

The engine holds every open call and waiting result (the `ToolEvent`, its decoded block, `Held`,
per-conversation dicts): with 100k open conversations that is millions of container objects, and
with CPython's default thresholds (700, 10, 10) the cyclic collector walks them again and again
although almost none of them is garbage (held state is freed by reference counting when its pair
or orphan is emitted), and its pauses land in the sidecar's latency tail (figures: BENCHMARKS.md,
"Figures behind constants in the code").

Why the collector stays enabled rather than being switched off: reference cycles do occur in this
process (asyncio futures and tasks, exceptions holding their traceback's frames, aiokafka's
internals), and only the cyclic collector frees them; without it each would leak for the life of
a process that runs for weeks. Larger thresholds only make collections rarer: a cycle now waits
until 100k more container objects exist (instead of 700) before a young collection frees it, and
objects that die by reference counting before then never cost the collector anything.
The effect is measured by `python bench/engine_bench.py --conversations 100000 --gc tuned`.

Why `gc.freeze()` once at start-up: the objects alive then (modules, functions, classes, the parsed
configuration) live as long as the process; moving them to the permanent generation keeps every
later full collection from walking them again. A small gain (within noise in the engine benchmark,
whose start-up heap is ~17k objects), and cheap. Freezing *after* state has built up does not help
(measured: the objects created afterwards are collected as before), so it is done once, early.
"""

from __future__ import annotations

import gc
from typing import Final

# (young, middle, old). A young collection every 100k net new container objects instead of 700,
# a middle one every 50 young ones; full collections are further gated by CPython itself (only
# when the objects promoted since the last full one exceed 25 % of the old generation).
THRESHOLDS: Final = (100_000, 50, 100)

_applied: list[tuple[int, int, int]] = []


def tune_gc(thresholds: tuple[int, int, int] = THRESHOLDS, *, freeze: bool = True) -> tuple[int, int, int]:
    """Apply the thresholds (and freeze what is alive now) once per process; later calls only
    return the thresholds in force, so a command called twice in one process (tests) does not
    freeze again. Returns the thresholds that were in force before the first call."""
    if _applied:
        return _applied[0]
    before = gc.get_threshold()
    _applied.append(before)
    gc.enable()
    if freeze:
        gc.collect()  # garbage alive now would otherwise be frozen with the rest, never freed
        gc.freeze()
    gc.set_threshold(*thresholds)
    return before
