"""The system under test as processes, started the way `deploy.demo` starts it.

`Fleet` runs redis-server, a smart-HTTP git server (`loadtest.gitserve`: git's own
`git http-backend` by default, or the product's dulwich `deploy.gitserver`, with a request log),
the coordinator (`python -m cli.main api`) and W
workers (`python -m cli.main worker --name N`), each a process of its own with its log in the
run folder, all sharing one environment: GITFLEET_REDIS_URL, GITFLEET_ADMIN_TOKEN,
GITFLEET_SECRET_KEY, GITFLEET_WEBHOOK_SECRET, GITFLEET_TRACE_FILE, GITFLEET_CACHE_DIR and
GITFLEET_INSECURE_GIT_HOSTS (the git server is plain http on 127.0.0.1).
A worker can be restarted without tracing (no GITFLEET_TRACE_FILE, no OTLP endpoint) to
measure what tracing costs.

The benchmark talks to the coordinator over HTTP only, with the client the `gitfleet` commands
use (`api.client.CoordinatorClient`): single calls, concurrent bulk calls, and GitHub-style push
webhooks signed with the webhook secret.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import sys
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cryptography.fernet import Fernet
from redis import Redis

from api.client import CoordinatorClient
from deploy.testbed.process import Proc, free_port, start, stop, wait_for
from fleet.control.keys import Keys
from fleet.control.routing import membership
from fleet.control.routing.leases import Lease
from fleet.control.scheduler import LOCK_NAME
from loadtest.redisops import counting_client

ROOT = Path(__file__).resolve().parents[1]
PREFIX = "gitfleet"
TRACING_VARIABLES = (
    "GITFLEET_TRACE_FILE",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
)
API_TIMEOUT = 120.0  # seconds a single call may take


class BenchError(RuntimeError):
    """The benchmark could not go on: says which step failed and where its logs are."""


def environment(folder: Path) -> dict[str, str]:
    kept = ("GITFLEET_DEBUG_LOGGERS",)  # a debugging aid, changes no behaviour
    env = {
        k: v for k, v in os.environ.items() if k in kept or not k.startswith(("GITFLEET_", "OTEL_"))
    }
    env.update(
        GITFLEET_REDIS_URL=f"redis://127.0.0.1:{free_port()}/0",
        GITFLEET_ADMIN_TOKEN=secrets.token_urlsafe(24),
        GITFLEET_SECRET_KEY=Fernet.generate_key().decode(),
        GITFLEET_WEBHOOK_SECRET=secrets.token_urlsafe(16),
        GITFLEET_TRACE_FILE=str(folder / "traces.jsonl"),
        GITFLEET_CACHE_DIR=str(folder / "cache"),
        GITFLEET_INSECURE_GIT_HOSTS="127.0.0.1",  # the git server below: plain http, loopback
        PYTHONPATH=str(ROOT),
    )
    return env


def answers(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


class Fleet:
    """Redis, the git server, the API and the workers of one benchmark run."""

    def __init__(self, folder: Path, *, git_server: str = "git") -> None:
        self.folder = folder
        self.git_server = git_server  # `loadtest.gitserve` backend
        self.env = environment(folder)
        self.procs: dict[str, Proc] = {}
        self.api_port = 0
        self.git_port = 0
        url = self.env["GITFLEET_REDIS_URL"]
        # the bench's own reads (status board, idle waits, membership): each command tallied,
        # so the fleet's Redis figures leave them out (`loadtest.redisops`)
        self.redis, self.tally = counting_client(url)
        # commands the bench sends in a component's place (the scheduler's interval requests):
        # not tallied, so they count as the fleet's
        self.stand_in = Redis.from_url(url)

    @property
    def trace_file(self) -> Path:
        return Path(self.env["GITFLEET_TRACE_FILE"])

    def start(self, repos: Mapping[str, Path], workers: Sequence[str]) -> None:
        self._redis()
        self._git(repos)
        self._api()
        for name in workers:
            self.start_worker(name)
        self.wait_live(set(workers))

    def _redis(self) -> None:
        port = int(self.env["GITFLEET_REDIS_URL"].rsplit(":", 1)[1].split("/")[0])
        binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        cmd = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
        cmd += ["--appendonly", "yes", "--appendfsync", "everysec", "--dir", str(self.folder)]
        self._start("redis", cmd)
        wait_for(lambda: answers(port), what="redis", watched=[self.procs["redis"]], timeout=20)

    def _git(self, repos: Mapping[str, Path]) -> None:
        self.git_port = free_port()
        cmd = [sys.executable, "-m", "loadtest.gitserve", "--port", str(self.git_port)]
        cmd += ["--backend", self.git_server]
        cmd += [f"--repo={name}={path}" for name, path in repos.items()]
        self._start("git-server", cmd)
        watched = [self.procs["git-server"]]
        wait_for(lambda: answers(self.git_port), what="git server", watched=watched, timeout=30)

    def _api(self) -> None:
        self.api_port = free_port()
        self._start("api", [sys.executable, "-m", "cli.main", "api", "--port", str(self.api_port)])
        watched = [self.procs["api"]]
        wait_for(lambda: answers(self.api_port), what="the API", watched=watched, timeout=60)

    def _start(self, name: str, cmd: list[str], env: dict[str, str] | None = None) -> Proc:
        log = self.folder / f"{name}.log"
        proc = start("", name, cmd, log, cwd=ROOT, env=env or self.env)
        self.procs[name] = proc
        return proc

    # -- workers ------------------------------------------------------------------------------

    def start_worker(self, name: str, *, tracing: bool = True) -> Proc:
        env = dict(self.env)
        if not tracing:
            for variable in TRACING_VARIABLES:
                env.pop(variable, None)
        cmd = [sys.executable, "-m", "cli.main", "worker", "--name", name]
        return self._start(f"worker:{name}", cmd, env)

    def stop_worker(self, name: str) -> None:
        proc = self.procs.pop(f"worker:{name}")
        stop([proc], grace=60)

    def workers(self) -> dict[str, Proc]:
        return {k.split(":", 1)[1]: p for k, p in self.procs.items() if k.startswith("worker:")}

    def live(self) -> set[str]:
        return set(membership.live_workers(self.redis, prefix=PREFIX))

    def wait_live(self, names: set[str], *, timeout: float = 60) -> None:
        watched = [self.procs[f"worker:{n}"] for n in names if f"worker:{n}" in self.procs]
        what = f"workers {sorted(names)} to be live"
        wait_for(lambda: self.live() == names, what=what, watched=watched, timeout=timeout)

    def stop_workers(self) -> None:
        """Stop every worker at once (each finishes its job and deregisters)."""
        stop(list(self.workers().values()), grace=60)
        for name in list(self.workers()):
            self.procs.pop(f"worker:{name}")

    def start_workers(self, names: Sequence[str], *, tracing: bool = True) -> float:
        """Start `names` and return the time.time() at which all of them were live."""
        for name in names:
            self.start_worker(name, tracing=tracing)
        self.wait_live(set(names))
        return time.time()

    def scheduler_leads(self) -> bool:
        """Whether a coordinator's scheduler holds its lease (`fleet.control.scheduler`): then it
        requests syncs of new automated apps by itself."""
        lock = Lease(self.redis, Keys(PREFIX).scheduler_lease)
        return lock.holder(LOCK_NAME) is not None

    def render_cache_entries(self) -> int:
        """Renders the workers have stored: one file per render under each worker's cache."""
        root = Path(self.env["GITFLEET_CACHE_DIR"]) / "workers"
        return sum(1 for _ in root.glob("*/render/*/*.json"))

    # -- state --------------------------------------------------------------------------------

    def is_idle(self) -> bool:
        """No pending or deferred sync anywhere (the pending-sync registry is empty)."""
        keys = Keys(PREFIX)
        pending = int(self.redis.scard(keys.pending_index))
        deferred = int(self.redis.zcard(keys.deferred))
        return pending == 0 and deferred == 0

    def wait_idle(self, *, timeout: float) -> None:
        watched = list(self.workers().values())
        what = "every pending sync to finish"
        wait_for(self.is_idle, what=what, watched=watched, timeout=timeout)

    def stop(self) -> None:
        stop(list(self.workers().values()), grace=30)
        rest = [p for k, p in self.procs.items() if not k.startswith("worker:")]
        stop(rest, grace=10)
        self.procs.clear()
        self.redis.close()
        self.stand_in.close()

    def api(self) -> CoordinatorClient:
        server, token = f"http://127.0.0.1:{self.api_port}", self.env["GITFLEET_ADMIN_TOKEN"]
        return CoordinatorClient(server, token, timeout=API_TIMEOUT)

    def repo_url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.git_port}/{name}"

    def git_requests(self) -> Counter[str]:
        """Requests the git server has answered: `refs` (ref advertisements) and `fetch`
        (upload-pack POSTs: one per fetch with dulwich's server, two with git's, which
        negotiates in a round of its own)."""
        log = self.folder / "git-server.log"
        text = log.read_text(errors="replace") if log.exists() else ""
        counts: Counter[str] = Counter()
        for line in text.splitlines():
            if "/info/refs" in line:
                counts["refs"] += 1
            elif "POST" in line and "git-upload-pack" in line:
                counts["fetch"] += 1
        return counts


def push_event(repo_url: str, *, sha: str, before: str, paths: Sequence[str]) -> dict[str, Any]:
    """A GitHub push event to main touching `paths` in one commit."""
    name = repo_url.rstrip("/").rsplit("/", 1)[1]
    return {
        "ref": "refs/heads/main",
        "before": before,
        "after": sha,
        "repository": {
            "name": name,
            "full_name": f"bench/{name}",
            "clone_url": repo_url,
            "html_url": repo_url,
            "default_branch": "main",
        },
        "head_commit": {"id": sha, "modified": list(paths), "timestamp": _now_iso()},
        "commits": [{"id": sha, "added": [], "removed": [], "modified": list(paths)}],
    }


def _now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
