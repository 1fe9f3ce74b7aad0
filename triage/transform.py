"""Parse trees to event fields: one method per grammar rule or alias of `vllm_log.lark`.

Each method returns the fields of an event (a dict with its `kind`), a list of them, or
a piece that an enclosing rule assembles. Sizes become bytes here, through units.parse_size;
nothing else in the grammar's output is interpreted outside this module.
"""

from __future__ import annotations

import re

from lark import Token, Transformer, v_args

from . import events as ev
from .settings import parse_settings
from .transform_layers import LayerEvents
from .units import parse_size


def _num(tok: Token | str) -> float:
    return float(str(tok))


def _int(tok: Token | str) -> int:
    return int(str(tok).replace(",", ""))


@v_args(inline=True)
class ToEvents(LayerEvents):
    """Method names are the grammar's rule names and aliases; each returns event fields (those of
    the layers under vLLM come from LayerEvents)."""

    # --- OOM ---
    def oom(self, head, requested, rest, tail=None):
        fields = {"kind": "torch_oom", "device": str(head).split()[0], "requested": parse_size(requested)}
        fields.update(rest)
        return fields

    def oom_new(self, *clauses):
        out: dict = {"processes": []}
        for key, value in clauses:
            if key == "process":
                out["processes"].append(value)
            else:
                out.update(value)
        out["processes"] = tuple(out["processes"])
        return out

    def oom_capacity(self, *args):
        sizes = [a for a in args if a.type == "SIZE"]
        index = [a for a in args if a.type == "INT"]
        return "capacity", {
            "gpu_index": _int(index[0]) if index else None,
            "total": parse_size(sizes[0]),
            "free": parse_size(sizes[1]),
        }

    def oom_process(self, pid, size):
        return "process", ev.OomProcess(pid=_int(pid), bytes=parse_size(size))

    def oom_this_process(self, size):
        return "this", {"this_process": parse_size(size)}

    def oom_allowed(self, size):
        return "allowed", {"allowed": parse_size(size)}

    def oom_allocation(self, allocated, *rest):
        private = rest[0] if len(rest) == 2 else None
        return "allocation", {
            "allocated": parse_size(allocated),
            "private_pools": private,
            "reserved_unallocated": parse_size(rest[-1]),
        }

    def oom_private(self, size):
        return parse_size(size)

    def oom_old(self, *clauses):
        out: dict = {}
        for c in clauses:
            out.update(c)
        return out

    def old_gpu(self, _device, index):
        return {"gpu_index": _int(index)}

    def old_total(self, size, _cap):
        return {"total": parse_size(size)}

    def old_allocated(self, size):
        return {"allocated": parse_size(size)}

    def old_free(self, size):
        return {"free": parse_size(size)}

    def old_allowed(self, size):
        return {"allowed": parse_size(size)}

    def old_reserved(self, size):
        return {"reserved_total": parse_size(size)}

    def cuda_error_oom(self, head, tail=None):
        return {"kind": "cuda_error_oom", "device": str(head).split()[0]}

    def cpu_alloc(self, _verb, n, tail=None):
        return {"kind": "cpu_alloc_failed", "requested": _int(n)}

    # --- V0 profiling ---
    def budget(self, total, util, budget, tail=None):
        return {"kind": "memory_budget", "total": parse_size(total), "utilization": _num(util),
                "budget": parse_size(budget)}

    def profile_split(self, *clauses):
        out = {"kind": "memory_profile"}
        for c in clauses:
            if isinstance(c, tuple):
                out[c[0]] = c[1]
        return out

    def split_weights(self, s):
        return "weights", parse_size(s)

    def split_non_torch(self, s):
        return "non_torch", parse_size(s)

    def split_activation(self, s):
        return "activation_peak", parse_size(s)

    def split_kv(self, s):
        return "kv_cache", parse_size(s)

    def profile_results(self, *pairs):
        got = dict(p for p in pairs if isinstance(p, tuple))
        total, util = got.get("total_gpu_memory"), got.get("gpu_memory_utilization")
        out: list[dict] = []
        if isinstance(total, int) and util is not None:
            out.append({"kind": "memory_budget", "total": total, "utilization": float(util),
                        "budget": int(total * float(util))})
        out.append({"kind": "memory_profile", "kv_cache": got.get("kv_cache_size"),
                    "non_torch": got.get("non_torch_memory")})
        return out

    def result_pair(self, name, value):
        return str(name), parse_size(value) if value.type == "SIZE" else _num(value)

    # --- V1 profiling ---
    def profile_time(self, seconds, *clauses):
        out = {"kind": "memory_profile", "seconds": _num(seconds)}
        out.update(c for c in clauses if isinstance(c, tuple))
        return out

    def v1_non_kv(self, s):
        return "non_kv_total", parse_size(s)

    def v1_activation(self, s):
        return "activation_peak", parse_size(s)

    def v1_non_torch(self, s):
        return "non_torch", parse_size(s)

    def v1_consumed(self, s):
        return "non_torch", parse_size(s)

    def v1_weights(self, s):
        return "weights", parse_size(s)

    def kv_memory(self, size, tail=None):
        return {"kind": "kv_cache_memory", "bytes": parse_size(size)}

    def kv_pinned(self, free, size, tail=None):
        return {"kind": "kv_cache_pinned", "free": parse_size(free), "bytes": parse_size(size)}

    def kv_tokens(self, n, tail=None):
        return {"kind": "kv_cache_tokens", "tokens": _int(n)}

    def concurrency(self, n, factor):
        return {"kind": "max_concurrency", "tokens_per_request": _int(n), "factor": float(str(factor)[:-1])}

    def max_concurrency(self, conc, tail=None):
        return conc

    def blocks(self, _head, gpu, *rest):
        cpu = _int(rest[1]) if len(rest) >= 2 and rest[1].type == "INT" else None
        return {"kind": "cache_blocks", "gpu_blocks": _int(gpu), "cpu_blocks": cpu}

    def weights_v0(self, size, tail=None):
        return {"kind": "weights_loaded", "bytes": parse_size(size)}

    def weights_v1(self, size, *rest):
        secs = [r for r in rest if isinstance(r, Token) and r.type == "NUMBER"]
        return {"kind": "weights_loaded", "bytes": parse_size(size), "seconds": _num(secs[0]) if secs else None}

    # --- startup free memory ---
    def startup_free(self, *args):
        device = str(args[0]) if args[0].type == "DEVICE_NAME" else None
        rest = args[1:] if device else args
        free_gib, total, tail = rest[0], rest[1], rest[2]
        fields = {"kind": "startup_free_memory", "free": parse_size(f"{free_gib} GiB"),
                  "total": parse_size(total), "device": device}
        fields.update(tail)
        return fields

    def free_error(self, util, requested):
        return {"utilization": _num(util), "requested": parse_size(requested), "is_error": True}

    def free_info(self, util, requested):
        return {"utilization": _num(util), "requested": parse_size(requested), "is_error": False}

    def profiling_error(self, figures=None, tail=None):
        fields = {"kind": "profiling_mismatch"}
        if isinstance(figures, dict):
            fields.update(figures)
        return fields

    def profiling_figures(self, measure, a, _cur, _m2, b):
        return {"measure": str(measure), "initial": a, "current": b}

    def amount(self, tok):
        return parse_size(tok) if tok.type == "SIZE" else _int(tok)

    # --- KV errors ---
    def kv_error(self, n, m, tail=None):
        return {"kind": "kv_too_small", "max_seq_len": _int(n), "kv_tokens": _int(m)}

    def kv_needed(self, _word, n, *rest):
        fields = {"kind": "kv_needed", "max_seq_len": _int(n)}
        figures = next((r for r in rest if isinstance(r, dict)), None)
        if figures:
            fields.update(figures)
        return fields

    def kv_needed_figures(self, needed, available, est=None):
        return {"needed": parse_size(needed), "available": parse_size(available),
                "estimated_max_len": est if isinstance(est, int) else None}

    def kv_estimate(self, n=None):
        return _int(n) if n is not None else None

    def no_cache(self, tail=None):
        return {"kind": "no_cache_memory"}

    # --- graphs, warm-up, loading ---
    def graph_start(self, head, tail=None):
        return {"kind": "phase", "phase": "cuda_graph_capture", "what": str(head)}

    def graph_done(self, secs, *rest):
        size = next((r for r in rest if r.type == "SIZE"), None)
        return {"kind": "graph_capture_done", "seconds": _num(secs), "bytes": parse_size(size) if size else None}

    def sampler_oom(self, what, n, tail=None):
        return {"kind": "sampler_warmup_oom", "requests": _int(n), "what": str(what).split()[0]}

    def load_oom(self, tail=None):
        return {"kind": "load_model_oom"}

    def encoder_budget(self, tokens, items, modality, tail=None):
        return [{"kind": "encoder_cache_budget", "tokens": _int(tokens), "items": _int(items),
                 "modality": str(modality)},
                {"kind": "phase", "phase": "profiling", "what": "multimodal encoder profiling"}]

    def profile_start(self, head, tail=None):
        return {"kind": "phase", "phase": "profiling", "what": str(head)}

    def weights_start(self, head, tail=None):
        return {"kind": "phase", "phase": "loading_weights", "what": str(head)}

    def swap(self, head, swap, total, tail=None):
        return {"kind": "swap_space", "swap": parse_size(swap), "cpu_total": parse_size(total),
                "is_error": str(head).startswith("Too")}

    def ready(self, head, tail=None):
        return {"kind": "ready", "what": str(head)}

    # --- version and config ---
    def banner(self, words, *rest):
        version = next((str(r)[2:-1] for r in rest if r.type == "VERSION_PAREN"), None)
        tail = next((str(r) for r in rest if r.type == "TAIL"), "")
        engine = "v1" if "V1" in words else "v0" if "V0" in words else None
        return {"kind": "engine_config", "version": version, "engine": engine, "settings": parse_settings(tail)}

    def server_version(self, _head, version, *rest):
        return {"kind": "engine_config", "source": "version", "version": str(version).lstrip("v")}

    def logo_version(self, version, tail=None):
        return {"kind": "engine_config", "source": "version", "version": str(version).lstrip("v")}

    def arg_dump(self, head, tail):
        return {"kind": "engine_config", "source": "args", "settings": parse_settings(str(tail))}

    # --- tracebacks and wrappers ---
    def traceback(self, tail=None):
        return {"kind": "traceback_start"}

    def frame(self, path, lineno, *rest):
        func = next((str(r) for r in rest if r.type == "FUNC"), "")
        return {"kind": "frame", "file": str(path)[6:-1], "lineno": _int(lineno), "func": func}

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
        return {"kind": "process_died", "name": str(name), "method": str(method),
                "wrapper": "exception in worker"}

    def failed_procs(self, procs, tail=None):
        codes = [int(c) for c in re.findall(r":\s*(-?\d+)", str(procs))]
        return {"kind": "process_died", "name": str(procs), "exit_code": codes[0] if codes else None,
                "wrapper": "Failed core proc(s)"}

    # --- other startup failures ---
    def address_in_use(self, _errno, rest):
        return rest

    def bind_uvicorn(self, host, port, tail):
        return {"kind": "address_in_use", "host": str(host)[1:-1], "port": _int(port)}

    def bind_plain(self, tail):
        if "in use" not in str(tail).lower():
            raise ValueError("not an address-in-use error")
        port = re.search(r"port[ =:]+(\d+)|:(\d{2,5})\b", str(tail))
        return {"kind": "address_in_use", "port": _int(port.group(1) or port.group(2)) if port else None}

    def hub_http(self, status, _client, tail=None):
        text = str(tail or "")
        if "huggingface" not in text and "hf.co" not in text and "http" in text:
            raise ValueError("an HTTP error from somewhere else")
        return {"kind": "hub_auth_error", "status": int(str(status)), "repo": _hf_repo(text)}

    def hub_gated(self, head, tail=None):
        text = str(head)
        if text == "Invalid credentials in Authorization header":
            return {"kind": "hub_auth_error", "status": 401, "repo": _hf_repo(str(tail or "")), "token_rejected": True}
        return {"kind": "hub_auth_error", "gated": True, "repo": _hf_repo(text + " " + str(tail or ""))}

    def hub_missing(self, head, tail=None):
        rest = str(tail or "")
        quoted = re.search(r"'([\w.\-]+/[\w.\-]+)'", rest)
        return {"kind": "repo_not_found", "repo": _hf_repo(rest) or (quoted.group(1) if quoted else None)}

    def architecture(self, names, verb, tail=None):
        archs = tuple(re.findall(r"'([^']+)'", str(names)))
        rest = str(tail or "")
        listed = "upported architectures" in rest and any(f"'{a}'" in rest for a in archs)
        return {"kind": "architecture_unsupported", "architectures": archs, "listed": listed,
                "inspect_failed": "inspected" in str(verb)}

    def arch_no_impl(self, head, tail=None):
        name = re.match(r"(?:Cannot find model module\. )?'?([\w.]+)", str(head))
        return {"kind": "architecture_unsupported", "architectures": (name.group(1),) if name else ()}

    def bind_zmq(self, head, tail=None):
        port = re.search(r":(\d{2,5})\b", str(tail or ""))
        return {"kind": "address_in_use", "port": _int(port.group(1)) if port else None, "host": "zmq"}

    def arch_unknown_model_type(self, model_type, tail=None):
        return {"kind": "architecture_unsupported", "architectures": (str(model_type).strip("`"),)}

    def divisibility(self, head, tail=None):
        a, b = re.findall(r"\d+", str(head))[:2]
        return {"kind": "not_divisible", "what": "units (heads, layers or experts)", "total": _int(a),
                "size": _int(b), "parallel": "tensor"}

    def dtype_for_quant(self, head, method, tail=None):
        dtype = str(head).split()[0][len("torch."):]
        return {"kind": "capability_too_low", "feature": f"{dtype} with quantization {str(method).rstrip('.')}",
                "required": None}

    def dist_init(self, head, tail=None):
        return {"kind": "nccl_error", "problem": f"distributed init failed ({head})"}

    def systemd_restart(self, count, *rest):
        return {"kind": "restart_count", "count": _int(count)}

    def systemd_exit(self, code, status, tail=None):
        how, value = str(code).rstrip(","), str(status)
        if how == "killed" and value.split("/")[0] == "9":
            return {"kind": "killed", "signal": "SIGKILL"}
        if value.startswith("7/") and how == "killed":
            return {"kind": "killed", "signal": "SIGBUS"}
        number = int(value.split("/")[0])
        return {"kind": "process_died", "name": "main process (systemd)",
                "exit_code": -number if how == "killed" else number, "wrapper": f"systemd: {how}"}

    def systemd_oom(self, tail=None):
        return {"kind": "host_memory_problem", "problem": "systemd: the kernel OOM killer killed a process of the unit"}

    def world_size(self, world, gpus, tail=None):
        return {"kind": "not_enough_gpus", "required": _int(world), "available": _int(gpus),
                "detail": f"world size {world} is larger than the {gpus} GPUs available in this node"}

    def exit_status(self, tok):
        text = str(tok)
        return {"kind": "killed", "signal": "SIGBUS" if "135" in text else "SIGKILL"}

    def not_divisible(self, what, total, by, size, tail=None):
        parallel = str(by).split()[0].lower()
        return {"kind": "not_divisible", "what": str(what), "total": _int(total), "size": _int(size),
                "parallel": parallel}

    def not_enough_gpus(self, head, tail=None):
        return {"kind": "not_enough_gpus", "detail": str(head)}

    def bf16_capability(self, required, *rest):
        has = next((r for r in rest if isinstance(r, tuple)), (None, None))
        return {"kind": "capability_too_low", "feature": "bfloat16", "required": str(required),
                "gpu": has[0], "capability": has[1]}

    def gpu_has(self, name, cap):
        return (str(name).strip(), str(cap))

    def cc_below(self, cap, tail=None):
        return {"kind": "capability_too_low", "feature": "this vLLM build", "required": str(cap)}

    def quant_capability(self, method, *rest):
        caps = [str(r) for r in rest if isinstance(r, Token) and r.type == "INT"]
        return {"kind": "capability_too_low", "feature": f"quantization {method}",
                "required": _cap(caps[0]) if caps else None, "capability": _cap(caps[1]) if len(caps) > 1 else None}

    def driver(self, head, tail=None):
        text = str(head)
        found = re.search(r"found version (\d+)", str(tail or ""))
        return {"kind": "driver_problem", "problem": _DRIVER_PROBLEMS.get(text, text),
                "found": found.group(1) if found else None}

    def nccl(self, head, tail=None):
        return {"kind": "nccl_error", "problem": _nccl_problem(str(tail or ""))}

    def nccl_code(self, code, tail=None):
        return {"kind": "nccl_error", "problem": _NCCL_CODES.get(str(code), str(code))}

    def nccl_watchdog(self, work, tail=None):
        text = str(work)
        timeout = re.search(r"Timeout\(ms\)=(\d+)", text)
        seq = re.search(r"SeqNum=(\d+)", text)
        op = re.search(r"OpType=(\w+)", text)
        return {"kind": "nccl_error", "problem": "watchdog timeout", "timeout_ms": _int(timeout.group(1)) if timeout else None,
                "seq": _int(seq.group(1)) if seq else None, "op": op.group(1) if op else None}

    def shm(self, head, tail=None):
        text, rest = str(head), str(tail or "")
        if text == "No space left on device" and not re.search(r"/dev/shm|shm|torch_\d", rest + text):
            path = re.search(r"""['"]([~/.\w][^'"]*)['"]""", rest)
            return {"kind": "disk_full", "problem": "no space left on device", "path": path.group(1) if path else None}
        path = re.search(r"(/dev/shm/\S+)", rest)
        size = re.search(r"\(size (\d+)\)|to (\d+) bytes|only (\d+) bytes", rest)
        return {"kind": "shm_problem", "problem": _SHM_PROBLEMS.get(text, text), "path": path.group(1) if path else None,
                "size": _int(next(g for g in size.groups() if g)) if size else None}

    def host_memory(self, head, tail=None):
        text, rest = str(head), str(tail or "")
        if text == "unable to mmap" and "Cannot allocate memory" not in rest:
            raise ValueError("an mmap that failed for another reason (a missing file, a file system)")
        out = {"kind": "host_memory_problem", "problem": _HOST_PROBLEMS.get(text, text),
               "generic": text.startswith("A worker died")}
        m = re.search(r"was (\d+(?:\.\d+)?)GB / (\d+(?:\.\d+)?)GB \((\d+(?:\.\d+)?)\), which exceeds the memory "
                      r"usage threshold of (\d+(?:\.\d+)?)", rest)
        if m:
            out.update(used=parse_size(m.group(1) + "GB"), total=parse_size(m.group(2) + "GB"),
                       threshold=float(m.group(4)))
        return out

    def killed(self, _tok):
        return {"kind": "killed"}

    def crash(self, head, tail=None):
        text = str(head)
        signal = next((sig for word, sig in _CRASH_SIGNALS if word in text), "SIGABRT")
        return {"kind": "process_crash", "signal": signal, "detail": f"{text} {tail or ''}".strip()[:300]}

    def supervisor(self, head, tail=None):
        return {"kind": "process_died", "name": "the server's container or unit", "wrapper": str(head)}

    def exit_code(self, head, tail=None):
        code = int(re.sub(r"\D", "", str(head)))
        if code in (137, 135):  # `Exited (137)`: the kill forms that exit_status reads elsewhere
            return {"kind": "killed", "signal": "SIGBUS" if code == 135 else "SIGKILL"}
        return {"kind": "process_died", "exit_code": code, "wrapper": str(head).strip()}

    def usage_error(self, head, tail=None):
        return {"kind": "usage_error", "message": str(tail or "")[:300]}


