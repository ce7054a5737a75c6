"""The fault suite of issue 12: a benchmark that injects faults into a running fleet.

- `command`: `python -m loadtest.faults --out DIR` and `gitfleet bench --preset faults`;
  `settings`: its options (standard library only: the CLI builds the parser at every start).
- `system`: the fleet as processes that can be killed, paused and restarted; `apiserver`: a
  testbed cluster's kube-apiserver stopped and started again.
- `stream`: the steady stream of commits and push webhooks; `observe`: what the clusters hold,
  and a watch for stale writes and wrong prunes; `records`: the registry's records.
- `kinds`: the fault table; `measure`: one fault measured; `stage`: what they share.

A benchmark, not a test: it reports figures. The invariants it measures have integration tests
in `tests/reliability/`.
"""
