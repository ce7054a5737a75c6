"""App sets: one app template stamped out per parameter set a generator yields (Argo CD's
ApplicationSets). `records` holds what is stored, `template` renders `{{param}}`,
`generators` yields the parameter sets (a list, the registered clusters, git directories), and
`reconcile` makes the registry's apps match them (`AppSets`, run by the coordinator's scheduler
and by the API on create and update)."""
