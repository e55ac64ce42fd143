"""OutputWatch (acks.py): the clock /readyz reads runs from the first output handed over until
outputs flow again, through failures and rebuilds; nothing owed clears it."""

from __future__ import annotations

import asyncio

from stream_pairer.adapters.kafka.acks import OutputWatch


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def test_a_failed_batch_keeps_the_clock_running_until_an_acknowledgement() -> None:
    clock = Clock()
    watch = OutputWatch(clock)
    loop = asyncio.get_running_loop()
    watch.waiting("t.dead-letter")
    clock.now += 4
    refused = loop.create_future()
    watch.track("t.dead-letter", refused)
    refused.set_exception(RuntimeError("gone"))
    await asyncio.sleep(0)
    watch.partition_failed("t[0]", "rebuilt")
    clock.now += 6
    watch.settle(all_committed=True)  # a failed partition has not committed again: still owed
    stuck = watch.stuck()
    assert stuck is not None and stuck[0] == 10 and "t.dead-letter" in stuck[1] and "gone" in stuck[1]
    acked = loop.create_future()
    watch.track("t.dead-letter", acked)
    acked.set_result(None)
    await asyncio.sleep(0)
    stuck = watch.stuck()
    assert stuck is not None and "partition t[0]" in stuck[1]  # acknowledged, but not committed yet
    watch.partition_delivered("t[0]")
    assert watch.stuck() is None


async def test_settle_clears_only_when_nothing_is_in_flight_and_all_committed() -> None:
    watch = OutputWatch(Clock())
    pending = asyncio.get_running_loop().create_future()
    watch.track("t.pairs", pending)
    watch.settle(all_committed=True)
    assert watch.stuck() is not None  # a batch is in flight
    pending.cancel()
    await asyncio.sleep(0)
    watch.settle(all_committed=False)
    assert watch.stuck() is not None
    watch.settle(all_committed=True)
    assert watch.stuck() is None
