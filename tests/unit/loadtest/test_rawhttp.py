"""The load benchmark's HTTP client against a real local socket server: keep-alive requests,
the body read by its length, a reconnect after the server closes, and a clear error for an
answer that is not HTTP."""

from __future__ import annotations

import asyncio

import pytest

from loadtest.rawhttp import Connection, HttpError


async def _serve(answers: list[bytes], seen: list[bytes]) -> asyncio.Server:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while answers:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                (
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                ),
                0,
            )
            seen.append(head + await reader.readexactly(length))
            answer = answers.pop(0)
            writer.write(answer)
            await writer.drain()
            if b"Connection: close" in answer:
                break
        writer.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0)


def test_requests_share_a_connection_and_survive_a_server_close() -> None:
    async def run() -> tuple[list[int], list[bytes]]:
        answers = [
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}",
            b"HTTP/1.1 201 Created\r\nContent-Length: 4\r\nConnection: close\r\n\r\nnull",
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n",
        ]
        seen: list[bytes] = []
        server = await _serve(answers, seen)
        port = server.sockets[0].getsockname()[1]
        connection = Connection("127.0.0.1", port, {"Authorization": "Bearer t"}, timeout=5)
        statuses = [
            await connection.request("GET", "/a"),
            await connection.request("POST", "/b", {"x": 1}),
            await connection.request("GET", "/c"),  # a new connection after the close
        ]
        await connection.close()
        server.close()
        return statuses, seen

    statuses, seen = asyncio.run(run())
    assert statuses == [200, 201, 404]
    assert seen[1].startswith(b"POST /b HTTP/1.1\r\n")
    assert b"Authorization: Bearer t\r\n" in seen[1] and seen[1].endswith(b'{"x": 1}')


def test_an_answer_that_is_not_http_is_an_error_naming_the_request() -> None:
    async def run() -> None:
        server = await _serve([b"SSH-2.0-nope\r\n\r\n"], [])
        port = server.sockets[0].getsockname()[1]
        connection = Connection("127.0.0.1", port, {}, timeout=5)
        try:
            with pytest.raises(HttpError, match="GET /x"):
                await connection.request("GET", "/x")
        finally:
            server.close()

    asyncio.run(run())
