"""Registered tool schemas: tool definitions read from JSON files, each schema compiled once.

The tagger checks every call's arguments against its tool's schema, on the hot path, so a schema
is compiled when it is loaded and never again. The validator library is `jsonschema-rs` (a Rust
implementation with Python bindings), chosen over `fastjsonschema` and `jsonschema` for three
reasons, measured or shown in docs/FAILURES.md:

* speed on the common path (valid arguments): ~0.6 us per check, against ~3.4 us for fastjsonschema
  and ~58 us for jsonschema on the same realistic schema;
* correctness on the dialect tool schemas are written in: it implements drafts 4 to 2020-12, the
  default dialect of MCP `inputSchema`; fastjsonschema stops at draft-07 and silently ignores newer
  keywords (`prefixItems` is not enforced), which would hide argument errors;
* no code generation: fastjsonschema turns each schema into Python source and exec()s it.

Validators are built offline (a remote `$ref` is an error at load time, never a network fetch at
run time), with `format` asserted (a model writing "tomorrow" into a `date-time` field is exactly
an argument-construction failure) and with argument values masked in error messages, so that a
`failure_detail` says which rule failed without copying the user's data.

Accepted definition shapes (a file holds one definition, a list, or an object with a `tools`
list, as in an API request body or an MCP `tools/list` result):

* Anthropic: `{"name", "input_schema"}`; built-in tools with no schema (`{"type": "bash_20250124",
  "name": "bash"}`) register the name only;
* OpenAI Chat: `{"type": "function", "function": {"name", "parameters"}}`; OpenAI Responses and the
  legacy functions API: flat `{"name", "parameters"}`; custom (free-form) tools register the name;
* MCP: `{"name", "inputSchema"}`; Bedrock Converse: `{"toolSpec": {"name", "inputSchema": {"json"}}}`;
* Gemini: `{"functionDeclarations": [{"name", "parametersJsonSchema" | "parameters"}]}` (the
  OpenAPI-subset `parameters` are converted: upper-case type names lowered, `nullable` made a type).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import jsonschema_rs
import orjson

from stream_pairer.errors import ToolSchemaError

MAX_DETAIL: Final = 200


@dataclass(frozen=True, slots=True)
class Violation:
    """The first rule the arguments break. `rule` is the JSON Schema keyword (type, required,
    pattern, enum, additionalProperties...), `path` a JSON pointer into the arguments."""

    rule: str
    path: str
    message: str

    def detail(self) -> str:
        where = self.path or "/"
        return _cut(f"schema {self.rule} at {where}: {self.message}")


class ToolSchema:
    """One registered tool: its name, its schema (None when the definition has none) and the
    compiled validator."""

    __slots__ = ("_validator", "name", "schema", "source")

    def __init__(self, name: str, schema: dict[str, Any] | bool | None, source: str) -> None:
        self.name = name
        self.schema = schema
        self.source = source
        self._validator: jsonschema_rs.Validator | None = None
        if schema is not None:
            try:
                self._validator = jsonschema_rs.validator_for(
                    schema, validate_formats=True, mask="value", offline=True
                )
            except (ValueError, jsonschema_rs.ReferencingError) as err:
                first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
                raise ToolSchemaError(f"{source}: tool {name!r}: unusable JSON Schema: {first}") from err

    def check(self, arguments: Any) -> Violation | None:
        """The first violated rule, or None when the arguments conform (or there is no schema)."""
        if self._validator is None:
            return None
        try:
            self._validator.validate(arguments)
        except jsonschema_rs.ValidationError as err:
            rule = next((p for p in reversed(err.schema_path) if isinstance(p, str)), "schema")
            path = "".join(f"/{p}" for p in err.instance_path)
            return Violation(rule, path, err.message)
        except ValueError as err:  # a value the validator cannot represent (never from JSON input)
            return Violation("unsupported", "", str(err))
        return None


class ToolSchemaRegistry:
    """The tools an operator declared. Knowing the full set is what makes `tool_selection`
    detectable at all: a call to a name outside it is a call to a tool the model was never given."""

    __slots__ = ("_tools",)

    def __init__(self, tools: Iterable[ToolSchema] = ()) -> None:
        self._tools: dict[str, ToolSchema] = {}
        for tool in tools:
            self._add(tool)

    @classmethod
    def load(cls, *paths: str | os.PathLike[str]) -> ToolSchemaRegistry:
        """Read tool definitions from JSON files and directories (every `*.json` below a directory,
        in sorted order). An empty result is an error: an empty registry would tag every call
        `tool_selection`."""
        if not paths:
            raise ToolSchemaError("no tool schema path given")
        reg = cls()
        for p in paths:
            path = Path(p)
            if path.is_dir():
                files = sorted(f for f in path.rglob("*.json") if f.is_file() and not f.name.startswith("."))
                if not files:
                    raise ToolSchemaError(f"{path}: no *.json tool definition files in this directory")
            elif path.is_file():
                files = [path]
            else:
                raise ToolSchemaError(f"{path}: no such file or directory")
            for f in files:
                try:
                    doc = orjson.loads(f.read_bytes())
                except OSError as err:
                    raise ToolSchemaError(f"{f}: cannot read: {err.strerror or err}") from err
                except orjson.JSONDecodeError as err:
                    raise ToolSchemaError(f"{f}: not valid JSON: {err}") from err
                for tool in definitions(doc, str(f)):
                    reg._add(tool)
        if not reg._tools:
            raise ToolSchemaError(f"no tool definitions found in {', '.join(map(str, paths))}")
        return reg

    @classmethod
    def from_definitions(cls, doc: Any, source: str = "<definitions>") -> ToolSchemaRegistry:
        """A registry from already-decoded definitions (any shape `load` accepts)."""
        return cls(definitions(doc, source))

    def _add(self, tool: ToolSchema) -> None:
        old = self._tools.get(tool.name)
        if old is not None and old.schema != tool.schema:
            raise ToolSchemaError(
                f"{tool.source}: tool {tool.name!r} is already defined with a different schema "
                f"in {old.source}"
            )
        if old is None:
            self._tools[tool.name] = tool

    def get(self, name: str | None) -> ToolSchema | None:
        return None if name is None else self._tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._tools))


def definitions(doc: Any, source: str) -> Iterator[ToolSchema]:
    """Every tool definition in one decoded JSON document, compiled."""
    yield from _walk(doc, source, "")


def _walk(doc: Any, source: str, where: str) -> Iterator[ToolSchema]:
    if isinstance(doc, list):
        for i, item in enumerate(doc):
            yield from _walk(item, source, f"{where}[{i}]")
        return
    if not isinstance(doc, dict):
        raise ToolSchemaError(f"{_at(source, where)}: expected a tool definition object or a list of them")
    for key in ("tools", "functionDeclarations", "function_declarations"):
        if isinstance(doc.get(key), list) and "name" not in doc:
            yield from _walk(doc[key], source, f"{where}.{key}")
            return
    if "jsonrpc" in doc and isinstance(doc.get("result"), dict):  # an MCP tools/list response
        yield from _walk(doc["result"], source, f"{where}.result")
        return
    yield _one(doc, source, where)


def _one(d: dict[str, Any], source: str, where: str) -> ToolSchema:
    at = _at(source, where)
    if isinstance(d.get("toolSpec"), dict):  # Bedrock Converse
        spec = d["toolSpec"]
        schema_box = spec.get("inputSchema")
        schema = schema_box.get("json") if isinstance(schema_box, dict) else None
        return ToolSchema(_name(spec, at), _schema(schema, at), at)
    if d.get("type") == "function" and isinstance(d.get("function"), dict):  # OpenAI Chat
        fn = d["function"]
        return ToolSchema(_name(fn, at), _schema(fn.get("parameters"), at), at)
    name = _name(d, at)
    for key in ("input_schema", "inputSchema", "parametersJsonSchema"):
        if key in d:
            return ToolSchema(name, _schema(d[key], at), at)
    if "parameters" in d:
        params = d["parameters"]
        if isinstance(params, dict) and _looks_openapi(params):
            params = _from_openapi(params)
        return ToolSchema(name, _schema(params, at), at)
    # A built-in or free-form tool (Anthropic bash/text_editor, OpenAI custom): the name only.
    return ToolSchema(name, None, at)


def _name(d: dict[str, Any], at: str) -> str:
    name = d.get("name")
    if not isinstance(name, str) or not name:
        raise ToolSchemaError(f"{at}: a tool definition needs a non-empty string 'name'")
    return name


def _schema(value: Any, at: str) -> dict[str, Any] | bool | None:
    if value is None or isinstance(value, dict | bool):
        return value
    raise ToolSchemaError(f"{at}: the tool's schema must be a JSON object, got {type(value).__name__}")


def _looks_openapi(schema: dict[str, Any]) -> bool:
    """Gemini's OpenAPI-subset parameters write types in upper case (`"OBJECT"`)."""
    t = schema.get("type")
    return isinstance(t, str) and t.isupper()


def _from_openapi(node: Any) -> Any:
    if isinstance(node, list):
        return [_from_openapi(x) for x in node]
    if not isinstance(node, dict):
        return node
    out = {k: _from_openapi(v) for k, v in node.items() if k != "nullable"}
    t = node.get("type")
    if isinstance(t, str):
        out["type"] = t.lower()
        if node.get("nullable") is True:
            out["type"] = [t.lower(), "null"]
    return out


def _at(source: str, where: str) -> str:
    return f"{source}{where}" if where else source


def _cut(s: str) -> str:
    return s if len(s) <= MAX_DETAIL else s[: MAX_DETAIL - 3] + "..."
