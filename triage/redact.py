"""Scrub secrets from every string that leaves the process.

Logs carry tokens: `HF_TOKEN` in an environment dump, `api_key='...'` in printed
arguments, `Authorization: Bearer ...` in a request log, credentials in a URL, a private
key pasted by mistake. A report may be pasted into a public channel, so redaction is on by
default in every output: the pipeline redacts every string of the report, and the CLI runs
`redact_text` once more over text formats and over its own error lines.

Every pattern is linear in its input: quantifiers that could be tried from each offset of a
long word are bounded, so a hostile 64 KiB line costs milliseconds, not minutes.
"""

from __future__ import annotations

import re
from typing import Any

MASK = "[REDACTED]"

_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    # private key blocks, whole (to the end of the text when the END line is missing)
    (re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----.*?"
                r"(?:-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----|\Z)", re.S), MASK),
    # Hugging Face user/org tokens
    (re.compile(r"\bhf_[A-Za-z0-9]{20,}"), MASK),
    # OpenAI / Anthropic / DeepSeek style keys: sk-..., sk-proj-..., sk-ant-api03-...
    (re.compile(r"\bsk-[A-Za-z0-9_\-]{16,}"), MASK),
    # Stripe-style live/test keys, Groq, Google, GitLab, NVIDIA, Replicate, PyPI, npm
    (re.compile(r"\b(?:[rsp]k_(?:live|test)_[A-Za-z0-9]{16,}|gsk_[A-Za-z0-9]{20,}|AIza[0-9A-Za-z_\-]{30,}"
                r"|glpat-[A-Za-z0-9_\-]{20,}|nvapi-[A-Za-z0-9_\-]{20,}|r8_[A-Za-z0-9]{20,}"
                r"|pypi-[A-Za-z0-9_\-]{40,}|npm_[A-Za-z0-9]{30,})"), MASK),
    # GitHub and Slack tokens, Slack webhooks
    (re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|xox[abprse]-[A-Za-z0-9\-]{10,}"
                r"|xapp-[A-Za-z0-9\-]{10,})"), MASK),
    (re.compile(r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/\-]+"), "hooks.slack.com/" + MASK),
    # AWS access key ids
    (re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[A-Z0-9]{16}\b"), MASK),
    # JSON Web Tokens (three base64url parts, the first two JSON objects)
    (re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*"), MASK),
    # Authorization headers and bearer tokens
    (re.compile(r"(?i)\b(bearer|basic|token)\s+[A-Za-z0-9._~+/\-]{12,}=*"), r"\1 " + MASK),
    # credentials inside URLs: scheme://user:password@host (a password may hold '@'; the last one ends it)
    (re.compile(r"(?i)([a-z][a-z0-9+.\-]{0,31}://)[^/\s:@'\"]{0,256}:[^/\s'\"]{1,256}@"),
     r"\1" + MASK + "@"),
    # command-line flags with the value after a space: --api-key token-abc123, --hf-token hf_...
    # (not a usage text's metavar: [--api-key API_KEY] [--hf-token [HF_TOKEN]])
    (re.compile(r"(?i:(--[\w\-]{0,40}(?:api[_\-]?key|token|password|passwd|secret)\s+))"
                r"(?![-\[{<])(?![A-Z][A-Z_]*(?:[\]\s]|$))[^\s'\"]+"),
     r"\1" + MASK),
]
# key=value and 'key': value in argument dumps (Namespace(...), non-default args: {...}),
# environment listings, URLs' query strings and JSON
_KEY_VALUE = re.compile(
    r"""(?ix)
    (?<![\w\-])  # from the start of a word only: tried at every offset of a long word it would be quadratic
    ([\w\-]*(?:api[_\-]?key|hf[_\-]?token|access[_\-]?token|auth[_\-]?token|secret[_\-]?access[_\-]?key|
               secret|password|passwd|private[_\-]?key|token)['"]?\s*[:=]\s*)
    (?!None\b|none\b|null\b|False\b|True\b)
    (\[REDACTED\]|'[^']*'|"[^"]*"|\[(?:\[REDACTED\]|[^\[\]]){0,4096}\]|[^\s,)}\]]+)""")
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")


def _mask_value(m: re.Match[str]) -> str:
    value = m.group(2)
    if value == MASK:
        return m.group(0)
    if value.startswith("[") and value.endswith("]"):  # a list of keys: api_key=['k1', 'k2']
        items = value[1:-1].strip()
        if not items or items == MASK:
            return m.group(0)
        if _QUOTED.fullmatch(items.split(",")[0].strip()):
            return m.group(1) + "[" + _QUOTED.sub(_mask_quoted, value[1:-1]) + "]"
        return f"{m.group(1)}[{MASK}]"
    quote = value[0] if value[:1] in ("'", '"') else ""
    inner = value[1:-1] if quote else value
    if not inner or inner == MASK or (inner.startswith("<") and inner.endswith(">")):
        return m.group(0)  # empty, already masked, or a placeholder such as <your token>
    return f"{m.group(1)}{quote}{MASK}{quote}"


def _mask_quoted(m: re.Match[str]) -> str:
    value = m.group(0)
    inner = value[1:-1]
    if not inner or inner == MASK or (inner.startswith("<") and inner.endswith(">")):
        return value
    return f"{value[0]}{MASK}{value[0]}"


def redact_text(text: str) -> str:
    """The text with every secret this module knows replaced by [REDACTED]."""
    if not text:
        return text
    for pattern, repl in _PATTERNS:
        text = pattern.sub(repl, text)
    return _KEY_VALUE.sub(_mask_value, text)


def redact_data(value: Any) -> Any:
    """Redact every string inside nested dicts/lists (a report's JSON form)."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, list):
        return [redact_data(v) for v in value]
    if isinstance(value, tuple):
        return tuple(redact_data(v) for v in value)
    if isinstance(value, dict):
        return {k: redact_data(v) for k, v in value.items()}
    return value
