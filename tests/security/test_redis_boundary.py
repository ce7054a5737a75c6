"""Redis is a trust boundary (issue 10, item 8): what a worker reads from Redis is data, never code.

Whoever can write to Redis can put jobs in a worker's queue. rq stores jobs with pickle unless
told otherwise, so one planted job would run any code on a worker, which holds the credential
key. A worker must therefore read jobs as JSON, run only gitfleet's own two job functions with
the arguments they take, and shrug off a record that is not a job at all. Every process takes
Redis AUTH and TLS from GITFLEET_REDIS_URL, and the coordinator and workers refuse to start
without GITFLEET_SECRET_KEY unless `--insecure-dev` is given.

Real things throughout: workers as threads of this process (`FleetEnv`) or as `python -m
cli.main worker` processes, the coordinator as `python -m cli.main api`, real redis-servers
(the session's, one that requires a password, one that serves TLS only).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import logging
import os
import subprocess
import sys
import urllib.request
import uuid
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.fernet import Fernet
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from redis import Redis
from rq import Queue
from rq.job import Job
from rq.registry import StartedJobRegistry
from rq.serializers import JSONSerializer

from deploy.testbed.process import free_port
from fleet.control.routing import membership
from fleet.control.routing.dispatch import PREVIEW_JOB, SYNC_JOB, Dispatcher
from fleet.model import Trigger
from tests.support.fleet import FleetEnv
from tests.support.redis_server import RedisServer, TlsFiles
from tests.support.wait import eventually

pytestmark = pytest.mark.redis

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "redis-password-for-tests-7b1f"
ADMIN_TOKEN = "gf_admin-token-for-redis-tests-0123456789"


# -- planting jobs ---------------------------------------------------------------------------


class _Plant:
    """Pickles to "create `path`": what any pickle planted in Redis could do instead."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, tuple[Path]]:
        return (Path.touch, (self.path,))


@pytest.fixture
def env(registry: FleetEnv) -> FleetEnv:
    """The shared `registry` fixture (a fleet without clusters) under this file's name."""
    return registry


def _plant(env: FleetEnv, queue: str, func: str, *args: Any, **kwargs: Any) -> str:
    """Queue a job the way anyone who can write to Redis could: with rq's default (pickle)
    serializer unless `serializer=` says otherwise. Returns the job id."""
    serializer = kwargs.pop("serializer", None)
    job_id = f"planted-{uuid.uuid4().hex[:10]}"
    q = Queue(queue, connection=env.redis, serializer=serializer)
    q.enqueue_call(func, args=args, kwargs=kwargs, job_id=job_id)
    return job_id


def _status(env: FleetEnv, job_id: str) -> str:
    raw = env.redis.hget(Job.key_for(job_id), "status")
    return raw.decode() if isinstance(raw, bytes) else ""


def _serves(env: FleetEnv) -> None:
    """The worker still runs real work: a sync of an app nobody registered is skipped."""
    ref = env.dispatcher.request_sync(f"{env.prefix}-ghost", "nowhere", trigger=Trigger.MANUAL)
    answer = env.dispatcher.wait(ref, 30)
    assert answer is not None and answer["result"] == "skipped", answer


def _refusals(caplog: pytest.LogCaptureFixture, job_id: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("gitfleet.")
        and r.levelno >= logging.ERROR
        and job_id in r.getMessage()
    ]


def test_jobs_gitfleet_queues_are_plain_json(env: FleetEnv) -> None:
    membership.register(env.redis, "w-json", ttl=30, meta={}, prefix=env.prefix)
    ref = env.dispatcher.request_sync(f"{env.prefix}-shop", "eu", trigger=Trigger.MANUAL)
    raw = env.redis.hget(Job.key_for(ref.job_id), "data")
    assert isinstance(raw, bytes)
    data = json.loads(zlib.decompress(raw))
    assert data == [SYNC_JOB, None, [f"{env.prefix}-shop@eu"], {}]
    meta = env.redis.hget(Job.key_for(ref.job_id), "meta")
    assert isinstance(meta, bytes) and isinstance(json.loads(meta)["otel"], dict)


