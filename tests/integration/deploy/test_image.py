"""The OCI image (`deploy/image`): built reproducibly, unpacked, and run as a runtime would.

The module builds the image twice from the same inputs, the second time in an empty cache
(`deploy.image.build.verify`: Debian root filesystem, wheels installed, layers and assembly
all made again) and requires equal digests. It then unpacks the image with `umoci unpack` and
runs its entrypoint chrooted into that root filesystem, as the image's user and with the
image's environment plus what the Helm chart adds (Redis URL, credential key, admin token):
`gitfleet api` answers /readyz against a real Redis, `gitfleet worker` joins the shard
membership, the pinned helm, kubectl and sops run, and kubectl renders a kustomization through the
worker's own render launcher (chrooted, the kernel refuses it a user namespace, so the render
takes the launcher's documented fallback and stays on the network). The runtime's job of
providing /dev is done here with four device nodes; everything else comes from the image.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import tarfile
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet
from redis import Redis

from deploy.image.build import Image, Inputs, build_stages, cache_root, gather, locked, verify
from deploy.image.oci import blob, manifest_digest
from deploy.testbed.build import KUBERNETES_VERSION
from deploy.testbed.process import free_port, wait_for
from fleet.control.routing.membership import live_workers
from tests.support.redis_server import RedisServer

DEVICES = {"null": 3, "zero": 5, "random": 8, "urandom": 9}  # character devices, major 1
DB = 13  # a Redis database of its own: the image's API uses the default key prefix


@dataclass(frozen=True)
class Unpacked:
    """An unpacked image: its root filesystem and the runtime process umoci derived."""

    rootfs: Path
    process: dict[str, Any]

    @property
    def uid(self) -> int:
        return int(self.process["user"]["uid"])

    def argv(self, *args: str) -> list[str]:
        """The image's entrypoint with `args` in place of its default command."""
        config = json.loads((self.rootfs.parent / "image-config.json").read_text())
        return [*config["config"]["Entrypoint"], *args]

    def env(self, **extra: str) -> dict[str, str]:
        pairs = dict(item.split("=", 1) for item in self.process["env"])
        return {**pairs, **extra}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Inputs:
    """The build's inputs, taken once: other edits to the checkout do not reach this module."""
    return gather(tmp_path_factory.mktemp("inputs"))


@pytest.fixture(scope="module")
def builds(inputs: Inputs, tmp_path_factory: pytest.TempPathFactory) -> tuple[Image, Image]:
    return verify(tmp_path_factory.mktemp("dist"), inputs)


@pytest.fixture(scope="module")
def image(builds: tuple[Image, Image]) -> Image:
    return builds[0]


