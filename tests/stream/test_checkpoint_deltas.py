"""Delta checkpoints, pure: the codec of a delta, the chain a reader assembles from a checkpoint
partition's records (snapshot + deltas), and what it does when records are compacted, lost or do
not match the committed offset. (The engines' side, that a written chain assembles to exactly the
whole checkpoint, is tests/stream/test_checkpoint_chain.py.)"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from stream_pairer.stream.checkpoint import (
    Checkpoint,
    decode,
    encode,
    key,
    read_chain,
    snapshot_key,
)

Pos = tuple[int, int]


def snap(token: str, held: set[Pos], clocks: dict[Pos, float], committed: int = 10) -> Checkpoint:
    return Checkpoint(
        "g,x", "t", 3, committed, committed + 5, 1.7e12, tuple(sorted(held)), token,
        tuple(sorted((o, b, c) for (o, b), c in clocks.items())),
    )  # fmt: skip


def delta(prev: Checkpoint, epoch: str, seq: int, token: str, add: set[Pos], drop: set[Pos],
          set_clocks: dict[Pos, float], unclock: set[Pos]) -> Checkpoint:  # fmt: skip
    """The delta from `prev` to a state with the header `snap` gives at committed + 1."""
    committed = prev.committed + 1
    return Checkpoint(
        "g,x", "t", 3, committed, committed + 5, 1.7e12, tuple(sorted(add)), token,
        tuple(sorted((o, b, c) for (o, b), c in set_clocks.items())), epoch=epoch, seq=seq,
        prev=prev.token, released=tuple(sorted(drop)), unclocked=tuple(sorted(unclock)),
    )  # fmt: skip


def test_a_delta_round_trips_and_a_snapshot_keeps_the_version_1_format() -> None:
    s = snap("s", {(10, 0), (12, 1)}, {(10, 0): 5.0})
    d = delta(s, "s", 1, "d1", {(20, 0)}, {(10, 0)}, {(12, 1): 7.5}, {(10, 0)})
    assert decode(encode(d)) == d and decode(encode(s)) == s
    assert encode(s).startswith(b'{"v":1,') and encode(d).startswith(b'{"v":2,')
    # Released offsets can lie before the delta's committed offset: negative offset deltas.
    d2 = delta(s, "s", 1, "d1", set(), {(3, 0), (4, 2)}, {}, {(3, 0)})
    assert decode(encode(d2)) == d2


def test_keys_name_the_partition_and_the_delta_slot() -> None:
    base = key("g,x", "t", 3)  # a comma in the group id does not confuse the slot
    assert snapshot_key(base) == (base, 0)
    assert snapshot_key(key("g,x", "t", 3, 17)) == (base, 17)


class World:
    """A random life of a held set and clocks, written as a chain; the states by token."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.held: set[Pos] = set()
        self.clocks: dict[Pos, float] = {}
        self.states: dict[str, Checkpoint] = {}
        self.log: list[tuple[bytes, bytes | None]] = []
        self.epoch = ""
        self.seq = 0
        self.last: Checkpoint | None = None
        self.n = 0

    def step(self, as_snapshot: bool) -> Checkpoint:
        rng = self.rng
        add = {(rng.randrange(100), rng.randrange(3)) for _ in range(rng.randrange(4))}
        drop = set(rng.sample(sorted(self.held), min(len(self.held), rng.randrange(4))))
        add -= drop
        self.held = (self.held - drop) | add
        unclock = {p for p in self.clocks if p in drop or rng.random() < 0.2}
        for p in unclock:
            del self.clocks[p]
        set_clocks = {p: float(rng.randrange(10**6)) for p in add if rng.random() < 0.5}
        self.clocks.update(set_clocks)
        self.n += 1
        token = f"t{self.n}"
        whole = snap(token, self.held, self.clocks, committed=self.n)
        if as_snapshot or self.last is None:
            rec, self.epoch, self.seq = whole, token, 0
        else:
            self.seq += 1
            rec = delta(self.last, self.epoch, self.seq, token, add, drop, set_clocks, unclock)
        self.last = rec
        self.states[token] = whole
        self.log.append((key(rec.group, rec.topic, rec.partition, rec.seq), encode(rec)))
        return rec


def compact(log: list[tuple[bytes, bytes | None]], upto: int) -> list[tuple[bytes, bytes | None]]:
    newest = {k: i for i, (k, _) in enumerate(log)}
    return [r for i, r in enumerate(log[:upto]) if newest[r[0]] == i] + log[upto:]


