"""Stage 1b: the user-facing error templates of the fetched sources, with provenance.

Reads the sources ``fetch.py`` left in the cache, walks each startup-path file with ``ast``
and writes ``scripts/catalogue/extraction.json``: one record per distinct template (package,
exception class, template parts) with the file, line and function of its latest release and
the releases it appears in.  Deterministic for a given cache; committed, so stage 2
(``build.py``) runs without network.

    python scripts/catalogue/extract.py --cache /tmp/catalogue-src
"""

from __future__ import annotations

import argparse
import ast
import json
import re
from pathlib import Path

from fetch import LAYERS, VLLM_RELEASES
from templates import Part, percent_template, render, template_of

HERE = Path(__file__).resolve().parent
OUT = HERE / "extraction.json"

# The startup path: the code that runs between `vllm serve` / `LLM(...)` and "ready", and
# whose errors end a start.  Request-time code (samplers, serving endpoints, schedulers'
# step loop, the models' forward passes, kernels) is left out: its errors do not stop a
# start, and each model file's own checks are reached only through the registry.
_STARTUP_FUNCS = (
    r"^(__init__|load_model|.*profile_run|determine_available_memory|.*memory_pool.*|.*kv_cache.*|"
    r".*capture.*|_dummy.*|init.*|.*warm.*|may_reinit.*|compile_or_warm.*)$"
)
_EXECUTOR_FUNCS = (
    r"^(__init__|_init_executor|get_class|determine.*|initialize.*|worker_main|make_worker.*|wait_for_ready|"
    r"_ensure_worker.*|monitor_workers|_init_workers.*|.*placement.*|_check_executor_parameters|"
    r"_init_worker|_create_worker|_get_worker.*|_run_workers)$"
)
_BACKEND_FUNCS = r"^(__init__|validate.*|.*support.*|check.*|get_.*backend.*|get_kv_cache_shape)$"
STARTUP_PATHS = {
    "vllm": [
        r"vllm/config\.py",
        r"vllm/config/.*",  # every config class: validation (invalid_arguments)
        r"vllm/engine/arg_utils\.py",  # flags -> configs
        r"vllm/engine/(llm_engine|async_llm_engine)\.py::"  # the V0 engines' construction
        r"^(__init__|from_.*|_get_executor_cls|_init.*|_initialize_kv_caches|.*startup.*|_verify_args)$",
        r"vllm/entrypoints/openai/(api_server|cli_args)\.py",
        r"vllm/entrypoints/cli/.*",
        r"vllm/entrypoints/(utils|llm|api_server)\.py",  # the server's and LLM(...)'s start
        r"vllm/entrypoints/chat_utils\.py::.*chat_template.*",  # the chat template loaded at start
        r"vllm/model_executor/model_loader/.*",  # weights: files, formats, loaders
        # the model registry; before 0.6.3 it lived in models/__init__.py
        r"vllm/model_executor/models/(registry|config|interfaces|interfaces_base|__init__)\.py",
        r"vllm/model_executor/layers/quantization/[^/]*\.py",  # quantization config checks
        # the schemes and kernels of its subfolders (compressed_tensors, quark, kernels, utils):
        # their choice and weights' construction and post-processing at load, not their apply
        r"vllm/model_executor/layers/quantization/.+/.*\.py::^(__init__|create_weights|process_weights_after_loading|"
        r"can_implement|is_supported.*|choose_.*|_?check.*|_?verify.*|_?validate.*|from_config|get_quant_method|"
        r"_?get_scheme.*|get_.*kernel.*|select_.*|get_min_capability|get_.*method)$",
        # fused MoE layers: construction, the choice of a kernel / all2all backend, weights at load
        r"vllm/model_executor/layers/fused_moe/.*\.py::^(__init__|create_weights|process_weights_after_loading|"
        r"_?check.*|_?verify.*|_?validate_(?!.*shapes).*|select_(?!experts).*|get_.*method.*|_?maybe_make.*|init_prepare_finalize|"
        r"maybe_init_modular_kernel|make.*kernel.*|_setup_kernel|get_.*backend.*|_init.*)$",
        # each model's own checks of its config at construction and of its checkpoint in load_weights
        # (reached through the registry; not forward passes or per-request input processing)
        r"vllm/model_executor/models/(?!registry|config|interfaces|interfaces_base|__init__)[^/]*\.py::"
        r"^(__init__|load_weights|_?verify.*|_?check_config.*|_init_(?!.*input).*|init_vision_tower.*|"
        r"get_.*quant.*config|_maybe_ignore_quant_config)$",
        r"vllm/model_inspection\.py",
        # V0 (before 0.11): the same cut as V1's below, through the same function names
        # (and the V0 workers' module-level checks of the KV cache's size and the GPU's dtype)
        r"vllm/worker/.*::" + _STARTUP_FUNCS + r"|^(raise_if_cache_size_invalid|_check_if_gpu_supports_dtype)$",
        r"vllm/executor/.*::" + _EXECUTOR_FUNCS,
        # V1: only what runs before ready (construction, loading, profiling, KV cache, graph
        # capture, the engine-core handshake); request handling, sleep/wake, elastic scaling
        # and weight updates are left out.
        r"vllm/v1/executor/(abstract|multiproc_executor|uniproc_executor|ray_distributed_executor|ray_executor.*)\.py::"
        + _EXECUTOR_FUNCS,
        r"vllm/v1/executor/(ray_utils|vllm_net_devices)\.py",
        r"vllm/v1/worker/(gpu_worker|worker_base|cpu_worker|xpu_worker|tpu_worker)\.py::" + _STARTUP_FUNCS,
        r"vllm/v1/worker/utils\.py::^(request_memory|.*block_size.*|allocate_kv_cache|map_kv_cache.*|"
        r"prepare_kernel.*|bind_kv_cache)$",
        r"vllm/v1/worker/[^/]*model_runner\.py::" + _STARTUP_FUNCS,
        r"vllm/v1/worker/gpu/model_runner\.py::" + _STARTUP_FUNCS,
        r"vllm/distributed/(parallel_state|utils)\.py",
        # communicators: their construction at start-up (NCCL, custom all-reduce, shm broadcast)
        r"vllm/distributed/device_communicators/(pynccl.*|custom_all_reduce.*|cuda_communicator|shm_broadcast|"
        r"cuda_wrapper|cpu_communicator|all2all|xpu_communicator)\.py::^(__init__|init.*|_init.*|create.*)$",
        r"vllm/ray/.*",  # Ray placement groups
        r"vllm/platforms/.*",  # device detection, capabilities, backend choice
        r"vllm/attention/selector\.py",
        r"vllm/v1/attention/selector\.py",
        # backends: their construction and support checks, not their forward passes
        r"vllm/attention/backends/.*\.py::" + _BACKEND_FUNCS,  # and their subfolders (mla/)
        r"vllm/v1/attention/backends/.*\.py::" + _BACKEND_FUNCS,
        # KV cache sizing at start-up; not the free-block queue and block hashes of serving
        r"vllm/v1/core/kv_cache_utils\.py::!^(popleft.*|remove|append.*|block_hash|.*free.*|get_all_free.*|__.*__)$",
        r"vllm/v1/engine/(core|core_client|async_llm|llm_engine)\.py::"  # engine-core start
        r"^(__init__|from_.*|make_.*client|run_engine_core|_initialize_kv_caches|_init.*|.*startup.*|.*handshake.*)$",
        r"vllm/v1/engine/utils\.py::^(launch.*|wait_for_engine_startup|.*placement.*|get_physical.*|__init__|_dp_.*)$",
        r"vllm/multimodal/registry\.py",
        r"vllm/transformers_utils/(config|tokenizer|tokenizer_base|utils|repo_utils)\.py",
        r"vllm/transformers_utils/configs/__init__\.py",
        r"vllm/tokenizers/[^/]*\.py",
        r"vllm/plugins/__init__\.py",
        r"vllm/envs\.py",
        # LoRA (--enable-lora): the manager and the model's LoRA layers built at load, the
        # adapters of --lora-modules loaded and checked at start, and the dummy LoRAs of the
        # profile run; not the per-step adapter activation, mappings and kernels (lora/ops)
        r"vllm/lora/[^/]*\.py::!(forward|apply.*|_apply.*|activate.*|deactivate.*|_deactivate.*|"
        r"set_adapter_mapping|_set_adapter_mapping|set_active_adapters|_set_active_adapters|remove.*|pin.*|"
        r"_pin.*|list_adapters|get_adapter|update_metadata|convert_mapping|compute_meta|.*mapping.*|__.*__)",
        r"vllm/lora/(layers|punica_wrapper)/.*\.py::^(__init__|create_lora_weights|can_replace_layer|"
        r"get_punica_wrapper|_?check.*|_?verify.*|_?validate.*)$",
        r"vllm/v1/worker/[^/]*mixin\.py::^(__init__|load_.*|init.*|_init.*|maybe_(dummy_run|setup_dummy|profile|"
        r"select_dummy|create|get_kv_connector|setup_kv).*|_dummy.*|.*profile.*|.*capture.*|ensure_.*|.*kv_cache.*)$",
        # KV / encoder-cache transfer (--kv-transfer-config, --ec-transfer-config): the connector
        # factory, each connector's construction and KV cache registration at start; not the
        # handshakes with a remote instance and transfers, which run per request
        r"vllm/distributed/(kv|ec)_transfer/.*\.py::^(__init__|_init.*|init.*|ensure_.*|create_.*|"
        r"_?get_connector_class.*|register_kv_caches|register_cross_layers_kv_cache|initialize.*|"
        r"_?validate_(?!remote|push|source|.*tensor|.*metadata).*|_?check_(?!peer|lookup|tensors|sources|healthy|health).*|"
        r"get_required_kvcache_layout)$",
        # speculative decoding: the drafter's construction and load_model (V1), the V0 workers'
        r"vllm/v1/spec_decode/.*\.py::^(__init__|load_model|_?validate.*|_?check.*|_?verify.*|_get_.*model.*|"
        r"initialize.*|_init.*|.*capture.*|.*kv_cache.*|_maybe_share.*)$",
        r"vllm/spec_decode/.*\.py::^(__init__|load_model|init_device|create_worker|create_spec_worker|"
        r"determine_num_available_blocks|initialize_cache|_?validate.*|_?verify.*|_configure_model_sampler.*)$",
        # tool-call and reasoning parsers named by --tool-call-parser / --reasoning-parser: the lookup
        # by name at start (each parser's own code parses model output per request)
        r"vllm/(entrypoints/openai/tool_parsers|tool_parsers|reasoning|entrypoints/openai/reasoning_parsers|parser)/"
        r"(abstract_tool_parser|abs_reasoning_parsers|__init__|parser_manager)\.py::^(get_.*|import_.*|_load.*)$",
    ],
    "huggingface_hub": [
        r"huggingface_hub/errors\.py",
        r"huggingface_hub/utils/_(http|validators|auth|cache_manager)\.py",
        r"huggingface_hub/(file_download|_snapshot_download|_local_folder|constants)\.py",
    ],
    "transformers": [
        r"transformers/configuration_utils\.py",
        r"transformers/dynamic_module_utils\.py",
        r"transformers/models/auto/(configuration_auto|tokenization_auto|auto_factory|processing_auto)\.py",
        r"transformers/utils/(hub|import_utils)\.py",
        r"transformers/tokenization_utils_base\.py",
    ],
    "safetensors": [r"safetensors/.*"],
    "torch": [
        r"torch/cuda/(__init__|memory|_utils)\.py",
        r"torch/utils/cpp_extension\.py",
        r"torch/distributed/(distributed_c10d|rendezvous)\.py",
        # torch.compile at vLLM's start: inductor's error classes (a missing or too old Triton, no
        # working C++ compiler); dynamo's name no cause (BackendCompilerFailed and InductorError
        # wrap the error that says why; Unsupported is a graph break) and are left out
        r"torch/_inductor/exc\.py",
    ],
    # Triton compiles vLLM's kernels while it warms up: its error classes (out of shared memory,
    # ptxas, compilation), the C compiler its launcher needs, and the backends' driver setup
    "triton": [
        r"triton/(errors|runtime/errors|compiler/errors|runtime/build)\.py",
        r"triton/backends/(nvidia|amd)/(driver|compiler)\.py::^(__init__|_?get_.*|_path_to_binary|.*version.*|"
        r"make_.*|load_binary|_?check.*)$",
    ],
}

