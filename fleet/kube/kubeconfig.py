"""Read a kubeconfig into the connection settings of one cluster.

Supports what fleets use with static credentials: a bearer token (inline or a token file), client
certificates (inline data or files), basic auth, and a CA (inline or a file) or an explicit
insecure-skip-tls-verify. Exec and auth-provider plugins are refused with a clear error: a
control plane running unattended cannot prompt for a login. So are a user's own impersonation
fields (`as`, `as-groups`, ...): gitfleet would otherwise act with the credentials' full rights;
a project names the ServiceAccount to act as instead (`ClusterConfig.acting_as`).
"""

from __future__ import annotations

import base64
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fleet.errors import UsageError

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class ServiceAccount:
    """A ServiceAccount that requests act as (Kubernetes impersonation), so the API server's
    RBAC for that account bounds them. Spelled `namespace:name`, as Argo CD's
    `destinationServiceAccounts` are."""

    namespace: str
    name: str

    @property
    def user(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.name}"

    @property
    def groups(self) -> tuple[str, ...]:
        """The groups the API server gives a ServiceAccount's own token."""
        return (
            "system:serviceaccounts",
            f"system:serviceaccounts:{self.namespace}",
            "system:authenticated",
        )

    def __str__(self) -> str:
        return f"{self.namespace}:{self.name}"


@dataclass(frozen=True)
class ClusterConfig:
    """Everything needed to talk to one API server. `repr` never shows a credential.
    `impersonate`: every request acts as this ServiceAccount (None: as the credentials)."""

    name: str
    server: str
    ca_pem: bytes = field(default=b"", repr=False)
    insecure: bool = False
    token: str = field(default="", repr=False)
    client_cert_pem: bytes = field(default=b"", repr=False)
    client_key_pem: bytes = field(default=b"", repr=False)
    username: str = ""
    password: str = field(default="", repr=False)
    namespace: str = "default"
    impersonate: ServiceAccount | None = None

    def acting_as(self, account: ServiceAccount | None) -> ClusterConfig:
        """These settings, with every request acting as `account` (None: as the credentials)."""
        return dataclasses.replace(self, impersonate=account)


def load(path: Path, context: str | None = None) -> ClusterConfig:
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise UsageError(f"cannot read kubeconfig {path}: {e.strerror}") from e
    return parse(text, context=context, source=str(path), base=Path(path).parent)


def parse(
    text: str, *, context: str | None = None, source: str = "kubeconfig", base: Path | None = None
) -> ClusterConfig:
    try:
        doc = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as e:
        raise UsageError(f"{source} is not valid YAML: {e}") from e
    if not isinstance(doc, dict):
        raise UsageError(f"{source} is not a kubeconfig (expected a mapping)")
    ctx_name = context or doc.get("current-context") or ""
    ctx = _named(doc, "contexts", ctx_name, source).get("context") or {}
    cluster = _named(doc, "clusters", ctx.get("cluster", ""), source).get("cluster") or {}
    user: dict[str, Any] = {}
    if ctx.get("user"):
        user = _named(doc, "users", ctx["user"], source).get("user") or {}
    if not cluster.get("server"):
        raise UsageError(f"{source}: cluster of context '{ctx_name}' has no server")
    _refuse_plugins(user, source)
    base = base or Path.cwd()
    return ClusterConfig(
        name=str(ctx_name),
        server=str(cluster["server"]).rstrip("/"),
        ca_pem=_data_or_file(cluster, "certificate-authority", base),
        insecure=bool(cluster.get("insecure-skip-tls-verify", False)),
        token=_token(user, base),
        client_cert_pem=_data_or_file(user, "client-certificate", base),
        client_key_pem=_data_or_file(user, "client-key", base),
        username=str(user.get("username", "")),
        password=str(user.get("password", "")),
        namespace=str(ctx.get("namespace") or "default"),
    )


def _named(doc: dict[str, Any], section: str, name: str, source: str) -> dict[str, Any]:
    for entry in doc.get(section) or []:
        if isinstance(entry, dict) and entry.get("name") == name:
            return entry
    raise UsageError(f"{source}: no entry named '{name}' in {section}")


def _refuse_plugins(user: dict[str, Any], source: str) -> None:
    for key in ("exec", "auth-provider"):
        if key in user:
            raise UsageError(
                f"{source}: user uses an '{key}' plugin, which gitfleet does not run; "
                "give it a kubeconfig with a token or a client certificate"
            )
    for key in ("as", "as-uid", "as-groups", "as-user-extra"):
        if user.get(key):
            raise UsageError(
                f"{source}: user sets '{key}' (impersonation), which gitfleet would not honour; "
                "register the credentials without it and name a ServiceAccount for the cluster "
                "in the project's destinationServiceAccounts"
            )


def _data_or_file(entry: dict[str, Any], key: str, base: Path) -> bytes:
    if entry.get(f"{key}-data"):
        return base64.b64decode(entry[f"{key}-data"])
    if entry.get(key):
        return (base / str(entry[key])).read_bytes()
    return b""


def _token(user: dict[str, Any], base: Path) -> str:
    if user.get("token"):
        return str(user["token"])
    if user.get("tokenFile"):
        return (base / str(user["tokenFile"])).read_text().strip()
    return ""
