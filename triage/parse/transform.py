"""Parse trees to event fields: one method per grammar rule or alias of `vllm_log.lark`.

Each method returns the fields of an event (a dict with its `kind`), a list of them, or
a piece that an enclosing rule assembles. Sizes become bytes here, through units.parse_size;
nothing else in the grammar's output is interpreted outside this module.
"""

from __future__ import annotations

import re

from triage.parse.engine_args import parse_settings
from triage.parse.transform_common import inline_children, num, whole
from triage.parse.transform_default import DefaultEvents
from triage.parse.transform_failures import FailureEvents
from triage.parse.transform_layers import LayerEvents
from triage.parse.transform_memory import MemoryEvents
from triage.patterns import LazyPattern
from triage.units import parse_size

_RELEASE = LazyPattern(r"v?(\d+)\.(\d+)(?:\.(\d+))?")


def _before_experimental_v1(version: str | None) -> bool:
    """A banner version before 0.6.6 (V1's first core, which shared the banner's wording), or one
    that names no release (a `dev` build of that era: the wording was gone by 0.7)."""
    m = _RELEASE.match(version or "")
    if not m:
        return True
    return (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)) < (0, 6, 6)


# Each mixin carries its own inline_children: it applies only to the methods a class defines itself.
@inline_children
class ToEvents(DefaultEvents, MemoryEvents, FailureEvents, LayerEvents):
    """Method names are the grammar's rule names and aliases; each returns event fields. By family:
    memory (MemoryEvents), the other startup failures (FailureEvents), the layers under vLLM
    (LayerEvents); progress, configuration and tracebacks are here."""

    # --- graphs, warm-up, loading ---
    def graph_start(self, head, tail=None):
        return {"kind": "phase", "phase": "cuda_graph_capture", "what": str(head)}

    def graph_done(self, secs, *rest):
        size = next((r for r in rest if r.type == "SIZE"), None)
        return {"kind": "graph_capture_done", "seconds": num(secs), "bytes": parse_size(size) if size else None}

    def graph_estimate(self, size, tail=None):
        return {"kind": "cuda_graph_estimate", "bytes": parse_size(size)}

    def graph_advice(self, current, equivalent, suggested, tail=None):
        return {
            "kind": "cuda_graph_advice",
            "current": num(current),
            "equivalent": num(equivalent),
            "suggested": num(suggested),
        }

    def graph_unprofiled(self, tail=None):
        # "... increasing --gpu-memory-utilization from U to S." ends the warning
        words = str(tail or "").rstrip(". ").split()
        nums = [w for w in words[-3:] if w.replace(".", "", 1).isdigit()]
        pair = (num(nums[0]), num(nums[1])) if len(nums) == 2 and words[-2] == "to" else (None, None)
        return {"kind": "cuda_graph_advice", "profiled": False, "current": pair[0], "suggested": pair[1]}

    def graph_pool(self, actual, estimated, tail=None):
        return {"kind": "cuda_graph_pool", "actual": parse_size(actual), "estimated": parse_size(estimated)}

    def sampler_oom(self, what, n, tail=None):
        return {"kind": "sampler_warmup_oom", "requests": whole(n), "what": str(what).split()[0]}

    def load_oom(self, tail=None):
        return {"kind": "load_model_oom"}

    def encoder_budget(self, tokens, items, modality, tail=None):
        return [
            {"kind": "encoder_cache_budget", "tokens": whole(tokens), "items": whole(items), "modality": str(modality)},
            {"kind": "phase", "phase": "profiling", "what": "multimodal encoder profiling"},
        ]

    def profile_start(self, head, tail=None):
        return {"kind": "phase", "phase": "profiling", "what": str(head)}

    def weights_start(self, head, tail=None):
        out = {"kind": "phase", "phase": "loading_weights", "what": str(head)}
        words = str(tail or "").split()
        if str(head) == "Starting to load model" and words and words[0].endswith("..."):
            out["model"] = words[0][:-3]  # `Starting to load model Qwen/Qwen3-32B...`
        return out

    def swap(self, head, swap, total, tail=None):
        return {
            "kind": "swap_space",
            "swap": parse_size(swap),
            "cpu_total": parse_size(total),
            "is_error": str(head).startswith("Too"),
        }

    def ready(self, head, tail=None):
        return {"kind": "ready", "what": str(head)}

    def engine_stopping(self, head, tail=None):
        return {"kind": "engine_stopping"}

    # --- version and config ---
    def banner(self, words, *rest):
        version = next((str(r)[2:-1] for r in rest if r.type == "VERSION_PAREN"), None)
        tail = next((str(r) for r in rest if r.type == "TAIL"), "")
        # V0's llm_engine.py said "an LLM engine" up to 0.6 and "a V0 LLM engine" after; V1 named itself
        # from 0.7 (0.6's experimental V1 core said "an LLM engine" too: the version, where read, decides that)
        engine = "v1" if "V1" in words else "v0" if "V0" in words else None
        if engine is None and _before_experimental_v1(version):
            engine = "v0"
        return {"kind": "engine_config", "version": version, "engine": engine, "settings": parse_settings(tail)}

    def server_version(self, _head, version, *rest):
        return {"kind": "engine_config", "source": "version", "version": str(version).lstrip("v"), "server": True}

    def logo_version(self, _logo, version, tail=None):  # the first token is the banner's `█ version`
        return {"kind": "engine_config", "source": "version", "version": str(version).lstrip("v")}

    def arg_dump(self, head, tail):
        return {"kind": "engine_config", "source": "args", "settings": parse_settings(str(tail))}

    # --- tracebacks and wrappers ---
    def traceback(self, tail=None):
        return {"kind": "traceback_start"}

    def frame(self, path, lineno, *rest):
        func = next((str(r) for r in rest if r.type == "FUNC"), "")
        return {"kind": "frame", "file": str(path)[6:-1], "lineno": whole(lineno), "func": func}

    def rpc_call(self, tok, tail=None):
        method = re.search(r"[\"'](\w+)[\"']", str(tok))
        return {"kind": "frame", "file": "<rpc>", "lineno": None, "func": method.group(1) if method else ""}

    def phase_call(self, tok, tail=None):
        name = str(tok).rstrip("(").rsplit(".", 1)[-1].split()[-1]
        return {"kind": "frame", "file": "<call>", "lineno": None, "func": name}

    def chain(self, text):
        return {"kind": "chain", "cause": "direct cause" in text}

    def exception(self, name, tail=None):
        return {"kind": "exception", "type": str(name), "message": str(tail or "").strip()}

    def wrapper_plain(self, head, tail=None):
        return {"kind": "process_died", "wrapper": str(head)}

    def worker_died(self, name, *rest):
        code = next((int(r) for r in rest if r.type == "SIGNED"), None)
        return {"kind": "process_died", "name": str(name), "exit_code": code, "wrapper": "died unexpectedly"}

    def worker_died_v0(self, head, code, tail=None):
        name = " ".join(str(head).split()[1:4])
        return {"kind": "process_died", "name": name, "exit_code": int(code), "wrapper": "worker died"}

    def worker_exception(self, name, method, tail=None):
        return {"kind": "process_died", "name": str(name), "method": str(method), "wrapper": "exception in worker"}

    def failed_procs(self, procs, tail=None):
        codes = [int(c) for c in re.findall(r":\s*(-?\d+)", str(procs))]
        return {
            "kind": "process_died",
            "name": str(procs),
            "exit_code": codes[0] if codes else None,
            "wrapper": "Failed core proc(s)",
        }


TRANSFORMER = ToEvents()
