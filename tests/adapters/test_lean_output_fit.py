"""The sidecar's size fitting keeps the `--raw` rule readable: a side whose `raw` was left out by
configuration stays without the key, a side that had it keeps the key as null, flagged."""

from __future__ import annotations

import orjson

from stream_pairer.adapters.kafka.delivery import fit_output
from stream_pairer.core.model import ToolEvent
from stream_pairer.core.vocab import RawMode
from tests.reference.engine import Engine, EngineConfig


def test_fitting_a_lean_pair_leaves_an_omitted_raw_absent() -> None:
    engine = Engine(EngineConfig(raw=RawMode.CALL))
    big = "x" * 50_000
    call = ToolEvent("tool_call", "c", "t1", "s", {"q": 1}, 1000.0, "canonical", {"offset": 1}, raw={"q": 1})
    result = ToolEvent("tool_result", "c", "t1", "s", big, 1500.0, "canonical", {"offset": 2}, raw={"c": big})
    (pair,) = engine.process(call) + engine.process(result)
    assert "raw" in pair["call"] and "raw" not in pair["result"]
    fitted = orjson.loads(fit_output(orjson.dumps(pair), 10_000))
    assert fitted["payload_truncated"] is True
    assert fitted["call"]["raw"] is None  # there, emptied by the fitting (flagged above)
    assert "raw" not in fitted["result"]  # left out by --raw call, and still visibly so
    assert fitted["result"]["content"] is None
