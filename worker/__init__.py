"""The gitfleet worker: one shard member running syncs from its own RQ queue, warm between jobs."""
