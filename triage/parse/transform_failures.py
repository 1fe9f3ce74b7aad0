"""Parse trees to event fields for startup failures that are not about GPU memory: the port, the
hub, the architecture, parallelism, capability, driver, NCCL, shared and host memory, kills and
crashes, usage errors. A mixin of ToEvents (transform.py)."""

from __future__ import annotations

import re

from triage.parse.lark_runtime import Token, Transformer
from triage.parse.layer_hints import is_shm_path
from triage.parse.transform_common import inline_children, whole
from triage.patterns import LazyPattern
from triage.units import parse_size


@inline_children
class FailureEvents(Transformer):
    """Methods named after the start rules of the non-memory startup failures."""

    # --- other startup failures ---
    def address_in_use(self, _errno, rest):
        return rest

    def bind_uvicorn(self, host, port, tail):
        return {"kind": "address_in_use", "host": str(host)[1:-1], "port": whole(port)}

    def bind_plain(self, tail):
        if "in use" not in str(tail).lower():
            raise ValueError("not an address-in-use error")
        port = re.search(r"port[ =:]+(\d+)|:(\d{2,5})\b", str(tail))
        return {"kind": "address_in_use", "port": whole(port.group(1) or port.group(2)) if port else None}

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
        out = {"kind": "repo_not_found", "repo": _hf_repo(rest) or (quoted.group(1) if quoted else None)}
        if str(head).startswith("Revision"):  # huggingface_hub's RevisionNotFoundError: .../revision/<rev>
            rev = re.search(r"/revision/([^\s/.]+(?:\.[^\s/.]+)*?)\.?(?:\s|$)|Invalid rev id: (\S+)", rest)
            out["revision"] = next((g for g in rev.groups() if g), None) if rev else "?"
        return out

    def architecture(self, names, verb, tail=None):
        archs = tuple(re.findall(r"'([^']+)'", str(names)))
        rest = str(tail or "")
        listed = "upported architectures" in rest and any(f"'{a}'" in rest for a in archs)
        return {
            "kind": "architecture_unsupported",
            "architectures": archs,
            "listed": listed,
            "inspect_failed": "inspected" in str(verb),
        }

    def arch_no_impl(self, head, tail=None):
        name = re.match(r"(?:Cannot find model module\. )?'?([\w.]+)", str(head))
        return {"kind": "architecture_unsupported", "architectures": (name.group(1),) if name else ()}

    def bind_zmq(self, head, tail=None):
        port = re.search(r":(\d{2,5})\b", str(tail or ""))
        return {"kind": "address_in_use", "port": whole(port.group(1)) if port else None, "host": "zmq"}

    def bind_c10d(self, head, tail=None):
        # errors.md §3.6: the tail names the errno (98 / EADDRINUSE); another errno (13, a wrong
        # address) is not a taken port, and figures cut before their errno do not say. A paste
        # of the sentence alone is read as the usual reason, a taken port.
        text = str(tail or "").strip(" .")
        in_use = re.search(r"errno: 98\b|code: -98\b|EADDRINUSE|in use", text, re.I)
        if text and not in_use:
            raise ValueError("the rendezvous server failed for another reason, or the paste cut its errno")
        port = re.search(r"port: (\d+)|:(\d{2,5}) \(errno", text)
        return {
            "kind": "address_in_use",
            "port": whole(port.group(1) or port.group(2)) if port else None,
            "host": "c10d",
        }

    def remote_code(self, head, tail=None):
        repo = re.search(r"https://(?:hf\.co|huggingface\.co)/([\w.\-]+/[\w.\-]+?)\.?(?:\s|$)", str(tail or ""))
        return {"kind": "remote_code_required", "repo": repo.group(1) if repo else None}

    def arch_unknown_model_type(self, model_type, tail=None):
        return {"kind": "architecture_unsupported", "architectures": (str(model_type).strip("`"),)}

    def divisibility(self, head, tail=None):
        a, b = re.findall(r"\d+", str(head))[:2]
        return {
            "kind": "not_divisible",
            "what": "units (heads, layers or experts)",
            "total": whole(a),
            "size": whole(b),
            "parallel": "tensor",
        }

    def dtype_for_quant(self, head, method, tail=None):
        dtype = str(head).split()[0][len("torch.") :]
        return {
            "kind": "capability_too_low",
            "feature": f"{dtype} with quantization {str(method).rstrip('.')}",
            "required": None,
        }

    def dist_init(self, head, tail=None):
        return {"kind": "nccl_error", "problem": f"distributed init failed ({head})"}

    def systemd_restart(self, count, *rest):
        return {"kind": "restart_count", "count": whole(count)}

    def systemd_exit(self, code, status, tail=None):
        how, value = str(code).rstrip(","), str(status)
        if how == "killed" and value.split("/")[0] == "9":
            return {"kind": "killed", "signal": "SIGKILL"}
        if value.startswith("7/") and how == "killed":
            return {"kind": "killed", "signal": "SIGBUS"}
        number = int(value.split("/")[0])
        return {
            "kind": "process_died",
            "name": "main process (systemd)",
            "exit_code": -number if how == "killed" else number,
            "wrapper": f"systemd: {how}",
        }

    def systemd_oom(self, tail=None):
        return {"kind": "host_memory_problem", "problem": "systemd: the kernel OOM killer killed a process of the unit"}

    def batch_default(self, n, tail=None):
        return {"kind": "scheduler_batch", "max_num_batched_tokens": whole(n)}

    def rank_assigned(self, rank, world, dp, pp, *rest):
        ints = [x for x in rest if getattr(x, "type", "") == "INT"]
        return {"kind": "rank_assigned", "world": whole(world), "pp_rank": whole(pp), "tp_rank": whole(ints[-1])}

    def world_size(self, world, gpus, tail=None):
        return {
            "kind": "not_enough_gpus",
            "required": whole(world),
            "available": whole(gpus),
            "detail": f"world size {world} is larger than the {gpus} GPUs available in this node",
        }

    def exit_status(self, tok):
        text = str(tok)
        return {"kind": "killed", "signal": "SIGBUS" if "135" in text else "SIGKILL"}

    def not_divisible(self, what, total, by, size, tail=None):
        parallel = str(by).split()[0].lower()
        return {
            "kind": "not_divisible",
            "what": str(what),
            "total": whole(total),
            "size": whole(size),
            "parallel": parallel,
        }

    def not_enough_gpus(self, head, tail=None):
        detail = str(head)
        count = re.match(r"\s*(\d{1,6}) GPUs\b", str(tail or "")) if detail.endswith("requiring") else None
        if count is None:
            return {"kind": "not_enough_gpus", "detail": detail}
        return {"kind": "not_enough_gpus", "required": int(count[1]), "detail": f"{detail} {count[1]} GPUs"}

    def bf16_capability(self, required, *rest):
        has = next((r for r in rest if isinstance(r, tuple)), (None, None))
        return {
            "kind": "capability_too_low",
            "feature": "bfloat16",
            "required": str(required),
            "gpu": has[0],
            "capability": has[1],
        }

    def gpu_has(self, name, cap):
        return (str(name).strip(), str(cap))

    def cc_below(self, cap, tail=None):
        return {"kind": "capability_too_low", "feature": "this vLLM build", "required": str(cap)}

    def quant_capability(self, method, *rest):
        caps = [str(r) for r in rest if isinstance(r, Token) and r.type == "INT"]
        return {
            "kind": "capability_too_low",
            "feature": f"quantization {method}",
            "required": _cap(caps[0]) if caps else None,
            "capability": _cap(caps[1]) if len(caps) > 1 else None,
        }

    def quant_scheme_capability(self, *parts):
        caps = [str(r) for r in parts if isinstance(r, Token) and r.type == "INT"]
        return {
            "kind": "capability_too_low",
            "feature": "the checkpoint's quantization scheme",
            "required": _cap(caps[0]) if caps else None,
            "capability": _cap(caps[1]) if len(caps) > 1 else None,
        }

    def torch_arch(self, arch, tail=None):
        return {"kind": "torch_arch", "capability": _cap(str(arch)[3:].rstrip("a"))}

    def torch_arch_old(self, cap, tail=None):
        return {"kind": "torch_arch", "capability": str(cap)}

    def driver(self, head, tail=None):
        text = str(head)
        found = re.search(r"found version (\d+)", str(tail or ""))
        return {
            "kind": "driver_problem",
            "problem": _DRIVER_PROBLEMS.get(text, text),
            "found": found.group(1) if found else None,
        }

    def nccl(self, head, tail=None):
        return {"kind": "nccl_error", "problem": _nccl_problem(str(tail or ""))}

    def nccl_warn(self, tail=None):
        """A WARN whose text belongs to another family is left to it (errors.md §3.4): a relayed CUDA
        failure or a CUDA allocation (the CUDA text decides), a shared-memory segment (the shm event
        reads it, and its text cut by a wrap must stay a cut message for the unwrap to rejoin), two
        ranks on one device (the device assignment, not the transport)."""
        text = str(tail or "").strip()
        if text.startswith("Duplicate GPU detected"):  # more ranks than visible GPUs: two share one
            return {"kind": "not_enough_gpus", "detail": f"NCCL found two ranks on one GPU ({text[:160]})"}
        if _NATIVE_WARN.search(text):  # no family reads it by meaning: the catalogue's NCCL formats do
            return {"kind": "native_error", "layer": "NCCL", "text": text[:300]}
        if not text or _NOT_NCCL_WARN.search(text):
            return None
        return {"kind": "nccl_warn", "problem": text[:160]}

    def nccl_code(self, code, tail=None):
        return {"kind": "nccl_error", "problem": _NCCL_CODES.get(str(code), str(code))}

    def nccl_watchdog(self, work, tail=None):
        text = str(work)
        timeout = re.search(r"Timeout\(ms\)=(\d+)", text)
        seq = re.search(r"SeqNum=(\d+)", text)
        op = re.search(r"OpType=(\w+)", text)
        return {
            "kind": "nccl_error",
            "problem": "watchdog timeout",
            "timeout_ms": whole(timeout.group(1)) if timeout else None,
            "seq": whole(seq.group(1)) if seq else None,
            "op": op.group(1) if op else None,
        }

    def shm(self, head, tail=None):
        text, rest = str(head), str(tail or "")
        if text.startswith("unable to open shared memory object") and "No space left on device" not in rest:
            # torch names the errno after the object (errors.md 4.3): EMFILE and the others are no shm shortage
            raise ValueError("a shared memory object that failed for another reason (too many open files)")
        if text == "No space left on device":
            # the path decides (errors.md 9, trap 7): a quoted one by where it lies, else the words around
            path = re.search(r"""['"]([~/.\w][^'"]*)['"]""", rest)
            on_shm = is_shm_path(path.group(1)) if path else re.search(r"/dev/shm|\bshm\b|torch_\d", rest)
            if not on_shm:
                return {
                    "kind": "disk_full",
                    "problem": "no space left on device",
                    "path": path.group(1) if path else None,
                }
        path = re.search(r"(/dev/shm/\S+)", rest)
        size = re.search(r"\(size (\d+)\)|to (\d+) bytes|only (\d+) bytes", rest)
        return {
            "kind": "shm_problem",
            "problem": _SHM_PROBLEMS.get(text, text),
            "path": path.group(1) if path else None,
            "size": whole(next(g for g in size.groups() if g)) if size else None,
        }

    def host_memory(self, head, tail=None):
        text, rest = str(head), str(tail or "")
        if text == "unable to mmap" and "Cannot allocate memory" not in rest:
            raise ValueError("an mmap that failed for another reason (a missing file, a file system)")
        out = {
            "kind": "host_memory_problem",
            "problem": _HOST_PROBLEMS.get(text, text),
            "generic": text.startswith("A worker died"),
        }
        m = re.search(
            r"was (\d+(?:\.\d+)?)GB / (\d+(?:\.\d+)?)GB \((\d+(?:\.\d+)?)\), which exceeds the memory "
            r"usage threshold of (\d+(?:\.\d+)?)",
            rest,
        )
        if m:
            out.update(
                used=parse_size(m.group(1) + "GB"), total=parse_size(m.group(2) + "GB"), threshold=float(m.group(4))
            )
        return out

    def slurm_oom(self, head, tail=None):
        return {
            "kind": "host_memory_problem",
            "problem": "Slurm: the job step hit its memory limit (--mem) and was OOM-killed",
        }

    def killed(self, tok):
        return {"kind": "killed", "signal": "SIGBUS" if str(tok).startswith("Bus") else "SIGKILL"}

    def shell_job(self, head, tail=None):
        return {"kind": "killed", "signal": "SIGBUS" if str(head).endswith("Bus error") else "SIGKILL"}

    def signal_exit(self, head, tail=None):
        text = str(head)
        named = re.search(r"SIG[A-Z]+", text)
        said = re.search(r"killed by signal: (.+)$", text)
        number = re.search(r"exitcode: -(\d+)", text)
        signal = (
            named.group(0)
            if named
            else "SIGILL"
            if "invalid opcode" in text
            else _LINUX_SIGNALS.get(int(number.group(1)), "")
            if number
            else _STRSIGNAL.get(said.group(1) if said else "", "")
        )
        if said and signal == "SIGBUS":  # torch's DataLoader: a worker's shared-memory batch could not be backed
            return {"kind": "shm_problem", "problem": "a DataLoader worker died of a bus error (shared memory)"}
        if signal in ("SIGKILL", "SIGBUS"):
            return {"kind": "killed", "signal": signal}
        if signal in ("SIGSEGV", "SIGILL", "SIGABRT", "SIGFPE"):
            return {"kind": "process_crash", "signal": signal, "detail": f"{signal}: {text} {tail or ''}".strip()[:300]}
        raise ValueError("a stop signal (SIGTERM, SIGINT) or one this table does not know: not a cause by itself")

    def crash(self, head, tail=None):
        text = str(head)
        signal = next((sig for word, sig in _CRASH_SIGNALS if word in text), "SIGABRT")
        return {"kind": "process_crash", "signal": signal, "detail": f"{text} {tail or ''}".strip()[:300]}

    def probe_kill(self, container, kind, tail=None):
        return {"kind": "stop_requested", "by": f"{kind} probe", "probe": True}

    def stop_signal(self, sig, tail=None):
        return {"kind": "stop_requested", "by": str(sig), "probe": False}

    def systemd_timeout(self, head, tail=None):
        return {
            "kind": "stop_requested",
            "by": "systemd, whose start timeout (TimeoutStartSec) ran out",
            "probe": False,
        }

    def supervisor(self, head, tail=None):
        return {"kind": "process_died", "name": "the server's container or unit", "wrapper": str(head)}

    def exit_code(self, head, tail=None):
        code = int(re.sub(r"\D", "", str(head)))
        if code in (137, 135):  # `Exited (137)`: the kill forms that exit_status reads elsewhere
            return {"kind": "killed", "signal": "SIGBUS" if code == 135 else "SIGKILL"}
        return {"kind": "process_died", "exit_code": code, "wrapper": str(head).strip()}

    def usage_error(self, head, tail=None):
        message = str(tail or "")
        if _SLURM_TASK.match(message):  # `srun: error: <node>: task N: ...` glued to the line before it
            raise ValueError("Slurm's report of how a task ended, not a refused command line")
        return {"kind": "usage_error", "message": message[:300]}


