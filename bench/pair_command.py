"""`stream-pairer pair` as a user runs it, against the cheapest program that touches the same bytes.

Why a whole command and not the engine alone: the engine's speed only matters if it reaches the
user, and a command also reads, splits, routes, writes and summarises (issue 23 measured the
command at 4.9x an orjson round trip while the engine alone was ~2x). The ceiling is a program
that reads the same file line by line, `orjson.loads` + `orjson.dumps` each line and writes it to a
file: any pairing tool has to at least parse and write every record.

Both run as child processes (interpreter start-up included in both), interleaved, best of
`--repeat`; CPU is user + system time of the child (`RUSAGE_CHILDREN`), so the shared machine's
load does not count. Prints µs of CPU per record for each and the ratio (target <= 1.5x).

    python3 bench/pair_command.py --records 200000 --conversations 10000 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

from common import ROOT, loadavg, record  # type: ignore[import-not-found]

ROUND_TRIP = """
import sys, orjson
loads, dumps = orjson.loads, orjson.dumps
with open(sys.argv[1], "rb") as f, open(sys.argv[2], "wb", buffering=1 << 20) as out:
    for line in f:
        out.write(dumps(loads(line)) + b"\\n")
"""


def child_cpu(cmd: list[str]) -> float:
    """CPU seconds (user + system) of one child process run to completion."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def make_data(path: Path, records: int, conversations: int) -> int:
    with open(path, "wb") as f:
        subprocess.run(
            [
                sys.executable,
                str(ROOT / "bench" / "datagen.py"),
                "--records",
                str(records),
                "--conversations",
                str(conversations),
            ],
            check=True,
            stdout=f,
            stderr=subprocess.DEVNULL,
        )
    return count_lines(path)


def count_lines(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=200_000)
    p.add_argument("--conversations", type=int, default=10_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--input", type=Path, help="an existing JSONL file instead of generated data")
    a = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="pair-bench-") as tmp:
        work = Path(tmp)
        data = a.input or work / "bench.jsonl"
        n = make_data(data, a.records, a.conversations) if a.input is None else count_lines(data)
        out_dir = str(work / "out")
        pair_cmd = [sys.executable, "-m", "stream_pairer", "pair", str(data), "--out", out_dir, "-q"]
        trip_cmd = [sys.executable, "-c", ROUND_TRIP, str(data), str(work / "roundtrip.jsonl")]
        pair_best = trip_best = float("inf")
        for _ in range(a.repeat):
            trip_best = min(trip_best, child_cpu(trip_cmd))
            pair_best = min(pair_best, child_cpu(pair_cmd))
    pair_us = pair_best / n * 1e6
    trip_us = trip_best / n * 1e6
    ratio = pair_us / trip_us
    print(f"records: {n:,} (load {loadavg()}, best of {a.repeat}, CPU = user + sys of the child)")
    print(f"orjson loads+dumps into a file: {trip_us:6.2f} us/record")
    print(f"stream-pairer pair -q:          {pair_us:6.2f} us/record")
    print(f"ratio: {ratio:.2f}x (target <= 1.5x)")
    record(
        "pair_command",
        {
            "records": n,
            "pair_us": round(pair_us, 3),
            "orjson_us": round(trip_us, 3),
            "ratio": round(ratio, 3),
        },
    )
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    raise SystemExit(main())
