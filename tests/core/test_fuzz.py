"""Fuzzing the whole read path (formats -> engine -> tagging -> output records) with bad input.

Every record is mutated from a real-looking sample of every supported format (tests/samples/*.jsonl):
byte flips, truncation, invalid UTF-8, wrong types in any field, deleted and renamed keys, deep
nesting, huge payloads, thousands of parallel blocks, splices of two records, odd message keys.
The properties, checked on every run:

* nothing raises: a record is either events or exactly one dead letter;
* every dead letter has a known reason, a non-empty detail and the original bytes (text or base64);
* every output record is serializable by orjson (what the file writer and the Kafka producer do);
* conservation, by the audit's own logic: each event of each readable record is in exactly one
  output record, each unreadable record in exactly one dead letter, pairs agree with the ids.

The suite runs a few thousand records (`STREAM_PAIRER_FUZZ_RECORDS` raises it); the 100k run is this
file as a script, which prints its figures; with atheris installed, a coverage-guided run too:

    python tests/core/test_fuzz.py --records 100000 --seed 1
    python tests/core/test_fuzz.py --atheris -max_total_time=300
"""

from __future__ import annotations

import argparse
import base64
import functools
import json
import os
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

if __package__ in (None, ""):  # run as a script: make `stream_pairer` importable from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from stream_pairer.analysis.audit import Auditor, AuditReport, render
from stream_pairer.core.formats import DEFAULT_CONFIG, FORMATS, parse_record
from stream_pairer.core.model import FormatError
from stream_pairer.core.toolschemas import ToolSchemaError, ToolSchemaRegistry
from tests.core.fuzz_inputs import SAMPLES, SEED_FORMATS, SEEDS, _dumps, _nodes, message_key, mutate
from tests.reference.engine import Engine, EngineConfig
from tests.reference.pipeline import Pipeline
from tests.reference.tagging import FailureTagger

SCHEMA_FILE = Path(__file__).parents[2] / "stream_pairer" / "schemas" / "dead_letter.schema.json"
DEAD_LETTER_REASONS = frozenset(json.loads(SCHEMA_FILE.read_text())["properties"]["reason"]["enum"])


def _schema_files() -> list[Path]:
    """The sample tool definitions that load together (a greedy pick: the sample set may hold
    deliberately conflicting definitions, for the registry's own tests)."""
    chosen: list[Path] = []
    for path in sorted((SAMPLES / "tool_schemas").rglob("*.json")):
        try:
            ToolSchemaRegistry.load(*chosen, path)
        except ToolSchemaError:
            continue
        chosen.append(path)
    return chosen


SCHEMA_FILES = _schema_files()


@functools.cache
def schemas() -> ToolSchemaRegistry | None:
    return ToolSchemaRegistry.load(*SCHEMA_FILES) if SCHEMA_FILES else None


def tagger() -> FailureTagger:
    """The failure tagger is on the read path of every run, so it is fuzzed too, with schemas."""
    return FailureTagger(schemas())


# --------------------------------------------------------------------------------------------- harness


@dataclass
class FuzzRun:
    """Feeds records through a Pipeline and the Auditor at once; `finish()` raises on any violation.

    With `keep_going`, an exception is counted by signature (and the first record that raised it
    kept) instead of propagated: the script uses that to list every distinct crash in one run.
    """

    engine_config: EngineConfig = field(default_factory=EngineConfig)
    keep_going: bool = False
    pipeline: Pipeline = field(init=False)
    auditor: Auditor = field(init=False)
    records: int = 0
    max_record_bytes: int = 0
    outputs: int = 0
    crashes: Counter[str] = field(default_factory=Counter)
    crash_samples: dict[str, bytes] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.pipeline = Pipeline(Engine(self.engine_config, tagger=tagger()))
        self.auditor = Auditor()
        self.stream = self.auditor.add_stream(("file", "fuzz"), "fuzz", 1)

    def feed(self, raw: bytes, key: str | None = None) -> None:
        self.records += 1
        source = {"file": "fuzz", "line": self.records}
        self.auditor.add_input(self.stream, self.records, raw, source, key)
        self.max_record_bytes = max(self.max_record_bytes, len(raw))
        try:
            out = self.pipeline.feed(raw, source, key=key)
            self._check_outputs(out, raw)
        except Exception as err:
            if not self.keep_going:
                raise
            tb = err.__traceback__
            while tb is not None and tb.tb_next is not None:
                tb = tb.tb_next
            where = f"{Path(tb.tb_frame.f_code.co_filename).name}:{tb.tb_lineno}" if tb else "?"
            signature = f"{type(err).__name__}: {str(err)[:80]} at {where}"
            self.crashes[signature] += 1
            self.crash_samples.setdefault(signature, raw)

    def finish(self) -> AuditReport:
        self._check_outputs(self.pipeline.flush("end_of_input", result_reason="no_call"), None)
        report = self.auditor.finish()
        if not self.keep_going:
            assert report.ok and report.duplicated == 0, render(report)
        return report

    def _check_outputs(self, out: list[dict[str, Any]], raw: bytes | None) -> None:
        lines = [orjson.dumps(rec) for rec in out]  # what the writers do: must never fail
        for rec, line in zip(out, lines, strict=True):
            self.outputs += 1
            if rec["kind"] == "dead_letter":
                assert raw is not None, "a dead letter can only come from the record just fed"
                check_dead_letter(rec, raw)
            self.auditor.add_output_line(line, f"out:{self.outputs}")


