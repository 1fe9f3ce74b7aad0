"""Slack Block Kit JSON (`{"blocks": [...], "text": fallback}`) for an incoming webhook or chat.postMessage.

Slack rejects a whole message when one block breaks a limit, so every text is cut to fit
(with "…") after escaping, never inside an `&amp;` entity, and code spans are built from
pieces that were cut before they were wrapped, so a cut never leaves a span open.
"""

from __future__ import annotations

import json

from triage.model.report import Diagnosis, Report
from triage.render.common import best_remedy, command_line, headline
from triage.version import __version__

HEADER_CHARS = 150
SECTION_CHARS = 3000
CONTEXT_CHARS = 2000
FALLBACK_CHARS = 3000
MAX_BLOCKS = 50
MAX_DIAGNOSES = 3
MAX_REMEDIES = 5
REMEDY_CHARS = 180  # for its flags and again for its text: 5 remedies and a title leave ~750 for the why
FAILURE_CHARS = 1500
TITLE_CHARS = 300
HEADERS = {
    "failed": "vLLM failed to start",
    "healthy": "vLLM started",
    "incomplete": "vLLM log incomplete",
    "recovered": "vLLM started after a failed attempt",
}


def render(report: Report, **_: object) -> str:
    return json.dumps(message(report), indent=2, ensure_ascii=False) + "\n"


def join(chunks: list[str]) -> str:
    """Several logs: one message object per line (JSON Lines), each ready to post on its own."""
    if len(chunks) == 1:
        return chunks[0]
    return "".join(json.dumps(json.loads(c), ensure_ascii=False) + "\n" for c in chunks)


def message(report: Report) -> dict:
    blocks = [_header(report), _section(_state(report)), _context(report)]
    shown = report.diagnoses[:MAX_DIAGNOSES]
    for i, d in enumerate(shown, 1):
        blocks += [{"type": "divider"}, _section(_diagnosis(i, d))]
    if len(report.diagnoses) > len(shown):
        rest = ", ".join(f"`{_code(d.id, 80)}`" for d in report.diagnoses[len(shown) :])
        more = len(report.diagnoses) - len(shown)
        blocks.append(_context_text(f"{more} more possible {'cause' if more == 1 else 'causes'}: {rest}"))
    return {"blocks": blocks[:MAX_BLOCKS], "text": _fallback(report)}


def escape(text: str) -> str:
    """The three characters Slack's mrkdwn reserves."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def clip(text: str, n: int) -> str:
    """Cut to at most n characters with "…", never through an entity such as `&amp;`."""
    if len(text) <= n:
        return text
    cut = text[: n - 1]
    amp = cut.rfind("&")
    if amp != -1 and ";" not in cut[amp:]:
        cut = cut[:amp]
    return cut + "…"


def _code(text: str, n: int) -> str:
    """Text for inside a code span: no backticks (they would end it), escaped, cut."""
    return clip(escape(" ".join(text.replace("`", "'").split())), n)


def _header(report: Report) -> dict:
    text = " ".join(f"{HEADERS[report.outcome]}: {report.input.name}".split())  # plain text: no entities
    text = text if len(text) <= HEADER_CHARS else text[: HEADER_CHARS - 1] + "…"
    return {"type": "header", "text": {"type": "plain_text", "text": text, "emoji": False}}


def _section(text: str) -> dict:
    return {"type": "section", "text": {"type": "mrkdwn", "text": clip(text, SECTION_CHARS)}}


def _context_text(text: str) -> dict:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": clip(text, CONTEXT_CHARS)}]}


def _context(report: Report) -> dict:
    version = f"vLLM {report.vllm.version}" if report.vllm.version else "vLLM version unknown"
    engine = f" ({report.vllm.engine.upper()})" if report.vllm.engine else ""
    return _context_text(f"{escape(version)}{engine} · {escape(report.input.name)} · vllm-triage {__version__}")


def _state(report: Report) -> str:
    failure = report.failure
    if report.outcome == "failed" and failure:
        phase = f" during *{escape(failure.phase.replace('_', ' '))}*" if failure.phase else ""
        origin = f" ({escape(failure.origin)})" if failure.origin else ""
        body = escape(failure.message.replace("```", "'''").strip())
        text = f"*Failed*{phase} at line {failure.line}{origin}\n```{clip(body, FAILURE_CHARS)}```"
    else:
        text = escape(headline(report))
    if report.outcome == "failed" and not report.diagnoses:
        text += "\nNo known cause matched this failure."
    return text


def _diagnosis(i: int, d: Diagnosis) -> str:
    title = f"*{i}. {clip(escape(d.title), TITLE_CHARS)}*  `{_code(d.id, 80)}` · confidence {d.confidence:.2f}"
    remedies = [_remedy(r.text, command_line(r)) for r in d.remedies[:MAX_REMEDIES]]
    if len(d.remedies) > MAX_REMEDIES:
        remedies.append(f"• …and {len(d.remedies) - MAX_REMEDIES} more")
    tail = "\n".join(["*What to change*"] + remedies) if remedies else ""
    budget = SECTION_CHARS - len(title) - len(tail) - 2
    explanation = clip(escape(d.explanation), budget) if d.explanation and budget > 1 else ""
    return "\n".join(x for x in (title, explanation, tail) if x)


def _remedy(text: str, cmd: str) -> str:
    code = f"`{_code(cmd, REMEDY_CHARS)}` — " if cmd else ""
    return f"• {code}{clip(escape(text), REMEDY_CHARS)}"


def _fallback(report: Report) -> str:
    """The notification text (and what clients without Block Kit show)."""
    text = headline(report)
    if report.diagnoses:
        d = report.diagnoses[0]
        best = best_remedy(d)
        text += f": {d.title}" + (f". Try {command_line(best)}" if best else "")
    return clip(escape(text), FALLBACK_CHARS)
