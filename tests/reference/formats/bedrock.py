"""AWS Bedrock Converse content blocks: `{"toolUse": {toolUseId, name, input}}` and
`{"toolResult": {toolUseId, content, status}}`. Bedrock blocks have no `type` key, which is how
the message scanner in `anthropic.py` tells them from Anthropic blocks in the same position."""

from __future__ import annotations

from typing import Any

from stream_pairer.core.formats.common import CALL, RESULT, Part, as_id, as_name, wrong_type


def block(b: dict[str, Any], prefix: str, i: int) -> Part | None:
    use = b.get("toolUse")
    if use is not None:
        if type(use) is not dict:
            raise wrong_type(use, prefix, i, "toolUse", "an object")
        return (
            CALL,
            as_id(use.get("toolUseId"), prefix, i, "toolUse.toolUseId"),
            as_name(use.get("name"), prefix, i, "toolUse.name", True),
            use.get("input"),
            None,
            b,
            "bedrock",
        )
    res = b.get("toolResult")
    if res is not None:
        if type(res) is not dict:
            raise wrong_type(res, prefix, i, "toolResult", "an object")
        status = res.get("status")
        if status is None:
            is_error = None
        elif type(status) is str:
            is_error = status == "error"
        else:
            raise wrong_type(status, prefix, i, "toolResult.status", '"success" or "error"')
        return (
            RESULT,
            as_id(res.get("toolUseId"), prefix, i, "toolResult.toolUseId"),
            None,
            res.get("content"),
            is_error,
            b,
            "bedrock",
        )
    return None
