"""Requests to one Kubernetes API server: discovery, reads, server-side apply, deletes.

A small client over urllib3 and orjson rather than the generated `kubernetes` models: gitfleet
handles objects as plain dicts from end to end, and model (de)serialization is the known
throughput trap of the official Python client. One `KubeClient` per cluster holds a connection
pool, a discovery cache (kind -> resource, refreshed when a kind is unknown, e.g. right after a
CRD is created) and request counters by verb that tests and benchmarks read. A client built from
settings that act as a ServiceAccount (`ClusterConfig.acting_as`) sends every request, discovery
included, with that account's impersonation headers, so the cluster's RBAC for it decides.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import orjson
import urllib3

from fleet.errors import ClusterUnreachable, KubeApiError
from fleet.kube import kubeconfig
from fleet.kube._transport import auth_headers, ssl_context
from fleet.model import Manifest, ObjectRef, split_api_version

FIELD_MANAGER = "gitfleet"
APPLY_CONTENT_TYPE = "application/apply-patch+yaml"


@dataclass(frozen=True)
class ApiResource:
    """Where a kind lives: its plural resource name and whether it is namespaced."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool

    def path(self, namespace: str = "", name: str = "") -> str:
        root = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            root += f"/namespaces/{quote(namespace, safe='')}"
        root += f"/{self.plural}"
        return root + (f"/{quote(name, safe='')}" if name else "")


