"""`StringCap` (adapters/bounded_json.py) against random JSON texts read in blocks of every
small size: the text stays valid JSON, every string is a prefix of the original (never a split
escape or character), no string passes the cap by more than one escape, and strings within the
cap, and all the structure around them, are unchanged."""

from __future__ import annotations

import functools
import io
import json
import random

import pytest

from stream_pairer.adapters.bounded_json import StringCap

PIECES = ["a", '"', "\\", "é", "😀", "\n", "\u0001", "x" * 50, "\\\\\\\\\\", "中"]
CAP = 100


class _Blocks:
    def __init__(self, data: bytes, size: int) -> None:
        self.f = io.BytesIO(data)
        self.size = size

    def read(self, _n: int = -1) -> bytes:
        return self.f.read(self.size)


@pytest.mark.parametrize("block", [1, 2, 3, 5, 7, 64])
def test_strings_are_cut_at_a_boundary_and_nothing_else_changes(block: int) -> None:
    rng = random.Random(block)
    for _ in range(60):
        strings = ["".join(rng.choice(PIECES) for _ in range(rng.randint(0, 300))) for _ in range(4)]
        ascii_only = rng.random() < 0.5
        doc = {"messages": [{"s": s, "k": [1, None, {"t": s[:10]}]} for s in strings]}
        cap = StringCap(_Blocks(json.dumps(doc, ensure_ascii=ascii_only).encode(), block), CAP)
        text = b"".join(iter(functools.partial(cap.read, block), b""))
        got = json.loads(text)["messages"]
        for message, original in zip(got, strings, strict=True):
            s = message["s"].rstrip("\ud83d")  # a cut between the two escapes of a surrogate pair
            assert original.startswith(s)
            assert message["k"] == [1, None, {"t": original[:10]}]
            encoded = len(json.dumps(original, ensure_ascii=ascii_only).encode())
            if encoded <= CAP:
                assert s == original
            else:
                assert len(json.dumps(s, ensure_ascii=ascii_only).encode()) <= CAP + 2
        assert cap.dropped >= 0
