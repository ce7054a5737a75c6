"""`fleet.kube` without an API server: the watch cache's compaction."""
