"""core/vocab.py: the one vocabulary equals what the published JSON Schemas promise, and stays str."""

from __future__ import annotations

import json
import re
from enum import StrEnum
from pathlib import Path
from typing import Any, get_type_hints

import orjson
import pytest

import stream_pairer
from stream_pairer.core import vocab
from stream_pairer.core.model import ToolEvent, dead_letter
from stream_pairer.core.vocab import (
    DeadLetterReason,
    DeadLetterRecord,
    EventType,
    FailurePoint,
    FifoBy,
    Match,
    OrphanReason,
    OrphanRecord,
    Outcome,
    PairRecord,
    RecordKind,
)
from tests.reference.engine import Engine

PACKAGE = Path(stream_pairer.__file__).parent
SCHEMAS = PACKAGE / "schemas"


def schema(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((SCHEMAS / name).read_text())
    return doc


def enum_of(name: str, prop: str) -> set[Any]:
    spec = schema(name)["properties"][prop]
    return set(spec["enum"]) if "enum" in spec else {spec["const"]}


@pytest.mark.parametrize(
    ("members", "schema_name", "prop"),
    [
        (RecordKind, "pair.schema.json", "kind"),
        (RecordKind, "orphan.schema.json", "kind"),
        (RecordKind, "dead_letter.schema.json", "kind"),
        (OrphanReason, "orphan.schema.json", "reason"),
        (DeadLetterReason, "dead_letter.schema.json", "reason"),
        (Match, "pair.schema.json", "match"),
        (FifoBy, "pair.schema.json", "fifo_by"),
        (Outcome, "pair.schema.json", "outcome"),
        (Outcome, "orphan.schema.json", "outcome"),
        (FailurePoint, "pair.schema.json", "failure"),
        (FailurePoint, "orphan.schema.json", "failure"),
        (EventType, "canonical_event.schema.json", "type"),
    ],
)
def test_each_enum_equals_the_schema_enum(members: type[StrEnum], schema_name: str, prop: str) -> None:
    published = enum_of(schema_name, prop) - {None}
    if members is RecordKind:  # each record schema fixes one or two kinds of the enum
        assert published and published <= set(RecordKind)
    else:
        assert published == {m.value for m in members}


@pytest.mark.parametrize(
    ("typed", "schema_name"),
    [
        (PairRecord, "pair.schema.json"),
        (OrphanRecord, "orphan.schema.json"),
        (DeadLetterRecord, "dead_letter.schema.json"),
    ],
)
def test_typed_dicts_state_the_schema_fields(typed: Any, schema_name: str) -> None:
    doc = schema(schema_name)
    assert set(get_type_hints(typed)) == set(doc["properties"])
    assert typed.__required_keys__ == set(doc["required"])


def test_every_dead_letter_reason_the_readers_raise_is_in_the_vocabulary() -> None:
    """Reasons are named through the enum where `FormatError` is raised (no module spells one as
    text: test_vocab_source.py), so a new one cannot reach the output unpublished."""
    raised: set[str] = set()
    pattern = re.compile(r"FormatError\(\s*DeadLetterReason\.([A-Z_0-9]+)")
    for path in (PACKAGE / "core").rglob("*.py"):
        raised.update(pattern.findall(path.read_text()))
    assert {"TOO_LARGE", "INVALID_JSON", "WRONG_TYPE"} <= raised  # the scan finds the raise sites
    assert raised <= set(DeadLetterReason.__members__)


def test_orphan_reason_rebalance_is_gone() -> None:
    """Rebalances rebuild by replay; no record ever carried `rebalance`, so it is not published."""
    assert "rebalance" not in set(OrphanReason)
    assert "rebalance" not in enum_of("orphan.schema.json", "reason")


def test_output_records_hold_plain_strings_and_serialize_as_before() -> None:
    """Records carry exact `str` values (not enum members): orjson writes the same bytes, and the
    summary counters keyed by them stay JSON-serializable."""
    engine = Engine()
    src = {"file": "x", "line": 1}
    call = ToolEvent("tool_call", "c", "t1", "search", {}, 1000.0, "canonical", src)
    result = ToolEvent(
        "tool_result", "c", "t1", "search", "ok", 1500.0, "canonical", {"file": "x", "line": 2}
    )
    (pair,) = engine.process(call) + engine.process(result)
    # An id-less result with no call to pair with waits its grace; the end of input makes it no_call.
    assert engine.process(ToolEvent("tool_result", "c", None, "x", "", 2000.0, "canonical", src)) == []
    (orphan,) = engine.flush("end_of_input", result_reason="no_call")
    dead = dead_letter(b"{", "invalid_json", "cut", src)
    for rec, key in ((pair, "kind"), (pair, "match"), (orphan, "kind"), (orphan, "reason"), (dead, "kind")):
        assert type(rec[key]) is str, (key, type(rec[key]))
    assert orjson.dumps({pair["kind"]: 1, orphan["reason"]: 2}) == b'{"pair":1,"no_call":2}'
    assert orphan["reason"] == OrphanReason.NO_CALL and pair["match"] == Match.ID


def test_vocabulary_module_is_the_one_definition() -> None:
    """No other module spells out the closed sets as tuples of literals again."""
    duplicated = re.compile(
        r'\(\s*"orphan_call",\s*"orphan_result"\s*\)|"argument_construction",\s*\n?\s*"execution"'
    )
    offenders = [
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if p.name != "vocab.py" and duplicated.search(p.read_text())
    ]
    assert offenders == []
    assert vocab.ORPHAN_KINDS == (RecordKind.ORPHAN_CALL, RecordKind.ORPHAN_RESULT)


def test_log_formats_equal_the_side_schema() -> None:
    """`ToolEvent.format` values (formats.FORMATS, owned by the format layer) are what side.schema.json
    publishes."""
    from stream_pairer.core.formats import FORMATS  # noqa: PLC0415

    assert set(FORMATS) == set(schema("side.schema.json")["properties"]["format"]["enum"])


def test_raw_modes_keep_raw_on_the_sides_they_name() -> None:
    """--raw: one definition of what each mode keeps, a config that checks its value."""
    from stream_pairer.core.vocab import DEFAULT_RAW_MODE, RawMode  # noqa: PLC0415
    from tests.reference.engine import EngineConfig  # noqa: PLC0415

    assert [(m.keeps(True), m.keeps(False)) for m in RawMode] == [(True, True), (True, False), (False, False)]
    assert EngineConfig().raw is DEFAULT_RAW_MODE is RawMode.ALL  # today's records by default
    assert EngineConfig(raw="omit").raw is RawMode.OMIT  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="some"):
        EngineConfig(raw="some")  # type: ignore[arg-type]
    call = ToolEvent(
        "tool_call", "c", "t1", "search", {"q": 1}, 1000.0, "canonical", {"line": 1}, raw={"x": 1}
    )
    assert call.to_side()["raw"] == {"x": 1}
    assert "raw" not in call.to_side(False)
    assert {k: v for k, v in call.to_side().items() if k != "raw"} == call.to_side(False)
