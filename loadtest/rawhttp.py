"""A lean HTTP/1.1 client for the API load benchmark: one keep-alive connection per sender.

On a 2-core machine the load generator shares the CPU with the coordinator it measures, and
httpx spent about 3 ms of CPU per request (0.65 of a core at 200 requests a second), which
the benchmark then charged to the coordinator as queueing. This client writes the request
line and headers itself and reads the answer by its Content-Length (uvicorn always sends one
for these JSON answers), about a tenth of that. It speaks only to the benchmark's own
coordinator on 127.0.0.1; anything it does not understand is an `HttpError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any


class HttpError(Exception):
    """The connection failed or the answer was not a well-formed HTTP/1.1 response."""


class Connection:
    """One keep-alive connection to `host:port`, opened on first use and again after a
    failure; `request` returns the status code (the body is read and dropped)."""

    def __init__(self, host: str, port: int, headers: dict[str, str], timeout: float) -> None:
        self.host, self.port, self.timeout = host, port, timeout
        self.fixed = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def request(self, method: str, path: str, body: Any = None) -> int:
        try:
            return await asyncio.wait_for(self._exchange(method, path, body), self.timeout)
        except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError) as e:
            await self.close()
            raise HttpError(f"{method} {path}: {e!r}") from e

    async def _exchange(self, method: str, path: str, body: Any) -> int:
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        reader, writer = self._reader, self._writer
        assert reader is not None
        payload = json.dumps(body).encode() if body is not None else b""
        head = f"{method} {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n{self.fixed}"
        if body is not None:
            head += "Content-Type: application/json\r\n"
        head += f"Content-Length: {len(payload)}\r\n\r\n"
        writer.write(head.encode() + payload)
        status_line = await reader.readline()
        parts = status_line.split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
            raise ValueError(f"not an HTTP response: {status_line[:80]!r}")
        length, close = 0, False
        while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"connection" and value.strip().lower() == b"close":
                close = True
            elif name == b"transfer-encoding":
                raise ValueError("chunked answers are not expected from the coordinator")
        await reader.readexactly(length)
        if close:
            await self.close()
        return int(parts[1])

    async def close(self) -> None:
        writer, self._reader, self._writer = self._writer, None, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
