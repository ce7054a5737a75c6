"""Plain helpers the tests share (git repos, servers, polling); fixtures live in conftest."""
