"""The FastAPI coordinator: REST API, webhooks, scheduler and shard map."""
