"""Running gitfleet locally: the multi-cluster testbed, the demo, its git server and Redis.

- `testbed/`: local Kubernetes control planes built from pinned Go modules.
- `demo`: `make demo`, the whole system on one machine through its own API and CLI.
- `gitserver`: a git smart-HTTP server; `redis`: running a durable redis-server.
- `chart/` (not Python): the Helm chart for a management cluster; `manifests`: the same
  objects rendered from it for `kubectl apply` (`python -m deploy.manifests render`).

It may import `fleet`; never `api`, `worker`, `loadtest` or `cli`.
"""
