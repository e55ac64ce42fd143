"""Gemini `Content` objects: `{role, parts: [{functionCall: {name, args, id?}} |
{functionResponse: {name, response, id?}} | {text} ...]}`.

The REST API writes camelCase; the Python SDK's `model_dump()` writes snake_case
(`function_call`, `function_response`): both are read. Gemini ids are optional; without them
results pair FIFO, preferring the oldest open call with the same function name.
"""

from __future__ import annotations

from typing import Any, Final

from stream_pairer.core.formats.common import CALL, RESULT, Part, as_id, as_name, wrong_type

# (key, id path, name path) for both spellings, so that error paths cost nothing on the happy path.
_CALL: Final = ("functionCall", "functionCall.id", "functionCall.name")
_CALL_SNAKE: Final = ("function_call", "function_call.id", "function_call.name")
_RESPONSE: Final = ("functionResponse", "functionResponse.id", "functionResponse.name")
_RESPONSE_SNAKE: Final = ("function_response", "function_response.id", "function_response.name")


def parts(content: dict[str, Any], prefix: str) -> list[Part]:
    items = content.get("parts")
    if items is None:
        return []
    if type(items) is not list:
        raise wrong_type(items, prefix, None, "parts", "an array")
    out: list[Part] = []
    path = prefix + "parts"
    for i, p in enumerate(items):
        if type(p) is not dict:
            raise wrong_type(p, path, i, None, "a part object")
        fc = p.get("functionCall")
        keys = _CALL
        if fc is None:
            fc = p.get("function_call")
            keys = _CALL_SNAKE
        if fc is not None:
            if type(fc) is not dict:
                raise wrong_type(fc, path, i, keys[0], "an object")
            out.append(
                (
                    CALL,
                    as_id(fc.get("id"), path, i, keys[1]),
                    as_name(fc.get("name"), path, i, keys[2], True),
                    fc.get("args"),
                    None,
                    p,
                    "gemini",
                )
            )
            continue
        fr = p.get("functionResponse")
        keys = _RESPONSE
        if fr is None:
            fr = p.get("function_response")
            keys = _RESPONSE_SNAKE
        if fr is not None:
            if type(fr) is not dict:
                raise wrong_type(fr, path, i, keys[0], "an object")
            response = fr.get("response")
            # Gemini's convention: {"output": ...} on success, {"error": ...} on failure.
            is_error = type(response) is dict and response.get("error") is not None
            out.append(
                (
                    RESULT,
                    as_id(fr.get("id"), path, i, keys[1]),
                    as_name(fr.get("name"), path, i, keys[2], False),
                    response,
                    is_error,
                    p,
                    "gemini",
                )
            )
    return out


def candidates(response: dict[str, Any], prefix: str) -> list[Part]:
    """`_candidates` of the format layer: the parts of every candidate's content."""
    cands = response["candidates"]
    if type(cands) is not list:
        raise wrong_type(cands, prefix, None, "candidates", "an array")
    out: list[Part] = []
    for i, cand in enumerate(cands):
        if type(cand) is not dict:
            raise wrong_type(cand, f"{prefix}candidates", i, None, "a candidate object")
        content = cand.get("content")
        if content is None:
            continue  # e.g. a candidate blocked by a safety filter
        if type(content) is not dict:
            raise wrong_type(content, f"{prefix}candidates", i, "content", "an object")
        out.extend(parts(content, f"{prefix}candidates[{i}].content."))
    return out
