"""`python -m triage` is the same as `vllm-triage`."""

from .cli import entry

entry()
