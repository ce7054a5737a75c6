"""The reliability tests use the shared `fleet` and `registry` fixtures of `tests/conftest.py`."""
