"""Failure-point tagging, termination: repeated identical calls, the call and wall-time caps per
request, and the bounded memory of the repeat check (its key, its per-conversation and total bounds).

Split from test_tagging.py (see its docstring for how the events are built: tagging_helpers.py).
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tests.core.tagging_helpers import T0, call, run_calls
from tests.reference.engine import Engine, EngineConfig
from tests.reference.state import Conversation
from tests.reference.tagging import MAX_PENDING_REQUESTS, TERMINATION, FailureTagger

# ---------------------------------------------------------------------------------------------
# termination


def test_repeated_identical_call_names_the_earlier_call() -> None:
    tagger = FailureTagger()
    a, b, c = run_calls(
        tagger,
        [
            call(
                "search_products", {"query": "shoes", "filters": {"size": 270, "color": "black"}}, "toolu_01"
            ),
            call(
                "search_products", {"filters": {"color": "black", "size": 270}, "query": "shoes"}, "toolu_02"
            ),
            call(
                "search_products", {"query": "shoes", "filters": {"size": 270, "color": "black"}}, "toolu_03"
            ),
        ],
    )
    assert a.failures == []
    assert b.failure == TERMINATION and c.failure == TERMINATION
    assert (
        b.failure_detail is not None
        and "repeats call toolu_01" in b.failure_detail
        and "#2" in b.failure_detail
    )
    assert (
        c.failure_detail is not None
        and "repeats call toolu_01" in c.failure_detail
        and "#3" in c.failure_detail
    )


def test_openai_string_arguments_repeat_a_decoded_object() -> None:
    tagger = FailureTagger()
    _, b = run_calls(
        tagger, [call("s", {"q": "x", "n": 1}, "a"), call("s", '{"n": 1, "q": "x"}', "b", fmt="openai_chat")]
    )
    assert b.failure == TERMINATION


@pytest.mark.parametrize(
    ("name", "args", "conv_id"),
    [
        ("search_products", {"query": "shoes", "limit": 11}, "c1"),  # arguments differ
        ("search_products", {"query": "shoes", "limit": 10.5}, "c1"),  # a value differs
        ("lookup_order", {"query": "shoes", "limit": 10}, "c1"),  # tool differs
        ("search_products", {"query": "shoes", "limit": 10}, "c2"),  # conversation differs
    ],
)
def test_not_a_repeat(name: str, args: dict[str, Any], conv_id: str) -> None:
    tagger = FailureTagger()
    convs = {"c1": Conversation("c1"), "c2": Conversation("c2")}
    tagger.on_call(call("search_products", {"query": "shoes", "limit": 10}, "a"), convs["c1"])
    second = call(name, args, "b", conv=conv_id)
    tagger.on_call(second, convs[conv_id])
    assert second.failures == []


def test_redelivered_call_is_neither_a_repeat_nor_counted() -> None:
    tagger = FailureTagger(max_calls_per_conversation=2)
    conv = Conversation("c1")
    a = call("s", {"q": 1}, "same")
    again = call("s", {"q": 1}, "same")
    b = call("s", {"q": 2}, "b")
    run_calls(tagger, [a, again, b], conv)
    assert again.failures == [] and b.failures == []  # b is call 2 of 2, not 3


def test_calls_without_ids_repeat_by_position() -> None:
    tagger = FailureTagger()
    _, b = run_calls(
        tagger,
        [
            call("get_weather", {"city": "Seoul"}, None, fmt="openai_legacy"),
            call("get_weather", {"city": "Seoul"}, None, fmt="openai_legacy"),
        ],
    )
    assert b.failure_detail is not None and "repeats call #1 (no id)" in b.failure_detail


@pytest.mark.parametrize("cap", [1, 3, 12])
def test_call_cap_tags_only_the_crossing_call(cap: int) -> None:
    tagger = FailureTagger(max_calls_per_conversation=cap)
    calls = run_calls(tagger, [call("s", {"page": i}, f"id{i}") for i in range(cap + 3)])
    tagged = [i + 1 for i, c in enumerate(calls) if c.failure == TERMINATION]
    assert tagged == [cap + 1]  # the call that crosses the cap; later ones are not tagged again
    assert calls[cap].failure_detail == f"call {cap + 1} in this request, past the cap of {cap}"
    assert tagger.crossings == {"calls": 1}


def test_default_cap_is_twelve() -> None:
    calls = run_calls(FailureTagger(), [call("s", {"page": i}, f"id{i}") for i in range(13)])
    assert [c.failure for c in calls[:12]] == [None] * 12
    assert calls[12].failure == TERMINATION


def test_call_cap_counts_per_request() -> None:
    """The issue's case: 30 requests of 7 calls each under a cap of 12 cross nothing (counting
    per conversation tagged 198 of those 210 calls); a request of 13 crosses once."""
    tagger = FailureTagger(max_calls_per_conversation=12)
    conv = Conversation("c1")
    calls = []
    for r in range(30):
        tagger.on_request(conv, T0 + r * 60_000)
        calls += run_calls(
            tagger, [call("s", {"r": r, "i": i}, f"r{r}-{i}", ts=T0 + r * 60_000 + i) for i in range(7)], conv
        )
    assert [c for c in calls if c.failures] == []
    tagger.on_request(conv, T0 + 31 * 60_000)
    last = run_calls(tagger, [call("s", {"x": i}, f"x{i}", ts=T0 + 31 * 60_000 + i) for i in range(14)], conv)
    assert [i for i, c in enumerate(last) if c.failure == TERMINATION] == [12]
    assert tagger.crossings == {"calls": 1}


def test_wall_time_cap_from_the_request_start() -> None:
    tagger = FailureTagger(max_conversation_ms=60_000)
    conv = Conversation("c1")
    tagger.on_request(conv, T0 - 30_000)  # the prompt, 30 s before the first call
    calls = run_calls(
        tagger,
        [
            call("s", {"p": 0}, "a", ts=T0),
            call("s", {"p": 1}, "b", ts=T0 + 30_000),  # exactly at the cap: not past it
            call("s", {"p": 2}, "c", ts=None),  # no time: cannot be judged
            call("s", {"p": 3}, "d", ts=T0 + 30_001),
            call("s", {"p": 4}, "e", ts=T0 + 90_000),  # past it too, but this request already crossed
        ],
        conv,
    )
    assert [c.failure for c in calls] == [None, None, None, TERMINATION, None]
    assert calls[3].failure_detail == "call at +60.0 s after the start of this request, past the 60 s cap"
    tagger.on_request(conv, T0 + 100_000)  # the next request starts the clock again
    (f,) = run_calls(tagger, [call("s", {"p": 5}, "f", ts=T0 + 120_000)], conv)
    assert f.failures == []
    assert tagger.crossings == {"time": 1}


def test_without_request_marks_time_counts_from_the_first_call() -> None:
    tagger = FailureTagger(max_conversation_ms=60_000)
    calls = run_calls(tagger, [call("s", {"p": 0}, "a", ts=T0), call("s", {"p": 1}, "b", ts=T0 + 60_001)])
    assert [c.failure for c in calls] == [None, TERMINATION]


def test_zero_disables_a_brake() -> None:
    tagger = FailureTagger(max_calls_per_conversation=0, max_conversation_ms=0)
    calls = run_calls(tagger, [call("s", {"p": i}, f"i{i}", ts=T0 + i * 3_600_000) for i in range(30)])
    assert all(c.failures == [] for c in calls)


def test_repeat_memory_is_bounded() -> None:
    tagger = FailureTagger(max_hashes_per_conversation=2)
    conv = Conversation("c1")
    calls = run_calls(
        tagger,
        [
            call("s", {"p": 1}, "a"),
            call("s", {"p": 2}, "b"),
            call("s", {"p": 3}, "c"),
            call("s", {"p": 1}, "d"),  # its original was forgotten: not detected (documented bound)
            call("s", {"p": 3}, "e"),
        ],
        conv,
    )
    assert len(conv.tags.seen) <= 2
    assert [c.failure for c in calls] == [None, None, None, None, TERMINATION]


def test_state_lives_in_the_conversation() -> None:
    tagger = FailureTagger()
    c1 = call("s", {"q": 1}, "a")
    tagger.on_call(c1, Conversation("c1"))
    c2 = call("s", {"q": 1}, "b")
    tagger.on_call(c2, Conversation("c1"))  # a new (evicted and recreated) conversation: state gone
    assert c2.failures == []


# ---------------------------------------------------------------------------------------------
# the repeat check's key and memory


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ({"n": 1}, {"n": 1.0}),  # JSON text differs: 1 vs 1.0
        ({"n": 1}, {"n": True}),
        ({"n": 1}, {"n": "1"}),
        ({"n": -1}, {"n": -2}),  # hash(-1) == hash(-2) in CPython: must not make a repeat
        ({"n": 5}, {"n": 5 + 2**61 - 1}),  # int hashes wrap modulo 2^61 - 1
        ({"n": 0.0}, {"n": -0.0}),
        ({"n": None}, {"n": []}),
        ({"l": [1, 2]}, {"l": [2, 1]}),  # array order matters
        ({"a": {"b": 1}}, {"a": {"b": 2}}),
        ({"a": 1, "b": 2}, {"a": 2, "b": 1}),
        ({"v": list(range(100))}, {"v": list(range(99))}),  # long arrays (serialized, not walked)
        ({"v": list(range(100))}, {"v": [*range(99), 100]}),
    ],
)
def test_repeat_key_tells_different_arguments_apart(first: Any, second: Any) -> None:
    _, b = run_calls(FailureTagger(), [call("s", first, "a"), call("s", second, "b")])
    assert b.failures == []


@pytest.mark.parametrize(
    "args",
    [
        {"q": "검색어 with ASCII", "n": 1, "f": 1.5, "t": True, "z": None},
        {"nested": {"b": [1, {"c": "x"}], "a": []}},
        {"big": {f"k{i}": i for i in range(40)}},  # a large object: serialized with sorted keys
        {"v": [0.5] * 50},
        "plain text",
        ["a", 1],
        {},
    ],
)
def test_repeat_key_is_canonical(args: Any) -> None:
    """The same arguments, rebuilt (fresh objects, object keys in reverse order), are a repeat."""

    def rebuilt(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: rebuilt(x) for k, x in reversed(list(v.items()))}
        if isinstance(v, list):
            return [rebuilt(x) for x in v]
        return orjson.loads(orjson.dumps(v))

    _, b = run_calls(FailureTagger(), [call("s", args, "a"), call("s", rebuilt(args), "b")])
    assert TERMINATION in b.failures  # (plain text is also argument_construction: not JSON)


def test_repeat_check_does_not_pin_utf8_copies_in_held_arguments() -> None:
    """Serializing a non-ASCII str makes CPython keep its UTF-8 form inside the string for its
    life; the repeat check must not do that to the arguments of every held call."""
    import tracemalloc  # noqa: PLC0415 - only this test traces allocations

    tagger = FailureTagger()
    text = "한국어 검색어 " * 500  # 4,000 characters, ~9 KB as UTF-8
    convs = [Conversation(f"c{i}") for i in range(20)]
    calls = [call("s", orjson.loads(orjson.dumps({"q": text + str(i)})), f"id{i}") for i in range(20)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for c, conv in zip(calls, convs, strict=True):
            tagger.on_call(c, conv)
        retained = (tracemalloc.get_traced_memory()[0] - before) / len(calls)
    finally:
        tracemalloc.stop()
    assert retained < 2_000  # the tagger's own entries; a pinned UTF-8 copy alone would be ~9 KB


def test_repeat_memory_is_bounded_across_conversations() -> None:
    tagger = FailureTagger(max_hashes_total=3)
    convs = [Conversation(f"c{i}") for i in range(5)]
    for i, conv in enumerate(convs):
        tagger.on_call(call("s", {"p": 1}, f"first{i}", conv=conv.conversation_id), conv)
    assert tagger.remembered_calls == 3
    assert sum(len(c.tags.seen) for c in convs) == 3
    # The two oldest conversations' calls were forgotten: their repeats go unseen ...
    old = call("s", {"p": 1}, "again0", conv="c0")
    tagger.on_call(old, convs[0])
    assert old.failures == []
    # ... while the newest conversation still has its call.
    new = call("s", {"p": 1}, "again4", conv="c4")
    tagger.on_call(new, convs[4])
    assert new.failure == TERMINATION and new.failure_detail is not None
    assert "repeats call first4" in new.failure_detail
    assert tagger.remembered_calls == 3
    assert sum(len(c.tags.seen) for c in convs) <= 3


def test_total_bound_forgets_only_the_entry_it_remembers() -> None:
    """An entry the per-conversation cap already dropped stays in the process-wide queue; when it
    reaches the front it must not delete a newer entry stored under the same key."""
    tagger = FailureTagger(max_hashes_per_conversation=2, max_hashes_total=4)
    a, b = Conversation("c1"), Conversation("c2")
    run_calls(tagger, [call("s", {"p": 1}, "a"), call("s", {"p": 2}, "b"), call("s", {"p": 3}, "c")], a)
    run_calls(tagger, [call("s", {"p": 1}, "d")], a)  # p=1 forgotten by the cap: stored anew
    run_calls(tagger, [call("s", {"q": 1}, "e", conv="c2")], b)  # pushes the stale p=1 item out
    [f] = run_calls(tagger, [call("s", {"p": 1}, "f")], a)
    assert f.failure == TERMINATION and f.failure_detail is not None
    assert "repeats call d" in f.failure_detail
    assert tagger.remembered_calls <= 4


def test_total_bound_must_be_positive() -> None:
    with pytest.raises(ValueError):
        FailureTagger(max_hashes_total=0)


def test_time_of_the_first_request_counts_from_its_prompt_before_the_conversation_exists() -> None:
    """The prompt of a conversation's first request comes before the engine holds the conversation:
    the tagger keeps its time until the first call creates the state."""
    tagger = FailureTagger(max_conversation_ms=60_000)
    engine = Engine(EngineConfig(), tagger=tagger)
    engine.mark_request("c1", T0)  # no conversation yet
    engine.process(call("s", {"p": 0}, "a", ts=T0 + 30_000))
    out = engine.process(call("s", {"p": 1}, "b", ts=T0 + 60_001))  # 60.001 s after the prompt
    out += engine.flush("end_of_input")
    tagged = [o["event"]["id"] for o in out if "termination" in o["failures"]]
    assert tagged == ["b"]
    assert tagger.crossings == {"time": 1}


def test_pending_request_starts_are_bounded() -> None:
    tagger = FailureTagger()
    for i in range(MAX_PENDING_REQUESTS + 50):
        tagger.on_pending_request(f"c{i}", float(i))
    assert len(tagger._pending) == MAX_PENDING_REQUESTS
    assert "c0" not in tagger._pending and f"c{MAX_PENDING_REQUESTS + 49}" in tagger._pending
