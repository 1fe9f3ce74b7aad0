"""Invariance: a failing log re-expressed in another form it could have taken keeps its
primary cause (issue 10). The forms come from tests/corpus/variants.py: wrappers (docker compose,
Kubernetes timestamps, journald, SkyPilot, Ray, `[rankN]:`, a search tool's `Line N:`), a
first line cut mid-word, CRLF, UTF-16 with a BOM, and another platform's spelling of the
same error (HIP, XPU, NPU where ../shared/errors.md shows that platform prints it).

The reference is what the tool says of the log as it is, so a log it gets wrong today
(corpus_known_misses.yaml) still counts: the question here is only whether the form
changes the answer. Shares are computed over (log, variant) pairs, printed, and held to
the issue's bars: >= 95% overall, >= 90% per family.
"""

from __future__ import annotations

from collections import Counter
from functools import lru_cache

import pytest
import yaml
from conftest import CORPUS, fixture_cases, log_text, triage_bytes
from variants import (
    CHAT,
    EXCERPTS,
    FAMILIES,
    ONE_LINE,
    WRAPPERS,
    crlf,
    cut,
    cut_first_line,
    error_line,
    to_hip,
    to_npu,
    to_xpu,
    utf16,
    variants_for,
)

OVERALL_BAR, FAMILY_BAR, EXCERPT_BAR, ONE_LINE_BAR = 0.95, 0.90, 0.95, 0.95


def _failing_logs() -> list[tuple[str, str]]:
    logs = [
        (log.stem, log.read_bytes().decode("utf-8", "replace"))
        for log, expect in fixture_cases()
        if expect.get("expect")
    ]
    labels = CORPUS / "labels.yaml"
    if labels.exists():
        for case, meta in sorted((yaml.safe_load(labels.read_text()) or {}).items()):
            path = CORPUS / f"{case}.log"
            if path.exists() and meta.get("expect"):
                logs.append((case, log_text(path)))
    return logs


def _primary(data: bytes) -> str | None:
    report = triage_bytes(data)
    return report.diagnoses[0].id if report.diagnoses else None


@lru_cache(maxsize=1)
def results() -> tuple[tuple[str, str, str, bool], ...]:
    """(family, variant, log, kept its primary cause) for every pair that applies."""
    out = []
    for name, text in _failing_logs():
        want = _primary(text.encode())
        if want is None:
            continue
        for family, variant, make in variants_for(name):
            data = make(text)
            if data is not None:
                out.append((family, variant, name, _primary(data) == want))
    return tuple(out)


def shares(key) -> dict[str, tuple[int, int]]:
    kept, total = Counter(), Counter()
    for row in results():
        total[key(row)] += 1
        kept[key(row)] += row[3]
    return {k: (kept[k], total[k]) for k in total}


def _table() -> str:
    rows = [("overall", *shares(lambda r: "all")["all"])]
    rows += [(f"family {k}", *v) for k, v in sorted(shares(lambda r: r[0]).items())]
    rows += [(f"  {k}", *v) for k, v in sorted(shares(lambda r: r[1]).items())]
    return "\n".join(f"invariance {label:<22} {kept:>5}/{total:<5} {kept / total:6.1%}" for label, kept, total in rows)


def test_the_overall_share_of_pairs_that_keep_their_primary_cause(capsys):
    kept, total = shares(lambda r: "all")["all"]
    with capsys.disabled():
        print("\n" + _table())
    missed = [r[1:3] for r in results() if not r[3]]
    assert kept / total >= OVERALL_BAR, f"{kept}/{total}; changed: {missed}"


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_each_family_keeps_its_share(family):
    kept, total = shares(lambda r: r[0]).get(family, (0, 0))
    assert total, f"no log has a {family} variant"
    missed = [r[1:3] for r in results() if r[0] == family and not r[3]]
    assert kept / total >= FAMILY_BAR, f"{family}: {kept}/{total}; changed: {missed}"


def test_the_npu_spelling_keeps_its_share():
    kept, total = shares(lambda r: r[1]).get("npu", (0, 0))
    assert total and kept / total >= FAMILY_BAR


# --- the generator itself: each form is the shape the real tool prints -------------------

SAMPLE = (
    "INFO 07-18 09:30:06 [api_server.py:1395] vLLM API server version 0.9.2\n"
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
    "23.65 GiB of which 1.19 GiB is free.\n"
)


