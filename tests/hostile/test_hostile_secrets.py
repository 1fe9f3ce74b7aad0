"""Secrets never leave: every kind planted where a report cites it, absent from every format.

Each secret is planted three ways in a real failure log: in the fatal exception's message
(the report's `failure.message` and a cited evidence line), in the printed arguments that
are cited as evidence (`non-default args: {...}`), and, where it can be one, in the model
name (a fact). `--no-redact` must show it (so the plant is where a report looks), the
default must not, in any of the formats, on stdout, in `--output` files, in the GitHub step
summary and in the one-line errors on stderr.
"""

from __future__ import annotations

import io
import json

import pytest
from secret_cases import ARGS_LINE, FAILED, FATAL_LINE, SECRETS, SECRETS_ROUND_TWO

from triage.apps.cli import _triage_parser, main
from triage.apps.output import NO_REDACT_WARNING
from triage.diagnose.redact import MASK, redact_data, redact_text
from triage.render import FORMATS


def planted_log(text: str, as_model: bool) -> bytes:
    lines = FAILED.read_text(encoding="utf-8").split("\n")
    args, fatal = lines[ARGS_LINE - 1], lines[FATAL_LINE - 1]
    if as_model:
        args = args.replace("'model': 'Qwen/Qwen2.5-14B-Instruct'", f"'model': '{text}'")
    lines[ARGS_LINE - 1] = args.replace("}", f", 'note': \"{text}\"}}")
    lines[FATAL_LINE - 1] = fatal + f" (while calling {text} )"
    return "\n".join(lines).encode()


