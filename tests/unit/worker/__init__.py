"""`worker`'s pure parts: what counts as drift."""
