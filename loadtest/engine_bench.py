"""Engine benchmark: how fast one sync writes, next to the API server's own limit and kubectl.

On a small machine the client, kube-apiserver and etcd share the cores, so an objects/s figure
means little alone. Every figure here comes from one run against one cluster, each phase in a
fresh namespace, so the ratios are what to read:

1. raw limit: server-side apply of N ConfigMaps from 8 threads through `KubeClient`, nothing else;
   beside it, the same with one LIST and a dry-run of every object first: the limit for an engine
   that, as issue 3 requires, validates everything by dry-run before it writes anything;
2. kubectl: `kubectl apply --server-side -f DIR` of the same files (default validation, then
   `--validate=false`);
3. cold sync: `fleet.engine.sync.run` of a git repo holding the same files, with fresh caches, so it
   includes the fetch, render, order, diff (GETs and dry-runs), apply, health, prune scan and
   inventory;
4. no-op: a second sync of an unchanged M-object app after a commit elsewhere in the repo.

CPU seconds per 1,000 objects are reported for the client (this process, or kubectl) and, when
its processes are found in /proc, for the server (kube-apiserver plus etcd), because wall time
alone hides who spent the cores (performance-anchors.md, section 2). Stage durations come from
the sync's own OpenTelemetry spans; request counts and summed latencies from a counting client.
`--profile` adds one more cold sync under cProfile (all threads) and writes the top entries.

Usage: python -m loadtest.engine_bench --out DIR [--objects 500] [--noop-objects 100]
[--clusters-json PATH] [--rounds 3] [--profile]
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import os
import platform
import pstats
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, TypeVar
from urllib.parse import urlparse

import psutil
import yaml
from dulwich.repo import Repo
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from deploy.testbed import runner
from deploy.testbed.build import ensure_binaries
from fleet.engine import sync
from fleet.engine.caches import SyncCaches
from fleet.engine.contract import SyncRequest, SyncResult
from fleet.engine.inventory import InventoryStore
from fleet.kube import kubeconfig
from fleet.kube.client import KubeClient
from fleet.model import Manifest, ObjectRef
from loadtest.probes import cpu_of
from loadtest.report import targets_table

RAW_THREADS = 8
PAYLOAD_BYTES = 1024
WARM_UP_OBJECTS = 20
STAGES = ("source", "render", "order", "diff", "apply", "prune", "record")
VERBS = {  # request label -> figure suffix; a dry-run PATCH is counted apart from real applies
    "GET": "get",
    "PATCH": "apply",
    "PATCH(dry-run)": "dry_run",
    "POST": "post",
    "PUT": "put",
    "DELETE": "delete",
}
THROUGHPUT = ("objects_per_s", "seconds", "client_cpu_s_per_1k")
PHASES = ("raw_apply", "raw_validated", "kubectl", "kubectl_novalidate", "cold_sync")
FIGURE_NAMES = (
    *(f"{p}_{t}" for p in PHASES for t in THROUGHPUT),
    "cold_sync_vs_kubectl",
    "cold_sync_vs_kubectl_novalidate",
    "cold_sync_vs_raw",
    "cold_sync_vs_raw_validated",
    "raw_apply_vs_kubectl",
    *(f"cold_sync_stage_{s}_seconds" for s in (*STAGES, "other")),
    *(f"cold_sync_requests_{v}" for v in VERBS.values()),
    "cold_sync_requests_total",
    *(f"cold_sync_request_seconds_{v}" for v in VERBS.values()),
    "noop_seconds",
    "noop_writes",
    "noop_renders",
    *(f"noop_requests_{v}" for v in VERBS.values()),
    "noop_requests_total",
)
AUTHOR = b"gitfleet bench <bench@gitfleet.invalid>"
T = TypeVar("T")


@dataclass(frozen=True)
class Figure:
    value: float
    unit: str


@dataclass(frozen=True)
class Sample:
    """One timed phase: wall seconds, client CPU seconds, server CPU seconds (None: unknown)."""

    seconds: float
    client_cpu: float
    server_cpu: float | None


@dataclass(frozen=True)
class ColdRun:
    """One cold sync: its sample, seconds per stage, and requests (count, summed latency)."""

    sample: Sample
    stages: dict[str, float]
    calls: dict[str, int]
    latency: dict[str, float]


@dataclass
class Bench:
    """What every phase shares: the cluster, the work folder, namespaces to clean up."""

    entry: dict[str, Any]
    work: Path
    spans: InMemorySpanExporter
    server_pids: list[int]
    namespaces: list[str] = field(default_factory=list)
    apps: list[str] = field(default_factory=list)
    suffix: str = field(default_factory=lambda: uuid.uuid4().hex[:6])

    def client(self) -> CountingKube:
        return CountingKube(kubeconfig.load(Path(self.entry["kubeconfig"])))

    def namespace(self, kube: KubeClient, label: str) -> str:
        name = f"bench-{label}-{self.suffix}"
        kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        self.namespaces.append(name)
        return name

    def measure(self, action: Callable[[], T]) -> tuple[Sample, T]:
        wall, cpu, server = time.perf_counter(), _client_cpu(), cpu_of(self.server_pids)
        result = action()
        after = cpu_of(self.server_pids)
        used = None if server is None or after is None else after - server
        return Sample(time.perf_counter() - wall, _client_cpu() - cpu, used), result


class CountingKube(KubeClient):
    """A KubeClient that tells dry-runs from writes and sums request latency per verb."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: Counter[str] = Counter()
        self.seconds: dict[str, float] = defaultdict(float)
        self._count_lock = threading.Lock()

    def reset_counts(self) -> None:
        with self._count_lock:
            self.calls.clear()
            self.seconds.clear()

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
        label = method + ("(dry-run)" if params and "dryRun" in params else "")
        started = time.perf_counter()
        try:
            kw = {"body": body, "params": params, "content_type": content_type, "obj": obj}
            return super().request(method, path, **kw)
        finally:
            with self._count_lock:
                self.calls[label] += 1
                self.seconds[label] += time.perf_counter() - started


