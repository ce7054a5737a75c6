"""Pure code, table-driven, with YAML fixtures under `tests/data/`: no cluster, no Redis."""
