"""vllm-triage: explain why a vLLM server failed to start."""

__version__ = "0.1.0"
