"""Repository content is untrusted (issue 10, item 2): what a member commits to a repository
their project allows can name files, links and references the worker must never follow, and
can cost the worker as much memory, time and network as its author likes.

Each attack is a real git repository served over real HTTP and synced through the real engine
(or the real fleet: API with a member token, a worker, the testbed). Each must end in a sync
error that names the file and the rule, with nothing applied to the cluster and nothing written
outside the render folder. The repositories are crafted with dulwich: git itself refuses to
commit most of these trees, which is exactly why a worker cannot assume it never sees one.
"""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from dulwich.objects import Blob, Commit, Tree
from dulwich.repo import Repo
from fastapi.testclient import TestClient
from pydantic import ValidationError

from api.schemas import ProjectIn
from fleet.control.policy import request_for
from fleet.control.registry.records import DEFAULT_PROJECT, AppDestination, AppRecord, AppSource
from fleet.engine import sync
from fleet.engine.caches import SyncCaches
from fleet.engine.contract import SyncRequest, SyncResult
from fleet.engine.limits import Limits
from fleet.engine.render.cache import Renderer
from fleet.engine.render.job import RenderParams, write_inside
from fleet.engine.render.manifests import yaml_documents
from fleet.engine.render.tools import child_environment
from fleet.engine.source.cache import SourceCache
from fleet.engine.source.entries import check_name, points_outside
from fleet.errors import RenderError, SourceError
from fleet.kube.client import KubeClient
from fleet.model import ObjectRef, Trigger
from tests.support import manifests as m
from tests.support.fleet import FleetEnv, wait_until
from tests.support.gitrepo import AUTHOR, GitRepo
from tests.support.gitserver import GitHttpServer

ADMIN = "gf_admin-token-for-repo-content-tests"
GIT_HOST = "127.0.0.1"
SYNC_TIMEOUT = 120
REGULAR, EXECUTABLE, SYMLINK, DIRECTORY, GITLINK = 0o100644, 0o100755, 0o120000, 0o40000, 0o160000
KIB, MIB = 1024, 1024 * 1024

KUSTOMIZATION = "resources:\n- cm.yaml\n"
CHART = "apiVersion: v2\nname: web\nversion: 1.0.0\n"


