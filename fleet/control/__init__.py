"""The fleet's state and coordination in Redis; it calls the engine, never the reverse.

- `keys`: every Redis key and queue name, built here and nowhere else.
- `connection`: the one way a process connects to Redis, from GITFLEET_REDIS_URL.
- `registry/`: clusters, projects, apps and tokens, credentials encrypted, status and history.
- `routing/`: who syncs what: owners, sharding, membership, leases, pending syncs, dispatch.
- `appsets/`: app sets: one app per element of a generator (list, clusters, git directories).
- `sourcerepos`: which repositories a project allows (globs matched per URL component).
- `windows`, `backoff`, `policy` (from a registered app to the engine's request), `pushes`
  (what a git push cannot change), `deliveries` (which secrets signed a webhook delivery, and
  whether it came before or is too old) and `scheduler` (who is due, when).

It may import `fleet.engine`, `fleet.kube`, the shared modules, redis and rq; never fastapi,
`api`, `worker` or `cli`.
"""
