"""Bring testbed clusters up and down, and report what runs.

Layout of DIR: `testbed.json` (ports and pids, written as each process starts so `down` can
clean a half-started testbed), `clusters.json` (the public list of {name, server, kubeconfig}),
and one folder per cluster with its kubeconfig, keys and component logs. etcd is shared by all
clusters, each under its own key prefix, with its data in /dev/shm when available.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deploy.testbed import api, pki
from deploy.testbed.build import ensure_binaries
from deploy.testbed.errors import StartError, TestbedError
from deploy.testbed.kubeconfig import write_kubeconfig
from deploy.testbed.process import Proc, ensure_port_free, free_port, start, stop, wait_for

CONTROLLERS = ("kwok", "kube-scheduler", "kube-controller-manager")
FAKE_NODE_ANNOTATION = "kwok.x-k8s.io/node"


@dataclass
class ClusterPlan:
    name: str
    folder: Path
    ports: dict[str, int]

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports['apiserver']}"

    @property
    def kubeconfig(self) -> Path:
        return self.folder / "kubeconfig"

    def ca_pem(self) -> bytes:
        return (self.folder / "pki" / "apiserver.crt").read_bytes()


@dataclass
class TestbedState:
    folder: Path
    etcd_data: str = ""
    etcd_port: int = 0
    procs: list[Proc] = field(default_factory=list)
    clusters: list[dict[str, Any]] = field(default_factory=list)

    @property
    def path(self) -> Path:
        return self.folder / "testbed.json"

    def save(self) -> None:
        data = {
            "etcd_data": self.etcd_data,
            "etcd_port": self.etcd_port,
            "procs": [p.to_json() for p in self.procs],
            "clusters": self.clusters,
        }
        self.path.write_text(json.dumps(data, indent=2))

    @classmethod
    def load(cls, folder: Path) -> TestbedState:
        path = folder / "testbed.json"
        if not path.exists():
            return cls(folder)
        data = json.loads(path.read_text())
        procs = [Proc(**p) for p in data.get("procs", [])]
        return cls(folder, data["etcd_data"], data["etcd_port"], procs, data["clusters"])


def plan_ports(index: int, base_port: int) -> dict[str, int]:
    names = ("apiserver", "controller-manager", "scheduler", "kwok")
    if base_port:
        ports = {n: base_port + 10 * (index + 1) + i for i, n in enumerate(names)}
        for name, port in ports.items():
            ensure_port_free(port, name)
        return ports
    return {n: free_port() for n in names}


def up(folder: Path, *, clusters: int, nodes: int = 2, base_port: int = 0) -> list[dict[str, Any]]:
    """Start `clusters` clusters in `folder`; return the clusters.json entries."""
    folder = folder.resolve()
    folder.mkdir(parents=True, exist_ok=True)
    previous = TestbedState.load(folder)
    if any(p.is_running() for p in previous.procs):
        raise TestbedError(
            f"a testbed already runs in {folder}: run `gitfleet testbed down --dir {folder}` first"
        )
    bins = ensure_binaries()
    state = TestbedState(folder)
    try:
        _start_etcd(state, bins, base_port)
        plans = [_plan_cluster(folder, i, base_port) for i in range(clusters)]
        _start_all(state, plans, bins, nodes)
    except BaseException:
        down(folder)
        raise
    return state.clusters


def _start_all(
    state: TestbedState, plans: list[ClusterPlan], bins: dict[str, Path], nodes: int
) -> None:
    apiservers = [_start_apiserver(state, plan, bins) for plan in plans]
    for plan, proc in zip(plans, apiservers, strict=True):
        wait_for(
            _apiserver_ready(plan),
            what=f"{plan.name} apiserver /readyz",
            watched=[proc],
            timeout=60,
        )
        _write_access(state, plan)
    for plan in plans:
        _start_controllers(state, plan, bins)
    for plan in plans:
        _create_nodes(plan, nodes)
    for plan in plans:
        _wait_cluster_ready(state, plan, nodes)
    (state.folder / "clusters.json").write_text(json.dumps(state.clusters, indent=2))


def _apiserver_ready(plan: ClusterPlan) -> Callable[[], bool]:
    def ready() -> bool:
        crt = plan.folder / "pki" / "apiserver.crt"
        return crt.exists() and api.is_ready(plan.server, plan.ca_pem())

    return ready


def _plan_cluster(folder: Path, index: int, base_port: int) -> ClusterPlan:
    name = f"cluster-{index + 1}"
    cluster_dir = folder / name
    (cluster_dir / "pki").mkdir(parents=True, exist_ok=True)
    return ClusterPlan(name, cluster_dir, plan_ports(index, base_port))


def _start_etcd(state: TestbedState, bins: dict[str, Path], base_port: int) -> None:
    client = base_port or free_port()
    peer = base_port + 1 if base_port else free_port()
    if base_port:
        ensure_port_free(client, "etcd")
        ensure_port_free(peer, "etcd peer")
    shm = Path("/dev/shm")
    root = shm if shm.is_dir() and os.access(shm, os.W_OK) else state.folder
    data = root / f"gitfleet-etcd-{os.getpid()}-{client}"
    shutil.rmtree(data, ignore_errors=True)
    state.etcd_data, state.etcd_port = str(data), client
    cmd = [
        str(bins["etcd"]),
        "--name=testbed",
        f"--data-dir={data}",
        f"--listen-client-urls=http://127.0.0.1:{client}",
        f"--advertise-client-urls=http://127.0.0.1:{client}",
        f"--listen-peer-urls=http://127.0.0.1:{peer}",
        f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
        f"--initial-cluster=testbed=http://127.0.0.1:{peer}",
        "--auto-compaction-mode=periodic",
        "--auto-compaction-retention=5m",
        "--quota-backend-bytes=8589934592",
        "--snapshot-count=50000",
        "--unsafe-no-fsync",
        "--log-level=warn",
    ]
    proc = start("", "etcd", cmd, state.folder / "etcd.log")
    state.procs.append(proc)
    state.save()
    wait_for(lambda: _etcd_healthy(client), what="etcd /health", watched=[proc], timeout=30)


def _etcd_healthy(port: int) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
            return b'"true"' in r.read()
    except OSError:
        return False


def _start_apiserver(state: TestbedState, plan: ClusterPlan, bins: dict[str, Path]) -> Proc:
    pki_dir = plan.folder / "pki"
    key, pub = pki.write_service_account_keys(pki_dir)
    pki.write_token_file(pki_dir)
    for stale in ("apiserver.crt", "apiserver.key"):
        (pki_dir / stale).unlink(missing_ok=True)
    cmd = [
        str(bins["kube-apiserver"]),
        f"--etcd-servers=http://127.0.0.1:{state.etcd_port}",
        f"--etcd-prefix=/{plan.name}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={plan.ports['apiserver']}",
        f"--cert-dir={pki_dir}",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={pub}",
        f"--service-account-signing-key-file={key}",
        "--service-cluster-ip-range=10.96.0.0/16",
        f"--token-auth-file={pki_dir / 'tokens.csv'}",
        "--authorization-mode=RBAC",
        "--endpoint-reconciler-type=none",
        "--allow-privileged=true",
        "--profiling=false",
        "--shutdown-delay-duration=0s",
        "--max-requests-inflight=800",
        "--max-mutating-requests-inflight=400",
    ]
    proc = start(plan.name, "kube-apiserver", cmd, plan.folder / "kube-apiserver.log")
    state.procs.append(proc)
    state.save()
    return proc


def _write_access(state: TestbedState, plan: ClusterPlan) -> None:
    token = pki.write_token_file(plan.folder / "pki")
    write_kubeconfig(plan.kubeconfig, plan.name, plan.server, plan.ca_pem(), token)
    entry = {"name": plan.name, "server": plan.server, "kubeconfig": str(plan.kubeconfig)}
    state.clusters.append({**entry, "ports": plan.ports})
    state.save()


def _start_controllers(state: TestbedState, plan: ClusterPlan, bins: dict[str, Path]) -> None:
    kc = str(plan.kubeconfig)
    auth = [f"--kubeconfig={kc}", f"--authentication-kubeconfig={kc}"]
    auth += [f"--authorization-kubeconfig={kc}", "--bind-address=127.0.0.1", "--leader-elect=false"]
    pki_dir = plan.folder / "pki"
    commands = {
        "kube-controller-manager": [
            *auth,
            f"--secure-port={plan.ports['controller-manager']}",
            f"--service-account-private-key-file={pki_dir / 'sa.key'}",
            f"--root-ca-file={pki_dir / 'apiserver.crt'}",
            f"--cert-dir={pki_dir / 'kcm'}",
            "--use-service-account-credentials=false",
            "--controllers=*",
        ],
        "kube-scheduler": [*auth, f"--secure-port={plan.ports['scheduler']}"],
        "kwok": [
            f"--kubeconfig={kc}",
            f"--config={bins['kwok-stages.yaml']}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={FAKE_NODE_ANNOTATION}=fake",
            f"--server-address=127.0.0.1:{plan.ports['kwok']}",
            "--cidr=10.0.0.0/16",
            "--node-ip=127.0.0.1",
            "--node-lease-duration-seconds=40",
        ],
    }
    for component in reversed(CONTROLLERS):
        cmd = [str(bins[component]), *commands[component]]
        proc = start(plan.name, component, cmd, plan.folder / f"{component}.log")
        state.procs.append(proc)
    state.save()


NODE_REGION = "testbed-1"
NODE_ZONES = ("testbed-1a", "testbed-1b", "testbed-1c")
NODE_INSTANCE_TYPE = "kwok-32c-256g"  # what the capacity below describes


def node_labels(name: str, index: int) -> dict[str, str]:
    """The well-known labels a real node carries, so charts that select on them (most public
    charts set `nodeSelector: kubernetes.io/os: linux`) schedule onto kwok nodes; the zones are
    spread over the nodes round-robin, all in one region."""
    return {
        "type": "kwok",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",  # older charts still select on the beta labels
        "beta.kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": NODE_INSTANCE_TYPE,
        "topology.kubernetes.io/region": NODE_REGION,
        "topology.kubernetes.io/zone": NODE_ZONES[index % len(NODE_ZONES)],
    }


def _node(name: str, index: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {FAKE_NODE_ANNOTATION: "fake"},
            "labels": node_labels(name, index),
        },
        "spec": {},
        "status": {
            "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "1000"},
            "capacity": {"cpu": "32", "memory": "256Gi", "pods": "1000"},
        },
    }


def _create_nodes(plan: ClusterPlan, nodes: int) -> None:
    token = pki.write_token_file(plan.folder / "pki")
    for i in range(nodes):
        status, body = api.request(
            plan.server,
            "/api/v1/nodes",
            ca_pem=plan.ca_pem(),
            token=token,
            method="POST",
            body=_node(f"kwok-node-{i}", i),
        )
        if status not in (201, 409):
            raise StartError(f"creating node kwok-node-{i} in {plan.name} failed: {body}")


def _count_ready_nodes(plan: ClusterPlan) -> int:
    token = pki.write_token_file(plan.folder / "pki")
    status, body = api.request(plan.server, "/api/v1/nodes", ca_pem=plan.ca_pem(), token=token)
    if status != 200:
        return 0
    return sum(
        any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in n["status"].get("conditions", [])
        )
        for n in body["items"]
    )


def _has_default_service_account(plan: ClusterPlan) -> bool:
    token = pki.write_token_file(plan.folder / "pki")
    path = "/api/v1/namespaces/default/serviceaccounts/default"
    status, _ = api.request(plan.server, path, ca_pem=plan.ca_pem(), token=token)
    return status == 200


def _wait_cluster_ready(state: TestbedState, plan: ClusterPlan, nodes: int) -> None:
    watched = [p for p in state.procs if p.cluster == plan.name]
    wait_for(
        lambda: _count_ready_nodes(plan) >= nodes,
        what=f"{nodes} Ready nodes in {plan.name}",
        watched=watched,
        timeout=90,
    )
    wait_for(
        lambda: _has_default_service_account(plan),
        what=f"the default ServiceAccount in {plan.name}",
        watched=watched,
        timeout=60,
    )


def down(folder: Path) -> list[str]:
    """Stop every process recorded in `folder`, controllers before apiservers before etcd."""
    folder = folder.resolve()
    state = TestbedState.load(folder)
    report: list[str] = []
    for group, grace in ((CONTROLLERS, 10.0), (("kube-apiserver",), 20.0), (("etcd",), 10.0)):
        procs = [p for p in state.procs if p.component in group]
        killed = stop(procs, grace=grace)
        report += [f"{p.component} of {p.cluster} needed SIGKILL" for p in killed]
    if state.etcd_data:
        shutil.rmtree(state.etcd_data, ignore_errors=True)
    if state.path.exists():
        state.procs = []
        state.save()
    return report


def status(folder: Path) -> list[str]:
    """One line per cluster (and etcd) saying which components run and whether it is ready."""
    state = TestbedState.load(folder.resolve())
    if not state.procs:
        return [f"no testbed recorded in {folder}"]
    lines = [_component_line("etcd", [p for p in state.procs if p.component == "etcd"])]
    for cluster in state.clusters:
        procs = [p for p in state.procs if p.cluster == cluster["name"]]
        ca = Path(cluster["kubeconfig"]).parent / "pki" / "apiserver.crt"
        ready = ca.exists() and api.is_ready(cluster["server"], ca.read_bytes())
        head = f"{cluster['name']}  {cluster['server']}  {'ready' if ready else 'NOT READY'}"
        lines.append(head + "  " + _component_line("", procs))
    return lines


def _component_line(label: str, procs: Iterable[Proc]) -> str:
    parts = [f"{p.component}={'running' if p.is_running() else 'stopped'}({p.pid})" for p in procs]
    return (label + " " if label else "") + " ".join(parts)
