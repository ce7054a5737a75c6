"""Minimal HTTPS calls to a testbed apiserver, used only while bringing a cluster up."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from typing import Any


def _context(ca_pem: bytes) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cadata=ca_pem.decode())
    return ctx


def request(
    server: str,
    path: str,
    *,
    ca_pem: bytes,
    token: str = "",
    method: str = "GET",
    body: dict[str, Any] | None = None,
    timeout: float = 5.0,
) -> tuple[int, Any]:
    """Return (status, decoded JSON or text); connection failures give status 0."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(server + path, data=data, method=method)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, context=_context(ca_pem), timeout=timeout) as resp:
            return resp.status, _decode(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, _decode(e.read())
    except (urllib.error.URLError, OSError, ssl.SSLError):
        return 0, None


def _decode(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")


def is_ready(server: str, ca_pem: bytes) -> bool:
    status, _ = request(server, "/readyz", ca_pem=ca_pem)
    return status == 200
