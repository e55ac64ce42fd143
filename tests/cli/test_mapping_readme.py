"""README "Mappings": both worked examples run from the README text itself (input, program and the
summary lines it promises), then audited with the same --map: conservation holds."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from stream_pairer.cli.app import main
from tests.reference.engines import pair_on

README = Path(__file__).resolve().parents[2] / "README.md"
_BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)


def _examples() -> list[dict[str, str]]:
    text = README.read_text()
    found = re.findall(r"<!-- map-example -->(.*?)<!-- /map-example -->", text, re.S)
    return [{lang: body for lang, body in _BLOCK.findall(part)} for part in found]


def test_the_readme_has_two_examples() -> None:
    examples = _examples()
    assert len(examples) == 2
    assert all({"jsonl", "jq", "text"} <= ex.keys() for ex in examples)


@pytest.mark.parametrize("n", [0, 1])
def test_readme_mapping_example_runs_as_written(
    n: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ex = _examples()[n]
    log, program, out = tmp_path / "log.jsonl", tmp_path / "map.jq", tmp_path / "out"
    log.write_text(ex["jsonl"])
    program.write_text(ex["jq"])
    for engine in ("python", "native"):
        with pair_on(engine):  # the reference model (tests/reference) in place of the core, then the core
            code = main(["pair", str(log), "--out", str(out), "--map", str(program), "--overwrite"])
        assert code == 0
        summary = {" ".join(line.split()) for line in capsys.readouterr().out.splitlines()}
        for promised in ex["text"].strip().splitlines():
            assert " ".join(promised.split()) in summary, (engine, promised, sorted(summary))
        assert "(ok)" in next(s for s in summary if s.startswith("conservation:"))
        assert main(["audit", "--input", str(log), "--outputs", str(out), "--map", str(program), "-q"]) == 0
        capsys.readouterr()