# -- the workload -------------------------------------------------------------------------------


def configmaps(count: int) -> dict[str, Manifest]:
    """`count` ConfigMaps without a namespace, keyed by their file name."""
    payload = ("gitfleet-engine-bench " * (PAYLOAD_BYTES // 22 + 1))[:PAYLOAD_BYTES]
    return {
        f"cm-{i:04d}.yaml": {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"cm-{i:04d}", "labels": {"bench": "engine"}},
            "data": {"index": str(i), "payload": payload},
        }
        for i in range(count)
    }


def as_yaml(objects: Mapping[str, Manifest]) -> dict[str, str]:
    return {name: yaml.safe_dump(obj, sort_keys=False) for name, obj in objects.items()}


def init_repo(path: Path) -> str:
    path.mkdir(parents=True, exist_ok=True)
    Repo.init(str(path), default_branch=b"main").close()
    return path.resolve().as_uri()


def commit(path: Path, files: Mapping[str, str], message: str) -> str:
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    with Repo(str(path)) as repo:
        worktree = repo.get_worktree()
        worktree.stage(sorted(files))
        sha = worktree.commit(message=message.encode(), author=AUTHOR, committer=AUTHOR)
    return sha.decode()


# -- phases -------------------------------------------------------------------------------------


def raw_apply(
    bench: Bench, objects: Mapping[str, Manifest], *, label: str = "raw", validate: bool = False
) -> Sample:
    """Apply every object from 8 threads; with `validate`, first one LIST and a dry-run of each
    (the least a sync that validates everything before writing can do)."""
    kube = bench.client()
    ns = bench.namespace(kube, label)
    placed = [{**o, "metadata": {**o["metadata"], "namespace": ns}} for o in objects.values()]

    def dry_run(obj: Manifest) -> Manifest:
        return kube.apply(obj, dry_run=True)

    def work() -> None:
        if validate:
            kube.list("v1", "ConfigMap", namespace=ns)
            list(pool.map(dry_run, placed))
        list(pool.map(kube.apply, placed))

    with ThreadPoolExecutor(RAW_THREADS) as pool:
        sample, _ = bench.measure(work)
    kube.close()
    return sample


def kubectl_apply(
    bench: Bench, kubectl: Path, folder: Path, *, label: str, validate: bool
) -> Sample:
    kube = bench.client()
    ns = bench.namespace(kube, label)
    kube.close()
    command = [*_kubectl(bench, kubectl), "apply", "--server-side", "-n", ns, "-f", str(folder)]
    command += [] if validate else ["--validate=false"]
    sample, out = bench.measure(lambda: _run(command))
    applied = out.count(" serverside-applied")
    expected = len(list(folder.glob("*.yaml")))
    if applied != expected:
        raise RuntimeError(f"kubectl applied {applied} objects, expected {expected}:\n{out}")
    return sample


def cold_sync(bench: Bench, files: Mapping[str, str], *, label: str) -> ColdRun:
    repo = bench.work / f"repo-{label}"
    url = init_repo(repo)
    commit(repo, {f"app/{name}": text for name, text in files.items()}, "the app")
    kube = bench.client()
    request = _request(bench, url, "app", bench.namespace(kube, label), label)
    caches = SyncCaches.at(bench.work / f"cache-{label}")
    bench.spans.clear()
    kube.reset_counts()
    sample, result = bench.measure(lambda: sync.run(request, kube=kube, caches=caches))
    kube.close()
    _check(result, "cold sync")
    return ColdRun(sample, stage_seconds(bench), dict(kube.calls), dict(kube.seconds))


def noop_sync(bench: Bench, files: Mapping[str, str]) -> tuple[Sample, SyncResult, CountingKube]:
    repo = bench.work / "repo-noop"
    url = init_repo(repo)
    commit(repo, {f"app/{name}": text for name, text in files.items()}, "the app")
    kube = bench.client()
    request = _request(bench, url, "app", bench.namespace(kube, "noop"), "noop")
    caches = SyncCaches.at(bench.work / "cache-noop")
    _check(sync.run(request, kube=kube, caches=caches), "first sync of the no-op app")
    sha = commit(repo, {"elsewhere/README.md": "a change outside the app\n"}, "unrelated")
    kube.reset_counts()
    sample, result = bench.measure(lambda: sync.run(request, kube=kube, caches=caches))
    _check(result, "no-op sync")
    if result.revision != sha:
        raise RuntimeError(f"the no-op sync ran at {result.revision}, not the new commit {sha}")
    return sample, result, kube


def profile_cold_sync(bench: Bench, files: Mapping[str, str], out: Path) -> None:
    """One more cold sync under cProfile in every thread; write the top entries to `out`."""
    profiler = ThreadProfiler()
    with profiler:
        cold_sync(bench, files, label="profile")
    text = io.StringIO()
    stats = pstats.Stats(*profiler.profiles, stream=text)
    stats.sort_stats("tottime").print_stats(40)
    stats.sort_stats("cumulative").print_stats(60)
    out.write_text(text.getvalue())
    stats.dump_stats(str(out.with_suffix(".prof")))


class ThreadProfiler:
    """cProfile in the calling thread and in every thread started while it is active."""

    def __init__(self) -> None:
        self.profiles: list[cProfile.Profile] = []

    def __enter__(self) -> ThreadProfiler:
        threading.setprofile(self._start_in_new_thread)
        self._start()
        return self

    def __exit__(self, *exc: object) -> None:
        threading.setprofile(None)
        self.profiles[0].disable()

    def _start(self) -> None:
        profile = cProfile.Profile()
        self.profiles.append(profile)
        profile.enable()

    def _start_in_new_thread(self, frame: FrameType, event: str, arg: object) -> None:
        sys.setprofile(None)
        self._start()


# -- the run ------------------------------------------------------------------------------------


def run(args: argparse.Namespace, entry: dict[str, Any], work: Path) -> dict[str, Any]:
    spans = _install_tracing()
    bench = Bench(entry, work, spans, server_processes(entry["server"]))
    kubectl = ensure_binaries(announce=True)["kubectl"]
    objects = configmaps(args.objects)
    folder = work / "manifests"
    folder.mkdir()
    for name, text in as_yaml(objects).items():
        (folder / name).write_text(text)
    load_before = os.getloadavg()[0]
    try:
        figures, rounds = _phases(bench, args, kubectl, folder)
        if args.profile:
            profile_cold_sync(bench, as_yaml(objects), args.out / "cold-sync-profile.txt")
    finally:
        _clean_up(bench)
    return {
        "machine": machine(bench),
        "parameters": _parameters(args, entry, kubectl, bench)
        | {"load_average_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)]},
        "figures": {k: {"value": round(f.value, 4), "unit": f.unit} for k, f in figures.items()},
        "rounds": rounds,
    }


def _phases(
    bench: Bench, args: argparse.Namespace, kubectl: Path, folder: Path
) -> tuple[dict[str, Figure], dict[str, list[float]]]:
    """Every phase `args.rounds` times, interleaved; figures from each phase's median round."""
    n, files = args.objects, as_yaml(configmaps(args.objects))
    raw_apply(bench, configmaps(WARM_UP_OBJECTS), label="warm-up", validate=True)
    _run([*_kubectl(bench, kubectl), "get", "configmaps", "-n", "default"])
    samples: dict[str, list[Sample]] = defaultdict(list)
    colds: list[ColdRun] = []
    for r in range(args.rounds):
        samples["raw_apply"].append(raw_apply(bench, configmaps(n), label=f"raw-{r}"))
        validated = raw_apply(bench, configmaps(n), label=f"validated-{r}", validate=True)
        samples["raw_validated"].append(validated)
        for phase, validate in (("kubectl", True), ("kubectl_novalidate", False)):
            label = f"{phase.replace('_', '-')}-{r}"
            samples[phase].append(
                kubectl_apply(bench, kubectl, folder, label=label, validate=validate)
            )
        colds.append(cold_sync(bench, files, label=f"cold-{r}"))
        samples["cold_sync"].append(colds[-1].sample)
    figures: dict[str, Figure] = {}
    for phase, runs in samples.items():
        figures |= throughput(phase, n, _median(runs))
    figures |= _ratios(figures) | _cold_details(_median_cold(colds))
    figures |= _noop_figures(*noop_sync(bench, as_yaml(configmaps(args.noop_objects))))
    spread = {phase: [round(n / s.seconds, 1) for s in runs] for phase, runs in samples.items()}
    return figures, spread


def _median(samples: list[Sample]) -> Sample:
    return sorted(samples, key=lambda s: s.seconds)[len(samples) // 2]


def _median_cold(colds: list[ColdRun]) -> ColdRun:
    return sorted(colds, key=lambda c: c.sample.seconds)[len(colds) // 2]


def throughput(phase: str, count: int, sample: Sample) -> dict[str, Figure]:
    per_1k = 1000 / count
    figures = {
        f"{phase}_objects_per_s": Figure(count / sample.seconds, "objects/s"),
        f"{phase}_seconds": Figure(sample.seconds, "s"),
        f"{phase}_client_cpu_s_per_1k": Figure(sample.client_cpu * per_1k, "CPU-s per 1k objects"),
    }
    if sample.server_cpu is not None:
        unit = "CPU-s per 1k objects (kube-apiserver + etcd)"
        figures[f"{phase}_server_cpu_s_per_1k"] = Figure(sample.server_cpu * per_1k, unit)
    return figures


def _ratios(figures: dict[str, Figure]) -> dict[str, Figure]:
    """The cold sync against each reference, and the raw limit against kubectl."""
    pairs = {
        "cold_sync_vs_kubectl": ("cold_sync", "kubectl", 1, "x"),
        "cold_sync_vs_kubectl_novalidate": ("cold_sync", "kubectl_novalidate", 1, "x"),
        "cold_sync_vs_raw": ("cold_sync", "raw_apply", 100, "%"),
        "cold_sync_vs_raw_validated": ("cold_sync", "raw_validated", 100, "%"),
        "raw_apply_vs_kubectl": ("raw_apply", "kubectl", 1, "x"),
    }
    return {
        name: Figure(
            scale
            * figures[f"{subject}_objects_per_s"].value
            / figures[f"{reference}_objects_per_s"].value,
            unit,
        )
        for name, (subject, reference, scale, unit) in pairs.items()
    }


def _cold_details(cold: ColdRun) -> dict[str, Figure]:
    """Where the median cold sync spent its time: stages, and requests by verb."""
    out = {f"cold_sync_stage_{k}_seconds": Figure(v, "s") for k, v in cold.stages.items()}
    out |= _request_figures("cold_sync", cold.calls)
    for label, slug in VERBS.items():
        unit = "s, summed over threads"
        out[f"cold_sync_request_seconds_{slug}"] = Figure(cold.latency.get(label, 0.0), unit)
    return out


def _noop_figures(sample: Sample, result: SyncResult, kube: CountingKube) -> dict[str, Figure]:
    figures = {
        "noop_seconds": Figure(sample.seconds, "s"),
        "noop_writes": Figure(result.writes, "writes (SyncResult.writes)"),
        "noop_renders": Figure(1 if result.rendered else 0, "renders"),
    }
    figures |= _request_figures("noop", kube.calls)
    kube.close()
    return figures


def _request_figures(phase: str, calls: Mapping[str, int]) -> dict[str, Figure]:
    figures = {
        f"{phase}_requests_{s}": Figure(calls.get(v, 0), "requests") for v, s in VERBS.items()
    }
    figures[f"{phase}_requests_total"] = Figure(sum(calls.values()), "requests")
    return figures


def stage_seconds(bench: Bench) -> dict[str, float]:
    """Seconds per stage of the last sync, from its spans; `other` is the rest of the root."""
    spans = {s.name: s for s in bench.spans.get_finished_spans()}
    seconds = {stage: _duration(spans.get(f"gitfleet.{stage}")) for stage in STAGES}
    seconds["other"] = _duration(spans.get("gitfleet.sync")) - sum(seconds.values())
    return seconds


def targets(figures: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, str, bool]]:
    """(target, measured, met) for each target of issue 3 and the brief."""

    def value(name: str) -> float:
        return float(figures[name]["value"])

    writes = ("apply", "post", "put", "delete")
    noop_writes = value("noop_writes") + sum(value(f"noop_requests_{s}") for s in writes)
    kubectl, raw, renders = (
        value(n) for n in ("cold_sync_vs_kubectl", "cold_sync_vs_raw", "noop_renders")
    )
    return [
        ("cold sync >= 3x kubectl apply --server-side", f"{kubectl:.2f}x", kubectl >= 3),
        ("cold sync >= 60% of the raw SSA limit", f"{raw:.1f}%", raw >= 60),
        ("no-op sync makes no write", f"{noop_writes:.0f} writes", noop_writes == 0),
        ("no-op sync performs no render", f"{renders:.0f} renders", renders == 0),
    ]


# -- environment --------------------------------------------------------------------------------


def machine(bench: Bench) -> dict[str, Any]:
    kube = KubeClient.from_kubeconfig(Path(bench.entry["kubeconfig"]))
    version = kube.request("GET", "/version")
    kube.close()
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {
        "cores": os.cpu_count(),
        "memory_gib": round(memory / 2**30, 1),
        "python": platform.python_version(),
        "kubernetes": str(version.get("gitVersion", "unknown")),
    }


def server_processes(server: str) -> list[int]:
    """Pids of the cluster's kube-apiserver and of its etcd, found by their command lines."""
    commands = dict(_command_lines())
    port = f"--secure-port={urlparse(server).port}"
    api = [p for p, argv in commands.items() if _is("kube-apiserver", argv) and port in argv]
    if not api:
        return []
    etcd_urls = [a.split("=", 1)[1] for a in commands[api[0]] if a.startswith("--etcd-servers=")]
    etcd_port = f":{urlparse(etcd_urls[0].split(',')[0]).port}" if etcd_urls else "?"
    listens = "--listen-client-urls="
    etcd = [
        pid
        for pid, argv in commands.items()
        if _is("etcd", argv) and any(a.startswith(listens) and etcd_port in a for a in argv)
    ]
    return api + etcd


def _command_lines() -> Iterator[tuple[int, list[str]]]:
    for proc in psutil.process_iter(["cmdline"]):
        argv = proc.info["cmdline"]  # None when it cannot be read
        if argv:
            yield proc.pid, list(argv)


def _is(program: str, argv: list[str]) -> bool:
    return bool(argv) and Path(argv[0]).name == program


def _client_cpu() -> float:
    """CPU seconds of this process and of the children it waited for (kubectl)."""
    t = psutil.Process().cpu_times()
    return t.user + t.system + t.children_user + t.children_system


def _install_tracing() -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return exporter


def _duration(span: Any) -> float:
    return 0.0 if span is None else (span.end_time - span.start_time) / 1e9


def _request(bench: Bench, url: str, path: str, namespace: str, label: str) -> SyncRequest:
    app = f"bench-{label}-{bench.suffix}"
    bench.apps.append(app)
    return SyncRequest(app=app, repo=url, path=path, namespace=namespace, timeout=900.0)


def _check(result: SyncResult, what: str) -> None:
    if result.error or not result.succeeded:
        raise RuntimeError(f"{what} failed ({result.sync_status}): {result.error}")


def _kubectl(bench: Bench, kubectl: Path) -> list[str]:
    cache = bench.work / "kubectl-cache"
    return [str(kubectl), "--kubeconfig", bench.entry["kubeconfig"], "--cache-dir", str(cache)]


def _run(command: list[str]) -> str:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:3])} ... failed: {done.stderr.strip()[-2000:]}")
    return done.stdout


