"""Slack's request signing and the slash command's answer.

The signature headers (present, a number, fresh) are checked before any of the body is read,
and the body is capped at SLACK_MAX_BYTES: an unsigned flood costs the server headers only.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qs

from triage.apps.serve.limits import SLACK_MAX_AGE, ApiError
from triage.diagnose.redaction import SERVER


def slack_headers_problem(timestamp: str | None, signature: str | None, now: float) -> str | None:
    """What is wrong with the signature headers alone (None: worth reading the body for)."""
    if not timestamp or not signature:
        return "missing X-Slack-Request-Timestamp or X-Slack-Signature"
    try:
        ts = int(timestamp)
    except ValueError:
        return "X-Slack-Request-Timestamp is not a number"
    if abs(now - ts) > SLACK_MAX_AGE:
        return "the Slack request timestamp is more than 5 minutes off: refused as a possible replay"
    if not signature.startswith("v0="):
        return "bad Slack signature"
    return None


def verify_slack(secret: str, timestamp: str | None, signature: str | None, body: bytes, now: float) -> str | None:
    """Slack request signing: None when valid, else why not (replays and forgeries)."""
    problem = slack_headers_problem(timestamp, signature, now)
    if problem or timestamp is None or signature is None:
        return problem or "bad Slack signature"
    base = b"v0:" + timestamp.encode() + b":" + body
    expected = "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected.encode(), signature.encode("utf-8", "replace")):
        return "bad Slack signature"
    return None


def slack_unescape(text: str) -> str:
    """Slack sends `&`, `<` and `>` of a slash command's text as HTML entities."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def command_text(body: bytes) -> str:
    return slack_unescape(parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True).get("text", [""])[0])


async def slack_answer(body: bytes, analyse: Callable[[bytes], Awaitable[str]]) -> dict[str, Any]:
    """A verified command: blocks for the user alone; a problem is said in the channel, not as an HTTP error."""
    text = command_text(body)
    if not text.strip():
        return {"response_type": "ephemeral", "text": "Paste a vLLM startup log after the command: `/triage <log>`"}
    try:
        message = json.loads(await analyse(text.encode("utf-8")))
    except ApiError as exc:
        return {"response_type": "ephemeral", "text": f"vllm-triage: {SERVER.text(exc.message)}"}
    return {"response_type": "ephemeral", **message}