@pytest.fixture(scope="module")
def unpacked(image: Image, tmp_path_factory: pytest.TempPathFactory) -> Unpacked:
    bundle = tmp_path_factory.mktemp("bundle") / "gitfleet"
    done = subprocess.run(
        ["umoci", "unpack", "--image", f"{image.layout}:{image.tag}", str(bundle)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    manifest = json.loads(blob(image.layout, manifest_digest(image.layout)).read_text())
    config = blob(image.layout, manifest["config"]["digest"]).read_text()
    (bundle / "image-config.json").write_text(config)
    for name, minor in DEVICES.items():
        node = bundle / "rootfs/dev" / name
        os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
        node.chmod(0o666)  # mknod's mode is cut by the umask
    process = json.loads((bundle / "config.json").read_text())["process"]
    return Unpacked(bundle / "rootfs", process)


def start(
    unpacked: Unpacked, args: list[str], env: dict[str, str], log: Path
) -> subprocess.Popen[bytes]:
    """Run `args` chrooted into the image as its user, from its working folder."""
    user, cwd = unpacked.process["user"], unpacked.process["cwd"]

    def enter() -> None:
        os.chroot(unpacked.rootfs)
        os.chdir(cwd)
        os.setgroups([])
        os.setgid(int(user["gid"]))
        os.setuid(int(user["uid"]))

    with log.open("wb") as sink:
        return subprocess.Popen(
            args, env=env, stdout=sink, stderr=subprocess.STDOUT, preexec_fn=enter
        )


def run(unpacked: Unpacked, args: list[str], tmp_path: Path) -> str:
    proc = start(unpacked, args, unpacked.env(), tmp_path / "run.log")
    assert proc.wait(timeout=120) == 0, (tmp_path / "run.log").read_text()
    return (tmp_path / "run.log").read_text()


def uids(pid: int) -> set[int]:
    """The real user id of `pid` and of each of its children (tini's child is gitfleet)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    found = set()
    for each in [pid, *map(int, children)]:
        for line in Path(f"/proc/{each}/status").read_text().splitlines():
            if line.startswith("Uid:"):
                found.add(int(line.split()[1]))
    return found


@pytest.fixture
def running() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes a test started in the image: stopped with SIGTERM (then killed) after it."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def chart_env(unpacked: Unpacked, redis_server: RedisServer, **extra: str) -> dict[str, str]:
    """The environment the chart gives a pod: the image's, plus Redis and the secrets."""
    return unpacked.env(
        GITFLEET_REDIS_URL=redis_server.url_for(db=DB),
        GITFLEET_SECRET_KEY=Fernet.generate_key().decode(),
        **extra,
    )


def test_same_inputs_give_the_same_digest(builds: tuple[Image, Image]) -> None:
    first, again = builds
    assert first.digest.startswith("sha256:")
    assert again.digest == first.digest
    assert again.archive.read_bytes() == first.archive.read_bytes()


def test_unchanged_inputs_reuse_every_stage(inputs: Inputs, image: Image) -> None:
    with locked(cache_root()):
        folder, reused = build_stages(cache_root(), cache_root(), inputs)
    assert reused
    assert json.loads((folder / "image.json").read_text())["digest"] == image.digest


def test_config_runs_gitfleet_as_a_user_without_a_shell(image: Image, unpacked: Unpacked) -> None:
    config = json.loads((unpacked.rootfs.parent / "image-config.json").read_text())["config"]
    assert config["User"] == "65532:65532"
    assert config["Entrypoint"] == ["/usr/bin/tini", "--", "/usr/local/bin/gitfleet"]
    assert config["Cmd"][0] == "api"
    assert "HOME=/home/gitfleet" in config["Env"]
    for shell in ("bin/sh", "usr/bin/sh", "bin/bash", "usr/bin/bash", "usr/bin/dash"):
        assert not (unpacked.rootfs / shell).exists(), shell
    for writable in ("home/gitfleet", "var/cache/gitfleet"):
        assert (unpacked.rootfs / writable).stat().st_uid == 65532


def test_archive_is_docker_loadable(image: Image, tmp_path: Path) -> None:
    with tarfile.open(image.archive) as tar:
        names = set(tar.getnames())
        docker = json.loads(tar.extractfile("manifest.json").read())  # type: ignore[union-attr]
        tar.extractall(tmp_path / "archive", filter="data")
    assert docker[0]["RepoTags"] == [image.reference]
    assert {docker[0]["Config"], *docker[0]["Layers"]} <= names
    manifest = json.loads(blob(image.layout, manifest_digest(image.layout)).read_text())
    assert docker[0]["Config"] == f"blobs/{manifest['config']['digest'].replace(':', '/')}"
    stat_cmd = ["umoci", "stat", "--image", f"{tmp_path / 'archive'}:{image.tag}"]
    done = subprocess.run(stat_cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr  # the OCI layout inside is whole and valid


def test_helm_kubectl_and_sops_run(unpacked: Unpacked, tmp_path: Path) -> None:
    assert KUBERNETES_VERSION in run(
        unpacked, ["/usr/local/bin/kubectl", "version", "--client"], tmp_path
    )
    assert "Version:" in run(unpacked, ["/usr/local/bin/helm", "version"], tmp_path)
    assert (
        "sops"
        in run(
            unpacked, ["/usr/local/bin/sops", "--version", "--disable-version-check"], tmp_path
        ).lower()
    )


RENDER = """
import pathlib, sys, tempfile
from fleet.engine.limits import Limits
from fleet.engine.render.tools import child_environment, find_tool, run_tool
src = pathlib.Path(sys.argv[1])
env = child_environment(pathlib.Path(tempfile.mkdtemp()))
argv = [str(find_tool("kubectl")), "kustomize", str(src)]
sys.stdout.write(run_tool(argv, cwd=src, what="kustomize", limits=Limits(), env=env).decode())
"""


def test_a_render_runs_the_image_kubectl_as_a_worker_does(
    unpacked: Unpacked, tmp_path: Path
) -> None:
    app = f"tmp/app-{uuid.uuid4().hex[:8]}"
    (unpacked.rootfs / app).mkdir()
    (unpacked.rootfs / app / "kustomization.yaml").write_text(
        "resources: [cm.yaml]\nnamePrefix: x-\n"
    )
    (unpacked.rootfs / app / "cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {a: b}\n"
    )
    out = run(unpacked, ["/usr/bin/python3", "-c", RENDER, f"/{app}"], tmp_path)
    assert "name: x-settings" in out


def test_api_answers_readyz(
    unpacked: Unpacked,
    redis_server: RedisServer,
    running: list[subprocess.Popen[bytes]],
    tmp_path: Path,
) -> None:
    port = free_port()
    env = chart_env(unpacked, redis_server, GITFLEET_ADMIN_TOKEN=uuid.uuid4().hex)
    args = unpacked.argv("api", "--host", "127.0.0.1", "--port", str(port))
    proc = start(unpacked, args, env, tmp_path / "api.log")
    running.append(proc)

    def ready() -> dict[str, Any] | None:
        assert proc.poll() is None, (tmp_path / "api.log").read_text()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as answer:
                return dict(json.loads(answer.read()))
        except OSError:
            return None

    answer = wait_for(ready, what="the image's API to answer /readyz", timeout=60)
    assert answer["status"] == "ok" and answer["redis"] == "ok"
    assert uids(proc.pid) == {unpacked.uid}
    proc.send_signal(signal.SIGTERM)  # uvicorn drains, then re-raises it: 128 + 15
    assert proc.wait(timeout=40) in (0, 143), (tmp_path / "api.log").read_text()
    assert "Application shutdown complete" in (tmp_path / "api.log").read_text()


def test_worker_joins_the_shard_membership(
    unpacked: Unpacked,
    redis_server: RedisServer,
    running: list[subprocess.Popen[bytes]],
    tmp_path: Path,
) -> None:
    prefix, name = f"image-{uuid.uuid4().hex[:8]}", "worker-in-image"
    env = chart_env(unpacked, redis_server, GITFLEET_PREFIX=prefix)
    proc = start(unpacked, unpacked.argv("worker", "--name", name), env, tmp_path / "worker.log")
    running.append(proc)
    redis = Redis.from_url(redis_server.url_for(db=DB))

    def registered() -> bool:
        assert proc.poll() is None, (tmp_path / "worker.log").read_text()
        return name in live_workers(redis, prefix=prefix)

    wait_for(registered, what="the image's worker to register", timeout=60)
    assert uids(proc.pid) == {unpacked.uid}
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0, (tmp_path / "worker.log").read_text()
    assert name not in live_workers(redis, prefix=prefix)