@settings(deadline=None)  # no timed tests: a loaded machine must not fail it
@given(st.integers(0, 2**32), st.lists(st.booleans(), min_size=1, max_size=25), st.data())
def test_the_chain_reads_back_every_state_of_the_live_epoch_after_any_compaction(
    seed: int, snapshots: list[bool], data: st.DataObject
) -> None:
    w = World(seed)
    epoch_start = 0
    for i, as_snapshot in enumerate(snapshots):
        if w.step(as_snapshot).seq == 0:
            epoch_start = i
    upto = data.draw(st.integers(0, len(w.log)))
    chain = read_chain(compact(w.log, upto))
    assert chain is not None
    live = [f"t{i + 1}" for i in range(epoch_start, len(snapshots))]
    for token in live:  # every state of the live chain (at-least-once may commit any of them)
        want = w.states[token]
        assert chain.find(want.committed, want.metadata) == want
    assert chain.newest.token == live[-1]
    for token in set(w.states) - set(live):  # an earlier epoch's state: not found (plain replay)
        old = w.states[token]
        assert chain.find(old.committed, old.metadata) is None


def test_a_delta_lost_before_its_commit_ends_the_chain_before_it() -> None:
    """A crash between writing a delta and committing the offset: the delta is in the log and
    the commit names its predecessor, found exactly. A delta that never became readable (an
    aborted transaction) ends the chain: a later delta built on it is not applied."""
    w = World(7)
    for as_snapshot in (True, False, False, False):
        w.step(as_snapshot)
    chain = read_chain(w.log)
    assert chain is not None and len(chain.deltas) == 3
    assert chain.find(2, w.states["t3"].metadata) is None  # offset and token must both match
    assert chain.find(3, w.states["t3"].metadata) == w.states["t3"]
    lost = w.log[:2] + w.log[3:]  # t3 never readable: t4, built on it, must not be applied
    chain = read_chain(lost)
    assert chain is not None and [d.token for d in chain.deltas] == ["t2"]
    assert chain.find(4, w.states["t4"].metadata) is None
    assert chain.find(2, w.states["t2"].metadata) == w.states["t2"]


def test_a_token_the_chain_does_not_know_is_the_safe_path() -> None:
    w = World(3)
    for as_snapshot in (True, False, False):
        w.step(as_snapshot)
    chain = read_chain(w.log)
    assert chain is not None
    assert chain.find(3, "sp1:someone-else") is None
    assert chain.find(None, "") is None  # no commit at all


def test_leftover_deltas_of_an_older_epoch_and_garbage_are_skipped() -> None:
    w = World(11)
    for as_snapshot in (True, False, False, False, False, True, False):
        w.step(as_snapshot)
    # Slots 2-4 of the first epoch stay in the log (compaction keeps them: nothing reused them).
    log = compact(w.log, len(w.log))
    assert sum(1 for k, _ in log if snapshot_key(k)[1] > 0) == 4
    log.append((key("g,x", "t", 3, 2), b"not a checkpoint"))
    chain = read_chain(log)
    assert chain is not None and chain.snapshot.token == "t6" and [d.token for d in chain.deltas] == ["t7"]
    assert chain.find(7, w.states["t7"].metadata) == w.states["t7"]


def test_no_snapshot_or_an_unreadable_one_means_no_chain() -> None:
    w = World(5)
    for as_snapshot in (True, False):
        w.step(as_snapshot)
    assert read_chain(w.log[1:]) is None  # only a delta (its snapshot not written yet, or lost)
    assert read_chain([*w.log, (key("g,x", "t", 3), b"garbage")]) is None
    assert read_chain([]) is None


def test_an_old_single_checkpoint_is_a_chain_of_its_own() -> None:
    """A checkpoint written before deltas (version 1, even the `stream_ms` one) restores as is."""
    old = b'{"v":1,"group":"g","topic":"t","partition":3,"committed":100,"processed":120,' \
        b'"stream_ms":1741944400000.0,"token":"tok","held":[0,5]}'  # fmt: skip
    chain = read_chain([(key("g", "t", 3), old)])
    assert chain is not None and chain.deltas == ()
    got = chain.find(100, "sp1:tok")
    assert got is not None and got.held == ((100, 0), (105, 0)) and got.processing_ms == 1741944400000.0
