"""Kubeconfig files for testbed clusters (token auth, TLS verified against the serving cert)."""

from __future__ import annotations

import base64
from pathlib import Path

import yaml


def kubeconfig_text(name: str, server: str, ca_pem: bytes, token: str) -> str:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": name,
                "cluster": {
                    "server": server,
                    "certificate-authority-data": base64.b64encode(ca_pem).decode(),
                },
            }
        ],
        "users": [{"name": f"{name}-admin", "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": f"{name}-admin"}}],
        "current-context": name,
    }
    return yaml.safe_dump(config, sort_keys=False)


def write_kubeconfig(path: Path, name: str, server: str, ca_pem: bytes, token: str) -> None:
    path.write_text(kubeconfig_text(name, server, ca_pem, token))
    path.chmod(0o600)
