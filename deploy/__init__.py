"""Running gitfleet locally: the multi-cluster testbed, the demo, its git server and Redis."""