@pytest.fixture(autouse=True)
def _insecure_loopback(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tests' git server speaks plain http on 127.0.0.1, which the operator must list."""
    monkeypatch.setenv("GITFLEET_INSECURE_GIT_HOSTS", GIT_HOST)


# -- crafting trees git would refuse ----------------------------------------------------------


@dataclass(frozen=True)
class Raw:
    """One tree entry written as given: any name, any mode. `data` is the blob (a symlink's
    target for SYMLINK) or, for a GITLINK, the hex id of a commit that is not in the repo."""

    folder: str
    name: bytes
    mode: int
    data: bytes = b""


def craft(repo: GitRepo, files: Mapping[str, str | bytes], raw: Sequence[Raw] = ()) -> str:
    """Commit `files` plus the `raw` entries on `main`, building the trees by hand."""
    with Repo(str(repo.path)) as r:
        trees: dict[str, Tree] = {}

        def tree(folder: str) -> Tree:
            if folder not in trees:
                trees[folder] = Tree()
                if folder:
                    tree(folder.rpartition("/")[0])
            return trees[folder]

        def blob(data: bytes) -> bytes:
            obj = Blob.from_string(data)
            r.object_store.add_object(obj)
            return obj.id

        tree("")
        for path, content in files.items():
            folder, _, name = path.rpartition("/")
            data = content.encode() if isinstance(content, str) else content
            tree(folder).add(name.encode(), REGULAR, blob(data))
        for entry in raw:
            sha = entry.data if entry.mode == GITLINK else blob(entry.data)
            tree(entry.folder).add(entry.name, entry.mode, sha)
        for folder in sorted(trees, key=lambda f: -len(f.split("/")) if f else 1):
            r.object_store.add_object(trees[folder])
            if folder:
                parent, _, name = folder.rpartition("/")
                trees[parent].add(name.encode(), DIRECTORY, trees[folder].id)
        return _commit(r, trees[""].id)


def _commit(r: Repo, tree_id: bytes) -> str:
    commit = Commit()
    commit.tree = tree_id
    commit.author = commit.committer = AUTHOR
    commit.author_time = commit.commit_time = int(time.time())
    commit.author_timezone = commit.commit_timezone = 0
    commit.message = b"crafted\n"
    head = r.refs.as_dict().get(b"refs/heads/main")
    commit.parents = [head] if head else []
    r.object_store.add_object(commit)
    r.refs[b"refs/heads/main"] = commit.id
    return commit.id.decode()


# -- the engine, over real git HTTP ---------------------------------------------------------


@dataclass
class Engine:
    repo: GitRepo
    url: str
    kube: KubeClient
    namespace: str
    caches: SyncCaches

    def sync(self, path: str = "app", **kw: Any) -> SyncResult:
        request = SyncRequest(
            app=f"content-{self.namespace}",
            repo=self.url,
            path=path,
            namespace=self.namespace,
            timeout=60.0,
        )
        return sync.run(replace(request, **kw), kube=self.kube, caches=self.caches)

    def configmap(self, name: str) -> object:
        return self.kube.get(ObjectRef("", "v1", "ConfigMap", self.namespace, name))


@pytest.fixture
def git() -> Iterator[GitHttpServer]:
    server = GitHttpServer().start()
    yield server
    server.stop()


@pytest.fixture
def engine(
    tmp_path: Path, git: GitHttpServer, kube: KubeClient, namespace: str, helm_binary: Path
) -> Engine:
    repo = GitRepo.create(tmp_path / "repo")
    url = git.add("content", repo.path)
    return Engine(repo, url, kube, namespace, SyncCaches.at(tmp_path / "cache"))


def app_files(renderer: str) -> dict[str, str | bytes]:
    """An app whose only object is ConfigMap `settings`, rendered by `renderer`."""
    cm = m.configmap("settings")
    if renderer == "kustomize":
        return {"app/kustomization.yaml": KUSTOMIZATION, "app/cm.yaml": cm}
    if renderer == "helm":
        return {"app/Chart.yaml": CHART, "app/templates/cm.yaml": cm}
    return {"app/cm.yaml": cm}


def assert_refused(engine: Engine, result: SyncResult, stage: str, *needles: str) -> None:
    """The sync failed at `stage` with every needle in its message, and applied nothing."""
    assert (result.error_stage, result.writes) == (stage, 0), result.error
    for needle in needles:
        assert needle in result.error
    assert engine.configmap("settings") is None


# -- 1. tree entries: names, links, submodules ------------------------------------------------


@pytest.mark.parametrize("renderer", ["kustomize", "helm", "plain"])
def test_a_tree_entry_named_by_an_absolute_path_is_refused_and_nothing_is_written_there(
    engine: Engine, tmp_path: Path, renderer: str
) -> None:
    target = tmp_path / "outside" / f"pwned-{uuid.uuid4().hex[:6]}.pth"
    payload = b"import os; os.system('echo owned')\n"
    craft(engine.repo, app_files(renderer), [Raw("app", str(target).encode(), REGULAR, payload)])

    result = engine.sync()

    assert_refused(engine, result, "source", f"app: tree entry {str(target)!r}", "git refuses")
    assert not target.exists()
    assert not target.parent.exists()


@pytest.mark.parametrize(
    "name",
    [b"..", b".", b".git", b".GIT", b".Git", b"git~1", b".git.", b"a/../../escape.yaml", b""],
)
def test_tree_entries_git_refuses_are_refused(engine: Engine, name: bytes) -> None:
    craft(engine.repo, app_files("kustomize"), [Raw("app", name, REGULAR, b"k: v\n")])

    result = engine.sync()

    shown = repr(name.decode())
    assert_refused(engine, result, "source", f"app: tree entry {shown}", "git refuses")


@pytest.mark.parametrize("target", [b"/etc/passwd", b"../../../../../../etc/passwd", b"../../.."])
def test_a_symlink_pointing_outside_the_repository_is_refused(
    engine: Engine, target: bytes
) -> None:
    craft(engine.repo, app_files("helm"), [Raw("app/templates", b"leak.yaml", SYMLINK, target)])

    result = engine.sync()

    assert_refused(
        engine,
        result,
        "source",
        f"app/templates/leak.yaml: symlink to {target.decode()!r} points outside the repository",
    )


def test_a_symlink_inside_the_repository_is_left_out_as_before(engine: Engine) -> None:
    files = {**app_files("plain"), "shared/extra.yaml": m.configmap("extra")}
    craft(engine.repo, files, [Raw("app", b"extra.yaml", SYMLINK, b"../shared/extra.yaml")])

    result = engine.sync()

    assert result.error == ""
    assert engine.configmap("settings") is not None
    assert engine.configmap("extra") is None


def test_a_submodule_in_the_app_is_refused(engine: Engine) -> None:
    gitlink = Raw("app", b"vendor", GITLINK, b"1" * 40)
    craft(engine.repo, app_files("kustomize"), [gitlink])

    result = engine.sync()

    assert_refused(engine, result, "source", "app/vendor: a submodule")


def test_a_helm_values_file_given_as_an_absolute_path_is_read_from_the_repo_and_never_written_there(
    engine: Engine, tmp_path: Path
) -> None:
    target = tmp_path / "outside" / "values.yaml"
    in_repo = str(target).lstrip("/")
    engine.repo.commit({**app_files("helm"), in_repo: "color: red\n"})

    result = engine.sync(render=RenderParams(values_files=(str(target),)))

    assert result.error == ""
    assert engine.configmap("settings") is not None
    assert not target.exists()


def test_a_helm_values_file_outside_the_repository_is_refused(engine: Engine) -> None:
    engine.repo.commit(app_files("helm"))

    result = engine.sync(render=RenderParams(values_files=("../../../etc/passwd",)))

    assert_refused(
        engine, result, "render", "values file '../../../etc/passwd'", "outside the repository"
    )


# -- 2. YAML and JSON that cost more than they show -------------------------------------------


def alias_bomb(levels: int = 9) -> str:
    """The 409-byte document from the issue: 9 levels of 9 aliases, 387 million strings."""
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, levels):
        name, previous = chr(ord("a") + level), chr(ord("a") + level - 1)
        lines.append(f"{name}: &{name} [" + ",".join([f"*{previous}"] * 9) + "]")
    body = "\n".join("  " + line for line in lines)
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bomb\ndata:\n{body}\n"


