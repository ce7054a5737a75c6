"""Stage 3, plan: pure functions from rendered objects to an ordered sync plan.

- `prepare`: namespaces, names, ownership marks and the project's boundaries.
- `boundaries`: the project's namespaces and cluster-scoped kinds, as the rule a refusal names.
- `tracking`: the ownership marks (app, uid, project) and the per-object policies read from
  annotations.
- `hooks`: the name of each run of a hook and the identity label that finds its earlier runs.
- `references`: what one object refers to (pod templates, Ingress, RoleBindings).
- `order`: phases, waves and a dependency graph inside each wave.

Pure: no `fleet.kube`, no urllib3, no clock, no logging.
"""
