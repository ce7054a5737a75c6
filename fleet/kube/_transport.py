"""Private to `fleet.kube`: how a request to an API server is authenticated and encrypted.

The client and the watch both build their urllib3 pools from one cluster's settings; this is
the one place that turns a kubeconfig's CA, client certificate, token or basic auth into a TLS
context and request headers, and a ServiceAccount to act as into impersonation headers. Nothing
outside `fleet.kube` imports it.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from pathlib import Path

import urllib3
from urllib3 import HTTPHeaderDict

from fleet.errors import UsageError
from fleet.kube.kubeconfig import ClusterConfig


def ssl_context(config: ClusterConfig) -> ssl.SSLContext:
    if not config.server.startswith("https://"):
        raise UsageError(f"cluster {config.name}: server {config.server} must use https")
    # the cluster's own CA when it has one (the system's CAs are then not trusted, and not
    # loaded: parsing the system bundle cost milliseconds per client and per watch)
    if config.ca_pem:
        ctx = ssl.create_default_context(cadata=config.ca_pem.decode())
    else:
        ctx = ssl.create_default_context()
    if config.insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if config.client_cert_pem and config.client_key_pem:
        _load_client_cert(ctx, config)
    return ctx


def _load_client_cert(ctx: ssl.SSLContext, config: ClusterConfig) -> None:
    """ssl needs files: write cert and key to a private folder, load them, remove them."""
    with tempfile.TemporaryDirectory(prefix="gitfleet-cert-") as folder:
        os.chmod(folder, 0o700)
        cert, key = Path(folder) / "cert.pem", Path(folder) / "key.pem"
        cert.write_bytes(config.client_cert_pem)
        key.write_bytes(config.client_key_pem)
        ctx.load_cert_chain(str(cert), str(key))


def auth_headers(config: ClusterConfig) -> HTTPHeaderDict:
    """Credentials, and the impersonation headers when the config acts as a ServiceAccount
    (one `Impersonate-Group` line per group: the API server reads each line as one group)."""
    headers = HTTPHeaderDict({"Accept": "application/json", "User-Agent": "gitfleet"})
    if config.token:
        headers["Authorization"] = f"Bearer {config.token}"
    elif config.username:
        headers.update(urllib3.util.make_headers(basic_auth=f"{config.username}:{config.password}"))
    if config.impersonate is not None:
        headers["Impersonate-User"] = config.impersonate.user
        for group in config.impersonate.groups:
            headers.add("Impersonate-Group", group)
    return headers