class KubeClient:
    """Requests to one cluster. Thread-safe: syncs apply objects from a thread pool."""

    def __init__(self, config: kubeconfig.ClusterConfig, *, maxsize: int = 16, timeout: float = 30):
        self.config = config
        self.name = config.name
        self.timeout = timeout
        self.requests: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._discovery: dict[tuple[str, str], dict[str, ApiResource]] = {}
        self._http = urllib3.PoolManager(
            num_pools=2,
            maxsize=maxsize,
            block=True,
            ssl_context=ssl_context(config),
            retries=False,
        )
        self._headers = auth_headers(config)

    @classmethod
    def from_kubeconfig(cls, path: Path, context: str | None = None, **kw: Any) -> KubeClient:
        return cls(kubeconfig.load(path, context), **kw)

    # -- raw requests -------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: dict[str, str] | None = None,
        content_type: str = "application/json",
        obj: str = "",
    ) -> Any:
        """Send one request; return the decoded JSON body, or raise a typed error."""
        url = self.config.server + path + (f"?{urlencode(params)}" if params else "")
        headers = urllib3.HTTPHeaderDict(self._headers)
        data = None
        if body is not None:
            data = orjson.dumps(body)
            headers["Content-Type"] = content_type
        with self._lock:
            self.requests[method] += 1
        try:
            resp = self._http.request(method, url, body=data, headers=headers, timeout=self.timeout)
        except urllib3.exceptions.HTTPError as e:
            raise ClusterUnreachable(
                f"cluster {self.name} at {self.config.server} is unreachable: {_reason(e)}",
                cluster=self.name,
                obj=obj,
            ) from e
        if resp.status >= 400:
            raise _api_error(resp.status, resp.data, cluster=self.name, obj=obj, method=method)
        return orjson.loads(resp.data) if resp.data else None

    # -- discovery ----------------------------------------------------------------------------

    def resource_for(self, api_version: str, kind: str) -> ApiResource:
        group, version = split_api_version(api_version)
        found = self._resources(group, version).get(kind)
        if found is None:
            found = self._resources(group, version, refresh=True).get(kind)
        if found is None:
            raise KubeApiError(
                f"kind {kind} is not served by {self.name} under {api_version}: install its "
                "CustomResourceDefinition first, or fix the apiVersion",
                status=404,
                reason="NotFound",
                cluster=self.name,
            )
        return found

    def has_kind(self, api_version: str, kind: str) -> bool:
        try:
            self.resource_for(api_version, kind)
        except KubeApiError:
            return False
        return True

    def _resources(self, group: str, version: str, refresh: bool = False) -> dict[str, ApiResource]:
        key = (group, version)
        if refresh or key not in self._discovery:
            self._discovery[key] = self._discover(group, version)
        return self._discovery[key]

    def _discover(self, group: str, version: str) -> dict[str, ApiResource]:
        path = f"/apis/{group}/{version}" if group else f"/api/{version}"
        try:
            listing = self.request("GET", path)
        except KubeApiError as e:
            if e.status == 404:
                return {}
            raise
        return {
            r["kind"]: ApiResource(group, version, r["kind"], r["name"], bool(r["namespaced"]))
            for r in listing.get("resources", [])
            if "/" not in r["name"]
        }

    def forget_discovery(self) -> None:
        self._discovery.clear()

    # -- objects ------------------------------------------------------------------------------

    def object_path(self, ref: ObjectRef) -> str:
        resource = self.resource_for(ref.api_version, ref.kind)
        return resource.path(ref.namespace if resource.namespaced else "", ref.name)

    def is_namespaced(self, api_version: str, kind: str) -> bool:
        return self.resource_for(api_version, kind).namespaced

    def get(self, ref: ObjectRef) -> Manifest | None:
        try:
            result: Manifest = self.request("GET", self.object_path(ref), obj=str(ref))
        except KubeApiError as e:
            if e.status == 404:
                return None
            raise
        return result

    def list(
        self, api_version: str, kind: str, *, namespace: str = "", label_selector: str = ""
    ) -> list[Manifest]:
        resource = self.resource_for(api_version, kind)
        params = {"labelSelector": label_selector} if label_selector else None
        body = self.request("GET", resource.path(namespace), params=params)
        items: list[Manifest] = body.get("items", [])
        for item in items:
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind)
        return items

    def apply(
        self,
        obj: Manifest,
        *,
        manager: str = FIELD_MANAGER,
        force: bool = True,
        dry_run: bool = False,
    ) -> Manifest:
        """Server-side apply `obj`; with dry_run the server validates, writing nothing."""
        ref = ObjectRef.of(obj)
        params = {"fieldManager": manager, "force": "true" if force else "false"}
        if dry_run:
            params["dryRun"] = "All"
        result: Manifest = self.request(
            "PATCH",
            self.object_path(ref),
            body=obj,
            params=params,
            content_type=APPLY_CONTENT_TYPE,
            obj=str(ref),
        )
        return result

    def create(self, obj: Manifest, *, manager: str = "") -> Manifest:
        """POST `obj`: 409 AlreadyExists when it exists (a create that must not overwrite)."""
        ref = ObjectRef.of(obj)
        resource = self.resource_for(ref.api_version, ref.kind)
        path = resource.path(ref.namespace if resource.namespaced else "")
        params = {"fieldManager": manager} if manager else None
        result: Manifest = self.request("POST", path, body=obj, params=params, obj=str(ref))
        return result

    def delete(
        self, ref: ObjectRef, *, propagation: str = "Background", resource_version: str = ""
    ) -> bool:
        """Delete `ref`; False when it was already gone. With `resource_version`, only that
        version of it: the API server answers 409 Conflict when it changed since."""
        body: dict[str, Any] = {
            "kind": "DeleteOptions",
            "apiVersion": "v1",
            "propagationPolicy": propagation,
        }
        if resource_version:
            body["preconditions"] = {"resourceVersion": resource_version}
        try:
            self.request("DELETE", self.object_path(ref), body=body, obj=str(ref))
        except KubeApiError as e:
            if e.status == 404:
                return False
            raise
        return True

    def patch_status(self, obj: Manifest, status: dict[str, Any]) -> Manifest:
        """Merge-patch the status subresource, as a controller would (tests play controllers)."""
        ref = ObjectRef.of(obj)
        result: Manifest = self.request(
            "PATCH",
            self.object_path(ref) + "/status",
            body={"status": status},
            content_type="application/merge-patch+json",
            obj=str(ref),
        )
        return result

    def metrics_text(self) -> str:
        """The apiserver's Prometheus metrics (used by benchmarks to count requests)."""
        resp = self._http.request(
            "GET", self.config.server + "/metrics", headers=self._headers, timeout=self.timeout
        )
        return str(resp.data.decode())

    def close(self) -> None:
        self._http.clear()


def iter_items(clients: dict[str, KubeClient]) -> Iterator[tuple[str, KubeClient]]:
    yield from clients.items()


def _reason(e: Exception) -> str:
    reason = getattr(e, "reason", None)
    return str(reason or type(e).__name__)


def _api_error(status: int, raw: bytes, *, cluster: str, obj: str, method: str) -> KubeApiError:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        body = {"message": raw[:300].decode(errors="replace")}
    reason = str(body.get("reason", "")) if isinstance(body, dict) else ""
    message = str(body.get("message", "")) if isinstance(body, dict) else str(body)
    where = f"{obj} " if obj else ""
    text = f"{where}{method} failed on {cluster} ({reason or status}): {message}"
    return KubeApiError(text, status=status, reason=reason, cluster=cluster, obj=obj)
