"""One redaction policy for every output path (triage/diagnose/redaction.py).

The same secret-laden logs go through the CLI in every format, through `batch` (its JSON
Lines, as fleet writes them) and through the HTTP server in each of its formats (JSON is also
what the paste page asks for): no secret in any output, and the evidence the CLI's JSON cites
is, text for text, the evidence the server's JSON and the batch record cite.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
from secret_cases import SECRETS, SECRETS_ROUND_TWO

from triage.apps.serve.requests import FORMATS as SERVER_FORMATS
from triage.diagnose.redact import MASK
from triage.diagnose.redaction import OFF, ON, SERVER, policy
from triage.render import FORMATS

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "apps"))
from serve_support import post, running
from test_hostile_secrets import cli, planted_log

CASES = [(n, t, s) for n, t, s, _ in SECRETS] + list(SECRETS_ROUND_TWO)
# Three secrets a log: planted in the printed arguments and the fatal message, each still whole
# where the report cites it (checked below with --no-redact).
GROUPS = [CASES[i : i + 3] for i in range(0, len(CASES), 3)]


def _evidence(report: dict) -> list[tuple[str, int, str]]:
    return [(d["id"], e["line"], e["text"]) for d in report["diagnoses"] for e in d["evidence"]]


@pytest.fixture(scope="module")
def port():
    with running() as p:
        yield p


@pytest.mark.parametrize("group", GROUPS, ids=["+".join(n for n, _, _ in g) for g in GROUPS])
def test_every_output_path_masks_alike(group, port, tmp_path):
    log = planted_log(" ; ".join(text for _, text, _ in group), as_model=False)
    secrets = [secret for _, _, secret in group]
    _, raw, _ = cli(["-", "-f", "json", "--no-redact"], stdin=log)
    unmasked = " ".join(text for *_, text in _evidence(json.loads(raw)))
    assert all(s in unmasked for s in secrets)  # the plants are where a report looks
    outputs = {}
    for fmt in FORMATS:
        code, out, err = cli(["-", "-f", fmt], stdin=log)
        assert code == 1 and err == ""
        outputs[f"cli {fmt}"] = out
    for fmt in SERVER_FORMATS:
        answer = post(port, log, path=f"/v1/triage?format={fmt}&name=%3Cstdin%3E")  # named as the CLI names stdin
        assert answer.status == 200
        outputs[f"server {fmt}"] = answer.text
        if fmt != "json":  # laid out from the same report: the CLI's text, byte for byte
            assert answer.text.rstrip("\n") == outputs[f"cli {fmt}"].rstrip("\n"), fmt
    (tmp_path / "planted.log").write_bytes(log)  # batch (and fleet) write one JSON report a line
    jsonl = tmp_path / "reports.jsonl"
    code, out, err = cli(["batch", str(tmp_path / "planted.log"), "--jobs", "1", "--jsonl", str(jsonl)])
    assert code == 1 and err == ""
    outputs["batch"], outputs["batch jsonl"] = out, jsonl.read_text(encoding="utf-8")
    for where, text in outputs.items():
        assert not [s for s in secrets if s in text], f"a secret leaked in {where}"
    cli_evidence, server_evidence, batch_evidence = (
        _evidence(json.loads(outputs[k])) for k in ("cli json", "server json", "batch jsonl")
    )
    assert cli_evidence == server_evidence == batch_evidence and MASK in " ".join(t for *_, t in cli_evidence)


def test_the_policy_is_one_switch_and_the_server_has_it_on():
    secret = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
    assert policy(True) is ON and policy(False) is OFF and SERVER is ON
    assert MASK in ON.text(f"token {secret}") and OFF.text(secret) == secret
    assert ON.lines() is not None and OFF.lines() is None
    assert ON.own_words("VLLM_TRIAGE_TOKEN: set it") == "VLLM_TRIAGE_TOKEN: set it"


def test_the_server_never_unredacts(monkeypatch):
    """The worker's pipeline runs with redaction on whatever it is handed: no request field,
    header or setting reaches `Options.redact`."""
    from triage.apps.serve import job

    seen = []
    monkeypatch.setattr(job, "run", lambda stream, name, options, rules: seen.append(options.redact) or 1 / 0)
    with pytest.raises(ZeroDivisionError):
        job.analyse_bytes(io.BytesIO(b"x").read(), "x", "json", [], 1024)
    assert seen == [True]
