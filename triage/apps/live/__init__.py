"""Live surfaces: `run -- CMD` and `--follow`, and the feed they share."""
