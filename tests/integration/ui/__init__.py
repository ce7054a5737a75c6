"""The web UI in a real headless Chromium against a real coordinator, workers and testbed."""