def nested_yaml(depth: int) -> str:
    """A ConfigMap whose data nests `depth` maps deep, in block style."""
    levels = "".join(f"\n{'  ' * (i + 1)}k{i}:" for i in range(depth))
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: deep\ndata:{levels} leaf\n"


def nested_json(depth: int) -> str:
    deep = "[" * depth + "]" * depth
    return f'{{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {{"name": "d"}}, "x": {deep}}}'


@pytest.mark.parametrize("renderer", ["kustomize", "plain"])
def test_a_yaml_alias_bomb_is_refused_before_it_is_expanded(engine: Engine, renderer: str) -> None:
    engine.repo.commit({**app_files(renderer), "app/bomb.yaml": alias_bomb()})
    if renderer == "kustomize":
        engine.repo.commit({"app/kustomization.yaml": "resources:\n- cm.yaml\n- bomb.yaml\n"})

    result = engine.sync()

    assert_refused(
        engine, result, "render", "app/bomb.yaml", "aliases expand to more than 10000 nodes"
    )


def test_an_alias_bomb_in_a_kustomization_file_is_refused(engine: Engine) -> None:
    kustomization = KUSTOMIZATION + alias_bomb().split("data:\n", 1)[1].replace("  ", "", 1)
    engine.repo.commit({**app_files("kustomize"), "app/kustomization.yaml": kustomization})

    result = engine.sync()

    assert_refused(engine, result, "render", "app/kustomization.yaml", "aliases expand")


def test_a_document_nested_deeper_than_the_limit_is_refused(engine: Engine) -> None:
    engine.repo.commit({**app_files("plain"), "app/deep.yaml": nested_yaml(150)})

    result = engine.sync()

    assert_refused(
        engine, result, "render", "app/deep.yaml document 1", "nested deeper than 100 levels"
    )


