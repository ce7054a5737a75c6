"""What one object refers to: the reference inference behind `fleet.engine.plan.order`.

Every function here reads one manifest and says which other objects it names, as `Key`s
(group, kind, namespace, name). A key has no API version on purpose: a Deployment that mounts
ConfigMap `settings` depends on that ConfigMap whatever version either is served at.

Namespaced references inherit the referring object's namespace, except where the API carries
an explicit namespace (webhook and APIService services, RoleBinding subjects). Whether the
referenced object is part of the same sync is for the caller to decide; this module never
guesses.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from fleet.model import Manifest, ObjectRef

RBAC = "rbac.authorization.k8s.io"
WEBHOOK_KINDS = frozenset({"ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"})
CRD_GROUP_KIND = ("apiextensions.k8s.io", "CustomResourceDefinition")
POD_POLICY_KINDS = frozenset({"NetworkPolicy", "ResourceQuota", "LimitRange"})
INGRESS_GROUP_KINDS = frozenset({("networking.k8s.io", "Ingress"), ("extensions", "Ingress")})
# Workloads a webhook's or APIService's Service can be backed by (matched by pod labels).
BACKING_WORKLOADS = frozenset(
    {("apps", "Deployment"), ("apps", "StatefulSet"), ("apps", "DaemonSet")}
)
# Where each workload keeps its pod template, as a path of keys from the object root.
_POD_SPEC_PATHS: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "Pod"): ("spec",),
    ("", "ReplicationController"): ("spec", "template", "spec"),
    ("apps", "Deployment"): ("spec", "template", "spec"),
    ("apps", "StatefulSet"): ("spec", "template", "spec"),
    ("apps", "DaemonSet"): ("spec", "template", "spec"),
    ("apps", "ReplicaSet"): ("spec", "template", "spec"),
    ("batch", "Job"): ("spec", "template", "spec"),
    ("batch", "CronJob"): ("spec", "jobTemplate", "spec", "template", "spec"),
}


class Key(NamedTuple):
    """An object's identity without its API version: how references are matched."""

    group: str
    kind: str
    namespace: str
    name: str


def key_of(ref: ObjectRef) -> Key:
    return Key(ref.group, ref.kind, ref.namespace, ref.name)


