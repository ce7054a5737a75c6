"""Coordinator API, store and CLI client tests against a real Redis."""