def test_json_nested_past_pythons_recursion_limit_is_a_render_error_not_a_recursion_error(
    engine: Engine,
) -> None:
    engine.repo.commit({**app_files("plain"), "app/deep.json": nested_json(5000)})

    result = engine.sync()

    assert_refused(engine, result, "render", "app/deep.json", "nested deeper than 100 levels")


def test_a_file_over_the_size_limit_is_refused(engine: Engine) -> None:
    big = m.configmap("big", "k: " + "x" * (64 * KIB))
    engine.repo.commit({**app_files("kustomize"), "app/big.yaml": big})
    engine.repo.commit({"app/kustomization.yaml": "resources:\n- cm.yaml\n- big.yaml\n"})

    result = engine.sync(limits=Limits(max_file_bytes=32 * KIB))

    assert_refused(engine, result, "render", "app/big.yaml", "larger than 32 KiB")


def test_a_render_over_the_object_limit_is_refused(engine: Engine) -> None:
    many = "---\n".join(m.configmap(f"cm-{i}") for i in range(12))
    engine.repo.commit({**app_files("plain"), "app/many.yaml": many})

    result = engine.sync(limits=Limits(max_objects=10))

    assert_refused(engine, result, "render", "app", "more than 10 objects")


# -- 3. remote references: kustomize resources and helm dependencies ------------------------


class Listener:
    """An HTTP server on 127.0.0.1 that serves `files` and counts every connection made."""

    def __init__(self, files: Mapping[str, str]) -> None:
        self.files = dict(files)
        self.connections = 0
        listener = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def setup(self) -> None:
                listener.connections += 1
                super().setup()

            def do_GET(self) -> None:
                body = listener.files.get(self.path.lstrip("/"))
                self.send_response(200 if body is not None else 404)
                self.end_headers()
                self.wfile.write((body or "").encode())

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    found = Listener({"remote.yaml": m.configmap("remote")})
    yield found
    found.close()


def test_a_kustomize_remote_resource_is_refused_and_never_fetched(
    engine: Engine, listener: Listener
) -> None:
    remote = f"http://{listener.base}/remote.yaml"
    kustomization = f"resources:\n- cm.yaml\n- {remote}\n"
    engine.repo.commit({**app_files("kustomize"), "app/kustomization.yaml": kustomization})

    result = engine.sync()

    assert_refused(
        engine,
        result,
        "render",
        f"app/kustomization.yaml: resources entry {remote!r} is not in the repository",
        "allowRemoteRenders",
    )
    assert listener.connections == 0


@pytest.mark.parametrize(
    "ref",
    [
        "github.com/kubernetes-sigs/kustomize//examples/helloWorld?ref=v1.0.6",
        "https://github.com/team-b/infra.git//base?ref=main",
        "git@github.com:team-b/infra.git",
        "ssh://git@github.com/team-b/infra.git",
    ],
)
def test_every_spelling_of_a_remote_kustomize_base_is_refused(engine: Engine, ref: str) -> None:
    kustomization = f"resources:\n- cm.yaml\n- {ref}\n"
    engine.repo.commit({**app_files("kustomize"), "app/kustomization.yaml": kustomization})

    result = engine.sync()

    assert_refused(engine, result, "render", f"{ref!r} is not in the repository")


def test_a_folder_named_like_a_remote_base_does_not_pass_for_a_local_one(engine: Engine) -> None:
    shadow = "github.com/team-b/infra"
    files = {
        **app_files("kustomize"),
        "app/kustomization.yaml": f"resources:\n- cm.yaml\n- {shadow}\n",
        f"app/{shadow}/kustomization.yaml": "resources: []\n",
    }
    engine.repo.commit(files)

    result = engine.sync()

    assert_refused(engine, result, "render", f"resources entry {shadow!r}", "allowRemoteRenders")


def test_a_url_in_a_kustomize_file_field_is_refused_and_never_fetched(
    engine: Engine, listener: Listener
) -> None:
    remote = f"http://{listener.base}/patch.yaml"
    kustomization = f"resources:\n- cm.yaml\npatches:\n- path: {remote}\n"
    engine.repo.commit({**app_files("kustomize"), "app/kustomization.yaml": kustomization})

    result = engine.sync()

    assert_refused(engine, result, "render", f"patches entry {remote!r} is a URL")
    assert listener.connections == 0


