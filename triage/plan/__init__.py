"""`vllm-triage plan`: size a vLLM launch before it runs, from the model's files and the GPU.

One job per module: `model_files` finds and reads a model folder offline, `spec` reads
config.json as vLLM does, `params` counts weights, `kv_layout` lays out the KV cache by family,
`gpu` reads the card, `triage.vllm_flags` reads `vllm serve` flags, `estimates` gives the startup
figures a config cannot state, `launch` resolves all of it, `answer` asks the memory model
(triage.memory, the one copy of vLLM's arithmetic) for its checks, `remedies` asks its
solvers, `assemble` builds the report (`schema`, the JSON contract), `wording` and `render`
turn it into text; `command` is the CLI.
"""
