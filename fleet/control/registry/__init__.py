"""The registry: what the coordinator knows, stored in Redis.

- `records`: clusters, projects, apps and tokens as frozen records.
- `store`: reading and writing them, with credentials encrypted by `secrets`.
- `tokens`: API tokens, kept only as digests.
- `status`: per-instance status, sync history and the counters /metrics reads.

The registry never imports `fleet.control.routing`: who syncs what sits above what is stored.
"""
