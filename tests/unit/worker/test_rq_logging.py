"""rq's own log level in a worker: its per-job INFO lines are hidden, its warnings never."""

import pytest

from worker.process import rq_logging_level


@pytest.mark.parametrize(
    ("worker", "rq"),
    [
        ("INFO", "WARNING"),
        ("info", "WARNING"),
        ("20", "WARNING"),
        ("WARNING", "WARNING"),
        ("ERROR", "ERROR"),
        ("CRITICAL", "CRITICAL"),
        ("DEBUG", "DEBUG"),
        ("10", "DEBUG"),
        ("5", "DEBUG"),
        ("NOTSET", "DEBUG"),
        ("WARN", "WARNING"),
        ("35", "ERROR"),
        ("45", "CRITICAL"),
        ("60", "CRITICAL"),
    ],
)
def test_rq_logs_its_per_job_lines_only_when_the_worker_debugs(worker: str, rq: str) -> None:
    assert rq_logging_level(worker) == rq
