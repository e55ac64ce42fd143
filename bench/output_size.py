#!/usr/bin/env python3
"""Output bytes per input byte for each `--raw` mode (issue 15, item 4: the size of the outputs).

Two inputs: the benchmark traffic of `bench/datagen.py` (K interleaved conversations, ~1 KB
records, its format mix; every call answered at the end: `drain`) and `examples/mixed.jsonl` (every
format, a few orphans and dead letters). Each runs through the Python pipeline and, when built,
the compiled core, without failure tagging (`pair` tags by default: its records are a few dozen
bytes longer); the two engines' bytes are compared, and the figures counted the way `pair`'s
summary and the sidecar's counters count them: record bytes in, record bytes out (no line breaks).

    python bench/output_size.py                               # K=1000, 50k records + drain
    python bench/output_size.py --conversations 1000 --records 200000

Then the same two inputs through the `pair` command as a user runs it (`measure_files`): file mode,
`source` = {file: the input's name, line}, failure tagging on, for each `--raw` mode, and the size of
`--output-format parquet` (zstd) next to the JSONL it replaces (issue 26: the README's figures).

It prints figures (and appends them to bench/results/output_size.jsonl); it asserts nothing.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
import datagen
from common import record
from engine_bench import engine_config

from stream_pairer.core import native
from stream_pairer.core.vocab import RawMode
from tests.reference.engine import Engine, EngineConfig
from tests.reference.pipeline import Pipeline

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "mixed.jsonl"
Records = list[tuple[str, bytes]]  # (key: the conversation id for records without one, value)


def _python(cfg: EngineConfig, recs: Records) -> list[bytes]:
    pipe = Pipeline(Engine(cfg))
    out: list[bytes] = []
    for i, (key, raw) in enumerate(recs):
        out += [
            orjson.dumps(r) for r in pipe.feed(raw, {"topic": "in", "partition": 0, "offset": i}, key=key)
        ]
    out += [orjson.dumps(r) for r in pipe.flush("end_of_input", result_reason="no_call")]
    return out


def _native(cfg: EngineConfig, recs: Records) -> list[bytes]:
    pipe = native.NativePipeline(cfg)
    out: list[bytes] = []
    for i, (key, raw) in enumerate(recs):
        out += pipe.feed(raw, {"topic": "in", "partition": 0, "offset": i}, key=key)
    out += pipe.flush("end_of_input", result_reason="no_call")
    return out


def measure(label: str, cfg: EngineConfig, recs: Records) -> None:
    input_bytes = sum(len(v) for _, v in recs)
    print(
        f"{label}: {len(recs):,} records, {input_bytes:,} bytes in ({input_bytes / len(recs):,.0f} B/record)"
    )
    print(
        f"  {'--raw':6s} {'out/in':>7s} {'bytes out':>13s} {'B/pair':>7s}  by kind (bytes out per input byte)"
    )
    for mode in RawMode:
        mode_cfg = replace(cfg, raw=mode)
        out = _python(mode_cfg, recs)
        agree = "yes" if _native(mode_cfg, recs) == out else "NO"
        by_kind: Counter[str] = Counter()
        n_pairs = 0
        for b in out:
            kind = orjson.loads(b)["kind"]
            by_kind[kind] += len(b)
            n_pairs += kind == "pair"
        total = sum(by_kind.values())
        kinds = ", ".join(f"{k} {n / input_bytes:.3f}" for k, n in sorted(by_kind.items()))
        per_pair = by_kind["pair"] / n_pairs if n_pairs else 0.0
        print(
            f"  {mode.value:6s} {total / input_bytes:7.3f} {total:13,} {per_pair:7,.0f}  {kinds}"
            f"  (compiled core gives the same bytes: {agree})"
        )
        row: dict[str, Any] = {
            "input": label,
            "raw": mode.value,
            "records": len(recs),
            "input_bytes": input_bytes,
            "output_bytes": total,
            "output_per_input": round(total / input_bytes, 4),
            "bytes_per_pair": round(per_pair, 1),
            "output_bytes_by_kind": dict(by_kind),
            "engines_agree": agree,
        }
        record("output_size", row)


def _dir_bytes(d: Path, suffix: str) -> int:
    return sum(p.stat().st_size for p in d.rglob(f"*{suffix}"))


def measure_files(label: str, path: Path) -> None:
    """`stream-pairer pair PATH --raw MODE` (JSONL), then `--output-format parquet`, file bytes."""
    import tempfile  # noqa: PLC0415

    from stream_pairer.cli.app import main as cli  # noqa: PLC0415

    size = path.stat().st_size
    print(f"{label} through `pair` (file mode, tagging on): {size:,} bytes in (the file)")
    head = f"{'summary out/in':>14s} {'jsonl bytes':>13s} {'parquet bytes':>14s} {'parquet/jsonl':>13s}"
    print(f"  {'--raw':6s} {head}")
    for mode in RawMode:
        with tempfile.TemporaryDirectory() as tmp:
            j, q, summary = Path(tmp) / "j", Path(tmp) / "q", Path(tmp) / "s.json"
            argv = [str(path), "--raw", mode.value, "-q"]
            assert cli(["pair", *argv, "--out", str(j), "--summary-json", str(summary)]) == 0
            assert cli(["pair", *argv, "--out", str(q), "--output-format", "parquet"]) == 0
            ratio = orjson.loads(summary.read_bytes())["output_bytes_per_input_byte"]
            jsonl, parquet = _dir_bytes(j, ".jsonl"), _dir_bytes(q, ".parquet")
        print(f"  {mode.value:6s} {ratio:14.3f} {jsonl:13,} {parquet:14,} {parquet / jsonl:13.3f}")
        record(
            "output_size",
            {
                "input": f"{label} (pair, file mode)",
                "raw": mode.value,
                "input_bytes": size,
                "output_per_input": ratio,
                "jsonl_file_bytes": jsonl,
                "parquet_file_bytes": parquet,
                "parquet_per_jsonl": round(parquet / jsonl, 4),
            },
        )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--conversations", type=int, default=1000)
    p.add_argument("--records", type=int, default=50_000, help="records after the warm-up (then the drain)")
    p.add_argument("--seed", type=int, default=42)
    args = p.parse_args()
    ds = datagen.generate(args.conversations, args.records, seed=args.seed, drain=True)
    bench_recs = [(k.decode(), v) for k, v in ds.all]
    cfg = engine_config(args.conversations, 1.0)
    measure(f"bench/datagen.py K={args.conversations:,}", cfg, bench_recs)
    lines = [line.rstrip(b"\r") for line in EXAMPLE.read_bytes().split(b"\n")]
    example = [(str(EXAMPLE.name), line) for line in lines if line.strip()]
    measure("examples/mixed.jsonl", EngineConfig(), example)
    import tempfile  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as tmp:
        traffic = Path(tmp) / "traffic.jsonl"
        traffic.write_bytes(b"".join(v + b"\n" for _, v in ds.all))
        measure_files(f"bench/datagen.py K={args.conversations:,}", traffic)
    measure_files("examples/mixed.jsonl", EXAMPLE)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
