"""A real redis-server on a free loopback port, for integration tests.

`password` makes the server require AUTH (the URL then carries it); `tls` serves TLS only, on
the same port (the URL is then `rediss://` with the CA to verify the server against).
The server keeps its data in `folder` with append-only persistence (`deploy.redis`), as
production must: `kill()` then `start()` restarts it on the same port and data, as a crash
and a restart by its supervisor would.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import redis

from deploy.redis import redis_command
from deploy.testbed.process import free_port


@dataclass(frozen=True)
class TlsFiles:
    """PEM files: the server's certificate and key, and the CA that signed the certificate."""

    cert: Path
    key: Path
    ca: Path


class RedisServer:
    def __init__(
        self, folder: Path, *, password: str | None = None, tls: TlsFiles | None = None
    ) -> None:
        self.port = free_port()
        self.folder = folder
        self.password = password
        self.tls = tls
        self.url = self.url_for(password=password)
        self.start()

    def start(self) -> None:
        """Start redis-server on this port and data folder, and wait until it answers."""
        folder, password, tls = self.folder, self.password, self.tls
        cmd = redis_command(self.port, folder, password=password)
        if tls is not None:
            cmd += ["--port", "0", "--tls-port", str(self.port), "--tls-auth-clients", "no"]
            cmd += ["--tls-cert-file", str(tls.cert), "--tls-key-file", str(tls.key)]
            cmd += ["--tls-ca-cert-file", str(tls.ca)]
        self.proc = subprocess.Popen(
            cmd, stdout=(folder / "redis.log").open("ab"), stderr=subprocess.STDOUT
        )
        self._wait()

    def url_for(self, *, password: str | None = None, db: int = 0, ca: Path | None = None) -> str:
        """A URL for this server: with `password` (or none), database `db`, and for a TLS
        server the CA to verify it against (its own unless `ca` is given)."""
        auth = f":{quote(password, safe='')}@" if password else ""
        if self.tls is None:
            return f"redis://{auth}127.0.0.1:{self.port}/{db}"
        verify = f"ssl_cert_reqs=required&ssl_ca_certs={ca or self.tls.ca}"
        return f"rediss://{auth}127.0.0.1:{self.port}/{db}?{verify}"

    def _wait(self) -> None:
        client = redis.Redis.from_url(self.url)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.proc.returncode}")
            try:
                if client.ping():
                    return
            except redis.ConnectionError:
                time.sleep(0.05)
        raise RuntimeError(f"redis-server did not answer on port {self.port}")

    def kill(self) -> None:
        """SIGKILL, as a crash: no shutdown save, only what the AOF already holds survives."""
        self.proc.kill()
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)
