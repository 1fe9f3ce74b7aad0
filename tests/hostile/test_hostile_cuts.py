"""A secret planted where a cut falls never comes back, whole or in part, in any output.

Text is cut in many places: a line at 64 KiB when it is read, an evidence line at 600
characters, the failure message at 1000 (2000 where rules read it), and each renderer cuts
again (the terminal at 400, JUnit at 500, GitHub at 1500, Slack's blocks). Redaction must
see every line whole, before any of these, or a URL credential whose `@` falls past a cut
stops matching and its password comes back. So each kind of secret is planted at every
offset around each cut (hypothesis picks the offsets, derandomized in the normal run;
`VLLM_TRIAGE_FUZZ=1` draws many more), and no window of it may appear in any format of the
CLI, in the GitHub step summary, or in the server's answers (the function its workers run).
"""

from __future__ import annotations

import io
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from secret_cases import FAILED, FATAL_LINE, SECRETS, SECRETS_ROUND_TWO

from triage.apps.cli import main
from triage.apps.serve.job import analyse_bytes
from triage.diagnose.report_builder import EVIDENCE_CHARS
from triage.ingest import read
from triage.ingest.read import InputStats, iter_lines
from triage.pipeline import load_rules
from triage.render import FORMATS

FUZZ = os.environ.get("VLLM_TRIAGE_FUZZ") == "1"
PER_KIND = 200 if FUZZ else 4

# The quoted, argv-list and dict forms of the secret-bearing flags and keys (how Python and
# vLLM print an argv list, a Namespace and a dict), beside the shapes of test_hostile_secrets.
QUOTED = [
    ("flag-double-quoted", '--api-key "tok-dq-0a1b2c3d4e5f"', "tok-dq-0a1b2c3d4e5f"),
    ("flag-single-quoted", "--api-key 'tok-sq-0a1b2c3d4e5f'", "tok-sq-0a1b2c3d4e5f"),
    ("argv-single", "['vllm', 'serve', '--api-key', 'tok-argv-9z8y7x6w', '--port', '8000']", "tok-argv-9z8y7x6w"),
    ("argv-double", '["vllm", "serve", "--hf-token", "tok-argvd-5v4u3t2s"]', "tok-argvd-5v4u3t2s"),
    ("argv-password", "['--db-password', 'pw-argv-QwErTy123']", "pw-argv-QwErTy123"),
    ("flag-hf-token", "--hf-token tok-hfflag-1q2w3e4r", "tok-hfflag-1q2w3e4r"),
    ("dict-api-key", "{'api_key': 'dict-key-7h8j9k0l', 'port': 8000}", "dict-key-7h8j9k0l"),
    ("dict-hf-token", '{"hf_token": "dict-hf-3m4n5b6v"}', "dict-hf-3m4n5b6v"),
    ("dict-token", "{'token': 'dict-tok-1z2x3c4v'}", "dict-tok-1z2x3c4v"),
    ("dict-secret", "{'secret': 'dict-sec-8i9o0p1a'}", "dict-sec-8i9o0p1a"),
    ("dict-authorization", "{'authorization': 'dictauth77QQ'}", "dictauth77QQ"),
    ("header-basic", "Authorization: Basic dXNlcjpwYXNzd29yZDEyMw==", "dXNlcjpwYXNzd29yZDEyMw"),
]
KINDS = [(name, text, secret) for name, text, secret, _ in SECRETS] + QUOTED
KINDS += [
    kind for kind in SECRETS_ROUND_TWO if kind[0] in ("azure-sas", "docker-auth", "url-encoded-token", "s3-signed-url")
]

FATAL_PREFIX = "ERROR 07-18 09:31:06 [core.py:586] "  # where the failure message starts in the fatal line
MESSAGE_CUTS = [1000, 2000, 400, 500, 1500, 375, 2900, 3000]  # pipeline, rules, terminal, junit, github, slack
LINE_CUTS = [EVIDENCE_CHARS] + [len(FATAL_PREFIX) + c for c in MESSAGE_CUTS]


