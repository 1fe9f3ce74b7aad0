"""`vllm-triage serve`: the chat-ops backend, an HTTP API over the same `pipeline.run` as the CLI.

One module per job: `limits` (the configuration and the error type), `requests` (reading and
checking what a client sent), `slack_command` (Slack's signing and the slash command's answer),
`job` (the pipeline and the renderer, run in a worker), `workers` (the worker processes),
`service` (slots, deadlines, hang-ups), `protocol` (connection-level guards under uvicorn),
`openapi` and `page` (what the API says about itself, the paste page), `app` (the routes)
and `serve_cli` (the CLI). FastAPI and uvicorn are an optional extra, imported only by `app`,
`protocol` and when the server starts: importing this package does not import them.
"""

from triage.apps.serve.serve_cli import serve_command

__all__ = ["serve_command"]
