"""The cluster a process runs in, reached as its pod's ServiceAccount (client-go's
`rest.InClusterConfig`).

A pod learns its API server from `KUBERNETES_SERVICE_HOST` / `KUBERNETES_SERVICE_PORT` and its
credentials from the files the kubelet mounts under
`/var/run/secrets/kubernetes.io/serviceaccount/` (`token`, `ca.crt`, `namespace`).
`GITFLEET_SERVICEACCOUNT_DIR` moves that folder (tests point it at a token of their own).

The files are read when a connection is configured, never copied elsewhere: the coordinator
registers the destination `in-cluster` with no credential of its own, and each worker reaches it
as its own pod's ServiceAccount, so what a sync there may do is what the chart's RBAC grants.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from fleet.errors import UsageError
from fleet.kube.kubeconfig import ClusterConfig

NAME = "in-cluster"
SERVER = "https://kubernetes.default.svc"  # what Argo CD shows for its in-cluster destination
DIR_ENV = "GITFLEET_SERVICEACCOUNT_DIR"
DEFAULT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


def account_dir(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    return Path(env.get(DIR_ENV) or DEFAULT_DIR)


def server_url(env: Mapping[str, str] | None = None) -> str | None:
    """`https://HOST:PORT` of the API server the pod was given, or None outside a cluster."""
    env = os.environ if env is None else env
    host = env.get("KUBERNETES_SERVICE_HOST", "").strip()
    port = env.get("KUBERNETES_SERVICE_PORT", "").strip()
    if not host or not port:
        return None
    host = f"[{host}]" if ":" in host else host  # an IPv6 service address
    return f"https://{host}:{port}"


def is_in_cluster(env: Mapping[str, str] | None = None) -> bool:
    """Whether this process runs in a pod with a ServiceAccount token mounted."""
    folder = account_dir(env)
    found = (folder / "token").is_file() and (folder / "ca.crt").is_file()
    return server_url(env) is not None and found


def config(name: str = NAME, env: Mapping[str, str] | None = None) -> ClusterConfig:
    """Connection settings for the cluster this pod runs in, from its ServiceAccount."""
    server = server_url(env)
    folder = account_dir(env)
    if server is None:
        raise UsageError(
            f"cluster {name}: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set, "
            "so this process does not run in a Kubernetes pod and cannot reach the cluster "
            f"registered as in-cluster (run the workers in that cluster, or set {DIR_ENV})"
        )
    try:
        token = (folder / "token").read_text().strip()
        ca_pem = (folder / "ca.crt").read_bytes()
    except OSError as e:
        raise UsageError(
            f"cluster {name}: cannot read the pod's ServiceAccount from {folder} ({e.strerror}); "
            "mount its token (automountServiceAccountToken: true)"
        ) from e
    namespace_file = folder / "namespace"
    namespace = namespace_file.read_text().strip() if namespace_file.is_file() else "default"
    return ClusterConfig(
        name=name, server=server, ca_pem=ca_pem, token=token, namespace=namespace or "default"
    )