def cli(argv: list[str], stdin: bytes | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, stdin=io.BytesIO(stdin) if stdin is not None else None, stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("name, text, secret, as_model", SECRETS, ids=[s[0] for s in SECRETS])
def test_a_planted_secret_is_in_no_format(name, text, secret, as_model, tmp_path, monkeypatch):
    log = planted_log(text, as_model)
    # the plant is where a report looks: --no-redact shows it in the failure and the evidence
    code, raw, err = cli(["-", "-f", "json", "--no-redact"], stdin=log)
    report = json.loads(raw)
    assert code == 1 and secret in report["failure"]["message"]
    assert any(secret in e["text"] for d in report["diagnoses"] for e in d["evidence"])
    if as_model:
        assert secret in str(report["facts"].get("model"))
    assert err == NO_REDACT_WARNING
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    for fmt in FORMATS:
        target = tmp_path / f"report.{fmt}"
        code, out, err = cli(["-", "-f", fmt, "-o", str(target), "-f", fmt], stdin=log)
        written = target.read_text(encoding="utf-8")
        assert code == 1 and err == ""
        assert secret not in out and secret not in written, f"{name} leaked in {fmt}"
        if fmt in ("json", "markdown"):  # the formats that show the failure and every evidence line
            assert MASK in out, f"{fmt}: the secret's place shows no {MASK}"
    assert summary.exists() and secret not in summary.read_text(encoding="utf-8")


@pytest.mark.parametrize("name, text, secret", SECRETS_ROUND_TWO, ids=[s[0] for s in SECRETS_ROUND_TWO])
def test_glued_and_storage_secrets_are_in_no_format(name, text, secret, tmp_path):
    """A token glued to a colour code, cloud storage and registry credentials: planted where a
    report cites them, shown by --no-redact, absent from every format by default."""
    log = planted_log(text, as_model=False)
    _, raw, _ = cli(["-", "-f", "json", "--no-redact"], stdin=log)
    assert secret in raw  # the plant is where a report looks
    for fmt in FORMATS:
        target = tmp_path / f"report.{fmt}"
        code, out, err = cli(["-", "-f", fmt, "-o", str(target), "-f", fmt], stdin=log)
        assert code == 1 and err == ""
        assert secret not in out and secret not in target.read_text(encoding="utf-8"), f"{name} leaked in {fmt}"


@pytest.mark.parametrize(
    "text, kept",
    [
        (
            "\x1b[1mhf_AbCdEfGhIjKlMnOpQrStUvWxYz0123\x1b[0m done \x1b[32mOK\x1b[0m",
            ["\x1b[1m", "\x1b[0m done \x1b[32mOK"],
        ),
        ("[1;33mapi_key[0m='abc12345' [32mok[0m", ["[1;33mapi_key[0m='", "' [32mok[0m"]),
    ],
)
def test_redaction_puts_the_escapes_back_around_the_mask(text, kept):
    out = redact_text(text)
    assert MASK in out and "abc12345" not in out and "AbCdEf" not in out
    assert all(piece in out for piece in kept)


@pytest.mark.parametrize(
    "text",
    [
        "AccountName=acct;EndpointSuffix=core.windows.net",
        "?sv=2021-06-08&se=2030-01-01&sp=r",
        "{'auths': {'ghcr.io': {}}}",
        "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Date=20250101T000000Z",
        "design=1 signal=SIGTERM",
        "[1;33mWARNING[0m tokenizer",
        "MY_hf_short",
        "\x1b[1mHF_TOKEN=<your read token>\x1b[0m",
    ],
)
def test_storage_shapes_leave_what_is_no_secret(text):
    assert redact_text(text) == text


def test_secrets_in_the_file_name_and_in_error_lines(tmp_path):
    token = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
    path = tmp_path / f"run-{token}.log"
    path.write_bytes(FAILED.read_bytes())
    for fmt in FORMATS:
        _, out, _ = cli([str(path), "-f", fmt])
        assert token not in out
    code, out, err = cli([str(tmp_path / f"missing-{token}.log")])
    assert code == 2 and token not in err and err.count("\n") == 1
    code, _, err = cli([str(tmp_path / f"missing-{token}.log"), "--no-redact"])
    assert code == 2 and token in err  # local use: the user asked to see it


def test_no_redact_says_it_is_for_local_use():
    help_text = _triage_parser().format_help()
    assert "--no-redact" in help_text and "local use only" in " ".join(help_text.split())
    assert "never paste" in NO_REDACT_WARNING and NO_REDACT_WARNING.count("\n") == 1


def test_redaction_is_one_stage_for_data_and_text():
    data = {"a": ["x hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123", ("api_key='abc12345'",)], "b": {"c": "password: pw"}}
    out = json.dumps(redact_data(data))
    assert "hf_Ab" not in out and "abc12345" not in out and 'pw"' not in out


@pytest.mark.parametrize(
    "text, keep",
    [
        ("usage: vllm serve [-h] [--api-key API_KEY] [--hf-token [HF_TOKEN]]", True),
        ("max_num_batched_tokens=8192, tokenizer='Qwen/Qwen2.5-7B', api_key=None", True),
        ("http://localhost:8000/v1/models and https://huggingface.co/api?x=1", True),
        ("api_key='<your-key>' hf_token=''", True),
        ("Authorization: Bearer [REDACTED]", True),
    ],
)
def test_what_is_not_a_secret_stays(text, keep):
    assert (redact_text(text) == text) is keep


def test_multi_line_private_key_block():
    text = (
        "key:\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA\nAAAEbm9uZQ\n"
        "-----END OPENSSH PRIVATE KEY-----\nafter"
    )
    out = redact_text(text)
    assert "b3BlbnNz" not in out and "AAAEbm9uZQ" not in out and out.endswith("after")
    assert "b3BlbnNz" not in redact_text("-----BEGIN PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA")  # cut off


def test_batch_redacts_and_warns_when_told_not_to(tmp_path):
    token = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
    (tmp_path / "a.log").write_bytes(planted_log(token, as_model=False))
    jsonl = tmp_path / "out.jsonl"
    code, out, err = cli(["batch", str(tmp_path / "a.log"), "--jobs", "1", "--jsonl", str(jsonl)])
    assert code == 1 and token not in out + err + jsonl.read_text() and NO_REDACT_WARNING not in err
    code, out, err = cli(["batch", str(tmp_path / "a.log"), "--jobs", "1", "--jsonl", str(jsonl), "--no-redact"])
    assert err.startswith(NO_REDACT_WARNING) and token in jsonl.read_text()


_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}
# The forms a chat tool or a browser gives a pasted log (tests/corpus/variants.py's chat family):
# the redactor must see the secret through them (ingest/chat.py undoes them before it reads).
CHAT_FORMS = {
    "html": lambda text: "".join(_HTML.get(c, c) for c in text),
    "json": lambda text: json.dumps(text, ensure_ascii=False)[1:-1] + "\n",
    "smart": lambda text: (
        text.replace("'", "\u2019").replace('"', "\u201d").replace(" --", " \u2014").replace("-----", "\u2014\u2014-")
    ),
}


@pytest.mark.parametrize("form", sorted(CHAT_FORMS))
def test_a_secret_pasted_through_a_chat_tool_is_in_no_report(form):
    leaked = []
    for name, text, secret, *_ in [*SECRETS, *SECRETS_ROUND_TWO]:
        log = CHAT_FORMS[form](planted_log(text, as_model=False).decode("utf-8"))
        _, out, _ = cli(["-", "-f", "json"], stdin=log.encode("utf-8"))
        if secret in out:
            leaked.append(name)
    assert not leaked
