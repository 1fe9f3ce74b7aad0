"""Scrub secrets from the text a log brings in, before anything is cut or laid out.

Logs carry tokens: `HF_TOKEN` in an environment dump, `api_key='...'` in printed
arguments (a Namespace, a dict, an argv list), `Authorization: Bearer ...` in a request
log, credentials in a URL, a private key pasted by mistake. A report may be pasted into a
public channel, so redaction is on by default. It runs in one place: the pipeline hands
every line it keeps to `LineRedactor` *whole*, before parsing, before evidence is cut at
600 characters or a message at 1000, so a secret that straddles a cut can never survive
as a fragment the patterns no longer know. The tool's own words (remedies, templates,
notes) never pass through it: `HF_TOKEN=<your read token>` stays as written.

Every pattern is linear in its input: quantifiers that could be tried from each offset of a
long word are bounded, so a hostile 64 KiB line costs milliseconds, not minutes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from triage.escapes import Stripped, changed_spans, may_hold_escape, strip_escapes
from triage.patterns import LazyPattern

MASK = "[REDACTED]"

# Names of flags and keys whose value is a secret (argv flags, dict keys, environment names).
_SECRET_NAME = r"(?:api[_\-]?key|token|password|passwd|secret|authorization)"
_PLACEHOLDER = LazyPattern(r"<[^<>\n]{1,100}>|\[REDACTED\]")


class Needs:
    """Literals one of which every match of a pattern holds (in the lower-cased text when
    `lower`; followed by a whitespace character when `spaced`): the pattern is run only on a
    text holding one (each pattern costs ~5 us on a 600-character argument dump, and runs on
    every line that holds a trigger word: an engine's metrics line says `tokens/s`)."""

    __slots__ = ("lower", "spaced", "words")

    def __init__(self, words: tuple[str, ...], lower: bool = False, spaced: bool = False) -> None:
        self.words, self.lower, self.spaced = words, lower, spaced

    def met(self, text: str) -> bool:
        hay = text.lower() if self.lower else text
        if not self.spaced:
            return any(w in hay for w in self.words)
        return any(_followed(hay, w, str.isspace) for w in self.words)


def _followed(hay: str, word: str, test) -> bool:
    """Whether `word` occurs in `hay` with a character passing `test` right after it."""
    i, size = hay.find(word), len(word)
    while i >= 0:
        if i + size < len(hay) and test(hay[i + size]):
            return True
        i = hay.find(word, i + 1)
    return False


# The words a key=value name ends with (_KEY_VALUE's alternatives all end in one of them).
_KEY_ENDS = ("key", "token", "secret", "passwd", "password")


def _key_value_possible(low: str) -> bool:
    """Whether a lower-cased text holds a name _KEY_VALUE knows followed, past an optional
    quote and spaces, by `:` or `=` (what every match of it holds: `tokens/s` is none)."""
    for word in _KEY_ENDS:
        i, size = low.find(word), len(word)
        while i >= 0:
            j = i + size
            if j < len(low) and low[j] in "'\"":
                j += 1
            while j < len(low) and low[j].isspace():
                j += 1
            if j < len(low) and low[j] in ":=":
                return True
            i = low.find(word, i + 1)
    return False


# A token's prefix starts a word or follows an underscore: `MY_hf_...`, `export X_sk-...` (an
# environment name glued to it); a letter or digit before it makes it part of another word.
_WORD_START = r"(?<![A-Za-z0-9])"
# Values in URLs' query strings and connection strings end at these.
_QUERY_VALUE = r"[^\s&;'\"<>]{1,4096}"

# (pattern, replacement, what every match holds); each pattern here is compiled when a text
# first needs it (LazyPattern): most logs hold none of these secrets, and compiling them all
# cost ~2 ms of every start.
_PATTERNS: list[tuple[LazyPattern, str, Needs]] = [
    # private key blocks, whole (to the end of the text when the END line is missing)
    (
        LazyPattern(
            r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----.*?"
            r"(?:-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----|\Z)",
            re.S,
        ),
        MASK,
        Needs(("PRIVATE KEY",)),
    ),
    # Hugging Face user/org tokens
    (LazyPattern(_WORD_START + r"hf_[A-Za-z0-9]{20,}"), MASK, Needs(("hf_",))),
    # OpenAI / Anthropic / DeepSeek style keys: sk-..., sk-proj-..., sk-ant-api03-...
    (LazyPattern(_WORD_START + r"sk-[A-Za-z0-9_\-]{16,}"), MASK, Needs(("sk-",))),
    # Stripe-style live/test keys, Groq, Google, GitLab, NVIDIA, Replicate, PyPI, npm
    (
        LazyPattern(
            _WORD_START + r"(?:[rsp]k_(?:live|test)_[A-Za-z0-9]{16,}|gsk_[A-Za-z0-9]{20,}|AIza[0-9A-Za-z_\-]{30,}"
            r"|glpat-[A-Za-z0-9_\-]{20,}|nvapi-[A-Za-z0-9_\-]{20,}|r8_[A-Za-z0-9]{20,}"
            r"|pypi-[A-Za-z0-9_\-]{40,}|npm_[A-Za-z0-9]{30,})"
        ),
        MASK,
        Needs(("k_live_", "k_test_", "gsk_", "AIza", "glpat-", "nvapi-", "r8_", "pypi-", "npm_")),
    ),
    # GitHub and Slack tokens, Slack webhooks
    (
        LazyPattern(
            _WORD_START + r"(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|xox[abprse]-[A-Za-z0-9\-]{10,}"
            r"|xapp-[A-Za-z0-9\-]{10,})"
        ),
        MASK,
        Needs(("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "xox", "xapp-")),
    ),
    (
        LazyPattern(r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/\-]+"),
        "hooks.slack.com/" + MASK,
        Needs(("hooks.slack.com/",)),
    ),
    # AWS access key ids
    (
        LazyPattern(_WORD_START + r"(?:AKIA|ASIA|AGPA|AIDA|AROA)[A-Z0-9]{16}\b"),
        MASK,
        Needs(("AKIA", "ASIA", "AGPA", "AIDA", "AROA")),
    ),
    # JSON Web Tokens (three base64url parts, the first two JSON objects)
    (LazyPattern(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*"), MASK, Needs(("eyJ",))),
    # Authorization headers and bearer tokens
    (
        LazyPattern(r"(?i)\b(bearer|basic|token)\s+[A-Za-z0-9._~+/\-]{12,}=*"),
        r"\1 " + MASK,
        Needs(("bearer", "basic", "token"), lower=True, spaced=True),
    ),
    # signed URLs: S3 and GCS signatures, credentials and session tokens; Azure SAS `sig=`
    (
        LazyPattern(
            r"(?i)([?&;](?:x-(?:amz|goog)-(?:signature|credential|security-token)|signature|sig)=)" + _QUERY_VALUE
        ),
        r"\1" + MASK,
        Needs(("sig=", "signature=", "credential=", "security-token="), lower=True),
    ),
    # Azure storage and Service Bus connection strings: AccountKey=...;SharedAccessKey=...
    (
        LazyPattern(r"(?i)((?<![\w\-])(?:account|sharedaccess)key\s*=\s*)[^\s;'\"]{1,4096}"),
        r"\1" + MASK,
        Needs(("accountkey", "sharedaccesskey"), lower=True),
    ),
    # a Docker registry's `auth` (base64 of user:password) in config.json, JSON or a Python dict
    (
        LazyPattern(r"""(?i)(["']auth["']\s*:\s*(["']))[^"'\n]{1,4096}(?=\2)"""),
        r"\1" + MASK,
        Needs(('"auth"', "'auth'"), lower=True),
    ),
    # a secret's name and value URL-encoded (a redirect URL in a query string): token%3Dabc
    (
        LazyPattern(
            r"(?i)((?<![\w\-])[\w\-]{0,64}(?:key|token|secret|password|passwd|sig|signature)"
            r"(?:%2[27])?%3[ad](?:%2[27])?)(?:(?!%2[267])[^\s&;'\"<>]){1,4096}"
        ),
        r"\1" + MASK,
        Needs(("%3d", "%3a"), lower=True),
    ),
    # credentials inside URLs: scheme://user:password@host (a password may hold '@'; the last one ends it)
    (
        LazyPattern(r"(?i)([a-z][a-z0-9+.\-]{0,31}://)[^/\s:@'\"]{0,256}:[^/\s'\"]{1,256}@"),
        r"\1" + MASK + "@",
        Needs(("://",)),
    ),
]
# A secret-bearing flag and its value, as a shell line or an argv list prints it:
#   --api-key tok   --api-key "tok"   --api-key 'tok'   '--api-key', 'tok'   "--hf-token", "tok"
# (not a usage text's metavar: [--api-key API_KEY] [--hf-token [HF_TOKEN]])
_FLAG_NAME = r"--[\w\-]{0,40}" + _SECRET_NAME
_QUOTED_VALUE = r"'[^'\n]{0,4096}'|\"[^\"\n]{0,4096}\""
_FLAG = LazyPattern(
    r"(?i)(?:(?P<fq>['\"])" + _FLAG_NAME + r"(?P=fq)\s*,\s*(?P<item>" + _QUOTED_VALUE + ")"  # an argv list's items
    r"|" + _FLAG_NAME + r"\s+(?:(?P<q>" + _QUOTED_VALUE + ")"  # a quoted value
    r"|(?![-\[{<])(?-i:(?![A-Z][A-Z_]*(?:[\]\s]|$)))(?P<bare>[^\s'\",\]]+)))"
)  # a bare one, no metavar
# key=value and 'key': value in argument dumps (Namespace(...), non-default args: {...}),
# environment listings, URLs' query strings and JSON
_KEY_VALUE = LazyPattern(
    r"""(?ix)
    (?<![\w\-])  # from the start of a word only: tried at every offset of a long word it would be quadratic
    ([\w\-]*(?:api[_\-]?key|hf[_\-]?token|access[_\-]?token|auth[_\-]?token|secret[_\-]?access[_\-]?key|
               secret|password|passwd|private[_\-]?key|token)['"]?\s*[:=]\s*)
    (?!None\b|none\b|null\b|False\b|True\b)
    (\[REDACTED\]|<[^<>\n]{1,100}>|'[^']*'|"[^"]*"|\[(?:\[REDACTED\]|[^\[\]]){0,4096}\]|[^\s,)}\]]+)"""
)
# Authorization: <scheme> <credentials>, in headers, dicts and JSON (a short credential too)
_AUTHORIZATION = LazyPattern(
    r"""(?ix)(\bauthorization['"]?\s*[:=]\s*['"]?)
    (?:(bearer|basic|token|digest|negotiate|apikey)\s+)?
    (\[REDACTED\]|[^\s'",}\]]{1,4096})"""
)
_QUOTED = LazyPattern(r"'[^']*'|\"[^\"]*\"")
# Cheap first look (plain substring tests on the lower-cased text, far quicker than one regex
# with these alternatives): a line that holds none of these holds no secret any pattern knows.
_TRIGGERS = (
    "hf_",
    "sk-",
    "k_live_",
    "k_test_",
    "gsk_",
    "aiza",
    "glpat-",
    "nvapi-",
    "r8_",
    "pypi-",
    "npm_",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "xox",
    "xapp-",
    "hooks.slack",
    "akia",
    "asia",
    "agpa",
    "aida",
    "aroa",
    "eyj",
    "bearer",
    "basic",
    "token",
    "://",
    "key",
    "secret",
    "passw",
    "auth",
    "private",
    "sig=",
    "signature=",
    "credential=",
    "%3d",
    "%3a",
)


def _maybe_secret(text: str) -> bool:
    low = text.lower()
    if any(t in low for t in _TRIGGERS):
        return True
    return may_hold_escape(text) and any(t in strip_escapes(low) for t in _TRIGGERS)  # `to\x1b[0mken=`


def _is_placeholder(inner: str) -> bool:
    return not inner or _PLACEHOLDER.fullmatch(inner) is not None


def _mask_value(m: re.Match[str]) -> str:
    value = m.group(2)
    if _is_placeholder(value):
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
    if _is_placeholder(inner):
        return m.group(0)  # empty, already masked, or a placeholder such as <your token>
    return f"{m.group(1)}{quote}{MASK}{quote}"


def _mask_quoted(m: re.Match[str]) -> str:
    value = m.group(0)
    return value if _is_placeholder(value[1:-1]) else f"{value[0]}{MASK}{value[0]}"


def _mask_flag(m: re.Match[str]) -> str:
    group = next(g for g in ("item", "q", "bare") if m.group(g) is not None)
    head, value = m.group(0)[: m.start(group) - m.start()], m.group(group)
    if group == "bare":
        return m.group(0) if _is_placeholder(value) else head + MASK
    return head + (value if _is_placeholder(value[1:-1]) else f"{value[0]}{MASK}{value[0]}")


def _mask_authorization(m: re.Match[str]) -> str:
    if _is_placeholder(m.group(3)):
        return m.group(0)
    scheme = f"{m.group(2)} " if m.group(2) else ""
    return f"{m.group(1)}{scheme}{MASK}"


# Texts redacted lately: a restart loop prints its startup once per attempt, the argument
# dump among it (which holds `token` or `key` words, so every pattern runs on it).
_DONE: dict[str, str] = {}
MAX_DONE, MAX_DONE_CHARS = 256, 8000


def redact_text(text: str) -> str:
    """The text with every secret this module knows replaced by [REDACTED]."""
    done = _DONE.get(text)
    if done is None:
        done = _through_escapes(text, _redact) if text and _maybe_secret(text) else text
        if len(text) <= MAX_DONE_CHARS:
            if len(_DONE) >= MAX_DONE:
                _DONE.clear()
            _DONE[text] = done
    return done


def _redact(text: str) -> str:
    text = _shapes(text)
    if "--" in text:  # every flag _FLAG knows starts so
        text = _FLAG.sub(_mask_flag, text)
    if "authorization" in text.lower():
        text = _AUTHORIZATION.sub(_mask_authorization, text)
    return _KEY_VALUE.sub(_mask_value, text) if _key_value_possible(text.lower()) else text


def _redact_ungated(text: str) -> str:
    """`_redact` with every pattern run on every text: what the gates are held to (tests)."""
    for pattern, repl, _needs in _PATTERNS:
        text = pattern.sub(repl, text)
    text = _FLAG.sub(_mask_flag, text)
    text = _AUTHORIZATION.sub(_mask_authorization, text)
    return _KEY_VALUE.sub(_mask_value, text)


def redact_shapes(text: str) -> str:
    """Only the secrets known by their shape (hf_..., sk-..., a URL's password, a JWT), not
    the `key: value` forms: for the tool's own sentences that quote a user's argument, where
    "TOKEN: set it" is prose, not a credential."""
    if not text or not _maybe_secret(text):
        return text
    return _through_escapes(text, _shapes)


def _through_escapes(text: str, scrub: Callable[[str], str]) -> str:
    """`scrub` run on the text with its escape sequences removed, its masks put back among
    them: a token glued to a colour code (`ESC[1mhf_...`, `^[[33mhf_...`, `[1;33mhf_...`)
    is no longer a word's tail the patterns skip. When the masks cannot be placed back, the
    scrubbed text is kept without its escapes (a report strips them anyway)."""
    if not may_hold_escape(text):
        return scrub(text)
    for sep in ("", " "):  # joined (`to ESC[0m ken=`), then apart (`AKIA...ESC[1mhf_...`: two tokens)
        view = Stripped(text, sep)
        if not view.changed:
            break
        clean = scrub(view.text)
        if clean != view.text:
            spans = changed_spans(view.text, clean, MASK)
            if spans is None:
                return scrub(clean)  # the masks cannot be put back: the text without its escapes
            text = view.restore(spans)
    return scrub(text)


def _shapes(text: str) -> str:
    """_PATTERNS applied, each only to a text holding a literal its matches need."""
    for pattern, repl, needs in _PATTERNS:
        if needs.met(text):
            text = pattern.sub(repl, text)
    return text


class LineRedactor:
    """Redacts a log line by line, remembering an open private-key block across lines.

    A key pasted into a log spans lines (BEGIN, base64 rows, END): after a BEGIN line without
    its END, the rows that look like the key's (base64, PEM headers) are masked whole, up to
    MAX_KEY_LINES; the first line that looks like anything else ends the block, so a key cut
    short never masks the log lines that follow it.
    """

    MAX_KEY_LINES = 200
    _BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
    _END = LazyPattern(r"-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
    _ROW = LazyPattern(r"[A-Za-z0-9+/=]{4,128}|(?:Proc-Type|DEK-Info|Comment): [^\n]{0,200}")

    def __init__(self) -> None:
        self._key_lines_left = 0

    @staticmethod
    def joined(text: str) -> str:
        """Lines a wrap cut, joined again: masked whole, without touching the key-block state."""
        return redact_text(_as_written(text))

    def __call__(self, line: str) -> str:
        line = _as_written(line)
        if self._key_lines_left:
            end = self._END.search(line)
            if end is not None:
                self._key_lines_left = 0
                line = MASK + line[end.end() :]
            elif self._ROW.fullmatch(line.strip()):
                self._key_lines_left -= 1
                return MASK
            else:
                self._key_lines_left = 0
        begin = self._BEGIN.search(line)
        if begin is not None and self._END.search(line, begin.end()) is None:
            self._key_lines_left = self.MAX_KEY_LINES
        return redact_text(line)


def _as_written(line: str) -> str:
    """The line as the log wrote it, before a chat tool or a browser changed its characters
    (`&quot;`, curly quotes, odd spaces, an em dash for `--`): the secret shapes are known in
    that form, so a pasted `\u2018password\u2019: ...` is masked as `'password': ...` is."""
    from triage.ingest.chat import plain, unescape_html

    return plain(unescape_html(line))


def redact_data(value: Any) -> Any:
    """Redact every string inside nested dicts/lists (foreign data in JSON form)."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, list):
        return [redact_data(v) for v in value]
    if isinstance(value, tuple):
        return tuple(redact_data(v) for v in value)
    if isinstance(value, dict):
        return {k: redact_data(v) for k, v in value.items()}
    return value
