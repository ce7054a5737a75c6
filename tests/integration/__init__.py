"""Against real things: the testbed's clusters, a real redis-server, real git repos."""