LOG_METHODS = {"error", "exception", "critical", "fatal"}
# a class whose base is named so is an exception class (its message may live in __init__ / __str__)
EXCEPTION_BASES = re.compile(r"(Error|Exception|Failed|Traceback|Issue|OutOfResources)$")
# the layers whose error classes carry their own message (vLLM and the hubs raise theirs with it)
OWN_MESSAGES = {"torch", "triton"}
SKIP_CLASSES = {"StopIteration", "KeyboardInterrupt", "SystemExit", "GeneratorExit", "StopAsyncIteration"}


def selected(package: str, rel: str) -> re.Pattern | bool | None:
    """True (all of the file), a function-name pattern (``::!`` a pattern of the functions left
    out: given as a negative lookahead), or False."""
    for spec in STARTUP_PATHS[package]:
        path, _, func = spec.partition("::")
        if re.fullmatch(path, rel):
            if func.startswith("!"):
                return re.compile(f"^(?!(?:{func[1:]})$)")
            return re.compile(func) if func else True
    return False


class _Walker(ast.NodeVisitor):
    """Collects (class, parts, line, function) for each user-facing error of one module."""

    def __init__(self, functions: re.Pattern | None, own_messages: bool = False) -> None:
        self.found: list[tuple[str, list[Part], int, str]] = []
        self.stack: list[tuple[str, dict]] = [("<module>", {})]
        self.functions = functions
        self.own_messages = own_messages
        self.classes: list[str | None] = []  # the enclosing classes; None where not an exception

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        bases = [_name(b) for b in node.bases]
        self.classes.append(node.name if any(EXCEPTION_BASES.search(b) for b in bases) else None)
        self.generic_visit(node)
        self.classes.pop()

    def _own_message(self, node: ast.AST, line: int) -> None:
        """An exception class's own message: what its __init__ hands to the base class, or
        what its __str__ returns (the raise site passes only fields: OutOfResources(...))."""
        if self.own_messages and self.classes and self.classes[-1] and self.stack[-1][0] in ("__init__", "__str__"):
            self._keep(self.classes[-1], template_of(node, self._local(line)), line)

    def visit_Return(self, node: ast.Return) -> None:
        if node.value is not None and self.stack[-1][0] == "__str__":
            self._own_message(node.value, node.lineno)
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        local: dict[str, list[tuple[int, ast.AST]]] = {}
        for sub in ast.walk(node):
            if isinstance(sub, ast.Assign) and len(sub.targets) == 1 and isinstance(sub.targets[0], ast.Name):
                local.setdefault(sub.targets[0].id, []).append((sub.lineno, sub.value))
        self.stack.append((node.name, local))
        self.generic_visit(node)
        self.stack.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def _local(self, line: int) -> dict[str, ast.AST]:
        """Each local name's value as last assigned before `line` (``message = ...`` per branch)."""
        out = {}
        for name, values in self.stack[-1][1].items():
            before = [v for ln, v in sorted(values, key=lambda lv: lv[0]) if ln < line]
            if before:
                out[name] = before[-1]
        return out

    def _keep(self, cls: str, parts: list[Part] | None, line: int) -> None:
        func = self.stack[-1][0]
        if parts and (self.functions is None or self.functions.search(func)):
            self.found.append((cls, parts, line, func))

    def visit_Raise(self, node: ast.Raise) -> None:
        exc = node.exc
        if isinstance(exc, ast.Call) and exc.args:
            cls, msg = _name(exc.func), exc.args[0]
            if not cls[:1].isupper() and len(exc.args) > 1 and _looks_like_class(exc.args[0]):
                cls, msg = _name(exc.args[0]), exc.args[1]  # raise _format(RepoNotFoundError, message, ...)
            if cls and cls not in SKIP_CLASSES:
                self._keep(cls, template_of(msg, self._local(node.lineno)), node.lineno)
        self.generic_visit(node)

    def visit_Assert(self, node: ast.Assert) -> None:
        if node.msg is not None:
            self._keep("AssertionError", template_of(node.msg, self._local(node.lineno)), node.lineno)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "__init__" and node.args:
            # super().__init__(msg, ...) or Base.__init__(self, msg, ...)
            first = node.args[0] if isinstance(func.value, ast.Call) else (node.args[1:] or [None])[0]
            if first is not None:
                self._own_message(first, node.lineno)
        if (
            isinstance(func, ast.Attribute)
            and func.attr in LOG_METHODS
            and node.args
            and "log" in _name(func.value).lower()
        ):
            first = template_of(node.args[0], self._local(node.lineno))
            if first is not None and len(node.args) > 1 and len(first) == 1 and isinstance(first[0], str):
                first = percent_template(first[0], [ast.unparse(a)[:80] for a in node.args[1:]])
            self._keep(f"logger.{func.attr}", first, node.lineno)
        self.generic_visit(node)


