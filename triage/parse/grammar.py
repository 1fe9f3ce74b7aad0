"""The log grammar (`vllm_log.lark`) and what is read off it: the start rules (its `family`
and `opening` lists), their FIRST terminals (the anchors), and the anchor regexes built from
those so the two cannot drift.

The search words (`vocabulary.py`) and the line parser (`parse.py`) both read this module;
it reads neither."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING

from triage.parse.log_parser import AT_START_ONLY as _OPENING
from triage.parse.log_parser import START_RULES

if TYPE_CHECKING:
    from triage.parse.lark_runtime import Lark


# Start rules, one per message family (the grammar's `family` and `opening` lists); the
# Transformer turns each into events. AT_START_ONLY: the `opening` ones, which only make
# sense at the start of a message (their anchors are generic words).
# scripts/gen_parsers.py reads them off the grammar's text and writes them beside its tables.
AT_START_ONLY = frozenset(_OPENING)
# Functions whose call, quoted in a traceback's source line, names the phase (vllm_log.lark's
# PHASE_CALL lists the same; a test keeps the two equal).
PHASE_CALLS = (
    "warmup_kernels",
    "kernel_warmup",
    "capture_model",
    "profile_run",
    "_dummy_sampler_run",
    "_dummy_run",
    "determine_available_memory",
    "determine_num_available_blocks",
    "_initialize_kv_caches",
    "initialize_kv_cache",
    "load_model",
    "flashinfer_autotune",
)


@lru_cache(maxsize=1)
def grammar() -> Lark:
    """The parser, built once per process from the standalone module `scripts/gen_parsers.py`
    writes (lark's LALR runtime and this grammar's tables: no grammar loader at run time)."""
    from triage.parse.log_parser import Lark_StandAlone

    lark = Lark_StandAlone()
    _skip_root_lexer(lark)
    return lark


class _NoRootLexer:
    """Stands in for the contextual lexer's root lexer, which lark builds (all 185 terminals:
    about 25 ms) at the first character no state expects, only to reword the error. Raising
    UnexpectedCharacters makes lark raise its original error, at the same position: the
    only thing `_error_pos` reads."""

    def next_token(self, lex_state: object, parser_state: object = None) -> object:
        from triage.parse.lark_runtime import UnexpectedCharacters

        raise UnexpectedCharacters(" ", 0, 1, 1)


def _skip_root_lexer(lark: Lark) -> None:
    lexer = getattr(getattr(lark, "parser", None), "lexer", None)
    if lexer is not None and hasattr(lexer, "root_lexer"):  # lark's ContextualLexer; another keeps its ways
        lexer.root_lexer = _NoRootLexer()


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
    first = start_firsts()
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
# lookbehind (the grammar is unchanged). tests/hostile/test_hostile_input.py times every anchor.
RUN_HEADS: dict[str, str] = {
    "EXC_NAME": r"[\w.]",
    "USAGE_HEAD": r"[\w.\-]",
    "NO_VLLM_IMPL": r"[\w.]",
    "NOT_DIVISIBLE_BY": r"\d",
    "LOADER_HEAD": r"[\w.+\-/]",
}


@lru_cache(maxsize=1)
def start_firsts() -> dict[str, set[str]]:
    """The parser's `first_terminals`, worked out once (the anchors and the search words both read them)."""
    return first_terminals(grammar())


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