def test_a_pickled_job_planted_in_a_workers_queue_is_refused_and_never_unpickled(
    env: FleetEnv, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    marker = tmp_path / "unpickled"
    env.worker_thread("w-pickle")
    queue = env.dispatcher.queue_name("w-pickle")

    job_id = _plant(env, queue, SYNC_JOB, _Plant(marker))

    eventually(lambda: _status(env, job_id) == "failed", timeout=30, what="the job refused")
    assert not marker.exists()
    refusals = _refusals(caplog, job_id)
    assert refusals and "refused" in refusals[0] and "not JSON" in refusals[0], refusals
    _serves(env)
    assert not marker.exists()


@pytest.mark.parametrize(
    ("func", "args", "kwargs", "why"),
    [
        ("os.mkdir", ["{marker}"], {}, "not a gitfleet job"),
        (SYNC_JOB, ["{marker}", "and-more"], {}, "takes 1 argument"),
        (SYNC_JOB, [{"instance": "{marker}"}], {}, "must be strings"),
        (SYNC_JOB, [], {"instance": "{marker}"}, "keyword arguments"),
        (PREVIEW_JOB, ["ghost@nowhere", '{"trigger": "os.mkdir"}'], {}, "intent"),
    ],
    ids=["another-function", "extra-argument", "not-a-string", "keywords", "bad-intent"],
)
def test_a_json_job_that_is_not_one_of_gitfleets_own_is_refused_without_running(
    env: FleetEnv,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    func: str,
    args: list[Any],
    kwargs: dict[str, Any],
    why: str,
) -> None:
    marker = tmp_path / "made-by-a-planted-job"
    fill = json.loads(json.dumps([args, kwargs]).replace("{marker}", str(marker)))
    env.worker_thread("w-json")
    queue = env.dispatcher.queue_name("w-json")

    job_id = _plant(env, queue, func, *fill[0], serializer=JSONSerializer, **fill[1])

    eventually(lambda: _status(env, job_id) == "failed", timeout=30, what="the job refused")
    assert not marker.exists()
    refusals = _refusals(caplog, job_id)
    assert refusals and "refused" in refusals[0] and why in refusals[0], refusals
    _serves(env)


def test_a_record_that_is_not_a_job_at_all_leaves_the_worker_serving(
    env: FleetEnv, caplog: pytest.LogCaptureFixture
) -> None:
    queue = env.dispatcher.queue_name("w-garbage")
    for job_id in ("garbage-queued", "garbage-started"):
        record = {"data": b"\x80\x04not a job", "status": "nonsense", "created_at": "yesterday"}
        env.redis.hset(Job.key_for(job_id), mapping={**record, "origin": queue})
    env.redis.rpush(Queue(queue, connection=env.redis).key, "garbage-queued")
    started = StartedJobRegistry(queue, connection=env.redis).key
    env.redis.zadd(started, {"garbage-started:execution": 1})

    worker = env.worker_thread("w-garbage")  # its first registry cleanup meets the started one

    _serves(env)
    assert worker.thread.is_alive()
    for job_id in ("garbage-queued", "garbage-started"):
        messages = _refusals(caplog, job_id)
        assert messages and "not a job gitfleet wrote" in messages[0], (job_id, messages)


# -- processes: the real entry points --------------------------------------------------------


def _environment(redis_url: str, folder: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITFLEET_", "OTEL_"))}
    env.update(
        PYTHONPATH=str(ROOT),
        GITFLEET_REDIS_URL=redis_url,
        GITFLEET_ADMIN_TOKEN=ADMIN_TOKEN,
        GITFLEET_CACHE_DIR=str(folder / "cache"),
        **extra,
    )
    return env


class Started:
    """A gitfleet process started with `python -m cli.main`, stopped by `stop()`."""

    def __init__(self, args: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "cli.main", *args],
            cwd=ROOT,
            env=env,
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
        )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def exited(self, timeout: float = 60) -> int:
        return self.proc.wait(timeout=timeout)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


@pytest.fixture
def started(tmp_path: Path) -> Iterator[Any]:
    procs: list[Started] = []

    def start(args: list[str], env: dict[str, str]) -> Started:
        proc = Started(args, env, tmp_path / f"{len(procs)}-{args[0]}.log")
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        proc.stop()


def _get(url: str, token: str | None = None) -> tuple[int, dict[str, Any]]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, {}
    except OSError:
        return 0, {}


def _api_ready(api: Started, port: int) -> bool:
    if api.proc.poll() is not None:
        raise AssertionError(f"the API exited:\n{api.output()}")
    return _get(f"http://127.0.0.1:{port}/readyz")[0] == 200


def _live(redis_url: str, name: str, prefix: str, proc: Started) -> bool:
    if proc.proc.poll() is not None:
        raise AssertionError(f"the worker exited:\n{proc.output()}")
    connection = Redis.from_url(redis_url)
    try:
        return name in membership.live_workers(connection, prefix=prefix)
    finally:
        connection.close()


def _worker_args(name: str, *extra: str) -> list[str]:
    return ["worker", "--name", name, "--ttl", "5", "--no-self-heal", *extra]


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server that requires a password."""
    server = RedisServer(tmp_path_factory.mktemp("locked-redis"), password=PASSWORD)
    yield server
    server.stop()


def test_a_worker_and_the_api_work_against_redis_with_its_password_in_the_url(
    locked: RedisServer, tmp_path: Path, started: Any
) -> None:
    url, prefix = locked.url_for(password=PASSWORD, db=1), f"t{uuid.uuid4().hex[:8]}"
    key = Fernet.generate_key().decode()
    worker = started(
        _worker_args("w-auth"),
        _environment(url, tmp_path, GITFLEET_SECRET_KEY=key, GITFLEET_PREFIX=prefix),
    )
    eventually(lambda: _live(url, "w-auth", prefix, worker), timeout=60, what="worker live")
    dispatcher = Dispatcher(Redis.from_url(url), prefix=prefix)
    ref = dispatcher.request_sync("ghost", "nowhere", trigger=Trigger.MANUAL)
    answer = dispatcher.wait(ref, 30)
    assert answer is not None and answer["result"] == "skipped", answer

    port = free_port()
    api = started(
        ["api", "--port", str(port)],
        _environment(url, tmp_path, GITFLEET_SECRET_KEY=key),
    )
    eventually(lambda: _api_ready(api, port), timeout=60, what="the API ready")
    status, clusters = _get(f"http://127.0.0.1:{port}/api/v1/clusters", ADMIN_TOKEN)
    assert status == 200 and isinstance(clusters, list | dict), (status, clusters)
    assert PASSWORD not in worker.output() + api.output()


@pytest.mark.parametrize("password", [None, "not-the-password-3c9d"], ids=["none", "wrong"])
def test_without_the_redis_password_the_worker_and_the_api_refuse_to_start_saying_why(
    locked: RedisServer, tmp_path: Path, started: Any, password: str | None
) -> None:
    url = locked.url_for(password=password, db=2)
    env = _environment(url, tmp_path, GITFLEET_SECRET_KEY=Fernet.generate_key().decode())

    worker = started(_worker_args("w-locked-out"), env)
    api = started(["api", "--port", str(free_port())], env)

    for proc in (worker, api):
        assert proc.exited() == 2, proc.output()
        output = proc.output()
        assert "GITFLEET_REDIS_URL" in output and "password" in output, output
        assert "Traceback" not in output, output
        assert password is None or password not in output, output


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A redis-server that serves TLS only, with a certificate for 127.0.0.1, and a password."""
    folder = tmp_path_factory.mktemp("tls-redis")
    files = _certificates(folder)
    server = RedisServer(folder, password=PASSWORD, tls=files)
    yield server
    server.stop()


def test_a_worker_verifies_redis_tls_against_the_ca_named_in_the_url(
    tls: RedisServer, tmp_path: Path, started: Any
) -> None:
    url, prefix = tls.url_for(password=PASSWORD, db=1), f"t{uuid.uuid4().hex[:8]}"
    assert url.startswith("rediss://") and "ssl_cert_reqs=required" in url
    key = Fernet.generate_key().decode()
    worker = started(
        _worker_args("w-tls"),
        _environment(url, tmp_path, GITFLEET_SECRET_KEY=key, GITFLEET_PREFIX=prefix),
    )
    eventually(lambda: _live(url, "w-tls", prefix, worker), timeout=60, what="worker live")

    other_ca = _certificates(tmp_path / "other").ca
    untrusted = tls.url_for(password=PASSWORD, db=1, ca=other_ca)
    refused = started(
        _worker_args("w-untrusted"),
        _environment(untrusted, tmp_path, GITFLEET_SECRET_KEY=key, GITFLEET_PREFIX=prefix),
    )
    assert refused.exited() == 2, refused.output()
    assert "certificate verify failed" in refused.output(), refused.output()
    assert PASSWORD not in refused.output()


def test_the_api_and_a_worker_refuse_to_start_without_a_secret_key(
    locked: RedisServer, tmp_path: Path, started: Any
) -> None:
    url, prefix = locked.url_for(password=PASSWORD, db=3), f"t{uuid.uuid4().hex[:8]}"
    port = free_port()

    api = started(["api", "--port", str(port)], _environment(url, tmp_path))
    worker = started(_worker_args("w-keyless"), _environment(url, tmp_path, GITFLEET_PREFIX=prefix))

    for proc in (api, worker):
        assert proc.exited() == 2, proc.output()
        output = proc.output()
        assert "GITFLEET_SECRET_KEY" in output and "--insecure-dev" in output, output
        assert "Traceback" not in output, output
    connection = Redis.from_url(url)
    assert connection.keys("*") == []  # nothing written: no key kept, no worker registered
    assert _get(f"http://127.0.0.1:{port}/healthz")[0] == 0


def test_with_insecure_dev_the_api_and_a_worker_start_without_a_secret_key(
    locked: RedisServer, tmp_path: Path, started: Any
) -> None:
    url, prefix = locked.url_for(password=PASSWORD, db=4), f"t{uuid.uuid4().hex[:8]}"
    port = free_port()

    api = started(["api", "--port", str(port), "--insecure-dev"], _environment(url, tmp_path))
    worker = started(
        _worker_args("w-dev", "--insecure-dev"), _environment(url, tmp_path, GITFLEET_PREFIX=prefix)
    )

    eventually(lambda: _api_ready(api, port), timeout=60, what="the API ready")
    eventually(lambda: _live(url, "w-dev", prefix, worker), timeout=60, what="worker live")
    for proc in (api, worker):
        assert "GITFLEET_SECRET_KEY is unset" in proc.output(), proc.output()


# -- certificates ----------------------------------------------------------------------------


def _certificates(folder: Path) -> TlsFiles:
    """A CA and a server certificate it signed for 127.0.0.1, as PEM files in `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"test ca {folder.name}")])
    ca = _signed(ca_name, ca_name, ca_key.public_key(), ca_key, ca=True)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    cert = _signed(name, ca_name, key.public_key(), ca_key, ca=False)
    files = TlsFiles(
        cert=folder / "server.pem", key=folder / "server-key.pem", ca=folder / "ca.pem"
    )
    files.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files.key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return files


def _signed(
    subject: x509.Name,
    issuer: x509.Name,
    public_key: Any,
    signer: ec.EllipticCurvePrivateKey,
    *,
    ca: bool,
) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:
        address = x509.IPAddress(ipaddress.ip_address("127.0.0.1"))
        builder = builder.add_extension(x509.SubjectAlternativeName([address]), critical=False)
    return builder.sign(signer, hashes.SHA256())