def _looks_like_class(node: ast.AST) -> bool:
    return bool(re.search(r"(Error|Exception|Warning)$", _name(node))) and _name(node)[:1].isupper()


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def extract_file(
    path: Path, functions: re.Pattern | None, own_messages: bool = False
) -> list[tuple[str, list[Part], int, str]]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except SyntaxError:
        return []
    walker = _Walker(functions, own_messages)
    walker.visit(tree)
    return walker.found


def extract(cache: Path) -> list[dict]:
    """Every distinct (package, class, template) of every release, oldest release first."""
    merged: dict[tuple[str, str, str], dict] = {}
    releases = [("vllm", v) for v in VLLM_RELEASES] + list(LAYERS.items())
    for package, version in releases:
        root = cache / package / version
        if not (root / ".done").exists():
            raise SystemExit(f"{root} is missing: run fetch.py first")
        for path in sorted(root.rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            sel = selected(package, rel)
            if sel is False:
                continue
            own = package in OWN_MESSAGES
            for cls, parts, line, func in extract_file(path, None if sel is True else sel, own):
                key = (package, cls, render(parts))
                rec = merged.setdefault(key, {"package": package, "class": cls, "parts": parts, "versions": []})
                rec.update(file=rel, line=line, function=func)  # the latest release's place
                if version not in rec["versions"]:
                    rec["versions"].append(version)
    return sorted(merged.values(), key=lambda r: (r["package"], r["file"], r["line"], r["class"], render(r["parts"])))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    records = extract(args.cache)
    doc = {
        "schema_version": 1,
        "releases": {"vllm": VLLM_RELEASES, **{k: [v] for k, v in LAYERS.items()}},
        "startup_paths": STARTUP_PATHS,
        "templates": records,
    }
    args.out.write_text(json.dumps(doc, separators=(",", ":"), sort_keys=False) + "\n", encoding="utf-8")
    print(f"{len(records)} templates -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
