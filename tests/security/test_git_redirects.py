"""A git host the project may use must not steer the worker's fetch elsewhere.

urllib3 follows redirects by default, so an allowed host answering `302 Location:
http://10.0.0.1/...` made the worker fetch from an address no URL rule or `sourceRepos` glob
ever checked (an SSRF into the worker's network). A redirect now fails the fetch with the
address it pointed to, and nothing is requested from that address.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from fleet.engine.source.cache import SourceCache
from fleet.errors import SourceError
from tests.support.listener import CredentialListener


class Redirector:
    """Plain HTTP on 127.0.0.1 that answers every request with a redirect to `target`."""

    def __init__(self, target: str) -> None:
        self.hits = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.hits += 1
                self.send_response(302)
                self.send_header("Location", target + self.path)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/team-a/app.git"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def inner() -> Iterator[CredentialListener]:
    with CredentialListener() as listener:
        yield listener


def test_a_redirect_from_the_git_host_fails_the_fetch_and_reaches_nothing(
    tmp_path: Path, inner: CredentialListener
) -> None:
    redirector = Redirector(f"http://127.0.0.1:{inner.port}/internal")
    try:
        source = SourceCache(tmp_path / "sources")
        with pytest.raises(SourceError) as caught:
            source.resolve(redirector.url)
    finally:
        redirector.stop()

    assert redirector.hits >= 1
    assert inner.requests == []
    message = str(caught.value)
    assert "redirect" in message
    assert f"127.0.0.1:{inner.port}/internal" in message
