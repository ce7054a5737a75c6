"""`make demo`: the whole system on one machine, driven through its own API and CLI.

Starts Redis (requiring the password GITFLEET_REDIS_URL carries), a 2-cluster testbed, a git
server holding the sample repository (`examples/demo-repo`, committed into a fresh
repository), the coordinator API and two workers (with GITFLEET_SECRET_KEY set, as in
production); onboards both clusters with labels, creates one application per sample folder,
waits until every one is Synced and Healthy, and prints the status with where traces and
metrics are. The processes keep running; `python -m deploy.demo down` (`make demo-stop`) stops
them all.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

from cryptography.fernet import Fernet

from deploy.redis import redis_command
from deploy.testbed import runner
from deploy.testbed.build import tools_dir
from deploy.testbed.process import Proc, free_port, start, stop, wait_for

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "examples" / "demo-repo"
APPS: tuple[tuple[str, str, list[str], list[str]], ...] = (  # name, path, target, flags
    ("guestbook", "guestbook", ["--cluster-selector", "demo=true"], []),
    ("settings", "settings/overlays/prod", ["--cluster", "cluster-1"], []),
    ("podinfo", "podinfo-chart", ["--cluster", "cluster-2"], []),
)


def gitfleet(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "cli.main", *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)


def must(result: subprocess.CompletedProcess[str], what: str) -> str:
    if result.returncode != 0:
        raise SystemExit(f"demo: {what} failed:\n{result.stdout}{result.stderr}")
    return result.stdout


def make_sample_repo(folder: Path) -> Path:
    from dulwich import porcelain

    repo_dir = folder / "demo-repo"
    shutil.rmtree(repo_dir, ignore_errors=True)
    shutil.copytree(SAMPLE, repo_dir)
    repo = porcelain.init(str(repo_dir))
    porcelain.add(
        repo, paths=[str(p) for p in repo_dir.rglob("*") if p.is_file() and ".git" not in p.parts]
    )
    porcelain.commit(
        repo,
        message=b"sample applications",
        author=b"demo <demo@example.com>",
        committer=b"demo <demo@example.com>",
    )
    repo.close()
    return repo_dir


def up(folder: Path) -> int:
    folder = folder.resolve()
    folder.mkdir(parents=True, exist_ok=True)
    if (folder / "demo.json").exists() and any(p.is_running() for p in _load(folder)):
        raise SystemExit(f"demo already runs; `make demo-stop` first ({folder})")
    procs: list[Proc] = []
    env = _environment(folder)
    try:
        clusters = runner.up(folder / "testbed", clusters=2, nodes=2)
        procs.append(_redis(folder, env))
        procs.append(_git_server(folder, env))
        procs.append(_api(folder, env))
        procs += [_worker(folder, env, name) for name in ("worker-1", "worker-2")]
        _save(folder, procs, env)
        _onboard(clusters, env)
        _create_apps(env)
        _wait(env)
    except BaseException:
        _save(folder, procs, env)
        down(folder)
        raise
    _report(folder, env)
    return 0


def _environment(folder: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITFLEET_")}
    env.update(
        GITFLEET_REDIS_URL=f"redis://:{secrets.token_urlsafe(24)}@127.0.0.1:{free_port()}/0",
        GITFLEET_ADMIN_TOKEN=secrets.token_urlsafe(24),
        GITFLEET_SECRET_KEY=Fernet.generate_key().decode(),
        GITFLEET_WEBHOOK_SECRET=secrets.token_urlsafe(16),
        GITFLEET_SERVER=f"http://127.0.0.1:{free_port()}",
        GITFLEET_TRACE_FILE=str(folder / "traces.jsonl"),
        GITFLEET_CACHE_DIR=str(folder / "cache"),
        GITFLEET_TOOLS_DIR=str(tools_dir()),
        GITFLEET_INSECURE_GIT_HOSTS="127.0.0.1",  # the demo's git server: plain http, loopback
        GITFLEET_NOTIFY_ALLOW_HOSTS="127.0.0.1",  # a notification receiver on this machine
        PYTHONPATH=str(ROOT),
    )
    env["GITFLEET_TOKEN"] = env["GITFLEET_ADMIN_TOKEN"]
    return env


def _redis(folder: Path, env: dict[str, str]) -> Proc:
    url = urlsplit(env["GITFLEET_REDIS_URL"])  # Redis requires the password the URL carries
    port = str(url.port)
    data = folder / "redis"  # append-only, as in production: a Redis restart keeps the fleet
    shutil.rmtree(data, ignore_errors=True)  # a new demo: new clusters, keys and tokens
    data.mkdir()
    cmd = redis_command(int(port), data, password=url.password)
    proc = start("", "redis", cmd, folder / "redis.log")
    wait_for(lambda: _answers(f"127.0.0.1:{port}"), what="redis", watched=[proc], timeout=20)
    return proc


def _answers(address: str) -> bool:
    import socket

    host, port = address.split(":")
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex((host, int(port))) == 0


def _git_server(folder: Path, env: dict[str, str]) -> Proc:
    repo = make_sample_repo(folder)
    port = free_port()
    cmd = [
        sys.executable,
        "-m",
        "deploy.gitserver",
        "--port",
        str(port),
        "--repo",
        f"demo.git={repo}",
    ]
    proc = start("", "git-server", cmd, folder / "git-server.log", env=env)
    env["DEMO_REPO_URL"] = f"http://127.0.0.1:{port}/demo.git"
    wait_for(lambda: _answers(f"127.0.0.1:{port}"), what="git server", watched=[proc], timeout=20)
    return proc


def _api(folder: Path, env: dict[str, str]) -> Proc:
    port = env["GITFLEET_SERVER"].rsplit(":", 1)[1]
    cmd = [sys.executable, "-m", "cli.main", "api", "--port", port]
    proc = start("", "api", cmd, folder / "api.log", env=env)
    wait_for(lambda: _answers(f"127.0.0.1:{port}"), what="the API", watched=[proc], timeout=60)
    return proc


def _worker(folder: Path, env: dict[str, str], name: str) -> Proc:
    cmd = [sys.executable, "-m", "cli.main", "worker", "--name", name]
    return start("", name, cmd, folder / f"{name}.log", env=env)


def _onboard(clusters: list[dict[str, str]], env: dict[str, str]) -> None:
    for c in clusters:
        must(
            gitfleet(
                "cluster",
                "add",
                c["name"],
                "--kubeconfig",
                c["kubeconfig"],
                "--label",
                "demo=true",
                env=env,
            ),
            f"cluster add {c['name']}",
        )


def _create_apps(env: dict[str, str]) -> None:
    for name, path, target, extra in APPS:
        args = [
            "app",
            "create",
            name,
            "--repo",
            env["DEMO_REPO_URL"],
            "--path",
            path,
            *target,
            "--namespace",
            f"demo-{name}",
            "--auto-sync",
            "--prune",
            "--self-heal",
            "--create-namespace",
            *extra,
        ]
        must(gitfleet(*args, env=env), f"app create {name}")


def _wait(env: dict[str, str]) -> None:
    for name, *_ in APPS:
        must(gitfleet("app", "wait", name, "--timeout", "5m", env=env), f"waiting for {name}")


def _report(folder: Path, env: dict[str, str]) -> None:
    print(must(gitfleet("app", "list", env=env), "app list"))
    server = env["GITFLEET_SERVER"]
    print(f"API and OpenAPI docs: {server}/docs   (token: {folder / 'env'}: GITFLEET_TOKEN)")
    print(f"Web UI:               {server}/ui/   (sign in with the same token)")
    print(f"Prometheus metrics:   {server}/metrics")
    print(f"Traces (JSON lines):  {env['GITFLEET_TRACE_FILE']}")
    print(f"Clusters:             {folder / 'testbed' / 'clusters.json'}")
    print(f"Try: source {folder / 'env'} && gitfleet app get guestbook")
    print("Stop everything with: make demo-stop")


def _save(folder: Path, procs: list[Proc], env: dict[str, str]) -> None:
    (folder / "demo.json").write_text(json.dumps([p.to_json() for p in procs], indent=2))
    keep = {k: v for k, v in env.items() if k.startswith("GITFLEET_")}
    (folder / "env").write_text("".join(f"export {k}={v}\n" for k, v in sorted(keep.items())))
    (folder / "env").chmod(0o600)


def _load(folder: Path) -> list[Proc]:
    path = folder / "demo.json"
    return [Proc(**p) for p in json.loads(path.read_text())] if path.exists() else []


def down(folder: Path) -> int:
    folder = folder.resolve()
    procs = _load(folder)
    workers = [p for p in procs if p.component.startswith("worker")]
    stop(workers, grace=20)
    stop([p for p in procs if p not in workers], grace=10)
    runner.down(folder / "testbed")
    (folder / "demo.json").unlink(missing_ok=True)
    print(f"demo in {folder} stopped")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("verb", choices=("up", "down"))
    parser.add_argument("--dir", type=Path, default=ROOT / ".demo")
    args = parser.parse_args(argv)
    started = time.monotonic()
    code = up(args.dir) if args.verb == "up" else down(args.dir)
    if args.verb == "up":
        print(f"demo ready in {time.monotonic() - started:.0f}s")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
