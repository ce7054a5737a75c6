"""The scheduler thread never spends more than a fifth of its time ticking."""

from fleet.control.scheduler import next_pause


def test_the_scheduler_waits_its_period_or_four_times_a_slow_tick():
    assert next_pause(1.0, 0.01) == 1.0
    assert next_pause(1.0, 0.5) == 2.0
