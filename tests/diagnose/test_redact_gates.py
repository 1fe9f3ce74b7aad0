"""Each secret shape's pattern runs only on a text holding a literal its matches need
(each pattern's `Needs`), and the flag, Authorization and key=value passes only on a text that
can hold their match: held to running every pattern on every text, on a secret of each shape
and each form (alone, inside a line, in upper and lower case), on mixes of them and on every
fixture line."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from triage.diagnose import redact

SECRETS = [
    "-----BEGIN RSA PRIVATE KEY-----MIIEpAIBAAKCAQEAx3Yz-----END RSA PRIVATE KEY-----",
    "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "sk-proj-Ab3dEf_Gh1jKlMn0pQrStUvWxYz-0123456789abcd",
    "sk_live_AbCdEfGhIjKlMnOpQrSt",
    "rk_test_AbCdEfGhIjKlMnOpQrSt",
    "gsk_AbCdEfGhIjKlMnOpQrStUvWx",
    "AIzaSyA-abcdefghijklmnopqrstuvwxyz012345",
    "glpat-AbCdEfGhIjKlMnOpQrStUv",
    "nvapi-AbCdEfGhIjKlMnOpQrStUvWx",
    "r8_AbCdEfGhIjKlMnOpQrStUv",
    "pypi-" + "Ab1" * 15,
    "npm_" + "Ab1" * 11,
    "ghp_abcdefghijklmnopqrstuvwxyz0123",
    "gho_abcdefghijklmnopqrstuvwxyz0123",
    "github_pat_11ABCDEFG0abcdefghijklmnop_qrstuvwxyz",
    "xoxb-123456789012-1234567890123-AbCdEfGh",
    "xapp-1-A0123456789-0123",
    "AKIAIOSFODNN7EXAMPLE",
    "ASIAIOSFODNN7EXAMPLE",
    "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "Authorization: Bearer Opaque.Tok3n_Value-0123456789xyz",
    "Basic dXNlcjpwYXNzd29yZDEyMzQ=",
    "token abcdef0123456789",
    "https://alice:S3cr3t-P%40ss@example.com/org/model",
    "redis://:p@ss@w0rd@cache.internal:6379",
    "AccountName=a;AccountKey=Zm9vYmFyYmF6cXV4MTIz==;EndpointSuffix=x",
    "SharedAccessKey=Zm9vYmFy",
    "?sv=2021-06-08&sig=Q2xpZW50U2ln%2BAbC%3D",
    '{"auth": "dXNlcjpwYXNz"}',
    "'auth': 'dXNlcjpwYXNz'",
    "cb%3Ftoken%3DQmFzZTY0VG9rZW4xMjM%26n%3D1",
    "&X-Amz-Signature=5d41402abc4b2a76",
    "&X-Goog-Signature=0a1b2c3d",
    "&X-Amz-Security-Token=FQoGZXIvYXdzEJr",
    "MY_hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123",
]
FIXTURES = sorted(Path(__file__).parents[2].joinpath("fixtures").rglob("*.log"))


def _every_pattern(text: str) -> str:
    for pattern, repl, _needs in redact._PATTERNS:
        text = pattern.sub(repl, text)
    return text


def _cases(text: str) -> list[str]:
    return [text, text.upper(), text.lower(), f"(APIServer pid=1) INFO 10-02 16:20:11 [x.py:1] args: {text} end"]


@pytest.mark.parametrize("secret", SECRETS)
def test_the_gates_let_every_planted_secret_through(secret):
    for text in _cases(secret):
        assert redact._shapes(text) == _every_pattern(text)


def test_the_gates_change_nothing_on_fixture_lines():
    for path in FIXTURES:
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            for text in _cases(line)[:3]:
                assert redact._shapes(text) == _every_pattern(text), (path.name, text[:120])


# ---- the gates of the flag, Authorization and key=value passes (`_redact`) ----------------------

FORMS = [
    "--api-key sk-abcdef0123456789abcdef",
    "'--hf-token', 'hf_tok'",
    '--token "quoted value"',
    "--api-key=x",
    "Authorization: Basic dXNlcjpw",
    "authorization = 'tok'",
    "AUTHORIZATION:Bearer xyz0123456789ab",
    "api_key='k1'",
    "HF_TOKEN=hf_x",
    "password: hunter2",
    "'secret': 'abc'",
    "passwd =\tp4ss",
    "token\u00a0:v",
    'private_key="pem"',
    "key : value",
    "tokens/s",
    "Avg prompt throughput: 12.0 tokens/s, Running: 3 reqs",
    "token\u2003abcdef0123456789xyz",
    "bearer\tabcdefghijklmnop",
    "token\rabcdefghijklmnop",
    "KEY= 1",
]


@pytest.mark.parametrize("form", FORMS)
def test_the_passes_gated_equal_the_passes_run_on_every_text(form):
    for text in _cases(form) + [form + " " + f for f in FORMS[:5]]:
        assert redact._redact(text) == redact._redact_ungated(text), text


def test_the_passes_gated_change_nothing_on_fixture_lines():
    for path in FIXTURES:
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            for text in _cases(line)[:3]:
                assert redact._redact(text) == redact._redact_ungated(text), (path.name, text[:120])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(FORMS + SECRETS + [" ", "=", ":", "'", '"', "--", "\t", "x", "Token", "KEY"]), max_size=8
    ).map("".join)
)
def test_the_passes_gated_equal_the_passes_run_on_any_mix(text):
    assert redact._redact(text) == redact._redact_ungated(text)


ESCAPES = ["\x1b[1m", "\x1b[0m", "^[[33m", "[1;33m", "[0m", "\\033[31m", "\x1b]0;title\x07"]


CORES = [s[len(s) // 2 - 5 : len(s) // 2 + 5] for s in SECRETS]  # a piece of each secret's middle


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(SECRETS + FORMS[:8] + ESCAPES + [" ", "=", "x", "'"]), max_size=8).map("".join))
def test_escapes_hide_no_secret_the_bare_text_shows(text):
    """Escape sequences between, before or inside secrets: what a reader sees of the redacted
    text (its escapes removed) holds no secret that the redaction of the bare text masks, and
    a text without a secret is left as it is."""
    from triage.escapes import strip_escapes

    seen, bare = strip_escapes(redact.redact_text(text)), redact.redact_text(strip_escapes(text))
    assert not [core for core in CORES if core in seen and core not in bare]
    if bare == strip_escapes(text):
        assert redact.redact_text(text) == text or redact.MASK in seen
