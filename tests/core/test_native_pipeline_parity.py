"""What the adapters read of a pipeline besides its outputs, on both engines: `info` after every
record (session ids, request starts, unknown types; cleared by a record the fast path reads),
`reject`, the observer's calls (records by format, skips by type, re-sent history copies,
evictions by limit), and routed outputs' kind, key and OutputMeta."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from stream_pairer.core import native
from stream_pairer.core.model import output_meta
from tests.reference.engine import Engine, EngineConfig
from tests.reference.pipeline import Pipeline
from tests.stream.test_partition_engines import Recorder

REPO = Path(__file__).resolve().parents[2]
SAMPLES = sorted((REPO / "tests" / "samples").glob("*.jsonl")) + sorted(
    (REPO / "tests" / "samples" / "families").glob("*.jsonl")  # the agent families (issue 24)
)
T0 = 1_750_000_000_000


def _lines() -> list[tuple[str, int, bytes]]:
    out = []
    for path in SAMPLES:
        for n, line in enumerate(path.read_bytes().splitlines(), 1):
            if line.strip():
                out.append((path.name, n, line))
    # Unknown types (skipped, counted by type), then a fast-path record that must clear `info`.
    out.append(("x", 1, b'{"type":"heartbeat","conversation_id":"q"}'))
    out.append(("x", 2, b'{"conversation_id":"q","type":"tool_call","id":"z","name":"t","ts":1750000000000}'))
    return out


def _info(p: Any) -> tuple[Any, ...]:
    return (list(p.info.requests), p.info.skipped_type, p.info.session_id)


def test_info_and_observer_calls_match_on_every_sample_record() -> None:
    cfg = EngineConfig(max_conversations=3, max_calls_per_conversation=2)  # evictions too
    obs_py, obs_nat = Recorder(), Recorder()
    py = Pipeline(Engine(cfg), observer=obs_py)
    nat = native.NativePipeline(cfg, observer=obs_nat)
    infos = 0
    for name, n, line in _lines():
        src = {"file": name, "line": n}
        want = [orjson.dumps(r) for r in py.feed(line, src, key=name)]
        assert nat.feed(line, src, key=name) == want, f"{name}:{n}"
        assert _info(nat) == _info(py), f"{name}:{n}"
        assert obs_nat.calls == obs_py.calls, f"{name}:{n}"
        infos += any(_info(py)[0:1][0]) or _info(py)[1] is not None or _info(py)[2] is not None
    kinds = {c[0] for c in obs_py.calls}
    assert {"read", "skipped", "copies", "evicted"} <= kinds  # every observer call was compared
    assert infos > 0 and _info(nat) == ([], None, None)  # the last (fast) record cleared it
    assert nat.core.fast_records > 0
    assert nat.summary.as_dict() == py.summary.as_dict()


def test_reject_is_the_same_dead_letter_and_count() -> None:
    py = Pipeline(Engine())
    nat = native.NativePipeline()
    src = {"file": "f", "line": 3}
    for args in [(b"{" + b"x" * 50, 10_000_000, src), (b"[1,", 3, src, "invalid_json", "cut short")]:
        assert nat.reject(*args) == [orjson.dumps(r) for r in py.reject(*args)]  # type: ignore[arg-type]
    assert nat.summary.as_dict() == py.summary.as_dict()


def test_routed_outputs_carry_kind_key_and_meta() -> None:
    nat = native.NativePipeline(EngineConfig(call_timeout_ms=1_000), routed=True)
    recs = [
        {"conversation_id": "c", "type": "tool_call", "id": "a", "name": "t", "ts": T0},
        {"conversation_id": "c", "type": "tool_result", "id": "a", "content": "ok", "ts": T0 + 40},
        {"conversation_id": "d", "type": "tool_call", "name": "u", "ts": T0},
        {"conversation_id": "e", "type": "tool_result", "id": "zz", "ts": T0},
    ]
    out: list[Any] = []
    for i, r in enumerate(recs):
        out += nat.feed(orjson.dumps(r), {"topic": "in", "partition": 0, "offset": i})
    out += nat.feed(b"nonsense", {"topic": "in", "partition": 0, "offset": 9})
    out += nat.flush("shutdown")
    assert [o[1] for o in out] == ["pair", "dead_letter", "orphan_call", "orphan_result"]
    for data, kind, cid, meta in out:
        rec = orjson.loads(data)
        assert meta == output_meta(rec) and kind == rec["kind"]
        assert cid == rec.get("conversation_id")
    assert out[0][3].latency_ms == 40.0 and out[0][3].label == "id"