# Linux's numbers of the fatal signals (errors.md 4.5): a negative exit code is the signal that ended a child
_LINUX_SIGNALS = {4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE", 9: "SIGKILL", 11: "SIGSEGV"}
# strsignal(3)'s texts (glibc), as torch's DataLoader and the shell print them
_STRSIGNAL = {
    "Killed": "SIGKILL",
    "Bus error": "SIGBUS",
    "Segmentation fault": "SIGSEGV",
    "Illegal instruction": "SIGILL",
    "Aborted": "SIGABRT",
    "Floating point exception": "SIGFPE",
}
_CRASH_SIGNALS = (
    ("Segmentation fault", "SIGSEGV"),
    ("Illegal instruction", "SIGILL"),
    ("Floating point exception", "SIGFPE"),
)

_DRIVER_PROBLEMS = {
    "no kernel image is available for execution on the device": "no kernel image for this GPU",
    "device kernel image is invalid": "kernel image built for another GPU or toolkit",
    "CUDA driver version is insufficient for CUDA runtime version": "driver older than the CUDA runtime",
    "The NVIDIA driver on your system is too old": "driver too old",
    "forward compatibility was attempted on non supported HW": "CUDA forward compatibility on unsupported hardware",
    "system has unsupported display driver / cuda driver combination": "driver and CUDA libraries mismatch",
    "hipErrorNoBinaryForGpu: Unable to find code object": "no kernel image for this GPU (the ROCm build lacks its gfx target)",  # noqa: E501
    "Failed to initialize NVML: Driver/library version mismatch": "driver and NVML library versions differ (reboot or reload the driver)",  # noqa: E501
    "nvidia-container-cli: requirement error: unsatisfied condition": "the image needs a newer CUDA than the host driver supports (driver too old)",  # noqa: E501
}
_NCCL_CODES = {
    "ncclSystemError": "unhandled system error",
    "ncclUnhandledCudaError": "unhandled cuda error",
    "ncclInternalError": "internal error",
    "ncclRemoteError": "remote process exited",
    "ncclInvalidUsage": "invalid usage",
    "ncclInvalidArgument": "invalid argument",
}
# WARNs whose meaning is not NCCL's transport and that no other family reads (errors.md §3.4): a
# CUDA allocation for NCCL's buffers, two ranks on one GPU, a segment it cannot open or map
_NATIVE_WARN = LazyPattern(r"CUDA calloc|CUDA malloc|CUDA host alloc|Could not map|Call to open failed")
_NOT_NCCL_WARN = LazyPattern(
    r"Cuda failure|CUDA calloc|out of memory|shared|/dev/shm|posix_fallocate|Could not map"
    r"|Call to open failed|Duplicate GPU detected"
)
_SHM_PROBLEMS = {
    "Call to posix_fallocate failed": "cannot allocate an NCCL shared-memory segment",
    "Error while creating shared memory segment": "cannot create an NCCL shared-memory segment",
    "failed to extend /dev/shm": "cannot extend an NCCL shared-memory segment",
    "No space left on device": "no space left on /dev/shm",
    "unable to write to file </torch_": "PyTorch could not write a shared-memory file in /dev/shm",
    "Fatal Python error: Bus error": "bus error",
    "SIGBUS received": "bus error",
    "Bus error (core dumped)": "bus error",
    "/dev/shm has only": "small /dev/shm",
    "Unexpected bus error encountered in worker": "a worker died of a bus error (PyTorch: shared memory too small)",
    "unable to open shared memory object </torch_": "PyTorch could not create a shared-memory object in /dev/shm",
}
_SLURM_TASK = LazyPattern(r"[\w.\-]+: tasks? [\d,\-\[\]]+: ")
_HOST_PROBLEMS = {
    "A worker died or was killed while executing a task by an unexpected system error": "a Ray worker died without a Python error",  # noqa: E501
    "Task was killed due to the node running low on memory": "Ray killed a task: node low on memory",
    "Memory on the node": "Ray memory monitor threshold exceeded",
    "killed by SIGKILL by OOM killer": "killed by the OOM killer",
    "OOM-killed": "container OOM-killed",
    "OOMKilled": "container OOM-killed",
    "Out of memory: Killed process": "kernel OOM killer",
    "oom-kill": "kernel OOM killer",
    "Memory cgroup out of memory: Kill": "kernel OOM killer (the container's or unit's memory limit)",
    "Out of memory: Kill process": "kernel OOM killer",
    "unable to mmap": "mapping a file into host memory failed: Cannot allocate memory (ENOMEM)",
    "[Errno 12] Cannot allocate memory": "the host refused an allocation (ENOMEM)",
    "Cannot allocate memory (os error 12)": "the host refused an allocation (ENOMEM)",
    "killed due to memory pressure (OOM)": "Ray's raylet killed workers under memory pressure",
    "were killed due to the node running low on memory": "Ray killed workers: node low on memory",
}


def _nccl_problem(text: str) -> str:
    for key in (
        "unhandled system error",
        "unhandled cuda error",
        "internal error",
        "remote process exited",
        "invalid usage",
        "invalid argument",
        "timeout",
    ):
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
