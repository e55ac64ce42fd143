"""What `--map` and discovery cost, and that the readers' paths do not pay for them.

Prints microseconds per record (best of --repeat) for:
* `parse_record` on canonical and Anthropic-message records (the Python format layer, which every
  record the compiled core does not read goes through): discovery lives on its error path only, so
  these must not move. Run the script against a checkout without this work for the "before"
  figure: `PYTHONPATH=<that tree> python3 bench/mapping_bench.py` (it imports whatever
  `stream_pairer` comes first on the path, and prints which);
* a whole pipeline (parse, pair, encode) on the compiled core's fast path (canonical records);
* the same traffic in an in-house shape through a jq mapping (`--map`), Python and native engines;
* the same traffic in an unnamed shape read by discovery.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import orjson

import stream_pairer
from stream_pairer.core.formats import FormatConfig, parse_record

MAPPING = (
    'if .ev == "start" then {type: "tool_call", id: .span, name: .tool, arguments: .params}\n'
    'elif .ev == "end" then {type: "tool_result", call_id: .span, content: .out} else empty end'
)


def traffic(n: int) -> dict[str, list[bytes]]:
    """n records of each shape: calls and results alternating over 100 conversations."""
    shapes: dict[str, list[bytes]] = {"canonical": [], "anthropic": [], "inhouse": [], "unnamed": []}
    for i in range(n):
        conv, cid, call = f"conv-{i % 100}", f"call_{i // 2}", i % 2 == 0
        args, out = {"q": "x" * 200, "n": i}, {"hits": ["y" * 100] * 3}
        if call:
            shapes["canonical"].append(
                orjson.dumps(
                    {
                        "conversation_id": conv,
                        "type": "tool_call",
                        "id": cid,
                        "name": "search",
                        "arguments": args,
                    }
                )
            )
            block = {"type": "tool_use", "id": cid, "name": "search", "input": args}
            shapes["anthropic"].append(
                orjson.dumps({"conversation_id": conv, "role": "assistant", "content": [block]})
            )
            shapes["inhouse"].append(
                orjson.dumps(
                    {"session_id": conv, "ev": "start", "span": cid, "tool": "search", "params": args}
                )
            )
            shapes["unnamed"].append(
                orjson.dumps(
                    {"session_id": conv, "step": {"toolCallId": cid, "toolName": "search", "input": args}}
                )
            )
        else:
            shapes["canonical"].append(
                orjson.dumps({"conversation_id": conv, "type": "tool_result", "id": cid, "content": out})
            )
            block = {"type": "tool_result", "tool_use_id": cid, "content": orjson.dumps(out).decode()}
            shapes["anthropic"].append(
                orjson.dumps({"conversation_id": conv, "role": "user", "content": [block]})
            )
            shapes["inhouse"].append(orjson.dumps({"session_id": conv, "ev": "end", "span": cid, "out": out}))
            shapes["unnamed"].append(
                orjson.dumps({"session_id": conv, "step": {"toolCallId": cid, "output": out}})
            )
    return shapes


def best_us(fn: Callable[[], object], n: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--parse-only", action="store_true", help="only the parse_record rows (any checkout)")
    args = ap.parse_args()
    n, shapes = args.records, traffic(args.records)
    src = {"file": "bench", "line": 1}
    print(f"stream_pairer from {stream_pairer.__file__}; {n:,} records per row, best of {args.repeat}")

    plain = FormatConfig()

    def parse_row(label: str, records: list[bytes], config: FormatConfig = plain) -> None:
        def parse_all() -> None:
            for r in records:
                parse_record(r, src, key="k", config=config)

        print(f"parse_record {label:<26} {best_us(parse_all, n, args.repeat):7.2f} us/record")

    for shape in ("canonical", "anthropic"):
        parse_row(shape, shapes[shape])
    if args.parse_only:
        return
    from stream_pairer.core.config import EngineConfig  # noqa: PLC0415
    from stream_pairer.core.mapping import compile_mapping  # noqa: PLC0415
    from tests.reference.engines import make_pipeline  # noqa: PLC0415 - python: the reference model

    mapped = FormatConfig(mapping=compile_mapping(MAPPING, "bench.jq"))
    parse_row("inhouse via --map", shapes["inhouse"], mapped)
    parse_row("unnamed via discovery", shapes["unnamed"])
    rows = [
        ("native", "canonical", FormatConfig()),
        ("native", "inhouse", mapped),
        ("python", "inhouse", mapped),
        ("native", "unnamed", FormatConfig()),
        ("python", "unnamed", FormatConfig()),
    ]
    for engine, shape, config in rows:

        def run(engine: str = engine, shape: str = shape, config: FormatConfig = config) -> None:
            p = make_pipeline(engine, EngineConfig(), config)  # type: ignore[arg-type]
            for i, r in enumerate(shapes[shape]):
                p.feed(r, {"file": "bench", "line": i})
            p.flush()

        label = f"{shape}{' (--map)' if config.mapping else ''}"
        us = best_us(run, n, args.repeat)
        print(f"pipeline {engine:<6} {label:<25} {us:7.2f} us/record (parse, pair, encode)")


if __name__ == "__main__":
    main()
