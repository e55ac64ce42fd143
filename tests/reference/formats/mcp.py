"""MCP JSON-RPC messages: `tools/call` requests and their responses, paired by JSON-RPC `id`.

A response does not name its method, so it is a tool result when it looks like one: `result`
holds a `content` array, `isError` or `structuredContent`. Results of other methods
(`initialize`, `tools/list`, `ping`, a sampling response whose `content` is a single object) and
requests other than `tools/call` (including notifications) carry no tool event. An `error`
response is a failed result (is_error True, payload = the error object): it is not possible to
tell from the response alone that its request was not a `tools/call`; if it was not, it ends as an
orphan result, never silently dropped.
"""

from __future__ import annotations

from typing import Any

from stream_pairer.core.formats.common import (
    CALL,
    RESULT,
    FormatError,
    Part,
    as_flag,
    as_id,
    as_name,
    missing,
    where,
    wrong_type,
)
from stream_pairer.core.vocab import DeadLetterReason


def parse(m: dict[str, Any], prefix: str) -> list[Part]:
    method = m.get("method")
    if method is not None:
        if method != "tools/call":
            return []
        params = m.get("params")
        if params is None:
            raise missing(prefix, None, "params", "a tools/call request needs params.name")
        if type(params) is not dict:
            raise wrong_type(params, prefix, None, "params", "an object")
        return [
            (
                CALL,
                as_id(m.get("id"), prefix, None, "id"),
                as_name(params.get("name"), prefix, None, "params.name", True),
                params.get("arguments"),
                None,
                m,
                "mcp",
            )
        ]
    error = m.get("error")
    if error is not None:
        return [(RESULT, as_id(m.get("id"), prefix, None, "id"), None, error, True, m, "mcp")]
    result = m.get("result")
    if type(result) is dict:
        content = result.get("content")
        if type(content) is list or "isError" in result or "structuredContent" in result:
            is_error = as_flag(result.get("isError"), prefix, None, "result.isError")
            payload = content if content is not None else result.get("structuredContent")
            return [(RESULT, as_id(m.get("id"), prefix, None, "id"), None, payload, bool(is_error), m, "mcp")]
        return []
    if "result" in m:
        return []
    raise FormatError(
        DeadLetterReason.UNKNOWN_SHAPE.value,
        f"{where(prefix, None, None)} is a JSON-RPC message with none of method, result, error",
    )
