"""`vllm-triage plan`: size a vLLM launch before it runs, from the model's files and the GPU.

The modules, one job each: `model_files` finds and reads a model folder offline,
`spec` normalises its config.json, `params` counts weights, `kv` gives the KV cache
layout by architecture family, `gpu` reads the card, `flags` reads `vllm serve` flags,
`answer` asks the memory model for the verdict, `schema` is the JSON contract and
`render` turns it into text; `command` is the CLI.
"""