_CRASH_SIGNALS = (("Segmentation fault", "SIGSEGV"), ("Illegal instruction", "SIGILL"),
                  ("Floating point exception", "SIGFPE"))

_DRIVER_PROBLEMS = {
    "no kernel image is available for execution on the device": "no kernel image for this GPU",
    "device kernel image is invalid": "kernel image built for another GPU or toolkit",
    "CUDA driver version is insufficient for CUDA runtime version": "driver older than the CUDA runtime",
    "The NVIDIA driver on your system is too old": "driver too old",
    "forward compatibility was attempted on non supported HW": "CUDA forward compatibility on unsupported hardware",
    "system has unsupported display driver / cuda driver combination": "driver and CUDA libraries mismatch",
    "hipErrorNoBinaryForGpu: Unable to find code object": "no kernel image for this GPU (the ROCm build lacks its gfx target)",
    "Failed to initialize NVML: Driver/library version mismatch": "driver and NVML library versions differ (reboot or reload the driver)",
    "nvidia-container-cli: requirement error: unsatisfied condition": "the image needs a newer CUDA than the host driver supports (driver too old)",
}
_NCCL_CODES = {"ncclSystemError": "unhandled system error", "ncclUnhandledCudaError": "unhandled cuda error",
               "ncclInternalError": "internal error", "ncclRemoteError": "remote process exited",
               "ncclInvalidUsage": "invalid usage", "ncclInvalidArgument": "invalid argument"}