def test_the_generator_makes_the_shapes_it_names():
    assert crlf(SAMPLE).count(b"\r\n") == 2
    assert utf16(SAMPLE)[:2] in (b"\xff\xfe", b"\xfe\xff")
    assert cut_first_line(SAMPLE).startswith(b"O 07-18")
    assert WRAPPERS["compose"](SAMPLE).startswith(b"vllm-1  | INFO")
    assert WRAPPERS["grep-tool"](SAMPLE).split(b"\n")[1].startswith(b"  Line 2: torch")
    assert b"HIP out of memory. Tried" in to_hip(SAMPLE)
    assert b"XPU out of memory. Tried to allocate 2.00 GiB. GPU 0" in to_xpu(SAMPLE)
    assert to_npu(SAMPLE) is None  # the new form: errors.md shows NPU only in the old one
    old = "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 14.75 GiB total capacity; ...)"
    assert (
        to_npu(old)
        == b"RuntimeError: NPU out of memory. Tried to allocate 20.00 MiB (NPU 0; 14.75 GiB total capacity; ...)"
    )


def test_variants_are_chosen_the_same_way_every_run():
    assert variants_for("some-log") == variants_for("some-log")
    assert len({v for _, v, _ in variants_for("a")} & set(WRAPPERS)) == 3


# --- the excerpt family: cut to the error line, the last traceback, the last 20 lines --------
# A cut is expected to keep the primary cause when it keeps the sign: every line the leading
# diagnosis cites as evidence, except the lines that only state the launch's configuration
# (the version banner, the non-default args, the engine's config), which an excerpt lacks by
# nature and which shape remedies, not the cause.
_CONTEXT_ONLY = (
    "non-default args",
    "with config:",
    "API server version",
    "Automatically detected platform",
    "vLLM version",
    "args: Namespace(",
    "Initializing an LLM engine",
    "Initializing a V1 LLM engine",
)


# Causes a phase places (taxonomy v3: the same OOM without its phase is gpu_out_of_memory): their
# sign includes the phase, so a cut is expected to hold only where it still shows that phase.
PHASE_PLACED = frozenset({"cuda_graph_capture_oom", "warmup_oom", "weights_exceed_memory"})


def _sign_lines(report) -> set[int]:
    lead = report.diagnoses[0]
    return {e.line for e in lead.evidence if not any(c in e.text for c in _CONTEXT_ONLY)} or {report.failure.line}


@lru_cache(maxsize=1)
def excerpt_results() -> tuple[tuple[str, str, bool, bool], ...]:
    """(cut, log, expected to hold, held) for every failing log and every cut that applies."""
    out = []
    for name, text in _failing_logs():
        report = triage_bytes(text.encode())
        if not report.diagnoses or report.failure is None:
            continue
        want, signs = report.diagnoses[0].id, _sign_lines(report)
        lines = text.replace("\r\n", "\n").split("\n")
        for label, make in EXCERPTS.items():
            span = make(lines, report.failure.line)
            if span is None:
                continue
            excerpt = triage_bytes(cut(text, span))
            expected = all(span[0] <= n <= span[1] for n in signs)
            if want in PHASE_PLACED:
                expected = expected and excerpt.failure is not None and excerpt.failure.phase == report.failure.phase
            out.append((label, name, expected, bool(excerpt.diagnoses) and excerpt.diagnoses[0].id == want))
    return tuple(out)


def test_excerpts_that_keep_the_sign_keep_the_primary_cause(capsys):
    rows = excerpt_results()
    expected = [r for r in rows if r[2]]
    held = sum(r[3] for r in expected)
    missed = sorted((r[0], r[1]) for r in expected if not r[3])
    with capsys.disabled():
        for label in EXCERPTS:
            mine = [r for r in expected if r[0] == label]
            print(
                f"excerpt {label:<15} {sum(r[3] for r in mine):>4}/{len(mine):<4} expected to hold; "
                f"{sum(1 for r in rows if r[0] == label and not r[2] and r[3])} more held without their sign"
            )
        print(f"excerpt overall         {held:>4}/{len(expected):<4} {held / len(expected):6.1%}")
        for label, name in missed:
            print(f"  expected to hold, did not: {label} {name}")
    assert len(expected) >= 100, "too few cuts keep their sign to measure"
    assert held / len(expected) >= EXCERPT_BAR, f"{held}/{len(expected)}; did not hold: {missed}"


def test_the_cuts_take_the_lines_they_name():
    from variants import error_line, last_lines, last_traceback

    lines = [
        "INFO start",
        "Traceback (most recent call last):",
        '  File "x.py", line 1, in f',
        "ValueError: bad",
        *[f"INFO {i}" for i in range(30)],
        "",
    ]
    assert error_line(lines, 4) == (4, 4)
    assert last_traceback(lines, 4) == (2, 4)
    assert last_traceback(lines, 1) is None
    assert last_lines(lines, 4) == (15, 34)
    assert (
        cut("\n".join(lines), (2, 4))
        == b'Traceback (most recent call last):\n  File "x.py", line 1, in f\nValueError: bad\n'
    )


