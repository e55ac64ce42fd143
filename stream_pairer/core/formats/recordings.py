"""Recorded HTTP traffic of provider APIs, as test suites commit it (no proxy log envelope):

* nock recordings (`nock.recorder.rec({output_objects: true})`, `nock back` fixtures): a JSON
  array of `{scope, method, path, body, status, response, rawHeaders}`, `body` the request body
  and `response` the response body (an object, or a JSON text);
* VCR.py cassettes (YAML, read by adapters/cassettes.py into one record per interaction):
  `{request: {method, uri, body}, response: {status, body: {string}}}`, an HTTP exchange that
  wire.py reads once its `body.string` is taken as the body;
* a saved response, `{status, headers, body}`: the provider's response body, its calls.

Exchanges are read as `wire` records (requests repeat the history: counted once by id); a
response alone is read as the provider body it holds.
"""

from __future__ import annotations

from typing import Any, Final

from stream_pairer.core.formats import wire
from stream_pairer.core.formats.common import CALL, RESULT, Part


def is_nock(d: dict[str, Any]) -> bool:
    return "scope" in d and "method" in d and "response" in d


def is_response(d: dict[str, Any]) -> bool:
    return "status" in d and "body" in d and ("headers" in d or "statusCode" in d)


# Keys of a provider response body that holds a model turn (other endpoints, `GET /v1/models`,
# embeddings, files, carry no tool event).
_TURN_KEYS: Final = frozenset({"content", "choices", "candidates", "output", "role"})


def nock(d: dict[str, Any], message: wire.MessageParser, dispatch: wire.Dispatcher) -> list[Part]:
    response = wire.body_of({"body": d.get("response")}, "response")
    if response is not None and not (_TURN_KEYS & response.keys()):
        response = None
    exchange = {"request": {"body": d.get("body")}, "response": {"body": response}}
    return wire.parse(exchange, exchange["request"], message, dispatch)


def response(d: dict[str, Any], dispatch: wire.Dispatcher) -> list[Part]:
    body = wire.body_of({"body": d.get("body")}, "body")
    if body is None:
        return []
    return [p for p in dispatch(body, "body.", False) if p[0] == CALL or p[0] == RESULT]
