"""The RQ worker process: membership, queue consumption, jobs that call fleet.sync."""
