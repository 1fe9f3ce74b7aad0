"""Scrub secrets from every string that leaves the process.

Logs carry tokens: `HF_TOKEN` in an environment dump, `api_key='...'` in printed
arguments, `Authorization: Bearer ...` in a request log, credentials in a URL. A report
may be pasted into a public channel, so redaction is on by default in every output.
"""

from __future__ import annotations

import re
from typing import Any

MASK = "[REDACTED]"

_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    # private key blocks, whole
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)", re.S), MASK),
    # Hugging Face user/org tokens
    (re.compile(r"\bhf_[A-Za-z0-9]{20,}\b"), MASK),
    # OpenAI / Anthropic style keys
    (re.compile(r"\bsk-(?:[A-Za-z0-9_\-]{16,})"), MASK),
    # GitHub and Slack tokens
    (re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|xox[abprs]-[A-Za-z0-9\-]{10,})"), MASK),
    # AWS access key ids
    (re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"), MASK),
    # Authorization headers and bearer tokens
    (re.compile(r"(?i)\b(bearer|basic|token)\s+[A-Za-z0-9._~+/\-]{12,}=*"), r"\1 " + MASK),
    # credentials inside URLs: scheme://user:password@host
    (re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/\s:@'\"]+:[^/\s@'\"]+@"), r"\1" + MASK + "@"),
]
# key=value and 'key': value in argument dumps, env listings and JSON
_KEY_VALUE = re.compile(
    r"""(?ix)
    (\b[\w\-]*(?:api[_\-]?key|hf[_\-]?token|access[_\-]?token|auth[_\-]?token|secret|password|passwd|
               token)['"]?\s*[:=]\s*)
    (?!None\b|none\b|null\b|False\b|True\b)
    ('[^']*'|"[^"]*"|[^\s,)}\]]+)""")


def _mask_value(m: re.Match[str]) -> str:
    value = m.group(2)
    quote = value[0] if value[:1] in ("'", '"') else ""
    inner = value[1:-1] if quote else value
    if not inner or inner == MASK or (inner.startswith("<") and inner.endswith(">")):
        return m.group(0)  # empty, already masked, or a placeholder such as <your token>
    return f"{m.group(1)}{quote}{MASK}{quote}"


def redact_text(text: str) -> str:
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
