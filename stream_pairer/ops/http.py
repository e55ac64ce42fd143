"""/metrics, /healthz and /readyz on the sidecar's own asyncio loop, with no extra dependency.

Why not prometheus_client's `start_http_server`: it serves from a thread and knows nothing of
health. Why not an HTTP framework: three GET endpoints for a kubelet and a Prometheus scraper do
not justify one. Each connection gets one response and is closed (HTTP/1.1 `Connection: close`),
which every scraper and probe handles.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Final

from stream_pairer.errors import ConfigError

log = logging.getLogger("stream_pairer.http")

Response = tuple[int, str, bytes]  # status, content type, body
Handler = Callable[[], Response]

MAX_REQUEST_BYTES: Final = 8192
READ_TIMEOUT_S: Final = 5.0
_REASONS: Final = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    503: "Service Unavailable",
}


class HttpServer:
    def __init__(self, routes: dict[str, Handler], host: str = "0.0.0.0", port: int = 9464) -> None:
        self.routes = routes
        self.host = host
        self.port = port
        self._server: asyncio.Server | None = None

    @property
    def bound_port(self) -> int | None:
        if self._server is None or not self._server.sockets:
            return None
        return int(self._server.sockets[0].getsockname()[1])

    async def start(self) -> int:
        """Listen (port 0 = an ephemeral port); return the bound port. A port that cannot be bound
        (in use, privileged, an unknown host) is a configuration error: ConfigError naming it."""
        if self._server is None:
            try:
                self._server = await asyncio.start_server(self._handle, self.host, self.port)
            except OSError as err:
                raise ConfigError(
                    f"cannot listen on {self.host}:{self.port} (--http-port): {err.strerror or err}"
                ) from err
        port = self.bound_port
        assert port is not None
        return port

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 2.0)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
                return
            response = self._respond(head[:MAX_REQUEST_BYTES])
            status, ctype, body = response
            writer.write(
                f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode("latin-1")
                + body
            )
            await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    def _respond(self, head: bytes) -> Response:
        parts = head.split(b"\r\n", 1)[0].split()
        if len(parts) != 3:
            return 400, "text/plain", b"bad request\n"
        method, target = parts[0], parts[1].decode("latin-1")
        path = target.split("?", 1)[0]
        handler = self.routes.get(path)
        if handler is None:
            return 404, "text/plain", b"not found\n"
        if method != b"GET":
            return 405, "text/plain", b"GET only\n"
        try:
            return handler()
        except Exception:  # a broken handler must not take the endpoint (or the loop) down
            log.exception("HTTP handler for %s failed", path)
            return 503, "text/plain", b"handler error\n"
