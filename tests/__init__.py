"""gitfleet's tests: markers `cluster`, `redis` and `bench` come from the fixtures a test uses."""