# --- one line pasted through a chat box: the error line alone (where it keeps the cause by
# itself) in each one-line form a chat tool gives it (backticks, a bullet, a quote, a chat
# header, IRC's nick, HTML entities, curly quotes, a fence).


@lru_cache(maxsize=1)
def one_line_results() -> tuple[tuple[str, str, bool], ...]:
    """(form, log, kept its primary cause) for every failing log whose error line alone keeps it."""
    out = []
    for name, text in _failing_logs():
        report = triage_bytes(text.encode())
        if not report.diagnoses or report.failure is None:
            continue
        want = report.diagnoses[0].id
        span = error_line(text.replace("\r\n", "\n").split("\n"), report.failure.line)
        if span is None:
            continue
        line = cut(text, span).decode().rstrip("\n")
        if _primary((line + "\n").encode()) != want:
            continue
        out += [(form, name, _primary((make(line) + "\n").encode()) == want) for form, make in ONE_LINE.items()]
    return tuple(out)


def test_one_line_chat_pastes_keep_the_primary_cause(capsys):
    rows = one_line_results()
    with capsys.disabled():
        for form in ONE_LINE:
            mine = [r for r in rows if r[0] == form]
            print(f"one-line chat {form:<10} {sum(r[2] for r in mine):>4}/{len(mine):<4}")
    for form in ONE_LINE:
        mine = [r for r in rows if r[0] == form]
        held = sum(r[2] for r in mine)
        missed = [r[1] for r in mine if not r[2]]
        assert len(mine) >= 100 and held / len(mine) >= ONE_LINE_BAR, f"{form}: {held}/{len(mine)}; missed: {missed}"


CHAT_BAR = (
    0.995  # measured 1851/1855 (99.8%) once short JSON pastes, `N: ` gutters, `ts` + journald and curly frames held
)


def test_the_chat_family_keeps_its_measured_share():
    kept, total = shares(lambda r: r[0]).get("chat", (0, 0))
    missed = [r[1:3] for r in results() if r[0] == "chat" and not r[3]]
    assert total and kept / total >= CHAT_BAR, f"chat: {kept}/{total}; changed: {missed}"


def test_the_chat_generator_makes_the_shapes_it_names():
    line = 'ValueError: can\'t use --max-model-len "4096"...'
    assert CHAT["fence-log"](line).splitlines()[2:] == [b"```log", line.encode(), b"```"]
    assert CHAT["blockquote"](SAMPLE).split(b"\n")[1].startswith(b"> torch")
    assert CHAT["html"](line) == b"ValueError: can&#39;t use --max-model-len &quot;4096&quot;..."
    assert CHAT["json"]('a "b"\nc\n') == b'a \\"b\\"\\nc\\n\n'
    assert CHAT["smart"](line).decode() == "ValueError: can\u2019t use \u2014max-model-len \u201c4096\u201d\u2026"
    assert CHAT["spaces"]("  File x").decode() == "\u200b\u00a0\u00a0File x"
    assert CHAT["teams"](SAMPLE).startswith(b"[10:42 AM] alice: INFO")
    assert CHAT["irc"](SAMPLE).startswith(b"<bob> INFO")
    assert CHAT["ts"](SAMPLE).split(b"\n")[1].startswith(b"Dec 05 10:42:01 torch")
    assert CHAT["gutter"](SAMPLE).split(b"\n")[1].startswith(b"   2 | torch")
    assert ONE_LINE["backticks"](line) == f"`{line}`"


def _healthy_logs() -> list[tuple[str, str]]:
    logs = [
        (log.stem, log.read_bytes().decode("utf-8", "replace"))
        for log, expect in fixture_cases()
        if not expect.get("expect")
    ]
    labels = CORPUS / "labels.yaml"
    if labels.exists():
        for case, meta in sorted((yaml.safe_load(labels.read_text()) or {}).items()):
            path = CORPUS / f"{case}.log"
            if path.exists() and not meta.get("expect"):
                logs.append((case, log_text(path)))
    return logs


def test_a_healthy_log_through_a_chat_tool_stays_healthy():
    """Every chat form of every log that is healthy as it is: the normalisations must not make
    a server that came up (or a log that states no failure) read as failed."""
    alarms = []
    for name, text in _healthy_logs():
        if triage_bytes(text.encode()).diagnoses:
            continue
        for form, make in CHAT.items():
            data = make(text)
            report = triage_bytes(data) if data is not None else None
            if report is not None and report.diagnoses:
                alarms.append((form, name, report.diagnoses[0].id))
    assert not alarms
