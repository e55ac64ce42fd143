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


# The I/O `pair` does beyond the round trip's: its outputs are ~2x its input (README, Output size),
# so writing them costs more system time than writing the round trip's one copy. This program
# writes the bytes of pair's own outputs once more (read whole first, so only the writing counts):
# the round trip plus it is the "orjson loads+dumps + the command's own file writing".
WRITE_OUTPUTS = """
import sys
blobs = [open(p, "rb").read() for p in sys.argv[2:]]
with open(sys.argv[1], "wb", buffering=1 << 20) as out:
    for b in blobs:
        out.write(b)
"""


def child_cpu(cmd: list[str]) -> tuple[float, float]:
    """CPU seconds (user, system) of one child process run to completion."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime


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
        outs = [str(work / "out" / f) for f in ("pairs.jsonl", "orphans.jsonl", "dead_letter.jsonl")]
        write_cmd = [sys.executable, "-c", WRITE_OUTPUTS, str(work / "copy.jsonl"), *outs]
        best: dict[str, tuple[float, float]] = {}
        for _ in range(a.repeat):
            for name, cmd in (("trip", trip_cmd), ("pair", pair_cmd), ("write", write_cmd)):
                u, s = child_cpu(cmd)
                if name not in best or u + s < sum(best[name]):
                    best[name] = (u, s)
    us = {k: (u + s) / n * 1e6 for k, (u, s) in best.items()}
    split = {k: f"user {u / n * 1e6:.2f} + sys {s / n * 1e6:.2f}" for k, (u, s) in best.items()}
    ratio = us["pair"] / us["trip"]
    with_io = us["pair"] / (us["trip"] + us["write"])
    print(f"records: {n:,} (load {loadavg()}, best of {a.repeat}, CPU = user + sys of the child)")
    print(f"orjson loads+dumps into a file:     {us['trip']:6.2f} us/record ({split['trip']})")
    print(f"writing pair's output bytes again:  {us['write']:6.2f} us/record ({split['write']})")
    print(f"stream-pairer pair -q:              {us['pair']:6.2f} us/record ({split['pair']})")
    print(f"ratio to the round trip:            {ratio:.2f}x (target <= 1.5x)")
    print(f"ratio to round trip + output write: {with_io:.2f}x")
    record(
        "pair_command",
        {
            "records": n,
            "pair_us": round(us["pair"], 3),
            "orjson_us": round(us["trip"], 3),
            "write_outputs_us": round(us["write"], 3),
            "ratio": round(ratio, 3),
            "ratio_with_output_write": round(with_io, 3),
        },
    )
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    raise SystemExit(main())