def _dig(obj: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(part)
    return obj


def _maps(value: Any) -> Iterator[Mapping[str, Any]]:
    """The mappings in a list field, skipping anything malformed."""
    if isinstance(value, list):
        yield from (item for item in value if isinstance(item, Mapping))


def _group_kind(obj: Manifest) -> tuple[str, str]:
    ref = ObjectRef.of(obj)
    return ref.group, ref.kind


def pod_template(obj: Manifest) -> Mapping[str, Any] | None:
    """The pod template (metadata + spec) of a workload; a bare Pod is its own template."""
    path = _POD_SPEC_PATHS.get(_group_kind(obj))
    if path is None:
        return None
    template = _dig(obj, path[:-1]) if len(path) > 1 else obj
    return template if isinstance(template, Mapping) else None


def pod_spec(obj: Manifest) -> Mapping[str, Any] | None:
    """The pod spec of a Pod or of any workload with a pod template, else None."""
    path = _POD_SPEC_PATHS.get(_group_kind(obj))
    spec = _dig(obj, path) if path else None
    return spec if isinstance(spec, Mapping) else None


def pod_labels(obj: Manifest) -> Mapping[str, Any]:
    labels = _dig(pod_template(obj), ("metadata", "labels"))
    return labels if isinstance(labels, Mapping) else {}


def selects(selector: Any, labels: Mapping[str, Any]) -> bool:
    """Whether a Service-style equality selector matches; an empty selector matches nothing."""
    if not isinstance(selector, Mapping) or not selector:
        return False
    return all(labels.get(k) == v for k, v in selector.items())


def crd_target(obj: Manifest) -> tuple[str, str] | None:
    """The (group, kind) of the custom resources a CRD defines, or None for other objects."""
    if _group_kind(obj) != CRD_GROUP_KIND:
        return None
    group, kind = _dig(obj, ("spec", "group")), _dig(obj, ("spec", "names", "kind"))
    return (group, kind) if isinstance(group, str) and isinstance(kind, str) else None


def _volume_refs(volume: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    yield "ConfigMap", _dig(volume, ("configMap", "name"))
    yield "Secret", _dig(volume, ("secret", "secretName"))
    yield "PersistentVolumeClaim", _dig(volume, ("persistentVolumeClaim", "claimName"))
    for source in _maps(_dig(volume, ("projected", "sources"))):
        yield "ConfigMap", _dig(source, ("configMap", "name"))
        yield "Secret", _dig(source, ("secret", "name"))


def _container_refs(container: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    for env in _maps(container.get("env")):
        yield "ConfigMap", _dig(env, ("valueFrom", "configMapKeyRef", "name"))
        yield "Secret", _dig(env, ("valueFrom", "secretKeyRef", "name"))
    for source in _maps(container.get("envFrom")):
        yield "ConfigMap", _dig(source, ("configMapRef", "name"))
        yield "Secret", _dig(source, ("secretRef", "name"))


def _pod_refs(spec: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """Core-group (kind, name) pairs a pod spec needs; the default ServiceAccount included."""
    yield (
        "ServiceAccount",
        spec.get("serviceAccountName") or spec.get("serviceAccount") or "default",
    )
    for secret in _maps(spec.get("imagePullSecrets")):
        yield "Secret", secret.get("name")
    for volume in _maps(spec.get("volumes")):
        yield from _volume_refs(volume)
    for field in ("initContainers", "containers", "ephemeralContainers"):
        for container in _maps(spec.get(field)):
            yield from _container_refs(container)


def _ingress_refs(obj: Manifest) -> Iterator[tuple[str, Any]]:
    spec = obj.get("spec") or {}
    backends = [spec.get("defaultBackend") or spec.get("backend") or {}]
    for rule in _maps(spec.get("rules")):
        backends += [path.get("backend") or {} for path in _maps(_dig(rule, ("http", "paths")))]
    for backend in backends:
        yield "Service", _dig(backend, ("service", "name")) or backend.get("serviceName")
    for tls in _maps(spec.get("tls")):
        yield "Secret", tls.get("secretName")


def _binding_refs(obj: Manifest, namespace: str) -> Iterator[Key]:
    role = obj.get("roleRef") or {}
    kind, name = role.get("kind"), role.get("name")
    if kind in ("Role", "ClusterRole") and isinstance(name, str):
        yield Key(RBAC, kind, namespace if kind == "Role" else "", name)
    for subject in _maps(obj.get("subjects")):
        if subject.get("kind") == "ServiceAccount" and isinstance(subject.get("name"), str):
            yield Key("", "ServiceAccount", subject.get("namespace") or namespace, subject["name"])


def _service_key(service: Any) -> Key | None:
    if not isinstance(service, Mapping) or not isinstance(service.get("name"), str):
        return None
    return Key("", "Service", str(service.get("namespace") or ""), service["name"])


def backend_services(obj: Manifest) -> set[Key]:
    """The Services an admission webhook configuration or an APIService calls."""
    group, kind = _group_kind(obj)
    if kind in WEBHOOK_KINDS and group == "admissionregistration.k8s.io":
        services = [_dig(hook, ("clientConfig", "service")) for hook in _maps(obj.get("webhooks"))]
    elif (group, kind) == ("apiregistration.k8s.io", "APIService"):
        services = [_dig(obj, ("spec", "service"))]
    else:
        return set()
    return {key for key in map(_service_key, services) if key is not None}


def _core_refs(obj: Manifest) -> Iterator[tuple[str, Any]]:
    spec = pod_spec(obj)
    if spec is not None:
        yield from _pod_refs(spec)
    if _group_kind(obj) in INGRESS_GROUP_KINDS:
        yield from _ingress_refs(obj)


def references(obj: Manifest) -> set[Key]:
    """Every object `obj` names in its spec and must therefore come after.

    Covers pod templates (ConfigMaps, Secrets, ServiceAccount, PVCs), Ingress backends and TLS
    Secrets, RoleBinding/ClusterRoleBinding roles and ServiceAccount subjects, and the Services
    behind webhook configurations and APIServices. Containment (Namespace) and CRD edges are
    not references; `fleet.engine.plan.order` adds those.
    """
    ref = ObjectRef.of(obj)
    keys = {
        Key("", kind, ref.namespace, name)
        for kind, name in _core_refs(obj)
        if isinstance(name, str) and name
    }
    if ref.group == RBAC and ref.kind in ("RoleBinding", "ClusterRoleBinding"):
        keys.update(_binding_refs(obj, ref.namespace))
    keys.update(backend_services(obj))
    keys.discard(key_of(ref))
    return keys


Edge = tuple[Key, bool]  # (dependency, must it be healthy first)


def crds_by_target(objects: Iterable[Manifest]) -> dict[tuple[str, str], Key]:
    """CRD keys by the (group, kind) of the custom resources each defines."""
    found = {}
    for obj in objects:
        target = crd_target(obj)
        if target is not None:
            found[target] = key_of(ObjectRef.of(obj))
    return found


def anchors(obj: Manifest, crds: Mapping[tuple[str, str], Key]) -> list[Key]:
    """The Namespace and the CRD that must exist before `obj` can be applied."""
    ref = ObjectRef.of(obj)
    found = [Key("", "Namespace", "", ref.namespace)] if ref.namespace else []
    crd = crds.get((ref.group, ref.kind))
    return [*found, crd] if crd is not None else found


@dataclass(frozen=True)
class _Group:
    """What the edge rules look up among objects applied together."""

    members: Mapping[Key, Manifest]
    crds: Mapping[tuple[str, str], Key]
    policies: Mapping[str, list[Key]]  # namespace -> NetworkPolicy, ResourceQuota, LimitRange
    workloads: Mapping[str, list[Key]]  # namespace -> Deployments, StatefulSets, DaemonSets
    plain: list[Key]  # every member that is not a webhook configuration


def _group(members: Mapping[Key, Manifest]) -> _Group:
    policies: dict[str, list[Key]] = defaultdict(list)
    workloads: dict[str, list[Key]] = defaultdict(list)
    for key in members:
        if key.kind in POD_POLICY_KINDS and key.group in ("", "networking.k8s.io"):
            policies[key.namespace].append(key)
        if (key.group, key.kind) in BACKING_WORKLOADS:
            workloads[key.namespace].append(key)
    plain = [key for key in members if key.kind not in WEBHOOK_KINDS]
    return _Group(members, crds_by_target(members.values()), policies, workloads, plain)


def _backends(obj: Manifest, group: _Group, catalog: Mapping[Key, Manifest]) -> set[Key]:
    """A webhook's or APIService's Services and the workloads those Services select."""
    found = set()
    for service in backend_services(obj):
        found.add(service)
        selector = _dig(catalog.get(service), ("spec", "selector"))
        for workload in group.workloads.get(service.namespace, ()):
            if selects(selector, pod_labels(group.members[workload])):
                found.add(workload)
    return found


def _edges(key: Key, obj: Manifest, group: _Group, catalog: Mapping[Key, Manifest]) -> list[Edge]:
    edges = [(ref, False) for ref in references(obj)]
    edges += [(ref, ref.kind == "CustomResourceDefinition") for ref in anchors(obj, group.crds)]
    if pod_spec(obj) is not None:
        edges += [(ref, False) for ref in group.policies.get(key.namespace, ())]
    edges += [(ref, True) for ref in _backends(obj, group, catalog)]
    if key.kind in WEBHOOK_KINDS:
        edges += [(ref, False) for ref in group.plain]
    return edges


def dependencies(
    members: Mapping[Key, Manifest], catalog: Mapping[Key, Manifest]
) -> dict[Key, dict[Key, bool]]:
    """For each member, the members it must come after and whether each must be healthy first.

    `members` are the objects applied together (one wave). `catalog` holds every object of the
    sync and is only read for a webhook's Service selector, which may live in another wave.
    Edges to objects outside `members`, and self-edges, are dropped.
    """
    group = _group(members)
    graph: dict[Key, dict[Key, bool]] = {}
    for key, obj in members.items():
        deps = graph[key] = {}
        for dep, healthy in _edges(key, obj, group, catalog):
            if dep in members and dep != key:
                deps[dep] = deps.get(dep, False) or healthy
    return graph
