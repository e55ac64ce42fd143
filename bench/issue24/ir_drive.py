"""Feed the records ir_gen.py wrote to one pipeline (`native`, `python`) or to none (`none`:
the load-only baseline, subtracted), for an instruction count under valgrind that does not
depend on the machine's load (BENCHMARKS.md, issue 24). Run from the repository root:
`python3 bench/issue24/ir_drive.py FORMAT VARIANT`."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

sys.path.insert(0, "bench")
import native_bench


def main() -> None:
    fmt, variant = sys.argv[1], sys.argv[2]
    recs = pickle.loads(Path(f"/tmp/recs_{fmt}.pkl").read_bytes())
    n = 0
    if variant != "none":
        step = native_bench.VARIANTS[variant](1000, 1.0)
        for i, (key, raw) in enumerate(recs):
            n += step(raw, {"topic": "bench", "partition": 0, "offset": i}, key.decode())
    print(variant, n)


if __name__ == "__main__":
    main()
