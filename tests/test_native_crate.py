"""The compiled core's source held to the Python package's standards: no module over 600 lines and
no dependency cycle between sibling modules (the readers once formed canonical <-> messages <->
envelope <-> gemini/mcp/bedrock). Why a test and not a review rule: both crept in before, one
commit at a time. A parent module that declares its children and is used by them (Rust's `impl`
blocks in submodules) is not a cycle; siblings depending on each other both ways is."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "native" / "src"
MAX_LINES = 600


def _group(code: str, start: int) -> list[str]:
    """The top-level items of the `{...}` group opening at `start` (nested groups kept whole)."""
    depth, item, items = 0, "", []
    for c in code[start:]:
        depth += (c == "{") - (c == "}")
        if depth == 0:
            break
        if c == "," and depth == 1:
            items.append(item)
            item = ""
        elif depth >= 1 and not (c == "{" and depth == 1):
            item += c
    return [i.strip() for i in [*items, item] if i.strip()]


def _refs(text: str, prefix: str) -> set[str]:
    """The first path segment of every `prefix::name` / `prefix::{a, b::{c}}` reference in `text`
    (comments stripped)."""
    code = re.sub(r"//.*", "", text)
    names: set[str] = set()
    for m in re.finditer(rf"\b{prefix}::(\w+|\{{)", code):
        if m.group(1) == "{":
            names.update(re.split(r"\W", i, maxsplit=1)[0] for i in _group(code, m.end() - 1))
        else:
            names.add(m.group(1))
    return names


def _siblings(folder: Path) -> dict[str, list[Path]]:
    """The child modules declared in `folder` (file `x.rs` or folder `x/`), each with its files."""
    mods: dict[str, list[Path]] = {}
    for p in sorted(folder.iterdir()):
        if p.is_file() and p.suffix == ".rs" and p.stem not in {"lib", "mod", "main"}:
            mods[p.stem] = [p]
        elif p.is_dir():
            mods[p.name] = sorted(p.rglob("*.rs"))
    return mods


def _graph(folder: Path, prefix: str) -> dict[str, set[str]]:
    """Sibling module -> the siblings it references (through `crate::` at the crate root, through
    `super::` one level down)."""
    mods = _siblings(folder)
    graph: dict[str, set[str]] = {}
    for name, files in mods.items():
        own = files if prefix == "crate" else [f for f in files if f.parent == folder]
        refs: set[str] = set()
        for f in own:
            refs |= _refs(f.read_text(encoding="utf-8"), prefix)
        graph[name] = (refs & mods.keys()) - {name}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One dependency cycle of `graph` as a path (first node repeated at the end), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for m in sorted(graph[n]):
            if state.get(m) == 1:
                return [*stack[stack.index(m) :], m]
            if m not in state and (found := visit(m)):
                return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state and (found := visit(n)):
            return found
    return None


def _folders() -> list[Path]:
    return [SRC, *sorted(p for p in SRC.rglob("*") if p.is_dir() and (p / "mod.rs").exists())]


def test_no_rust_module_is_over_600_lines() -> None:
    sizes = {
        str(p.relative_to(SRC)): len(p.read_text(encoding="utf-8").splitlines()) for p in SRC.rglob("*.rs")
    }
    assert sizes, "no Rust sources found"
    assert {k: v for k, v in sizes.items() if v > MAX_LINES} == {}


@pytest.mark.parametrize("folder", _folders(), ids=lambda p: str(p.relative_to(SRC.parent)))
def test_sibling_modules_depend_one_way(folder: Path) -> None:
    graph = _graph(folder, "crate" if folder == SRC else "super")
    assert _cycle(graph) is None, f"module cycle: {' -> '.join(_cycle(graph) or [])}"


def test_the_cycle_check_finds_a_cycle() -> None:
    """The check itself can fail: a two-way reference between siblings is reported as a cycle,
    and a `crate::{a, b}` group counts as references to both."""
    assert _refs("use crate::{fields::get, scan::{self, Member}};\n// crate::x", "crate") == {
        "fields",
        "scan",
    }
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None