def check_dead_letter(rec: dict[str, Any], raw: bytes) -> None:
    assert rec["reason"] in DEAD_LETTER_REASONS, rec["reason"]
    assert isinstance(rec["detail"], str) and rec["detail"].strip()
    assert rec["raw_bytes"] == len(raw)
    kept = rec["raw"].encode() if "raw" in rec else base64.b64decode(rec["raw_base64"])
    assert kept == raw[: len(kept)] and (rec["raw_truncated"] or kept == raw)


@dataclass
class FuzzFigures:
    records: int
    seconds: float
    report: AuditReport
    dead_letters: Counter[str]
    max_record_bytes: int
    pairs: int
    crashes: Counter[str]
    crash_samples: dict[str, bytes]


def fuzz(
    records: int, seed: int, engine_config: EngineConfig | None = None, keep_going: bool = False
) -> FuzzFigures:
    """`records` mutated records, deterministic for a seed, through one pipeline; then the audit."""
    rng = random.Random(seed)
    run = FuzzRun(engine_config or EngineConfig(), keep_going)
    started = time.perf_counter()
    for _ in range(records):
        run.feed(mutate(rng.choice(SEEDS), rng), message_key(rng))
    report = run.finish()
    summary = run.pipeline.summary
    return FuzzFigures(
        records,
        time.perf_counter() - started,
        report,
        summary.dead_letters,
        run.max_record_bytes,
        sum(summary.pairs.values()),
        run.crashes,
        run.crash_samples,
    )


# --------------------------------------------------------------------------------------------- tests


def test_seeds_cover_every_format_and_pair_cleanly() -> None:
    """The fuzz starts from good records of every format: check they are that, so a mutation's
    dead letter is the mutation's doing."""
    formats: Counter[str] = Counter()
    for i, raw in enumerate(SEEDS):
        try:
            # With a key: Codex, gemini-cli and wire records name no conversation themselves (the
            # file, or the Kafka key, does).
            events = parse_record(raw, {"file": "seed", "line": i + 1}, key="seed")
        except FormatError:
            continue  # the samples include deliberately unreadable lines
        formats.update(ev.format for ev in events)
    missing = set(FORMATS) - set(formats) - {"mapped"}  # `mapped` needs a --map program (test_mapping.py)
    assert not missing, f"no seed events of {missing}"


def test_fuzz_run_conserves_everything() -> None:
    n = int(os.environ.get("STREAM_PAIRER_FUZZ_RECORDS", "3000"))
    figures = fuzz(n, seed=20250601)
    report = figures.report
    assert report.inputs["records"] == n
    # Mutations must produce both outcomes, or the fuzz is not testing anything.
    assert report.inputs["unreadable"] > n // 10
    assert report.inputs["calls"] > n // 10 and figures.pairs > n // 50
    assert len(figures.dead_letters) >= 5, figures.dead_letters


def test_small_state_limits_under_fuzz_still_conserve() -> None:
    """The same bad input with tiny limits: evictions on every path, still nothing lost."""
    figures = fuzz(
        1500,
        seed=7,
        engine_config=EngineConfig(
            max_conversations=3,
            max_calls_per_conversation=2,
            max_held_bytes=4096,
            call_timeout_ms=5_000,
            result_grace_ms=1_000,
        ),
    )
    assert figures.report.reasons["orphan_call:evicted"] > 0


