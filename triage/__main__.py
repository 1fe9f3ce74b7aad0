"""`python -m triage` is the same as `vllm-triage`."""

from triage.apps.cli import entry

if __name__ == "__main__":  # not when a worker process (multiprocessing's spawn) imports it
    entry()
