"""`vllm-triage batch --ray`: many logs, from folders or object storage, triaged on a Ray cluster.

`sources` lists and reads the logs (local paths, globs, fsspec URLs), `worker` is the Ray
Data task body (a warm Triager per worker), `store` writes the reports under `--output` and
reads back what a rerun may skip, `run` drives it all. Only `run` imports Ray, and nothing
here is imported by a plain `batch` (ray, pyarrow and fsspec come with the `ray` extra).
"""
