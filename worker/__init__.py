"""The gitfleet worker: one shard member running syncs from its own RQ queue, warm between jobs.

- `command`, `__main__`, `settings`: starting a worker; `process`: the rq worker on its shard
  queue, with membership and self-heal; `runtime`: the warm state jobs share.
- `jobs`: the job functions (a sync, a preview); `status`: what a job writes afterwards;
  `journal`: the syncs each worker ran; `quiet`: periodic checks that cost no API call;
  `teardown`: the cascading delete of one instance.
- `selfheal`: watches of what this worker's apps manage, with `drift` (pure) deciding which
  changes are drift worth a sync.

It may import `fleet` (control, engine, kube and the shared modules), redis and rq; never
`api`, `deploy`, `loadtest` or `cli`.
"""