def test_evictions_are_counted_per_evicted_event() -> None:
    """Found by the overload trial: `stream_pairer_evictions_total` (fed from Engine.evictions) is
    documented as "open events emitted early as orphans (reason=evicted)", but the engine counts an
    LRU-evicted conversation once however many held events it emits (engine.py `_conversation`), so
    the metric undercounts (74,884 vs 91,445 evicted orphans in the overload trial)."""
    engine = Engine(EngineConfig(max_conversations=1))
    pipeline = Pipeline(engine)
    out = []
    for conv, cid in (("a", "1"), ("a", "2"), ("a", "3"), ("b", "4")):
        raw = orjson.dumps({"conversation_id": conv, "type": "tool_call", "id": cid, "name": "f"})
        out += pipeline.feed(raw, {"file": "e", "line": int(cid)})
    evicted = [r for r in out if r.get("reason") == "evicted"]
    assert len(evicted) == 3
    assert sum(engine.evictions.values()) == len(evicted)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=512), st.one_of(st.none(), st.text(max_size=8)))
def test_arbitrary_bytes(raw: bytes, key: str | None) -> None:
    run = FuzzRun()
    run.feed(raw, key)
    run.finish()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(SEEDS), st.data())
def test_any_json_value_in_any_field(seed: bytes, data: st.DataObject) -> None:
    obj = orjson.loads(seed)
    nodes = _nodes(obj)
    if nodes:
        container, key = data.draw(st.sampled_from(nodes))
        container[key] = data.draw(json_values)
    run = FuzzRun()
    run.feed(_dumps(obj), data.draw(st.one_of(st.none(), st.text(max_size=4))))
    run.feed(seed)
    run.finish()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.sampled_from(SEEDS), st.randoms(use_true_random=False)), min_size=1, max_size=25)
)
def test_sequences_of_mutated_records(items: list[tuple[bytes, random.Random]]) -> None:
    """Sequences, so that bad records land between calls and results of good conversations."""
    run = FuzzRun(EngineConfig(max_calls_per_conversation=3, max_held_bytes=20_000))
    for seed, rng in items:
        run.feed(mutate(seed, rng), message_key(rng))
    run.finish()


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(SEEDS), st.sampled_from([5_000, 20_000, 100_000]))
def test_many_parallel_blocks_in_one_record(seed: bytes, copies: int) -> None:
    """An assistant message with thousands of tool_use blocks: one event per block, all accounted."""
    obj = orjson.loads(seed)
    for container, key in _nodes(obj):
        if isinstance(container[key], list) and container[key] and isinstance(container[key][0], dict):
            container[key] = container[key] * copies
            break
    run = FuzzRun()
    run.feed(orjson.dumps(obj))
    run.finish()


def deep_call(levels: int) -> bytes:
    head = b'{"conversation_id":"deep","type":"tool_call","id":"d1","name":"f","arguments":'
    return head + b"[" * levels + b"1" + b"]" * levels + b"}"


def test_deep_but_writable_records_pair_and_serialize() -> None:
    """Found by this fuzz: a record nested 250+ levels parsed fine, then crashed the output writer
    (orjson writes at most 254 levels and a pair wraps the record 2 levels deeper). Now such records
    are dead letters; records below the limit still pair and every output serializes."""
    run = FuzzRun()
    run.feed(deep_call(150))
    run.feed(b'{"conversation_id":"deep","type":"tool_result","id":"d1","content":"ok"}')
    assert sum(run.pipeline.summary.pairs.values()) == 1
    run.feed(deep_call(260))
    assert run.pipeline.summary.dead_letters["too_large"] == 1
    run.finish()


def test_non_string_block_type_does_not_crash_the_tagger() -> None:
    """Found by the 100k fuzz: an OpenAI tool call whose `type` is an array or object (the formats
    layer ignores that field) and whose arguments are not JSON raised TypeError (unhashable) in
    tagging._arguments, which ends a whole `pair` run and would stop the sidecar on that record."""
    run = FuzzRun()
    for bad_type in (b"[null]", b'{"":null}'):
        run.feed(
            b'{"thread_id":"t","role":"assistant","tool_calls":[{"id":"c1","type":'
            + bad_type
            + b',"function":{"name":"search_flights","arguments":"{\\"from\\":\\"LI"}}]}'
        )
    assert run.pipeline.summary.events["tool_call"] == 2
    run.finish()


