"""Health, the gate between waves of stage 5 (apply): judge live objects, and wait until they
are healthy.

- `assess`: the pure judgement of one object, dispatching to a rule per kind.
- `rules`: one small pure function per kind, each with its reasons in its own docstring.
- `readers`: what the rules share: field readers that never raise, conditions, and the
  `HealthStatus` builders.
- `causes`: why a workload is not progressing, from the pods and events the waiting code read.
- `wait`: the polling half, the only module here that talks to a cluster (CRDs' status
  subresources, the pods and events of a stuck workload).
- `deviations`: where gitfleet's verdict departs from Argo CD's test fixtures, and why.

`assess`, `rules`, `readers` and `causes` are pure: no `fleet.kube`, no urllib3, no clock.
"""
