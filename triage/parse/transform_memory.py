"""Parse trees to event fields for GPU memory: OOMs, vLLM's profiling and KV cache figures, the
free memory at start-up and the KV capacity errors. A mixin of ToEvents (transform.py)."""

from __future__ import annotations

from triage.model import events as ev
from triage.parse.lark_runtime import Token, Transformer
from triage.parse.transform_common import inline_children, num, whole
from triage.units import parse_size


@inline_children
class MemoryEvents(Transformer):
    """Methods named after the memory start rules of vllm_log.lark."""

    # --- OOM ---
    def oom(self, head, *parts):
        # a paste may stop after the head, after the request or inside the figures
        fields = {"kind": "torch_oom", "device": str(head).split()[0]}
        for part in parts:
            if isinstance(part, dict):
                fields.update(part)
            elif part.type == "SIZE":
                fields["requested"] = parse_size(part)
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
            "gpu_index": whole(index[0]) if index else None,
            "total": parse_size(sizes[0]),
            "free": parse_size(sizes[1]),
        }

    def oom_process(self, pid, size):
        return "process", ev.OomProcess(pid=whole(pid), bytes=parse_size(size))

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
        return {"gpu_index": whole(index)}

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
        return {"kind": "cpu_alloc_failed", "requested": whole(n)}

    # --- V0 profiling ---
    def budget(self, total, util, budget, tail=None):
        return {
            "kind": "memory_budget",
            "total": parse_size(total),
            "utilization": num(util),
            "budget": parse_size(budget),
        }

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
            out.append(
                {
                    "kind": "memory_budget",
                    "total": total,
                    "utilization": float(util),
                    "budget": int(total * float(util)),
                }
            )
        out.append(
            {"kind": "memory_profile", "kv_cache": got.get("kv_cache_size"), "non_torch": got.get("non_torch_memory")}
        )
        return out

    def result_pair(self, name, value):
        return str(name), parse_size(value) if value.type == "SIZE" else num(value)

    # --- V1 profiling ---
    def profile_time(self, seconds, *clauses):
        out = {"kind": "memory_profile", "seconds": num(seconds)}
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
        return {"kind": "kv_cache_tokens", "tokens": whole(n)}

    def concurrency(self, n, factor):
        return {"kind": "max_concurrency", "tokens_per_request": whole(n), "factor": float(str(factor)[:-1])}

    def max_concurrency(self, conc, tail=None):
        return conc

    def blocks(self, _head, gpu, *rest):
        cpu = whole(rest[1]) if len(rest) >= 2 and rest[1].type == "INT" else None
        return {"kind": "cache_blocks", "gpu_blocks": whole(gpu), "cpu_blocks": cpu}

    def weights_v0(self, size, tail=None):
        return {"kind": "weights_loaded", "bytes": parse_size(size)}

    def weights_v1(self, size, *rest):
        secs = [r for r in rest if isinstance(r, Token) and r.type == "NUMBER"]
        return {"kind": "weights_loaded", "bytes": parse_size(size), "seconds": num(secs[0]) if secs else None}

    # --- startup free memory ---
    def startup_free(self, *args):
        device = str(args[0]) if args[0].type == "DEVICE_NAME" else None
        rest = args[1:] if device else args
        free_gib, total, tail = rest[0], rest[1], rest[2]
        fields = {
            "kind": "startup_free_memory",
            "free": parse_size(f"{free_gib} GiB"),
            "total": parse_size(total),
            "device": device,
        }
        fields.update(tail)
        return fields

    def free_error(self, util, requested):
        return {"utilization": num(util), "requested": parse_size(requested), "is_error": True}

    def free_info(self, util, requested):
        return {"utilization": num(util), "requested": parse_size(requested), "is_error": False}

    def profiling_error(self, figures=None, tail=None):
        fields = {"kind": "profiling_mismatch"}
        if isinstance(figures, dict):
            fields.update(figures)
        return fields

    def profiling_figures(self, measure, a, _cur, _m2, b):
        return {"measure": str(measure), "initial": a, "current": b}

    def amount(self, tok):
        return parse_size(tok) if tok.type == "SIZE" else whole(tok)

    # --- KV errors ---
    def kv_error(self, n, m=None, tail=None):
        tokens = m if isinstance(m, int) else None
        return {"kind": "kv_too_small", "max_seq_len": whole(n), "kv_tokens": tokens}

    def kv_error_tokens(self, m):
        return whole(m)

    def kv_needed(self, _word, n, *rest):
        fields = {"kind": "kv_needed", "max_seq_len": whole(n)}
        figures = next((r for r in rest if isinstance(r, dict)), None)
        if figures:
            fields.update(figures)
        return fields

    def kv_needed_figures(self, needed, available, est=None):
        return {
            "needed": parse_size(needed),
            "available": parse_size(available),
            "estimated_max_len": est if isinstance(est, int) else None,
        }

    def kv_estimate(self, n=None):
        return whole(n) if n is not None else None

    def no_cache(self, tail=None):
        return {"kind": "no_cache_memory"}

    def mamba_blocks(self, seqs, blocks, tail=None):
        return {"kind": "mamba_blocks_short", "max_num_seqs": whole(seqs), "blocks": whole(blocks)}