def test_huge_and_deep_records_are_dead_letters_with_reasons() -> None:
    run = FuzzRun()
    seed = orjson.loads(SEEDS[0])
    cases: dict[bytes, str] = {
        orjson.dumps({**seed, "pad": "x" * (DEFAULT_CONFIG.max_record_bytes + 1)}): "too_large",
        # Deeper than orjson reads (1024): the same reason, with the depth in the detail.
        b"[" * 5000 + b"]" * 5000: "too_large",
        b'{"a":' * 2000 + b"1" + b"}" * 2000: "too_large",
        b'{"conversation_id":"c","type":"tool_call","name":"\xff\xfe"}': "invalid_utf8",
        # Readable by orjson (<= 1024 levels) but too deep for any output record to be written.
        deep_call(260): "too_large",
        b"": "invalid_json",
        b"null": "not_an_object",
    }
    for before, (raw, reason) in enumerate(cases.items()):
        run.feed(raw)
        dead = run.pipeline.summary.dead_letters
        assert dead[reason] >= 1 and sum(dead.values()) == before + 1, (reason, dead)
    run.finish()


# --------------------------------------------------------------------------------------------- script


def atheris_main(libfuzzer_args: list[str]) -> int:
    """Coverage-guided fuzzing with atheris (libFuzzer), when it is installed (`pip install atheris`:
    not a project dependency). Each input is split into lines, fed as records through a fresh
    pipeline and audited; any exception or conservation failure is a finding. The corpus starts
    from the sample records; libFuzzer options pass through (e.g. -max_total_time=300)."""
    import atheris  # noqa: PLC0415 - optional

    atheris.instrument_all()
    corpus = Path(os.environ.get("STREAM_PAIRER_FUZZ_CORPUS", "/tmp/stream-pairer-fuzz-corpus"))
    corpus.mkdir(parents=True, exist_ok=True)
    for i, seed in enumerate(SEEDS):
        (corpus / f"seed-{i:03d}").write_bytes(seed)

    def one_input(data: bytes) -> None:
        run = FuzzRun()
        for line in data.split(b"\n")[:32]:
            run.feed(line, None)
        run.finish()

    atheris.Setup([sys.argv[0], *libfuzzer_args, str(corpus)], one_input)
    atheris.Fuzz()
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--atheris"]:
        return atheris_main(argv[1:])
    parser = argparse.ArgumentParser(description="the long fuzz run: mutated records of every format")
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--crash-dir",
        type=Path,
        default=None,
        help="write the first record of each distinct crash here (crash-N.bin)",
    )
    args = parser.parse_args(argv)
    figures = fuzz(args.records, args.seed, keep_going=True)
    r = figures.report
    crashes = sum(figures.crashes.values())
    print(
        f"fuzz: {figures.records:,} records from {len(SEEDS)} seeds of {len(SEED_FORMATS)} formats "
        f"({', '.join(SEED_FORMATS)}), seed {args.seed}"
    )
    print(
        f"  {figures.seconds:.1f} s ({figures.records / figures.seconds:,.0f} records/s), "
        f"{crashes:,} crashes, "
        f"largest record {figures.max_record_bytes:,} bytes"
    )
    print(
        f"  readable: {r.inputs['records'] - r.inputs['unreadable']:,} records "
        f"({r.inputs['without_events']:,} without events), {r.inputs['calls']:,} calls, "
        f"{r.inputs['results']:,} results -> {figures.pairs:,} pairs, "
        f"{r.outputs['orphan_call']:,} orphan calls, {r.outputs['orphan_result']:,} orphan results"
    )
    reasons = ", ".join(f"{k} {v:,}" for k, v in figures.dead_letters.most_common())
    print(f"  dead letters: {r.inputs['unreadable']:,} ({reasons})")
    print(
        f"  audit: {'OK' if r.ok else 'FAILED'}, lost {r.lost}, duplicated {r.duplicated}, "
        f"problems {sum(r.counts.values())}"
    )
    for i, (signature, n) in enumerate(figures.crashes.most_common()):
        print(f"  crash x{n:,}: {signature}")
        if args.crash_dir is not None:
            args.crash_dir.mkdir(parents=True, exist_ok=True)
            (args.crash_dir / f"crash-{i}.bin").write_bytes(figures.crash_samples[signature])
    return 0 if r.ok and not crashes else 1


if __name__ == "__main__":
    sys.exit(main())
