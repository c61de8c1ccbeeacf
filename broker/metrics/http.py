"""The metrics endpoint: HTTP/1.x on the broker's event loop, ``GET /metrics``.

Scrapes are read between two requests of the broker (same loop), so the state they
see is never half-updated; one connection is one request (``Connection: close``),
which is how Prometheus and the console's monitor scrape.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from prometheus_client import exposition

# what generate_latest writes: the classic text format (newer clients default to 1.0.0)
CONTENT_TYPE = getattr(exposition, "CONTENT_TYPE_PLAIN_0_0_4", exposition.CONTENT_TYPE_LATEST)

log = logging.getLogger(__name__)
MAX_HEAD = 16 * 1024
READ_TIMEOUT_S = 10.0


class MetricsServer:
    def __init__(self, render: Callable[[], bytes]) -> None:
        self.render = render
        self._server: asyncio.base_events.Server | None = None
        self.port = 0

    async def start(self, host: str, port: int) -> int:
        self._server = await asyncio.start_server(self._serve, host or None, port)
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("metrics at http://%s:%d/metrics", host or "0.0.0.0", self.port)
        return self.port

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
            if len(head) > MAX_HEAD:
                raise ValueError("request head too large")
            method, target, _version = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
            status, ctype, body = self._answer(method, target.split("?", 1)[0])
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                + (body if method != "HEAD" else b"")
            )
            await writer.drain()
        except (ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass  # not HTTP, or too slow: just close
        except ConnectionError:
            pass
        except Exception:  # noqa: BLE001 - a bug in a collector must not take the broker down
            log.exception("metrics scrape failed")
            try:
                writer.write(b"HTTP/1.1 500 Internal Server Error\r\nConnection: close\r\n\r\n")
            except ConnectionError:
                pass
        finally:
            writer.close()

    def _answer(self, method: str, path: str) -> tuple[str, str, bytes]:
        text = "text/plain; charset=utf-8"
        if method not in ("GET", "HEAD"):
            return "405 Method Not Allowed", text, b"only GET and HEAD\n"
        if path == "/metrics":
            return "200 OK", CONTENT_TYPE, self.render()
        if path == "/":
            return "200 OK", text, b"Quill broker metrics: GET /metrics\n"
        return "404 Not Found", text, f"no {path} here; metrics are at /metrics\n".encode()
