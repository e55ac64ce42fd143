"""Gemini `Content` objects: `{role, parts: [{functionCall: {name, args, id?}} |
{functionResponse: {name, response, id?}} | {text} ...]}`.

The REST API writes camelCase; the Python SDK's `model_dump()` writes snake_case
(`function_call`, `function_response`): both are read. Gemini ids are optional; without them
results pair FIFO, preferring the oldest open call with the same function name.
"""

from __future__ import annotations

from typing import Any

from stream_pairer.formats.common import CALL, RESULT, Part, as_id, as_name, wrong_type


def parts(content: dict[str, Any], prefix: str) -> list[Part]:
    items = content.get("parts")
    if items is None:
        return []
    if type(items) is not list:
        raise wrong_type(items, prefix, None, "parts", "an array")
    out: list[Part] = []
    for i, p in enumerate(items):
        if type(p) is not dict:
            raise wrong_type(p, f"{prefix}parts", i, None, "a part object")
        fc = p.get("functionCall")
        key = "functionCall"
        if fc is None:
            fc = p.get("function_call")
            key = "function_call"
        if fc is not None:
            if type(fc) is not dict:
                raise wrong_type(fc, f"{prefix}parts", i, key, "an object")
            fp = f"{prefix}parts[{i}].{key}."
            out.append(
                (
                    CALL,
                    as_id(fc.get("id"), fp, None, "id"),
                    as_name(fc.get("name"), fp, None, "name", True),
                    fc.get("args"),
                    None,
                    p,
                    "gemini",
                )
            )
            continue
        fr = p.get("functionResponse")
        key = "functionResponse"
        if fr is None:
            fr = p.get("function_response")
            key = "function_response"
        if fr is not None:
            if type(fr) is not dict:
                raise wrong_type(fr, f"{prefix}parts", i, key, "an object")
            fp = f"{prefix}parts[{i}].{key}."
            response = fr.get("response")
            # Gemini's convention: {"output": ...} on success, {"error": ...} on failure.
            is_error = type(response) is dict and response.get("error") is not None
            out.append(
                (
                    RESULT,
                    as_id(fr.get("id"), fp, None, "id"),
                    as_name(fr.get("name"), fp, None, "name", False),
                    response,
                    is_error,
                    p,
                    "gemini",
                )
            )
    return out
