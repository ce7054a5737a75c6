"""`loadtest.timeline`: which group a process is in, and latencies lined up with CPU seconds."""

from __future__ import annotations

from loadtest.timeline import group_of, per_second


def test_processes_are_grouped_by_their_command_line() -> None:
    assert group_of(["/venv/python", "-m", "cli.main", "api", "--port", "1"]) == "api"
    assert group_of(["/venv/python", "-m", "cli.main", "worker", "--name", "w"]) == "worker"
    assert group_of(["/usr/bin/redis-server", "*:6379"]) == "redis"
    assert group_of(["/cache/kube-apiserver", "--etcd-servers=x"]) == "kube-apiserver"
    assert group_of(["bash"]) == "other"
    assert group_of([]) == "other"


def test_each_second_gets_its_requests_and_the_cpu_row_that_covers_it() -> None:
    # the stream starts 2.3 s into the CPU timeline; a row at t covers (t - 1, t]
    cpu = [{"at_s": 3.3, "api": 0.4}, {"at_s": 4.3, "api": 0.9, "redis": 0.1}]
    latencies = [(0.1, 5.0), (0.5, 50.0), (0.9, 7.0), (1.2, 900.0)]

    rows = per_second(latencies, cpu, offset_s=2.3)

    assert rows == [
        {
            "second": 0,
            "requests": 3,
            "p99_ms": rows[0]["p99_ms"],
            "max_ms": 50.0,
            "cpu": {"api": 0.4},
        },
        {
            "second": 1,
            "requests": 1,
            "p99_ms": 900.0,
            "max_ms": 900.0,
            "cpu": {"api": 0.9, "redis": 0.1},
        },
    ]
    assert 7.0 < rows[0]["p99_ms"] <= 50.0