_SHM_PROBLEMS = {"Error while creating shared memory segment": "cannot create an NCCL shared-memory segment",
                 "failed to extend /dev/shm": "cannot extend an NCCL shared-memory segment",
                 "No space left on device": "no space left on /dev/shm",
                 "unable to write to file </torch_": "PyTorch could not write a shared-memory file in /dev/shm",
                 "Fatal Python error: Bus error": "bus error",
                 "SIGBUS received": "bus error", "Bus error (core dumped)": "bus error",
                 "/dev/shm has only": "small /dev/shm"}
_HOST_PROBLEMS = {"A worker died or was killed while executing a task by an unexpected system error":
                  "a Ray worker died without a Python error",
                  "Task was killed due to the node running low on memory": "Ray killed a task: node low on memory",
                  "Memory on the node": "Ray memory monitor threshold exceeded",
                  "killed by SIGKILL by OOM killer": "killed by the OOM killer",
                  "OOM-killed": "container OOM-killed", "OOMKilled": "container OOM-killed",
                  "Out of memory: Killed process": "kernel OOM killer", "oom-kill": "kernel OOM killer",
                  "unable to mmap": "mapping a file into host memory failed: Cannot allocate memory (ENOMEM)",
                  "[Errno 12] Cannot allocate memory": "the host refused an allocation (ENOMEM)",
                  "Cannot allocate memory (os error 12)": "the host refused an allocation (ENOMEM)",
                  "killed due to memory pressure (OOM)": "Ray's raylet killed workers under memory pressure",
                  "were killed due to the node running low on memory": "Ray killed workers: node low on memory"}


def _nccl_problem(text: str) -> str:
    for key in ("unhandled system error", "unhandled cuda error", "internal error", "remote process exited",
                "invalid usage", "invalid argument", "timeout"):
        if key in text:
            return key
    return text.split("(")[0].strip()[:80] or "NCCL error"


def _hf_repo(text: str) -> str | None:
    m = re.search(r"(?:huggingface\.co|hf\.co)/(?:api/models/)?([\w.\-]+/[\w.\-]+)", text)
    if m:
        return m.group(1)
    m = re.search(r"[Rr]epo (?:model )?([\w.\-]+/[\w.\-]+)", text)
    return m.group(1) if m else None


def _cap(digits: str) -> str:
    return f"{digits[:-1]}.{digits[-1]}" if len(digits) >= 2 else digits


TRANSFORMER = ToEvents()
