"""Write the bench records (datagen's mix and its Bedrock / Gemini / MCP rewrites) that
ir_drive.py feeds under valgrind (BENCHMARKS.md, issue 24). Run from the repository root."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

sys.path.insert(0, "bench")
import datagen
import stream_formats


def main() -> None:
    ds = datagen.generate(1000, 6000, seed=7, dt_ms=1.0)
    recs = ds.warmup + ds.records
    for fmt in ("mix", "bedrock", "gemini", "mcp"):
        out = recs if fmt == "mix" else stream_formats.Rewriter(fmt).records(recs)
        Path(f"/tmp/recs_{fmt}.pkl").write_bytes(pickle.dumps(out))
        print(fmt, len(out))


if __name__ == "__main__":
    main()