def test_a_project_that_opts_in_renders_remote_kustomize_resources(
    engine: Engine, listener: Listener
) -> None:
    remote = f"http://{listener.base}/remote.yaml"
    kustomization = f"resources:\n- cm.yaml\n- {remote}\n"
    engine.repo.commit({**app_files("kustomize"), "app/kustomization.yaml": kustomization})

    result = engine.sync(render=RenderParams(allow_remote=True))

    assert result.error == ""
    assert engine.configmap("remote") is not None
    assert listener.connections >= 1


def test_a_helm_dependency_from_a_chart_repository_is_refused_and_never_fetched(
    engine: Engine, listener: Listener
) -> None:
    chart = (
        CHART + "dependencies:\n"
        "- {name: lib, version: 0.1.0, repository: 'file://../lib'}\n"
        f"- {{name: redis, version: 1.0.0, repository: 'oci://{listener.base}/charts'}}\n"
    )
    files = {
        **app_files("helm"),
        "app/Chart.yaml": chart,
        "lib/Chart.yaml": "apiVersion: v2\nname: lib\nversion: 0.1.0\n",
    }
    engine.repo.commit(files)

    result = engine.sync()

    assert_refused(
        engine,
        result,
        "render",
        f"app/Chart.yaml: dependency redis from 'oci://{listener.base}/charts'",
        "allowRemoteRenders",
    )
    assert listener.connections == 0


# -- 4. the render child: environment, time, memory, output -----------------------------------


def fake_kubectl(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "bin" / "kubectl"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text('#!/bin/sh\n[ "$1" = version ] && { echo fake; exit 0; }\n' + body)
    script.chmod(0o755)
    return script


@pytest.fixture
def kustomize_app(tmp_path: Path) -> tuple[SourceCache, Renderer, Any]:
    repo = GitRepo.create(tmp_path / "repo")
    repo.commit(app_files("kustomize"))
    source = SourceCache(tmp_path / "sources")
    return source, Renderer(None), source.resolve(str(repo.path))


ENV_AS_CONFIGMAP = """echo 'apiVersion: v1'
echo 'kind: ConfigMap'
echo 'metadata: {name: env}'
echo 'data:'
env | cut -d= -f1 | while read -r name; do echo "  \\"$name\\": seen"; done
"""


def test_the_render_child_gets_an_allow_listed_environment_without_the_workers_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kustomize_app: Any
) -> None:
    planted = {
        "GITFLEET_SECRET_KEY": "planted-key",
        "GITFLEET_REDIS_URL": "redis://:planted@127.0.0.1:6379/0",
        "GITFLEET_ADMIN_TOKEN": "gf_planted",
        "AWS_SECRET_ACCESS_KEY": "planted-aws",
        "KUBECONFIG": "/root/.kube/config",
    }
    for name, value in planted.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("GITFLEET_KUBECTL", str(fake_kubectl(tmp_path, ENV_AS_CONFIGMAP)))
    source, renderer, resolved = kustomize_app

    result = renderer.render(source, resolved, "app", RenderParams())

    seen = set(result.objects[0]["data"])
    assert seen.isdisjoint(planted)
    assert {"PATH", "HOME", "TMPDIR"} <= seen
    assert seen <= {*child_environment(Path("/tmp")), "PWD", "SHLVL", "_"}
    assert child_environment(Path("/tmp")).keys().isdisjoint(planted)


def namespaces_allowed() -> bool:
    """Whether this kernel lets an unprivileged process have its own network namespace."""
    done = subprocess.run(["unshare", "--user", "--net", "true"], capture_output=True, check=False)
    return done.returncode == 0


