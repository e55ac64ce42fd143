"""`--map FILE` (core/mapping.py): a jq program turns each record into canonical events of format
`mapped`; a program that does not compile names its file and line; a record the program rejects is
a `mapping_error` dead letter carrying the program's message, and the run goes on."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_pairer.cli.app import main
from stream_pairer.core.formats import FormatConfig, parse_record
from stream_pairer.core.mapping import MappingError, compile_mapping
from tests.reference.engine import Engine
from tests.reference.engines import pair_on
from tests.reference.pipeline import Pipeline

SRC = {"file": "log.jsonl", "line": 1}
PROGRAM = """
# one record can hold several calls
if .kind == "calls" then .calls[] | {type: "tool_call", id: .id, name: .tool, arguments: .args, ts: .at}
elif .kind == "result" then {type: "tool_result", call_id: .of, content: .out, is_error: .failed,
                             conversation_id: .conv}
elif .kind == "reject" then error("kind reject: \\(.why)")
else empty end
"""


def _read(record: object, program: str = PROGRAM, key: str | None = "file-conv") -> list:  # type: ignore[type-arg]
    config = FormatConfig(mapping=compile_mapping(program, "rules.jq"))
    return parse_record(orjson.dumps(record), SRC, key=key, config=config)


def test_one_record_becomes_several_events_with_their_own_fields() -> None:
    evs = _read(
        {
            "kind": "calls",
            "session_id": "s-7",
            "calls": [
                {"id": "a", "tool": "search", "args": {"q": 1}, "at": "2025-01-01T00:00:01Z"},
                {"id": 2, "tool": "read", "args": {}, "at": "2025-01-01T00:00:02Z"},
            ],
        }
    )
    assert [(e.type, e.id, e.name, e.format, e.block, e.conversation_id) for e in evs] == [
        ("tool_call", "a", "search", "mapped", 0, "s-7"),  # conversation: the record's own field
        ("tool_call", "2", "read", "mapped", 1, "s-7"),
    ]
    assert evs[0].payload == {"q": 1}
    assert evs[1].ts_ms - evs[0].ts_ms == 1000.0  # each event's own time


def test_an_event_conversation_wins_and_the_key_is_the_last_resort() -> None:
    (ev,) = _read({"kind": "result", "of": "a", "out": "ok", "failed": True, "conv": "c-9"})
    assert (ev.type, ev.id, ev.conversation_id, ev.is_error, ev.payload) == (
        "tool_result",
        "a",
        "c-9",
        True,
        "ok",
    )
    (ev,) = _read({"kind": "result", "of": "a", "out": "ok", "failed": False})
    assert ev.conversation_id == "file-conv"


def test_empty_output_means_no_tool_event() -> None:
    assert _read({"kind": "log", "msg": "hello"}) == []


def test_any_json_value_can_be_mapped() -> None:
    (ev,) = _read(["a", "search"], '{type: "tool_call", id: .[0], name: .[1], arguments: {}}')
    assert (ev.id, ev.name, ev.conversation_id) == ("a", "search", "file-conv")


@pytest.mark.parametrize(
    ("record", "program", "says"),
    [
        ({"kind": "reject", "why": "x"}, PROGRAM, "the mapping rejected the record: kind reject: x"),
        ({"a": "text"}, ".a.b", "Cannot index string with string"),
        ({"a": 1}, "[.a]", "output 1 is an array, expected a canonical event object (emit events one by one"),
        ({"a": 1}, '{type: "call"}', 'output 1 has type \'call\', expected "tool_call" or "tool_result"'),
        ({"a": 1}, '{type: "tool_call", id: "x"}', "output 1 is not a canonical event: name is missing"),
        ({"a": 1}, '{type: "tool_result", call_id: {}}', "call_id is an object, expected a string id"),
        ({"a": 1}, '{type: "tool_result", ts: "soon"}', "output 1: ts is the string 'soon'"),
        ({"a": 1}, '{type: "tool_result", conversation_id: []}', "conversation_id is an array"),
        ({"a": 1}, 'range(20001) | {type: "tool_result"}', "more than 10000 values for one record"),
    ],
)
def test_a_rejected_record_is_a_mapping_error_carrying_the_message(
    record: object, program: str, says: str
) -> None:
    config = FormatConfig(mapping=compile_mapping(program, "rules.jq"))
    pipeline = Pipeline(Engine(), config)
    (dead,) = pipeline.feed(orjson.dumps(record), SRC, key="k")
    assert dead["kind"] == "dead_letter" and dead["reason"] == "mapping_error"
    assert dead["detail"].startswith("--map rules.jq: ") and says in dead["detail"], dead["detail"]
    assert dead["raw"] == orjson.dumps(record).decode()  # the input record, whole
    # nothing of the record was half-read, and the pipeline goes on
    assert pipeline.summary.events == {} and pipeline.summary.dead_letters == {"mapping_error": 1}


def test_invalid_json_is_still_invalid_json_under_a_mapping() -> None:
    pipeline = Pipeline(Engine(), FormatConfig(mapping=compile_mapping(".", "rules.jq")))
    (dead,) = pipeline.feed(b'{"a": ', SRC, key="k")
    assert dead["reason"] == "invalid_json"


@pytest.mark.parametrize(
    ("program", "message"),
    [
        (
            ".a |\n  map(.b\n  | foo(",
            "--map rules.jq, line 3, column 8: syntax error, unexpected end of file",
        ),
        (
            'if .x then\n  {type: "tool_call"}\nelse bar end\n',
            "--map rules.jq, line 3, column 6: bar/0 is not defined",
        ),
    ],
)
def test_a_compile_error_names_the_file_and_line(program: str, message: str) -> None:
    with pytest.raises(MappingError) as err:
        compile_mapping(program, "rules.jq")
    assert str(err.value) == message


@pytest.mark.parametrize("how", ["flag", "env"])
@pytest.mark.parametrize("command", ["pair", "audit", "run"])
def test_every_command_refuses_a_bad_mapping_in_one_line_exit_2(
    command: str,
    how: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    program = tmp_path / "bad.jq"
    program.write_text('def f: .;\n{type: "tool_call",\n id: nope(1)}\n')
    log = tmp_path / "log.jsonl"
    log.write_text("{}\n")
    argv = {
        "pair": ["pair", str(log), "--out", str(tmp_path / "out")],
        "audit": ["audit", "--input", str(log), "--outputs", str(tmp_path)],
        "run": [
            "run",
            "--bootstrap-servers",
            "127.0.0.1:1",
            "--group-id",
            "g",
            "--no-http",
            "--input-topic",
            "t",
        ],
    }[command]
    if how == "flag":
        argv += ["--map", str(program)]
    else:
        monkeypatch.setenv("STREAM_PAIRER_MAP", str(program))
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].endswith(f"--map {program}, line 3, column 6: nope/1 is not defined"), err
    assert not (tmp_path / "out").exists()  # nothing was written


def test_a_mapped_run_pairs_dead_letters_and_audits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "log.jsonl"
    records = [
        {
            "kind": "calls",
            "calls": [{"id": "a", "tool": "t", "args": {}}, {"id": "b", "tool": "t", "args": {}}],
        },
        {"kind": "reject", "why": "bad line"},
        {"kind": "result", "of": "b", "out": 1, "failed": False},
        {"kind": "result", "of": "a", "out": 2, "failed": False},
        {"kind": "chatter"},
    ]
    log.write_bytes(b"\n".join(orjson.dumps(r) for r in records) + b"\n")
    program = tmp_path / "rules.jq"
    program.write_text(PROGRAM)
    out = tmp_path / "out"
    assert main(["pair", str(log), "--out", str(out), "--map", str(program), "-q"]) == 0
    pairs = [orjson.loads(x) for x in (out / "pairs.jsonl").read_bytes().splitlines()]
    assert sorted(
        (p["call"]["id"], p["result"]["content"], p["match"], p["call"]["format"]) for p in pairs
    ) == [
        ("a", 2, "id", "mapped"),
        ("b", 1, "id", "mapped"),
    ]
    (dead,) = [orjson.loads(x) for x in (out / "dead_letter.jsonl").read_bytes().splitlines()]
    assert dead["reason"] == "mapping_error" and "kind reject: bad line" in dead["detail"]
    assert dead["source"] == {"file": log.name, "line": 2}
    capsys.readouterr()
    # the audit re-reads the input through the same mapping: every event in exactly one output
    assert main(["audit", "--input", str(log), "--outputs", str(out), "--map", str(program), "-q"]) == 0
    # ... and without it, the audit cannot know those events: it must not pass silently
    assert main(["audit", "--input", str(log), "--outputs", str(out), "-q"]) == 1


def test_the_sidecar_config_carries_the_mapping(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from stream_pairer.cli.app import build_parser  # noqa: PLC0415
    from stream_pairer.cli.commands.run import config_from_args  # noqa: PLC0415

    program = tmp_path / "rules.jq"
    program.write_text(PROGRAM)
    monkeypatch.setenv("STREAM_PAIRER_MAP", str(program))  # the Pod-spec way
    args = build_parser("run").parse_args(
        ["run", "--bootstrap-servers", "127.0.0.1:1", "--input-topic", "t", "--group-id", "g"]
    )
    mapping = config_from_args(args).formats.mapping
    assert mapping is not None and mapping.name == str(program)
    (ev,) = parse_record(
        b'{"kind": "result", "of": "a", "out": 1}', SRC, key="k", config=config_from_args(args).formats
    )
    assert ev.format == "mapped"


def test_both_engines_write_the_same_files_under_a_mapping(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    records = [
        {"kind": "calls", "calls": [{"id": "a", "tool": "t", "args": {"x": 1}, "at": 1_750_000_000}]},
        {"kind": "calls", "calls": [{"id": "b", "tool": "t", "args": {"x": 1}, "at": 1_750_000_001}]},
        {"kind": "reject", "why": "w"},
        {"kind": "result", "of": "a", "out": "Error: boom", "failed": True},
        {"kind": "result", "of": "zz", "out": None, "failed": False},
        [1, 2],
    ]
    log.write_bytes(b"\n".join(orjson.dumps(r) for r in records) + b"\n")
    program = tmp_path / "rules.jq"
    program.write_text(PROGRAM)
    summaries = {}
    for engine in ("python", "native"):
        summary = tmp_path / f"{engine}.json"
        argv = [
            "pair",
            str(log),
            "--out",
            str(tmp_path / engine),
            "-q",
            "--map",
            str(program),
        ]
        with pair_on(engine):  # the reference model (tests/reference) in place of the core, then the core
            assert main([*argv, "--summary-json", str(summary)]) == 0
        body = orjson.loads(summary.read_bytes())
        body.pop("seconds")
        summaries[engine] = body
    assert summaries["python"] == summaries["native"]
    assert summaries["python"]["events_by_format"] == {"mapped": 4}
    for name in ("pairs.jsonl", "orphans.jsonl", "dead_letter.jsonl"):
        assert (tmp_path / "native" / name).read_bytes() == (tmp_path / "python" / name).read_bytes(), name


_KINDS = st.sampled_from(["call", "result", "reject", "chatter"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(_KINDS, st.integers(0, 5), st.sampled_from(["c1", "c2"])), max_size=30))
def test_conservation_under_a_mapping(script: list[tuple[str, int, str]]) -> None:
    """Any mix of mapped calls, results, rejections and non-events: every mapped event ends in
    exactly one pair or orphan, every rejected record in one dead letter, nothing else is written."""
    pipeline = Pipeline(Engine(), FormatConfig(mapping=compile_mapping(PROGRAM, "rules.jq")))
    out = []
    for i, (kind, n, conv) in enumerate(script):
        record = {
            "call": {
                "kind": "calls",
                "session_id": conv,
                "calls": [{"id": f"k{n}", "tool": "t", "args": {}}],
            },
            "result": {"kind": "result", "of": f"k{n}", "out": i, "failed": False, "conv": conv},
            "reject": {"kind": "reject", "why": i},
            "chatter": {"kind": "chatter"},
        }[kind]
        out += pipeline.feed(orjson.dumps(record), {"file": "f", "line": i + 1}, key="k")
    out += pipeline.flush("end_of_input", "no_call")
    members = 2 * sum(r["kind"] == "pair" for r in out) + sum(r["kind"].startswith("orphan") for r in out)
    assert members == sum(kind in ("call", "result") for kind, _, _ in script)
    assert sum(r["kind"] == "dead_letter" for r in out) == sum(kind == "reject" for kind, _, _ in script)
    assert all(r["match"] == "id" for r in out if r["kind"] == "pair")
