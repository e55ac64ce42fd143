#!/usr/bin/env python3
"""Summarize py-spy raw (collapsed) stacks: share of samples per function, self and inclusive.

python bench/pyspy_summary.py /tmp/stream-pairer-bench/pyspy-<topic>.raw [--top 30]
"""

from __future__ import annotations

import argparse
import re
from collections import Counter

FRAME = re.compile(r"^(?P<fn>.*?) \((?P<file>.*?)(?::\d+)?\)$")


def short(frame: str) -> str:
    m = FRAME.match(frame)
    if not m:
        return frame
    path = m["file"]
    for marker in ("site-packages/", "stream_pairer/", "lib/python3.11/"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    return f"{m['fn']} ({path})"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("raw")
    p.add_argument("--top", type=int, default=30)
    a = p.parse_args()
    self_c: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    total = 0
    with open(a.raw) as f:
        for line in f:
            stack, _, n = line.rstrip("\n").rpartition(" ")
            if not stack:
                continue
            c = int(n)
            total += c
            frames = [short(x) for x in stack.split(";")]
            self_c[frames[-1]] += c
            for fr in set(frames):
                incl[fr] += c
    print(f"{total} samples")
    print("self time:")
    for fn, c in self_c.most_common(a.top):
        print(f"  {100 * c / total:5.1f}%  {fn}")
    print("inclusive time:")
    for fn, c in incl.most_common(a.top):
        print(f"  {100 * c / total:5.1f}%  {fn}")


if __name__ == "__main__":
    main()
