"""Benchmark traffic in the stream formats: the datagen conversations re-written as Bedrock
Converse, Gemini or MCP records.

Why a re-writing and not a generator of its own: the traffic model (K open conversations, parallel
turns, id-less conversations, unanswered calls, ~1 KiB records) is bench/datagen.py's; only the
spelling changes, so figures of different formats are comparable. Each datagen record is read by
the Python format layer and its events written again as the format writes them:

* `bedrock`: calls as a Converse response (`output.message.content[].toolUse`, several in one
  message for a parallel turn), results as a user message of `toolResult` blocks in a logging
  wrapper (`{conversation_id, ts, message}`), `status: success`;
* `gemini`: calls as a `generateContent` response (`candidates[0].content.parts[].functionCall`),
  results as a user `Content` of `functionResponse` parts (`response: {output}`) in a wrapper; the
  ids where datagen has them (the id-less conversations stay id-less and pair FIFO by name);
* `mcp`: one JSON-RPC message per event in a logging wrapper (`{session_id, direction, ts,
  message}`): `tools/call` requests and `result: {content: [text], isError: false}` responses.

Records without tool events (prompts, MCP notifications) are not generated: they go through the
Python format layer in the compiled core today (README, "Compiled core").
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson

from stream_pairer.core.formats import parse_record
from stream_pairer.core.model import ToolEvent

FORMATS = ("bedrock", "gemini", "mcp")


def _ts(ms: float | None) -> str | None:
    if ms is None:
        return None
    dt = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{int(ms) % 1000:03d}Z"


class Rewriter:
    """Re-writes datagen records into one stream format; remembers call names by id, because a
    Gemini response names its function while an Anthropic or Chat result does not."""

    def __init__(self, fmt: str) -> None:
        if fmt not in FORMATS:
            raise ValueError(f"unknown format {fmt!r}, expected one of {FORMATS}")
        self.fmt = fmt
        self.names: dict[tuple[str, str], str] = {}

    def records(self, recs: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
        out: list[tuple[bytes, bytes]] = []
        for key, raw in recs:
            events = parse_record(raw, {"offset": 0}, key=key.decode())
            out += [(key, r) for r in self._write(events)]
        return out

    def _name(self, ev: ToolEvent) -> str | None:
        if ev.id is None:
            return ev.name
        k = (ev.conversation_id, ev.id)
        if ev.is_call and ev.name is not None:
            self.names[k] = ev.name
            return ev.name
        return ev.name or self.names.pop(k, None)

    def _write(self, events: list[ToolEvent]) -> list[bytes]:
        if not events:
            return []
        first = events[0]
        conv, ts = first.conversation_id, _ts(first.ts_ms)
        for ev in events:
            ev.name = self._name(ev)
        if self.fmt == "mcp":
            return [orjson.dumps(self._mcp(ev, conv, ts)) for ev in events]
        calls = [ev for ev in events if ev.is_call]
        results = [ev for ev in events if not ev.is_call]
        out: list[dict[str, Any]] = []
        if calls:
            out.append(
                self._bedrock_calls(calls, conv, ts)
                if self.fmt == "bedrock"
                else self._gemini_calls(calls, conv, ts)
            )
        if results:
            out.append(
                self._bedrock_results(results, conv, ts)
                if self.fmt == "bedrock"
                else self._gemini_results(results, conv, ts)
            )
        return [orjson.dumps(r) for r in out]

    @staticmethod
    def _bedrock_calls(calls: list[ToolEvent], conv: str, ts: str | None) -> dict[str, Any]:
        content: list[Any] = [{"text": "Let me check that."}]
        content += [{"toolUse": {"toolUseId": ev.id, "name": ev.name, "input": ev.payload}} for ev in calls]
        return {
            "conversation_id": conv,
            "ts": ts,
            "output": {"message": {"role": "assistant", "content": content}},
            "stopReason": "tool_use",
            "usage": {"inputTokens": 375, "outputTokens": 95, "totalTokens": 470},
        }

    @staticmethod
    def _bedrock_results(results: list[ToolEvent], conv: str, ts: str | None) -> dict[str, Any]:
        content = [
            {
                "toolResult": {
                    "toolUseId": ev.id,
                    "content": [{"text": ev.payload} if type(ev.payload) is str else {"json": ev.payload}],
                    "status": "error" if ev.is_error else "success",
                }
            }
            for ev in results
        ]
        return {"conversation_id": conv, "ts": ts, "message": {"role": "user", "content": content}}

    @staticmethod
    def _gemini_calls(calls: list[ToolEvent], conv: str, ts: str | None) -> dict[str, Any]:
        parts: list[Any] = []
        for ev in calls:
            fc: dict[str, Any] = {"name": ev.name, "args": ev.payload}
            if ev.id is not None:
                fc["id"] = ev.id
            parts.append({"functionCall": fc})
        return {
            "conversation_id": conv,
            "createTime": ts,
            "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}],
            "modelVersion": "gemini-2.5-flash",
        }

    @staticmethod
    def _gemini_results(results: list[ToolEvent], conv: str, ts: str | None) -> dict[str, Any]:
        parts: list[Any] = []
        for ev in results:
            fr: dict[str, Any] = {
                "name": ev.name,
                "response": {"error" if ev.is_error else "output": ev.payload},
            }
            if ev.id is not None:
                fr["id"] = ev.id
            parts.append({"functionResponse": fr})
        return {"conversation_id": conv, "ts": ts, "message": {"role": "user", "parts": parts}}

    @staticmethod
    def _mcp(ev: ToolEvent, conv: str, ts: str | None) -> dict[str, Any]:
        if ev.is_call:
            msg: dict[str, Any] = {
                "jsonrpc": "2.0",
                "id": ev.id,
                "method": "tools/call",
                "params": {"name": ev.name, "arguments": ev.payload},
            }
            direction = "client_to_server"
        else:
            text = ev.payload if type(ev.payload) is str else orjson.dumps(ev.payload).decode()
            msg = {
                "jsonrpc": "2.0",
                "id": ev.id,
                "result": {"content": [{"type": "text", "text": text}], "isError": bool(ev.is_error)},
            }
            direction = "server_to_client"
        return {"session_id": conv, "direction": direction, "ts": ts, "message": msg}
