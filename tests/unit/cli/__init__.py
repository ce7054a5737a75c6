"""The `cli` package's pure parts: options, output, the health command."""
