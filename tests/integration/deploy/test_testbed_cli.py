"""`gitfleet testbed up|status|down` as a user runs them, and its errors."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from deploy.testbed.build import BuildError, GoModule, go_binary, module_key
from deploy.testbed.errors import StartError
from deploy.testbed.process import Proc, start, wait_for

GITFLEET = [sys.executable, "-m", "cli.main"]
GO_MOD = "module gitfleet.invalid/kwok\n\ngo 1.26\n\nrequire sigs.k8s.io/kwok v0.8.0\n"
GO_SUM = "sigs.k8s.io/kwok v0.8.0 h1:pinned=\n"
PINNED_KEY = "900e9e7b0659a799"  # sha256 of go.mod, go.sum, ldflags and Go version, cut to 16


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*GITFLEET, *args], capture_output=True, text=True, timeout=300)


def pids_of(folder: Path) -> list[Proc]:
    state = json.loads((folder / "testbed.json").read_text())
    return [Proc(**p) for p in state["procs"]]


def test_up_status_down_round_trip_leaves_no_process(
    testbed_binaries: dict[str, Path], tmp_path: Path
):
    folder = tmp_path / "tb"
    up = run("testbed", "up", "--clusters", "1", "--nodes", "1", "--dir", str(folder))
    assert up.returncode == 0, up.stderr
    assert up.stdout.startswith("cluster-1  https://127.0.0.1:")
    clusters = json.loads((folder / "clusters.json").read_text())
    assert [c["name"] for c in clusters] == ["cluster-1"]
    assert Path(clusters[0]["kubeconfig"]).is_file()
    procs = pids_of(folder)
    assert {p.component for p in procs} == {
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
        "kwok",
    }
    status = run("testbed", "status", "--dir", str(folder))
    assert "cluster-1" in status.stdout and "ready" in status.stdout
    assert "kube-apiserver=running" in status.stdout
    down = run("testbed", "down", "--dir", str(folder))
    assert down.returncode == 0
    assert not any(p.is_running() for p in procs)
    assert "no testbed recorded" in run("testbed", "status", "--dir", str(folder)).stdout


def test_up_refuses_a_port_in_use_with_a_clear_message(
    testbed_binaries: dict[str, Path], tmp_path: Path
):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = run(
            "testbed",
            "up",
            "--clusters",
            "1",
            "--dir",
            str(tmp_path / "tb"),
            "--base-port",
            str(port),
        )
    assert result.returncode == 2
    assert f"port {port} on 127.0.0.1" in result.stderr and "in use" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_component_that_exits_during_start_is_reported_with_its_log(tmp_path: Path):
    proc = start(
        "c1",
        "fake-apiserver",
        ["sh", "-c", "echo bind: address in use; exit 3"],
        tmp_path / "fake.log",
    )
    with pytest.raises(StartError) as err:
        wait_for(lambda: False, what="readiness", watched=[proc], timeout=30)
    assert "fake-apiserver of c1 exited during start" in str(err.value)
    assert "bind: address in use" in str(err.value)


def test_no_go_toolchain_is_a_clear_build_error(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(BuildError) as err:
        go_binary()
    assert "no Go toolchain found" in str(err.value)


def test_the_build_cache_key_changes_only_when_a_pin_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    module = GoModule("kwok", ("sigs.k8s.io/kwok/cmd/kwok",))
    copy = tmp_path / module.name
    copy.mkdir()
    (copy / "go.mod").write_text(GO_MOD)
    (copy / "go.sum").write_text(GO_SUM)
    monkeypatch.setattr(GoModule, "folder", property(lambda self: copy))
    first = module_key(module, "go1.26.8")
    assert first == PINNED_KEY
    assert module_key(module, "go1.26.8") == PINNED_KEY
    (copy / "go.mod").write_text(GO_MOD.replace("v0.8.0", "v0.7.0"))
    assert module_key(module, "go1.26.8") != first
    assert module_key(module, "go1.27.0") != module_key(module, "go1.26.8")
