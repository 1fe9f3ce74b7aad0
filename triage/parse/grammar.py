"""The log grammar (`vllm_log.lark`) and what is read off it: the start rules, their FIRST
terminals (the anchors), and the anchor regexes built from those so the two cannot drift.

The search words (`vocabulary.py`) and the line parser (`parse.py`) both read this module;
it reads neither."""

from __future__ import annotations

import re
from functools import lru_cache

from lark import Lark
from lark.exceptions import UnexpectedCharacters

# Start rules, one per message family; the Transformer turns each into events.
START_RULES = (
    "oom", "cuda_error_oom", "cpu_alloc", "budget", "profile_split", "profile_results",
    "profile_time", "kv_memory", "kv_pinned", "kv_tokens", "max_concurrency", "blocks", "weights_v0", "kv_needed",
    "weights_v1", "startup_free", "profiling_error", "kv_error", "no_cache", "graph_start",
    "graph_done", "sampler_oom", "load_oom", "encoder_budget", "profile_start",
    "weights_start", "swap", "ready", "banner", "server_version", "logo_version", "arg_dump",
    "traceback", "frame", "chain", "exception", "wrapper", "address_in_use", "hub_http", "hub_gated",
    "hub_missing", "architecture", "not_divisible", "not_enough_gpus", "bf16_capability", "cc_below",
    "quant_capability", "driver", "nccl", "nccl_code", "nccl_watchdog", "shm", "host_memory", "killed",
    "usage_error", "arch_no_impl", "world_size", "exit_status", "rpc_call", "failed_procs",
    "arch_unknown_model_type", "divisibility", "dtype_for_quant", "dist_init", "systemd_restart", "systemd_exit",
    "systemd_oom", "phase_call", "crash", "exit_code", "supervisor",
    "mps_oom", "device_error", "loader", "package_mismatch", "no_gpu", "hub_offline",
    "model_missing", "files_corrupt", "disk_full", "not_writable", "config_invalid", "main_guard", "collective",
)
# Rules that only make sense at the start of a message (their anchors are generic words).
AT_START_ONLY = frozenset({"frame", "chain", "exception", "killed", "phase_call"})
# Functions whose call, quoted in a traceback's source line, names the phase (vllm_log.lark's
# PHASE_CALL lists the same; a test keeps the two equal).
PHASE_CALLS = ("warmup_kernels", "kernel_warmup", "capture_model", "profile_run", "_dummy_sampler_run",
               "_dummy_run", "determine_available_memory", "determine_num_available_blocks",
               "_initialize_kv_caches", "initialize_kv_cache", "load_model", "flashinfer_autotune")


@lru_cache(maxsize=1)
def grammar() -> Lark:
    """The grammar, built once per process (and cached on disk by lark between runs)."""
    lark = Lark.open_from_package(
        __package__, "vllm_log.lark", parser="lalr", start=list(START_RULES), cache=_cache_path()
    )
    _skip_root_lexer(lark)
    return lark


class _NoRootLexer:
    """Stands in for the contextual lexer's root lexer, which lark builds (all 185 terminals:
    about 25 ms) at the first character no state expects, only to reword the error. Raising
    UnexpectedCharacters makes lark raise its original error, at the same position: the
    only thing `_error_pos` reads."""

    def next_token(self, lex_state, parser_state=None):
        raise UnexpectedCharacters(" ", 0, 1, 1)


def _skip_root_lexer(lark: Lark) -> None:
    lexer = getattr(getattr(lark, "parser", None), "lexer", None)
    if hasattr(lexer, "root_lexer"):  # lark's ContextualLexer; another lexer keeps its ways
        lexer.root_lexer = _NoRootLexer()


def _cache_path() -> str | bool:
    from triage.cache import grammar_cache

    return grammar_cache(__package__, "vllm_log.lark")  # named by the grammar's content


@lru_cache(maxsize=1)
def anchors() -> tuple[re.Pattern[str], dict[str, str]]:
    """One regex with a named group per start rule, from each rule's first terminals."""
    groups, names = anchor_groups()
    return re.compile("|".join(source for _, _, source in groups)), names


@lru_cache(maxsize=1)
def anchor_groups() -> tuple[list[tuple[str, str, str]], dict[str, str]]:
    """(group name, start rule, regex source) in search order, and group name -> rule.

    `anchors()` joins them into one pattern; the line parser compiles only the groups a log
    needs (compiling the whole pattern costs more than parsing a small log)."""
    lark = grammar()
    terminals = {t.name: t for t in lark.terminals}
    first = first_terminals(lark)
    groups, names = [], {}
    # Generic start-of-message anchors (exception names, frames) go last, so at a position
    # where a specific phrase also starts, the specific one is what the search reports.
    ordered = sorted(enumerate(START_RULES), key=lambda ir: ir[1] in AT_START_ONLY)
    for i, rule in ordered:
        pats = []
        for term in sorted(first[rule]):
            regexp = terminals[term].pattern.to_regexp()
            pats.append(f"(?<!{RUN_HEADS[term]})(?:{regexp})" if term in RUN_HEADS else regexp)
        group = f"a{i}"
        names[group] = rule
        groups.append((group, rule, f"(?P<{group}>{'|'.join(pats)})"))
    return groups, names


# Anchors that open with a repeated class (`[\w.\-]+: error: `, `\d+ is not divisible`): a search
# tries them from every offset of a long word, quadratic in its length (one 64 KiB base64 line
# took minutes). A match can only start where such a run starts; the scan says so with a
# lookbehind (the grammar is unchanged). tests/test_hostile_input.py times every anchor.
RUN_HEADS: dict[str, str] = {
    "EXC_NAME": r"[\w.]",
    "USAGE_HEAD": r"[\w.\-]",
    "NO_VLLM_IMPL": r"[\w.]",
    "NOT_DIVISIBLE_BY": r"\d",
    "LOADER_HEAD": r"[\w.+\-/]",
}



def first_terminals(lark: Lark) -> dict[str, set[str]]:
    """FIRST sets of the start rules (terminal names), computed from lark's rule table."""
    by_origin: dict[str, list[list[str]]] = {}
    for rule in lark.rules:
        by_origin.setdefault(rule.origin.name, []).append([s.name for s in rule.expansion])
    memo: dict[str, set[str]] = {}

    def first(sym: str, seen: frozenset[str]) -> set[str]:
        if sym not in by_origin:
            return {sym}
        if sym in memo:
            return memo[sym]
        out: set[str] = set()
        for expansion in by_origin[sym]:
            for s in expansion:
                if s in seen:
                    break
                out |= first(s, seen | {sym})
                if not _nullable(s, by_origin):
                    break
        memo[sym] = out
        return out

    return {r: first(r, frozenset()) for r in START_RULES}


def _nullable(sym: str, by_origin: dict[str, list[list[str]]]) -> bool:
    return sym in by_origin and any(not exp for exp in by_origin[sym])
