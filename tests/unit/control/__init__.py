"""`fleet.control`'s pure parts: keys, records, sharding, windows, policy, backoff."""
