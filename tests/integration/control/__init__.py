"""`fleet.control` against real things: dispatch, leases, membership and the scheduler on a real
Redis; the requests `policy` builds, synced to the testbed."""
