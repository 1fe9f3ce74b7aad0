"""`vllm-triage plan`: the command line. Exit 0 fits, 1 does not fit, 2 cannot tell (and why).

vllm-triage plan --model PATH_OR_ID [--gpu-memory SIZE | --gpu NAME | --nvidia-smi FILE]
                 [--vllm-version X.Y.Z [--vllm-engine v0|v1]] [vllm serve flags...] [--format terminal|json|markdown]
vllm-triage plan [--gpu ...] -- vllm serve MODEL --max-model-len 32768 ...
"""

from __future__ import annotations

import argparse
from typing import IO

from triage.errors import InputError, UsageError
from triage.plan.render import FORMATS

EPILOG = """\
Other flags are read as `vllm serve` flags (--tensor-parallel-size, --max-model-len,
--gpu-memory-utilization, --kv-cache-dtype, --dtype, --max-num-seqs, --max-num-batched-tokens,
--block-size, --enforce-eager, --quantization); a whole command line may follow `--`. Other
real `vllm serve` flags are listed as not taken into account; an unknown flag is an error (2).
The model is a local folder or an ORG/NAME id in the Hugging Face cache; the network is
never used. Exit status: 0 fits, 1 does not fit, 2 cannot tell or bad input.
Example: vllm-triage plan --model fixtures/configs/llama-3.1-8b-instruct --gpu L4 --max-model-len 32768
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="vllm-triage plan",
        allow_abbrev=False,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Size a vLLM launch before it runs: weights, KV cache, max_model_len and\n"
        "concurrency for a model's config.json on a GPU, with vLLM's own arithmetic.",
    )
    p.add_argument("--model", help="model folder (with config.json) or ORG/NAME in the local HF cache")
    gpu = p.add_mutually_exclusive_group()
    gpu.add_argument("--gpu-memory", metavar="SIZE", help="memory of one GPU as CUDA reports it: 80GiB, 24GB")
    gpu.add_argument("--gpu", metavar="NAME", help="a card from the built-in table: H100, A100-80GB, L4, 4090, ...")
    gpu.add_argument(
        "--nvidia-smi", metavar="FILE", help="nvidia-smi output (table or --format=csv): total and free memory per GPU"
    )
    p.add_argument(
        "--vllm-version",
        metavar="X.Y.Z",
        help="the vLLM release to plan for: before 0.8, V0's arithmetic (default: 0.10's V1)",
    )
    p.add_argument(
        "--vllm-engine",
        choices=("v0", "v1"),
        help="the engine, where it is not the release's default: v0 for VLLM_USE_V1=0 or 0.8-0.9's "
        "fallback on GPUs below compute capability 8.0",
    )
    p.add_argument("-f", "--format", choices=FORMATS, default=None, help="report format (default: terminal)")
    p.add_argument("--schema", action="store_true", help="print the plan's JSON Schema and exit")
    return p


def _split(argv: list[str]) -> tuple[list[str], list[str]]:
    if "--" in argv:
        at = argv.index("--")
        return argv[:at], argv[at + 1 :]
    return argv, []


def plan_command(argv: list[str], stdin, stdout: IO[str], stderr: IO[str] | None = None) -> int:
    import json

    from triage.plan.schema import plan_json_schema

    own, command_line = _split(list(argv))
    args, extra = parser().parse_known_args(own)
    if args.schema:
        stdout.write(json.dumps(plan_json_schema(), indent=2) + "\n")
        return 0
    report = make_plan(args, extra + command_line)
    from triage.plan.assemble import EXIT
    from triage.plan.render import render

    stdout.write(render(report, args.format or "terminal"))
    return EXIT[report.verdict]


def _version(text: str | None) -> str | None:
    """The release as given, checked: X.Y or X.Y.Z (a leading v and a suffix such as .post1 are kept)."""
    if text is None:
        return None
    from triage.plan.estimates import version_tuple

    if version_tuple(text) is None:
        raise UsageError(f"--vllm-version {text!r} is not a release number (X.Y.Z)")
    return text.strip().lstrip("v")


def make_plan(args: argparse.Namespace, vllm_tokens: list[str]):
    """The plan report for parsed plan options and the `vllm serve` tokens."""
    from triage.plan import gpu as gpus
    from triage.plan import model_files
    from triage.plan.answer import answer
    from triage.plan.assemble import build_report
    from triage.plan.launch import build
    from triage.vllm_flags import parse

    flags = parse(vllm_tokens)
    model = args.model or flags.model
    if not model:
        raise UsageError("plan needs a model: --model PATH_OR_ID, or `-- vllm serve MODEL ...`")
    if args.gpu_memory:
        gpu = gpus.from_size(args.gpu_memory)
    elif args.gpu:
        gpu = gpus.from_name(args.gpu)
    elif args.nvidia_smi:
        gpu = gpus.from_nvidia_smi(args.nvidia_smi, flags.tp * flags.pp)
    else:
        raise UsageError("plan needs the GPU: --gpu-memory SIZE, --gpu NAME or --nvidia-smi FILE")
    gpu.count = max(gpu.count, 1)
    files = model_files.load(model)
    try:
        version = _version(getattr(args, "vllm_version", None))
        launch = build(files, flags, gpu, version, getattr(args, "vllm_engine", None))
    except UsageError:
        raise
    except ValueError as exc:
        if str(exc).startswith("unknown --"):
            raise UsageError(str(exc)) from None
        raise InputError(f"cannot size {model} from its config.json: {str(exc)[:200]}") from None
    except (TypeError, ArithmeticError, KeyError, AttributeError, IndexError) as exc:
        raise InputError(f"cannot size {model} from its config.json: {type(exc).__name__}: {str(exc)[:200]}") from None
    return build_report(launch, answer(launch))
