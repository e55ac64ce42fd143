"""`stream-pairer formats`: every registered reader (formats.FORMATS) is listed with how it is
detected and a sample, and each sample really is read as its format."""

from __future__ import annotations

import orjson
import pytest

from stream_pairer.cli.app import main
from stream_pairer.core.formats import FORMATS, FormatConfig, catalog, parse_record
from stream_pairer.core.formats.catalog import SAMPLE_MAPPING, FormatInfo, describe
from stream_pairer.core.mapping import compile_mapping


def test_every_registered_format_is_described() -> None:
    assert set(FORMATS) <= set(describe())


@pytest.mark.parametrize("fmt", FORMATS)
def test_each_sample_is_read_as_its_format(fmt: str) -> None:
    info = describe()[fmt]
    config = (
        FormatConfig(mapping=compile_mapping(SAMPLE_MAPPING, "sample.jq"))
        if info.needs_mapping
        else FormatConfig()
    )
    events = parse_record(orjson.dumps(info.sample), {"file": "s", "line": 1}, key="k", config=config)
    assert events and {ev.format for ev in events} == {fmt}


def test_the_command_lists_every_format_with_detection_and_sample(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["formats"]) == 0
    text = capsys.readouterr().out
    listed = [line for line in text.splitlines() if line and not line.startswith(" ")]
    assert listed == list(FORMATS)
    assert text.count("  detected by: ") == text.count("  sample:      ") == len(FORMATS)
    assert main(["formats", "--json"]) == 0
    rows = [orjson.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["format"] for r in rows] == list(FORMATS)
    assert all(r["detected_by"] and r["sample"] == describe()[r["format"]].sample for r in rows)


def test_a_reader_module_describes_itself(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A reader added beside the others shows up from its own FORMAT_INFO, no edit elsewhere."""
    from stream_pairer.cli.commands import formats as command  # noqa: PLC0415
    from stream_pairer.core.formats import otel  # noqa: PLC0415

    own = FormatInfo("otel", "described by its own module", {"resourceSpans": []})
    monkeypatch.setattr(otel, "FORMAT_INFO", own, raising=False)
    monkeypatch.setattr(command, "FORMATS", (*FORMATS, "brand_new"))
    assert describe()["otel"] is own
    assert main(["formats"]) == 0
    text = capsys.readouterr().out
    assert "described by its own module" in text
    assert "brand_new\n  detected by: (not described: add a FORMAT_INFO to its reader module)" in text
    assert catalog.BUILT_IN  # the built-in descriptions are untouched