def test_a_render_runs_off_the_network_unless_the_project_opts_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kustomize_app: Any, listener: Listener
) -> None:
    host, port = listener.base.split(":")
    connect = f"import socket; socket.create_connection(('{host}', {port}), timeout=2).close()"
    body = f'{sys.executable} -c "{connect}" || exit 3\n' + ENV_AS_CONFIGMAP
    monkeypatch.setenv("GITFLEET_KUBECTL", str(fake_kubectl(tmp_path, body)))
    source, renderer, resolved = kustomize_app

    if namespaces_allowed():
        with pytest.raises(
            RenderError, match=r"(?s)^kustomize build of app failed: .*Network is unreachable"
        ):
            renderer.render(source, resolved, "app", RenderParams())
        assert listener.connections == 0
    else:  # the documented fallback: the tool runs on the network, the reference checks guard
        renderer.render(source, resolved, "app", RenderParams())
        assert listener.connections == 1
        listener.connections = 0
    renderer.render(source, resolved, "app", RenderParams(allow_remote=True))
    assert listener.connections == 1


def test_a_render_that_runs_too_long_is_killed_with_its_children(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kustomize_app: Any
) -> None:
    pids = tmp_path / "pids"
    body = f"sleep 60 &\necho $! > {pids}\nwait\n"
    monkeypatch.setenv("GITFLEET_KUBECTL", str(fake_kubectl(tmp_path, body)))
    source, renderer, resolved = kustomize_app

    with pytest.raises(RenderError) as caught:
        renderer.render(source, resolved, "app", RenderParams(), limits=Limits(render_timeout_s=1))

    assert str(caught.value).startswith("kustomize build of app timed out after 1s")
    assert "renderTimeoutS" in str(caught.value)
    sleeper = int(pids.read_text())
    wait_until(lambda: not is_running(sleeper), timeout=10, what="the tool's child to die")


