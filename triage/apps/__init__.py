"""The surfaces: the CLI, batch, live (`run`, `--follow`), the server."""