def _clean_up(bench: Bench) -> None:
    kube = bench.client()
    for app in bench.apps:
        InventoryStore(kube).delete(app)
    for ns in bench.namespaces:
        kube.delete(ObjectRef("", "v1", "Namespace", "", ns))
    kube.close()


def _parameters(
    args: argparse.Namespace, entry: dict[str, Any], kubectl: Path, bench: Bench
) -> dict[str, Any]:
    version = subprocess.run([str(kubectl), "version", "--client", "-o", "json"], **_TEXT)
    return {
        "objects": args.objects,
        "noop_objects": args.noop_objects,
        "rounds": f"{args.rounds}, phases interleaved; figures from each phase's median round",
        "object": f"ConfigMap, one YAML file each, {PAYLOAD_BYTES}-byte payload",
        "raw_threads": RAW_THREADS,
        "raw_validated": "1 LIST, then a dry-run of every object, then the applies (8 threads)",
        "warm_up": f"{WARM_UP_OBJECTS} ConfigMaps applied and kubectl discovery cached first",
        "kubectl": json.loads(version.stdout)["clientVersion"]["gitVersion"],
        "cluster": entry["name"],
        "testbed": str(args.clusters_json) if args.clusters_json else "own 1-cluster testbed",
        "server_cpu": "kube-apiserver + etcd from /proc (etcd is shared by the testbed's clusters)"
        if bench.server_pids
        else "not measured: processes not found",
        "git": "file:// repository fetched in-process by dulwich into fresh caches",
        "cpu_pinning": "none",
        "tracing": "OpenTelemetry SDK, in-memory exporter (stage durations)",
    }


