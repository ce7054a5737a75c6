"""Stage 4, diff: pure comparison of what we declare against what is live.

The cluster half of the stage (reading live objects, ownership, the confirming dry-run) is
`fleet.engine.apply.diff_live`.

- `compare`: the comparison and its ignore rules.
- `managed_fields`: which paths of a live object each field manager owns.

Pure: no `fleet.kube`, no urllib3.
"""