def windows(secret: str, size: int = 6) -> set[str]:
    """Every piece of the secret a cut could leave: the whole, or any `size` characters of it."""
    if len(secret) <= size:
        return {secret}
    return {secret[i : i + size] for i in range(len(secret) - size + 1)}


def planted(text: str, at: int) -> bytes:
    """The failing log with TEXT in its fatal line, starting at column AT (or just after the message)."""
    lines = FAILED.read_text(encoding="utf-8").split("\n")
    fatal = lines[FATAL_LINE - 1] + " (while calling "
    pad = max(0, at - len(fatal))
    fatal += ("x" * (pad - 1) + " " if pad else "") + text + " )"  # a word of its own, as a log prints it
    lines[FATAL_LINE - 1] = fatal
    return "\n".join(lines).encode()


def outputs(data: bytes, tmp_path, monkeypatch) -> dict[str, str]:
    """What the CLI writes in every format (one invocation), its stderr and step summary, and the server's answers."""
    summary = tmp_path / "summary.md"
    summary.unlink(missing_ok=True)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    argv = ["-", "--width", "80"]
    for fmt in FORMATS:
        if fmt != "terminal":
            argv += ["-f", fmt, "-o", str(tmp_path / f"out.{fmt}")]
    argv += ["-f", "terminal"]
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, stdin=io.BytesIO(data), stdout=out, stderr=err)
    assert code == 1, err.getvalue()
    found = {fmt: (tmp_path / f"out.{fmt}").read_text(encoding="utf-8") for fmt in FORMATS if fmt != "terminal"}
    found.update(terminal=out.getvalue(), stderr=err.getvalue(), summary=summary.read_text(encoding="utf-8"))
    rules = load_rules()
    for fmt in ("json", "markdown", "slack"):
        found[f"server-{fmt}"] = analyse_bytes(data, "planted.log", fmt, rules, 1 << 24)
    return found


def assert_absent(secret: str, found: dict[str, str], where: str) -> None:
    for fmt, text in found.items():
        leaked = [w for w in windows(secret) if w in text]
        assert not leaked, f"{where}: {leaked[0]!r} of the secret in {fmt}"