_TEXT: dict[str, Any] = {"capture_output": True, "text": True, "check": True}


# -- report -------------------------------------------------------------------------------------


def markdown(report: Mapping[str, Any]) -> str:
    m, p = report["machine"], report["parameters"]
    load = " -> ".join(f"{x:.2f}" for x in p["load_average_1m"])
    lines = [
        "# gitfleet engine benchmark",
        "",
        f"{m['cores']} cores, {m['memory_gib']} GiB, Python {m['python']}, Kubernetes "
        f"{m['kubernetes']}, kubectl {p['kubectl']}; {p['objects']} ConfigMaps "
        f"({p['object']}), no-op app of {p['noop_objects']}; {p['testbed']}, cluster "
        f"{p['cluster']}; CPU pinning: {p['cpu_pinning']}; rounds: {p['rounds']}; "
        f"1-minute load average {load} (the machine may be shared).",
        "",
        "| figure | value | unit |",
        "|---|---:|---|",
        *(f"| {k} | {f['value']:g} | {f['unit']} |" for k, f in report["figures"].items()),
        "",
        "## Objects/s in each round",
        "",
        "| phase | rounds |",
        "|---|---|",
        *(f"| {k} | {', '.join(f'{x:g}' for x in v)} |" for k, v in report["rounds"].items()),
        "",
        "## Targets",
        "",
        *targets_table(report["targets"]),
        "",
        f"The raw SSA limit itself is {report['figures']['raw_apply_vs_kubectl']['value']:.2f}x "
        "kubectl here: no engine that writes through this API server can beat kubectl by more.",
    ]
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def cluster_under_test(clusters_json: Path | None, work: Path) -> Iterator[dict[str, Any]]:
    """The first cluster of `clusters_json`, or a 1-cluster testbed started (and stopped) here."""
    if clusters_json is not None:
        yield json.loads(clusters_json.read_text())[0]
        return
    folder = work / "testbed"
    entries = runner.up(folder, clusters=1, nodes=1)
    try:
        yield entries[0]
    finally:
        runner.down(folder)


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="loadtest.engine_bench", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--out", type=Path, required=True, help="folder for the report files")
    parser.add_argument("--objects", type=int, default=500, help="ConfigMaps in the cold phases")
    parser.add_argument("--noop-objects", type=int, default=100, help="objects in the no-op app")
    parser.add_argument("--clusters-json", type=Path, help="use this testbed's first cluster")
    parser.add_argument("--rounds", type=int, default=3, help="repeat the cold phases")
    parser.add_argument("--profile", action="store_true", help="also profile one cold sync")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with (
        tempfile.TemporaryDirectory(prefix="gitfleet-bench-") as tmp,
        cluster_under_test(args.clusters_json, Path(tmp)) as entry,
    ):
        report = run(args, entry, Path(tmp))
    report["targets"] = [
        {"target": t, "measured": v, "met": ok} for t, v, ok in targets(report["figures"])
    ]
    (args.out / "engine-report.json").write_text(json.dumps(report, indent=2) + "\n")
    text = markdown(report)
    (args.out / "engine-report.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
