"""The cluster edge: the library's only package that speaks HTTP to a Kubernetes API server.

- `client`: `Kube`, requests to one API server (discovery, get, list, apply, delete).
- `watch`: list then stream one kind, keeping a compact cache of what it saw.
- `kubeconfig`: read a kubeconfig into the connection settings of one cluster.
- `incluster`: the cluster a pod runs in, as its ServiceAccount (the `in-cluster` destination).
- `_transport`: the private half both share: auth (and impersonation) headers, TLS and the
  urllib3 pool.

It may import `fleet.errors`, `fleet.model`, `fleet.telemetry` and urllib3; nothing of
`fleet.engine` or `fleet.control`. Only this package imports urllib3.
"""