@pytest.mark.parametrize("name, text, secret", KINDS, ids=[k[0] for k in KINDS])
@settings(
    max_examples=PER_KIND,
    deadline=None,
    derandomize=not FUZZ,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_a_secret_at_any_offset_around_a_cut_is_in_no_output(name, text, secret, data, tmp_path, monkeypatch):
    cut = data.draw(st.sampled_from(LINE_CUTS), label="cut")
    # the cut falls `inside` characters into the secret (a little before its start to a little past its end)
    inside = data.draw(st.integers(-2, len(secret) + 2), label="inside")
    at = cut - text.index(secret) - inside
    log = planted(text, at)
    assert_absent(secret, outputs(log, tmp_path, monkeypatch), f"{name} at column {at} (cut {cut})")


PIPELINE_CUTS = [EVIDENCE_CHARS, len(FATAL_PREFIX) + 1000]  # the evidence line, the failure message


@pytest.mark.parametrize("name, text, secret", KINDS, ids=[k[0] for k in KINDS])
def test_every_offset_inside_a_secret_at_the_report_s_own_cuts(name, text, secret):
    """Exhaustive where the report itself cuts (what renderers cut later is already clean): the
    cut at every second character of the secret (a leak is a window of 6, so none slips between)."""
    from triage.pipeline import Options, run

    rules = load_rules()
    for cut in PIPELINE_CUTS:
        for inside in range(-1, len(secret) + 2, 2):
            at = cut - text.index(secret) - inside
            report = run(io.BytesIO(planted(text, at)), "planted.log", Options(), rules).model_dump_json()
            assert_absent(secret, {"json": report}, f"{name}, cut {cut} falling {inside} characters into it")


def test_the_plant_is_where_the_cuts_are(tmp_path):
    """The plants sit where reports look: unredacted, the secret shows in the failure message."""
    import json

    text, secret = QUOTED[2][1], QUOTED[2][2]
    log = planted(text, 500)
    out = io.StringIO()
    assert main(["-", "-f", "json", "--no-redact"], stdin=io.BytesIO(log), stdout=out, stderr=io.StringIO()) == 1
    report = json.loads(out.getvalue())
    assert secret in report["failure"]["message"]
    assert any(secret in e["text"] for d in report["diagnoses"] for e in d["evidence"] if e["line"] == FATAL_LINE)


@pytest.mark.parametrize("name, text, secret", KINDS, ids=[k[0] for k in KINDS])
def test_a_secret_across_the_64_kib_line_cut_leaves_no_fragment(name, text, secret):
    """The reader cuts a line at 64 KiB before redaction can see it whole: the word the cut goes
    through is dropped, so no fragment of a secret that straddles the cut is left to leak."""
    from triage.diagnose.redact import LineRedactor

    limit = read.MAX_LINE_CHARS
    for at in range(limit - len(text) - 2, limit + 3):
        line = "x " * (at // 2) + " " * (at % 2) + text + " tail"
        [cut] = list(iter_lines(io.BytesIO(line.encode()), InputStats("long")))
        clean = LineRedactor()(cut[-(len(text) + 2 * read.CUT_WORD_CHARS) :])  # the rest is "x x x ..."
        leaked = [w for w in windows(secret) if w in clean]
        assert not leaked, f"{name} at {at}: {leaked[0]!r} survives the cut"


def test_the_tool_s_own_words_are_not_redacted():
    """Remedies and templates are the tool's: `HF_TOKEN=<your read token>` stays as written, and
    the terminal is laid out from text already clean (no pass after wrapping that lengthens lines)."""
    from conftest import FIXTURES

    log = (FIXTURES / "hf_auth_required" / "v085-serve-no-token-gated-llama-401.log").read_bytes()
    for fmt, width in (("markdown", 100), ("terminal", 80), ("terminal", 60)):
        out = io.StringIO()
        assert (
            main(["-", "-f", fmt, "--width", str(width)], stdin=io.BytesIO(log), stdout=out, stderr=io.StringIO()) == 1
        )
        text = out.getvalue()
        assert "HF_TOKEN=<your read token>" in " ".join(text.split()) and "[REDACTED] read token>" not in text
        if fmt == "terminal":
            assert max(len(line) for line in text.splitlines()) <= width


def test_a_usage_error_keeps_the_tool_s_own_sentence(monkeypatch):
    """`serve` on an open address without a token says so in its own words; only a secret known
    by its shape (a token typed on the command line) is masked in such a line."""
    monkeypatch.delenv("VLLM_TRIAGE_TOKEN", raising=False)
    out, err = io.StringIO(), io.StringIO()
    assert main(["serve", "--host", "0.0.0.0", "--port", "0"], stdout=out, stderr=err) == 2
    assert "without VLLM_TRIAGE_TOKEN: set it, listen on 127.0.0.1" in err.getvalue()
    assert "[REDACTED]" not in err.getvalue()
    token = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
    err = io.StringIO()
    assert main(["--width", token, "x.log"], stdout=io.StringIO(), stderr=err) == 2
    assert token not in err.getvalue() and "--width" in err.getvalue()


def test_a_private_key_across_lines_is_masked_and_the_log_after_it_kept():
    from triage.diagnose.redact import MASK, LineRedactor

    clean = LineRedactor()
    lines = [
        "key: -----BEGIN OPENSSH PRIVATE KEY-----",
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU=",
        "AAAEbm9uZQAAAAAAAAAB",
        "-----END OPENSSH PRIVATE KEY----- after",
        "ERROR 07-18 09:31:06 [core.py:586] ValueError: boom",
    ]
    out = [clean(line) for line in lines]
    assert out[1:3] == [MASK, MASK] and out[3] == MASK + " after" and out[4] == lines[4]
    assert "b3BlbnNz" not in out[0]
    cut_short = LineRedactor()  # a key whose END never comes: the next log line is not swallowed
    assert [cut_short(x) for x in (lines[0], lines[1], lines[4])][1:] == [MASK, lines[4]]
