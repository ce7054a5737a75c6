"""The benchmark's workload: N applications, one folder each, K ConfigMaps per application.

Application `i` deploys to cluster `i mod C`, into one namespace per cluster, from the folder
`apps/<name>/` of one monorepo; each ConfigMap is one file `cm-<k>.yaml` holding a 1 KiB
payload (the engine benchmark's) and a `value` that monorepo changes rewrite. The raw and
kubectl baselines apply exactly these objects, so every phase moves the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from fleet.model import Manifest, ObjectRef
from loadtest.engine_bench import PAYLOAD_BYTES, commit, init_repo

PAYLOAD = ("gitfleet-bench " * (PAYLOAD_BYTES // 15 + 1))[:PAYLOAD_BYTES]


@dataclass(frozen=True)
class App:
    """One application: its name, its target cluster and its folder in the repository."""

    name: str
    cluster: str

    @property
    def path(self) -> str:
        return f"apps/{self.name}"


def plan_apps(prefix: str, count: int, clusters: Sequence[str]) -> list[App]:
    """`count` applications named `<prefix>-00000`..., spread round-robin over `clusters`."""
    return [App(f"{prefix}-{i:05d}", clusters[i % len(clusters)]) for i in range(count)]


def configmap(app: str, index: int, value: str = "0") -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{app}-{index}", "labels": {"bench": "gitfleet"}},
        "data": {"value": value, "payload": PAYLOAD},
    }


def changed_ref(app: App, namespace: str) -> ObjectRef:
    """The object a monorepo change rewrites: the app's first ConfigMap."""
    return ObjectRef("", "v1", "ConfigMap", namespace, f"{app.name}-0")


def files_of(app: App, per_app: int, *, value: str = "0") -> dict[str, str]:
    """Repository path -> YAML text of every ConfigMap of `app`."""
    return {
        f"{app.path}/cm-{k}.yaml": yaml.safe_dump(configmap(app.name, k, value), sort_keys=False)
        for k in range(per_app)
    }


def by_cluster(apps: Iterable[App], per_app: int) -> dict[str, dict[str, Manifest]]:
    """cluster -> {file name: object}: the same objects, grouped for the baselines."""
    grouped: dict[str, dict[str, Manifest]] = {}
    for app in apps:
        objects = grouped.setdefault(app.cluster, {})
        for k in range(per_app):
            objects[f"{app.name}-{k}.yaml"] = configmap(app.name, k)
    return grouped


def write_folders(grouped: Mapping[str, Mapping[str, Manifest]], root: Path) -> dict[str, Path]:
    """One flat folder of YAML files per cluster, as `kubectl apply -f DIR` reads them."""
    folders = {}
    for cluster, objects in grouped.items():
        folder = root / cluster
        folder.mkdir(parents=True, exist_ok=True)
        for name, obj in objects.items():
            (folder / name).write_text(yaml.safe_dump(obj, sort_keys=False))
        folders[cluster] = folder
    return folders


def create_repo(folder: Path, apps: Iterable[App], per_app: int) -> str:
    """A fresh repository (default branch main) holding every app; returns the commit sha."""
    init_repo(folder)
    files: dict[str, str] = {"README.md": "gitfleet bench monorepo\n"}
    for app in apps:
        files |= files_of(app, per_app)
    return commit(folder, files, "bench applications")


def change(folder: Path, app: App, per_app: int, value: str) -> tuple[str, list[str]]:
    """Commit a new `value` in the first ConfigMap of `app`; (sha, paths touched)."""
    path = f"{app.path}/cm-0.yaml"
    text = files_of(app, per_app, value=value)[path]
    return commit(folder, {path: text}, f"bench: {app.name} value {value}"), [path]