def is_running(pid: int) -> bool:
    """Whether `pid` runs (a killed child nobody reaped yet is a zombie, state Z)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_a_render_whose_output_is_over_the_limit_is_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kustomize_app: Any
) -> None:
    body = "yes 'data: xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'\n"
    monkeypatch.setenv("GITFLEET_KUBECTL", str(fake_kubectl(tmp_path, body)))
    source, renderer, resolved = kustomize_app

    with pytest.raises(RenderError) as caught:
        limits = Limits(max_render_bytes=MIB)
        renderer.render(source, resolved, "app", RenderParams(), limits=limits)

    assert str(caught.value).startswith("kustomize build of app wrote more than 1 MiB")


def test_a_render_that_allocates_past_the_memory_limit_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kustomize_app: Any
) -> None:
    python = Path(sys.executable)
    body = f'exec {python} -c "b = bytearray(512 * 1024 * 1024); print(len(b))"\n'
    monkeypatch.setenv("GITFLEET_KUBECTL", str(fake_kubectl(tmp_path, body)))
    source, renderer, resolved = kustomize_app

    with pytest.raises(RenderError) as caught:
        limits = Limits(render_memory_bytes=128 * MIB)
        renderer.render(source, resolved, "app", RenderParams(), limits=limits)

    assert "MemoryError" in str(caught.value)
    assert "ran out of memory (limit 128 MiB" in str(caught.value)


# -- 5. fetching: size and time ---------------------------------------------------------------


def test_a_fetch_larger_than_the_limit_is_stopped_and_leaves_no_cache(
    tmp_path: Path, git: GitHttpServer
) -> None:
    repo = GitRepo.create(tmp_path / "repo")
    repo.commit({"app/blob.bin": os.urandom(256 * KIB), "app/cm.yaml": m.configmap("settings")})
    url = git.add("big", repo.path)
    source = SourceCache(tmp_path / "sources")

    with pytest.raises(SourceError) as caught:
        source.resolve(url, limits=Limits(max_fetch_bytes=64 * KIB))

    assert str(caught.value).startswith(f"fetch of {url} stopped: more than 64 KiB")
    assert "maxFetchBytes" in str(caught.value)
    assert not any(p.suffix == ".pack" for p in (tmp_path / "sources").rglob("*"))


def test_a_git_server_that_never_answers_is_given_up_after_the_fetch_timeout(
    tmp_path: Path,
) -> None:
    silent = socket.create_server(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{silent.getsockname()[1]}/stalled"
    source = SourceCache(tmp_path / "sources")
    try:
        started = time.monotonic()
        with pytest.raises(SourceError) as caught:
            source.resolve(url, limits=Limits(fetch_timeout_s=1))
        elapsed = time.monotonic() - started
    finally:
        silent.close()

    assert "timed out" in str(caught.value)
    assert caught.value.retryable
    assert elapsed < 30  # not the kernel's minutes-long default


# -- 6. through the fleet: a member's app, a worker, the status and history records ------------


@pytest.fixture
def api(fleet_api: Callable[..., TestClient]) -> TestClient:
    return fleet_api(ADMIN, scheduler=False)


def test_repository_content_attacks_through_the_fleet_end_as_failed_syncs_with_records(
    fleet: FleetEnv, api: TestClient, tmp_path: Path
) -> None:
    cluster = sorted(fleet.clusters)[0]
    project = {
        "name": "team-a",
        "sourceRepos": [fleet.repo_url],
        "destinations": [{"cluster": "*", "namespace": f"{fleet.prefix}-*"}],
        "limits": {"maxDepth": 50},
    }
    assert api.post("/api/v1/projects", json=project).status_code == 201
    shown = api.get("/api/v1/projects/team-a").json()
    assert (shown["limits"]["maxDepth"], shown["limits"]["maxObjects"]) == (50, 10_000)
    assert shown["allowRemoteRenders"] is False
    token = api.post("/api/v1/tokens", json={"name": "dev", "role": "member", "project": "team-a"})
    member = {"Authorization": f"Bearer {token.json()['token']}"}
    target = tmp_path / "outside" / "sitecustomize.py"
    evil, deep = fleet.app_name(0), fleet.app_name(1)
    craft(
        fleet.repo,
        {
            **{f"apps/{evil}/{k[4:]}": v for k, v in app_files("kustomize").items()},
            f"apps/{deep}/cm.yaml": m.configmap("settings"),
            f"apps/{deep}/deep.json": nested_json(5000),
        },
        [Raw(f"apps/{evil}", str(target).encode(), REGULAR, b"print('owned')\n")],
    )
    fleet.worker_thread("alpha")

    for name in (evil, deep):
        body = {
            "name": name,
            "project": "team-a",
            "source": {"repo": fleet.repo_url, "path": f"apps/{name}"},
            "destination": {"cluster": cluster, "namespace": name},
            "syncPolicy": {"createNamespace": True},
        }
        fleet.created.append((name, cluster, name))
        assert api.post("/api/v1/apps", json=body, headers=member).status_code == 201
        assert api.post(f"/api/v1/apps/{name}/sync", headers=member).status_code == 202

    for name, stage, needle in (
        (evil, "source", f"tree entry {str(target)!r}"),
        (deep, "render", f"apps/{deep}/deep.json: document nested deeper than 50 levels"),
    ):
        wait_until(
            lambda n=name: fleet.status(n, cluster).last_sync is not None,  # type: ignore[misc]
            timeout=SYNC_TIMEOUT,
            what=f"the failed sync of {name}",
        )
        last = fleet.status(name, cluster).last_sync
        assert last is not None
        assert (last.result, last.error_stage) == ("failed", stage), last.error
        assert needle in last.error
        history = api.get(f"/api/v1/apps/{name}/history", headers=member).json()
        assert needle in str(history)
        assert fleet.live(cluster, ObjectRef("", "v1", "ConfigMap", name, "settings")) is None
    assert not target.exists()


# -- 7. the pure rules, table-driven -----------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "allowed"),
    [
        (b"cm.yaml", True),
        (b".gitignore", True),
        (b"..data", True),
        (b"gitx", True),
        (b"", False),
        (b".", False),
        (b"..", False),
        (b".git", False),
        (b".GiT", False),
        (b".git ", False),
        (b"git~1", False),
        (b"a/b", False),
        (b"/etc/passwd", False),
        (b"nul\0byte", False),
    ],
)
def test_tree_entry_names_are_checked_as_git_checks_them(name: bytes, allowed: bool) -> None:
    if allowed:
        assert check_name(name, "app") == name.decode()
    else:
        with pytest.raises(SourceError, match=r"^app: tree entry .* is not a path git would"):
            check_name(name, "app")


@pytest.mark.parametrize(
    ("path", "target", "outside"),
    [
        ("app/link", "cm.yaml", False),
        ("app/link", "../shared/cm.yaml", False),
        ("app/sub/link", "../../x", False),
        ("app/link", "../../x", True),
        ("link", "..", True),
        ("app/link", "/etc/passwd", True),
        ("app/link", "a/../../../x", True),
    ],
)
def test_a_symlink_is_outside_when_it_leaves_the_repository_root(
    path: str, target: str, outside: bool
) -> None:
    assert points_outside(path, target) is outside


@pytest.mark.parametrize("path", ["/etc/cron.d/x", "../x", "a/../../x", "a//b", "./a", "a/."])
def test_the_render_folder_refuses_every_path_that_is_not_a_plain_relative_one(
    tmp_path: Path, path: str
) -> None:
    root = tmp_path / "root"
    with pytest.raises(RenderError, match="is not a relative path inside the repository"):
        write_inside(root, path, b"x")
    assert not (tmp_path / "x").exists()


def test_the_render_folder_never_writes_through_a_symlink(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "sub").symlink_to(outside)
    (root / "file.yaml").symlink_to(outside / "target.yaml")

    with pytest.raises(RenderError, match="resolves outside the render folder"):
        write_inside(root, "sub/cm.yaml", b"x")
    with pytest.raises(RenderError, match="resolves outside the render folder"):
        write_inside(root, "file.yaml", b"x")
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize(
    ("text", "limits", "error"),
    [
        ("a: &a [1, 2]\nb: *a\nc: *a\n", Limits(max_alias_nodes=6), ""),
        ("a: &a [1, 2]\nb: *a\nc: *a\n", Limits(max_alias_nodes=5), "expand to more than 5"),
        ("x: &s hello\ny: *s\nz: *s\n", Limits(max_alias_nodes=0), ""),
        ("a: &a {x: {y: 1}}\nb: {c: *a}\n", Limits(max_depth=4), ""),
        ("a: &a {x: {y: 1}}\nb: {c: *a}\n", Limits(max_depth=3), "nested deeper than 3 levels"),
        ("a: &a [*a]\n", Limits(), "a YAML alias refers to a node that contains it"),
        ("base: &b {k: v}\nmerged:\n  <<: *b\n  j: w\n", Limits(), ""),
        ("verbs: ['*']\nx: {y: {z: 1}}\n", Limits(max_depth=2), "nested deeper than 2 levels"),
    ],
)
def test_yaml_is_measured_before_it_is_built(text: str, limits: Limits, error: str) -> None:
    if not error:
        assert yaml_documents("f.yaml", text.encode(), limits)
    else:
        with pytest.raises(RenderError, match=f"^f.yaml document 1: .*{error}"):
            yaml_documents("f.yaml", text.encode(), limits)


def test_a_projects_limits_and_remote_opt_in_travel_from_the_api_to_the_engine_request() -> None:
    body = {
        "name": "team-a",
        "allowRemoteRenders": True,
        "limits": {"maxObjects": 50, "renderTimeoutS": 5},
    }
    project = ProjectIn.model_validate(body).record()
    app = AppRecord(
        name="web",
        project="team-a",
        source=AppSource(repo="https://git.example.com/team-a/web"),
        destination=AppDestination(namespace="web", cluster="east"),
    )

    request = request_for(app, project, "east", trigger=Trigger.MANUAL)

    assert request.render.allow_remote is True
    assert request.limits == Limits(max_objects=50, render_timeout_s=5)
    assert ProjectIn.of(project).limits.max_file_bytes == Limits().max_file_bytes
    assert request_for(app, DEFAULT_PROJECT, "east", trigger=Trigger.MANUAL).limits == Limits()
    assert DEFAULT_PROJECT.allow_remote_renders is False


@pytest.mark.parametrize(
    "limits",
    [
        {"maxDepth": 500},
        {"maxObjects": 0},
        {"renderTimeoutS": -1},
        {"fetchTimeoutS": 1e300},
        {"renderMemoryBytes": 2**64},
        {"maxFileByte": 1},
    ],
)
def test_limits_a_project_cannot_hold_are_refused_by_the_api(limits: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        ProjectIn.model_validate({"name": "team-a", "limits": limits})
