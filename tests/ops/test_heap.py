"""ops/heap.py: the sidecar's periodic malloc_trim (RSS not crept up by heap fragmentation)."""

from __future__ import annotations

import ctypes
import ctypes.util

import pytest

from stream_pairer.ops.heap import HeapTrimmer, _glibc_trim


def _rss() -> int:
    with open("/proc/self/status", "rb") as f:
        for line in f:
            if line.startswith(b"VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def test_trims_once_per_interval() -> None:
    calls: list[int] = []
    heap = HeapTrimmer(60.0, now_s=100.0, trim=lambda pad: calls.append(pad) or 1)
    assert [heap.maybe_trim(t) for t in (100.0, 159.9, 160.0, 161.0, 219.9, 220.0)] == [
        False, False, True, False, False, True,
    ]  # fmt: skip
    assert calls == [0, 0] and heap.trims == 2


def test_interval_zero_never_trims() -> None:
    calls: list[int] = []
    heap = HeapTrimmer(0.0, trim=lambda pad: calls.append(pad) or 1)
    assert not heap.available and not heap.maybe_trim(10**9) and calls == []


def test_without_malloc_trim_it_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    heap = HeapTrimmer(1.0)
    assert not heap.available and not heap.maybe_trim(10.0)


@pytest.mark.skipif(_glibc_trim() is None, reason="not glibc")
def test_a_trim_returns_free_pages_inside_the_heap() -> None:
    """What free() alone does not: 64 MiB of small blocks freed below a live block stay resident
    until malloc_trim gives their pages back."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    blocks = [libc.malloc(1024) for _ in range(65_536)]
    for b in blocks:
        ctypes.memset(b, 1, 1024)  # touched: resident
    keep = libc.malloc(1024)  # above them: the heap's top cannot shrink past it
    for b in blocks:
        libc.free(b)
    before = _rss()
    heap = HeapTrimmer(1.0, now_s=0.0)
    assert heap.maybe_trim(1.0)
    after = _rss()
    libc.free(keep)
    assert before - after > 32 * 2**20, (before, after)
