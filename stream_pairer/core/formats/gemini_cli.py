"""gemini-cli chat recordings (`~/.gemini/tmp/<project>/chats/session-*.json`, and the JSONL form).

The session file is one JSON document `{sessionId, projectHash, startTime, lastUpdated,
messages: [...]}` (the file reader streams its messages and uses `sessionId` as the conversation
id); the JSONL form writes the same header fields on a line of their own (a SESSION marker) and
one message per line. A message is `{id, timestamp, type, content, ...}` with `type`:

* `user`: a prompt: a request start.
* `gemini`: a model turn; `toolCalls[]` entries each hold the call *and* its result:
  `{id, name, args, result: [{functionResponse: {id, name, response}}], status, error?,
  timestamp}`. One call event and one result event per entry, same id. `status: "error"`, an
  `error` field or an `error` inside the function response is an error outcome. An entry with no
  `result` and a status that is not final (`cancelled`, `scheduled`...) yields the call only: it
  ends as an orphan, not as an invented result.
* `info`, `error`, `warning`: UI notices, no event.
"""

from __future__ import annotations

from typing import Any, Final

from stream_pairer.core.formats.common import (
    CALL,
    REQUEST_PART,
    RESULT,
    Part,
    as_id,
    as_name,
    wrong_type,
)

TYPES: Final = frozenset({"user", "gemini", "info", "error", "warning"})
FORMAT: Final = "gemini_cli"
_FINAL: Final = frozenset({"success", "error"})


def is_header(d: dict[str, Any]) -> bool:
    """The JSONL header line (or a document's top-level fields)."""
    return "sessionId" in d and "projectHash" in d and "messages" not in d


def session_of(d: dict[str, Any]) -> str | None:
    return as_id(d.get("sessionId"), "", None, "sessionId")


def parse(d: dict[str, Any], t: str) -> list[Part]:
    if t == "user":
        return [REQUEST_PART]
    if t != "gemini":
        return []
    calls = d.get("toolCalls")
    if calls is None:
        return []
    if type(calls) is not list:
        raise wrong_type(calls, "", None, "toolCalls", "an array")
    out: list[Part] = []
    for i, tc in enumerate(calls):
        if type(tc) is not dict:
            raise wrong_type(tc, "toolCalls", i, None, "a tool call object")
        call_id = as_id(tc.get("id"), "toolCalls", i, "id")
        name = as_name(tc.get("name"), "toolCalls", i, "name", True)
        out.append((CALL, call_id, name, tc.get("args"), None, tc, FORMAT))
        result = tc.get("result")
        status = tc.get("status")
        if result is None and not (type(status) is str and status in _FINAL):
            continue
        response, rid, failed = _response(result, i)
        error = tc.get("error")
        is_error = status == "error" or (error is not None and error != "") or failed
        payload = response if response is not None or error is None else {"error": error}
        out.append((RESULT, rid or call_id, name, payload, is_error, tc, FORMAT))
    return out


def _response(result: Any, i: int) -> tuple[Any, str | None, bool]:
    """(payload, id, error flag) from `result`: the single functionResponse's `response` when
    there is one (the usual case), else the whole `result` list."""
    if type(result) is not list:
        return result, None, False
    responses = []
    for j, item in enumerate(result):
        if type(item) is not dict:
            continue
        fr = item.get("functionResponse")
        if fr is None:
            continue
        if type(fr) is not dict:
            raise wrong_type(fr, f"toolCalls[{i}].result", j, "functionResponse", "an object")
        responses.append(fr)
    if len(responses) != 1:
        failed = any(type(fr.get("response")) is dict and fr["response"].get("error") for fr in responses)
        return result, None, failed
    fr = responses[0]
    response = fr.get("response")
    failed = type(response) is dict and response.get("error") is not None
    return response, as_id(fr.get("id"), f"toolCalls[{i}].result", 0, "functionResponse.id"), failed
