"""Repository URLs in a normal form, so one repository has one name.

Host and path, lower case, without scheme, credentials, default port, trailing slash or `.git`:
the HTTPS and SSH clone URLs of one repository, as a push webhook reports them, name the same
thing. The registry keys what each instance last synced by this name (`Keys.synced`) and the
webhook handler matches pushes by it. It is a matching key only, never a security boundary:
project policies match the parsed URL, scheme kept (`fleet.control.sourcerepos`), and
credentials are bound to `fleet.engine.source.remotes.RemoteUrl.name`.
"""

from __future__ import annotations

import functools
import re
from urllib.parse import urlsplit

_SCP_LIKE = re.compile(r"^(?:[\w.+-]+@)?([\w.-]+):(?!//)(.+)$")
_DEFAULT_PORTS = {22, 80, 443, 9418}


@functools.lru_cache(maxsize=1 << 14)
def normalize_repo(url: str) -> str:
    """`https://u:p@GitHub.com/org/repo.git/`, `git@github.com:org/repo`: github.com/org/repo
    (remembered: a push is matched against every app's URL, 10,000 of them in a large fleet)"""
    text = url.strip()
    scp = _SCP_LIKE.match(text) if "://" not in text else None
    if scp:
        host, path = scp.group(1), scp.group(2)
    elif "://" not in text and not text.startswith("/"):
        host, _, path = text.partition("/")  # already host/path, as in a project glob
    else:
        parts = urlsplit(text)
        host, path = parts.hostname or "", parts.path
        if parts.port and parts.port not in _DEFAULT_PORTS:
            host = f"{host}:{parts.port}"
    path = path.strip("/").removesuffix(".git").rstrip("/")
    return f"{host}/{path}".lower() if host else f"/{path}".lower()


def has_credentials(url: str) -> bool:
    """Whether a URL carries a password or token (`https://user:secret@host/...`)."""
    return "://" in url and bool(urlsplit(url).password)
