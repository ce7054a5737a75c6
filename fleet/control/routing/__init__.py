"""Who syncs what, and one sync per instance at a time.

- `owners`: application instances (`app@cluster`) and which worker owns each.
- `sharding`: consistent hashing with bounded loads (pure).
- `membership`: live workers, by heartbeats with a TTL.
- `leases`: per-instance leases, so one sync of an instance runs at a time.
- `pending`: one pending sync per instance, into which new triggers merge.
- `dispatch`: ask the owner worker for a sync through its rq queue.
- `payloads`: what a job carries (JSON, one of gitfleet's own job functions), and how it is read.
"""
