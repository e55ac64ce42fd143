"""The one vocabulary (stream_pairer/core/vocab.json) against everything that states it: the
generated part of core/vocab.py, the compiled core (build.rs generates its `vocab` module), the
published JSON Schemas, and the Rust sources (no vocabulary string written as a literal).

Why: each value is defined once and reaches the other places generated; these tests fail when a
generated copy is stale (vocab.py not regenerated, an old build of the core) or when a schema or a
Rust module states a value of its own."""

from __future__ import annotations

import ast
import importlib.util
import json
import re
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path
from typing import Any, get_args

import pytest

import stream_pairer
from stream_pairer.core import vocab

PACKAGE = Path(stream_pairer.__file__).resolve().parent
ROOT = PACKAGE.parent
DEFINITION: dict[str, Any] = json.loads((PACKAGE / "core" / "vocab.json").read_text(encoding="utf-8"))
SETS: dict[str, list[str]] = {s["name"]: [m["value"] for m in s["members"]] for s in DEFINITION["sets"]}
CONSTANTS: dict[str, Any] = {c["name"]: c["value"] for c in DEFINITION["constants"]}


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("gen_vocab", ROOT / "scripts" / "gen_vocab.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_vocab_py_is_generated_from_the_definition() -> None:
    gen = _generator()
    text = (PACKAGE / "core" / "vocab.py").read_text(encoding="utf-8")
    assert gen.splice(text, gen.render(DEFINITION)) == text, "run python3 scripts/gen_vocab.py"
    # and the generator really follows the file: another definition gives another module
    changed = json.loads(json.dumps(DEFINITION))
    changed["sets"][0]["members"][0]["value"] = "pear"
    assert gen.splice(text, gen.render(changed)) != text


def test_python_sets_and_constants_equal_the_definition() -> None:
    for name, values in SETS.items():
        members: type[StrEnum] = getattr(vocab, name)
        assert [m.value for m in members] == values, name
    assert list(get_args(vocab.EventTypeName)) == SETS["EventType"]
    for name, value in CONSTANTS.items():
        got = getattr(vocab, name)
        assert (
            sorted(got) if isinstance(got, frozenset) else list(got) if isinstance(got, tuple) else got
        ) == (sorted(value) if isinstance(got, frozenset) else value), name


def test_the_compiled_core_holds_the_definition() -> None:
    """`_native.vocabulary()` reads the Rust constants build.rs generated: a core built from an older
    vocab.json (or a hand-edited constant) differs here."""
    built = pytest.importorskip("stream_pairer._native").vocabulary()
    assert built["sets"] == SETS
    assert built["constants"] == CONSTANTS


def _enums(node: Any, path: str = "", conditional: bool = False) -> Iterator[tuple[str, set[Any], bool]]:
    """(where, values, loose) of every `enum` / `const` in a schema; `loose` for those that may
    name part of a set: inside `if`/`then`/`else`, or a record's fixed `kind`."""
    if isinstance(node, dict):
        loose = conditional or path.endswith("/kind")
        if "enum" in node:
            yield path, set(node["enum"]) - {None}, loose
        if "const" in node and isinstance(node["const"], str):
            yield path, {node["const"]}, True
        for k, v in node.items():
            yield from _enums(v, f"{path}/{k}", conditional or k in {"if", "then", "else"})
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _enums(v, f"{path}/{i}", conditional)


def _unmatched(enums: list[tuple[str, set[Any], bool]]) -> list[str]:
    sets = [set(v) for v in SETS.values()]
    return [
        where
        for where, values, loose in enums
        if not any(values == s or (loose and values <= s) for s in sets)
    ]


def test_every_enum_in_the_schemas_is_a_vocabulary_set() -> None:
    enums: list[tuple[str, set[Any], bool]] = []
    for path in sorted((PACKAGE / "schemas").glob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        enums += [(f"{path.name}{w}", v, loose) for w, v, loose in _enums(doc)]
    string_enums = [e for e in enums if all(isinstance(x, str) for x in e[1])]
    assert len(string_enums) >= 12  # the walk finds the schemas' enums
    assert _unmatched(string_enums) == []
    # and a value the vocabulary does not define is reported
    assert _unmatched([("x/reason", {"no_call", "lost"}, False)]) == ["x/reason"]
    assert _unmatched([("x/kind", {"pair"}, True)]) == []


# Strings in the Rust sources equal to a vocabulary value that are not that value: JSON member
# names the readers look up, and the fast path's own fall-through reasons (Err(..): why a record
# goes to the Python format layer, counted in `fallthrough`, never written to a record).
_NOT_VOCABULARY = re.compile(r'Err\("\w+"\)|ok_or\("\w+"\)|get\("\w+"\)|key == "\w+"|\.contains_key\("\w+"\)')


def test_rust_sources_name_the_vocabulary_instead_of_spelling_it() -> None:
    values = {v for name, vs in SETS.items() if name != "Format" for v in vs}
    found = []
    for path in sorted((ROOT / "native" / "src").rglob("*.rs")):
        if "tests" in path.relative_to(ROOT / "native" / "src").parts:
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = _NOT_VOCABULARY.sub("", line.split("//")[0])
            found += [f"{path.name}:{n}: {s}" for s in re.findall(r'(?<![\w\\])"(\w+)"', code) if s in values]
    assert found == []


def _string_collections(tree: ast.AST) -> Iterator[tuple[int, set[str]]]:
    """(line, values) of every tuple, list, set or `Literal[...]` written as two or more strings."""
    for node in ast.walk(tree):
        elts: list[ast.expr] = []
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            elts = node.elts
        elif isinstance(node, ast.Subscript) and getattr(node.value, "id", None) == "Literal":
            elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        strings = [e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        if len(strings) >= 2 and len(strings) == len(elts):
            yield node.lineno, set(strings)


def test_no_python_module_copies_a_vocabulary_set() -> None:
    """A whole set spelled out again (a `Literal[...]`, a tuple of reasons) is a copy that can drift:
    modules name the generated enum or its `Literal` alias instead."""
    sets = [set(v) for v in SETS.values()]
    copies = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "core" / "vocab.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        copies += [
            f"{path.relative_to(PACKAGE)}:{n}" for n, values in _string_collections(tree) if values in sets
        ]
    assert copies == []
    # the scan sees the copy this test exists for
    found = list(_string_collections(ast.parse('T = Literal["tool_call", "tool_result"]')))
    assert (1, {"tool_call", "tool_result"}) in found and found[0][1] in sets


def _reason_literals(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """String constants that spell a dead-letter reason, outside an `__all__` list (which names
    functions, one of them `wrong_type`)."""
    reasons = set(SETS["DeadLetterReason"])
    exported: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            exported |= {id(c) for c in ast.walk(node.value)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and node.value in reasons and id(node) not in exported:
            yield node.lineno, node.value


def test_no_python_module_spells_a_dead_letter_reason() -> None:
    """Readers and adapters name `DeadLetterReason` members: a reason spelled as text (22 of them
    were, in 14 files) is a copy a rename would miss."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path != PACKAGE / "core" / "vocab.py":
            tree = ast.parse(path.read_text(encoding="utf-8"))
            found += [f"{path.relative_to(PACKAGE)}:{n}: {v}" for n, v in _reason_literals(tree)]
    assert found == []
    # the scan sees the spelling this test exists for, and not an __all__ entry
    probe = 'raise FormatError("wrong_type", "x")\n__all__ = ["wrong_type"]'
    assert list(_reason_literals(ast.parse(probe))) == [(1, "wrong_type")]
