"""stream_pairer/_native.pyi against the built extension. Why: mypy reads only the stub, so a stub
that drifts from the module (a method renamed in Rust, a keyword added, a default changed) would
make mypy check calls against a boundary that does not exist. Names, parameter names and kinds,
defaults, and which members are properties must agree both ways; and mypy must actually reject a
call the stub does not allow (the stub is what it reads)."""

from __future__ import annotations

import ast
import inspect
import textwrap
from pathlib import Path
from typing import Any

import pytest

from stream_pairer.core import native

_native: Any = pytest.importorskip("stream_pairer._native")

STUB = Path(native.__file__).resolve().parents[1] / "_native.pyi"
ROOT = STUB.parents[1]


def _stub() -> ast.Module:
    return ast.parse(STUB.read_text(encoding="utf-8"))


def _public(names: Any) -> set[str]:
    return {n for n in names if not n.startswith("_")}


def _functions(body: list[ast.stmt]) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in body if isinstance(n, ast.FunctionDef)}


def _params(fn: ast.FunctionDef) -> list[tuple[str, str, object]]:
    """(name, kind, default) of each parameter but `self`; default `inspect._empty` when none."""
    a = fn.args
    empty: object = inspect.Parameter.empty
    pos = [*a.posonlyargs, *a.args]
    pos_defaults = [empty] * (len(pos) - len(a.defaults)) + [ast.literal_eval(d) for d in a.defaults]
    out = [
        (p.arg, "POSITIONAL_OR_KEYWORD", d) for p, d in zip(pos, pos_defaults, strict=True) if p.arg != "self"
    ]
    kw_defaults = [empty if d is None else ast.literal_eval(d) for d in a.kw_defaults]
    out += [(p.arg, "KEYWORD_ONLY", d) for p, d in zip(a.kwonlyargs, kw_defaults, strict=True)]
    return out


def _runtime_params(obj: Any) -> list[tuple[str, str, object]]:
    sig = inspect.signature(obj)
    return [
        (p.name, "POSITIONAL_OR_KEYWORD" if p.kind is p.POSITIONAL_ONLY else p.kind.name, p.default)
        for p in sig.parameters.values()
        if p.name != "self"
    ]


def _same(stub: list[tuple[str, str, object]], runtime: list[tuple[str, str, object]]) -> bool:
    """Equal, except that a default the extension cannot show (`...`: a Rust value such as a
    tuple) only has to exist on both sides."""
    if [(n, k) for n, k, _ in stub] != [(n, k) for n, k, _ in runtime]:
        return False
    return all(
        (r is Ellipsis and s is not inspect.Parameter.empty) or s == r
        for (*_, s), (*_, r) in zip(stub, runtime, strict=True)
    )


def test_module_names_agree() -> None:
    tree = _stub()
    stub_names = set(_functions(tree.body)) | {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    assert _public(stub_names) == _public(dir(_native))


def test_function_signatures_agree() -> None:
    for name, fn in _functions(_stub().body).items():
        assert _same(_params(fn), _runtime_params(getattr(_native, name))), name


def test_core_members_and_signatures_agree() -> None:
    cls = next(n for n in _stub().body if isinstance(n, ast.ClassDef) and n.name == "Core")
    fns = _functions(cls.body)
    props = {n for n, f in fns.items() if any(getattr(d, "id", None) == "property" for d in f.decorator_list)}
    attrs = {n.target.id for n in cls.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    methods = set(fns) - props - {"__init__"}
    runtime = {k: v for k, v in vars(_native.Core).items() if not k.startswith("_")}
    getsets = {k for k, v in runtime.items() if inspect.isgetsetdescriptor(v)}
    assert props | attrs == getsets
    assert methods == set(runtime) - getsets
    for name in methods:
        assert _same(_params(fns[name]), _runtime_params(runtime[name])), name
    assert _same(_params(fns["__init__"]), _runtime_params(_native.Core))


def test_the_comparison_sees_a_difference() -> None:
    """The checks above can fail: a renamed keyword or a changed default is a difference."""
    (fn,) = _functions(ast.parse("def f(self, a, *, b=1): ...").body).values()
    assert _same(
        _params(fn), [("a", "POSITIONAL_OR_KEYWORD", inspect.Parameter.empty), ("b", "KEYWORD_ONLY", 1)]
    )
    assert not _same(
        _params(fn), [("a", "POSITIONAL_OR_KEYWORD", inspect.Parameter.empty), ("c", "KEYWORD_ONLY", 1)]
    )
    assert not _same(
        _params(fn), [("a", "POSITIONAL_OR_KEYWORD", inspect.Parameter.empty), ("b", "KEYWORD_ONLY", 2)]
    )


def test_mypy_checks_calls_into_the_extension(tmp_path: Path) -> None:
    """A wrong call (a misspelt keyword, a str where bytes go) is a mypy error through the stub."""
    api = pytest.importorskip("mypy.api")
    probe = tmp_path / "probe.py"
    probe.write_text(
        textwrap.dedent(
            """
            from stream_pairer import _native

            def ok(core: _native.Core) -> int:
                return core.held_count + len(_native.dumps_str("x"))

            def wrong(core: _native.Core) -> None:
                core.flush(reasons="shutdown")
                _native.is_canonical("not bytes")
            """
        ),
        encoding="utf-8",
    )
    out, _, status = api.run(["--strict", "--no-incremental", "--follow-imports=silent", str(probe)])
    assert status == 1, out
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert len(errors) == 2, out
    assert all(":8:" in e or ":9:" in e for e in errors), out
