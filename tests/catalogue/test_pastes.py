"""Every catalogued release, every way a user pastes a message: the tool names its cause.

For each vLLM release of the catalogue, each of its one-line user-facing messages (an
exception's or an ERROR log line's) is rendered in each paste form of `pastes.py` and run
through the tool. The first cause must be the catalogue's, or (where the catalogue names none)
none or unknown_failure: a specific rule that names another cause over-fires, and a form the
tool cannot read loses the message. The few disagreements that stand are in
`test_releases.STANDING`, with why."""

from __future__ import annotations

import json
import re
from functools import cache

import pytest
from conftest import triage_text
from pastes import ARGPARSE, FORMS, message, pydantic_era
from test_releases import STANDING

from triage.parse.catalogue import path

with open(path(), encoding="utf-8") as _file:
    DOC = json.load(_file)
RELEASES = DOC["releases"]["vllm"]
ORDER = {v: i for i, v in enumerate(RELEASES)}
# the disagreements of classes test_releases does not paste: (file, function) -> (cause, why)
STANDING_HERE = {
    ("vllm/model_executor/model_loader/weight_cache/protocol.py", "_recv_exact"): (
        "hub_unreachable",
        "a bare ConnectionError reads as the hub's (a fallback rule, confidence 0.55); the IPC weight "
        "cache's socket error names no cause, and the pasted line holds nothing else that tells them apart",
    ),
}
# (file, function, form) -> why that form of the message stands unread
STANDING_FORMS = {
    (
        "vllm/model_executor/layers/quantization/compressed_tensors/comp"
        "ressed_tensors_moe/compressed_tensors_moe_w8a8_int8.py",
        "__init__",
        "bare",
    ): (
        "'dynamic per token quantization. Found ...' reads to the redactor as a token and its value: the bare "
        "sentence loses its end before it is matched (secrets never reach output); with its class the "
        "uncatalogued reading still names the check"
    ),
    (
        "vllm/model_executor/layers/quantization/compressed_tensors/comp"
        "ressed_tensors_moe/compressed_tensors_moe_w8a8_int8.py",
        "__init__",
        "bare-wrap-80",
    ): (
        "'dynamic per token quantization. Found ...' reads to the redactor as a token and its value: the bare "
        "sentence loses its end before it is matched (secrets never reach output); with its class the "
        "uncatalogued reading still names the check"
    ),
    ("vllm/entrypoints/cli/preload.py", "_validate_seed_args", "bare"): (
        "`--seed-token <word>` is redacted as a secret before matching (secrets never reach output); with its "
        "class the uncatalogued reading still names the check, alone the line shows no failure"
    ),
    ("vllm/model_executor/models/registry.py", "register_model", "core-wrap-120"): (
        "the cut leaves '>`' alone on the last line, which reads as a Markdown quote, not the message's end"
    ),
    ("vllm/lora/punica.py", "_raise_import_error", "core-wrap-120"): (
        "the cut leaves '>= 8.0' alone on the last line, which reads as a Markdown quote, not the message's end"
    ),
}
CLASS = re.compile(r"\w*(Error|Exception)|logger\.(error|exception|critical)")


def live(release: str) -> list[dict]:
    """The release's one-line messages whose rendered text its own pattern matches (a
    template with literal braces, `in {4, 8}`, cannot be rendered by field substitution)."""
    out = []
    for e in DOC["entries"]:
        if e["package"] != "vllm" or not CLASS.fullmatch(e["exception"]) or "\n" in e["template"]:
            continue
        if len(e["template"]) >= 400 or not ORDER[e["first"]] <= ORDER[release] <= ORDER[e["last"]]:
            continue
        if re.search(e["pattern"], re.sub(r"\s+", " ", message(e))):
            out.append(e)
    return out


@cache
def _first(text: str) -> str | None:
    got = triage_text(text + "\n").diagnoses
    return got[0].id if got else None


def agrees(e: dict, text: str) -> bool:
    got = _first(text)
    if got == e["cause"] or (e["cause"] == "unknown_failure" and got in (None, "unknown_failure")):
        return True
    standing = STANDING.get((e["file"], e["function"])) or STANDING_HERE.get((e["file"], e["function"]))
    return standing is not None and (got == standing[0] or (got is None and standing[0] == "unknown_failure"))


def cases(release: str) -> dict[str, list[tuple[dict, str]]]:
    """form -> [(entry, pasted text)] for the release."""
    new = pydantic_era(release)
    out: dict[str, list[tuple[dict, str]]] = {form: [] for form in FORMS}
    for e in live(release):
        for form, (applies, render) in FORMS.items():
            if applies(e, new):
                out[form].append((e, render(e)))
    return out


def table() -> str:
    """The pass rate per release and per form."""
    lines = [f"{'release':<12} " + " ".join(f"{f:>15}" for f in FORMS) + f" {'all':>15}"]
    for release in RELEASES:
        row, total = [], [0, 0]
        for _form, mine in cases(release).items():
            ok = sum(agrees(e, t) for e, t in mine)
            row.append(f"{ok:>7}/{len(mine):<7}" if mine else f"{'-':>15}")
            total[0] += ok
            total[1] += len(mine)
        lines.append(f"{release:<12} " + " ".join(row) + f" {total[0]:>7}/{total[1]:<7}")
    return "\n".join(lines)


@pytest.mark.parametrize("release", RELEASES)
def test_every_form_of_every_message_of_a_release_gets_its_cause(release):
    found = cases(release)
    assert len(found["exception"]) >= 100, len(found["exception"])
    wrong = [
        (form, e["cause"], _first(t), f"{e['file']}:{e['function']}", t[:160])
        for form, mine in found.items()
        for e, t in mine
        if not agrees(e, t) and (e["file"], e["function"], form) not in STANDING_FORMS
    ]
    assert not wrong, "\n".join(map(str, wrong))


@pytest.mark.parametrize("text", ARGPARSE)
def test_argparse_refusing_a_flag_is_invalid_arguments(text):
    assert _first(text) == "invalid_arguments"
    assert _first("usage: vllm serve [-h] [--model MODEL]\n" + text) == "invalid_arguments"


def test_table(capsys):
    """The pass rates (`-s -k table` shows them)."""
    with capsys.disabled():
        print("\n" + table())


def test_the_standing_disagreements_here_still_happen():
    """A listed disagreement that no longer happens is removed from the list."""
    for (file, function), (cause, _why) in STANDING_HERE.items():
        mine = [t for r in RELEASES for e, t in cases(r)["exception"] if (e["file"], e["function"]) == (file, function)]
        assert cause in {_first(t) for t in mine}, (file, function)


# vLLM 0.33's (vllm/config/multimodal.py): no rule knows it by its wording, only the catalogue
MESSAGE = "'mm_shm_cache_max_object_size_mb' should only be set when 'mm_processor_cache_type' is 'shm'."


def test_a_catalogued_message_pasted_alone_is_read_as_raised():
    report = triage_text(MESSAGE + "\n")
    assert [(d.id, d.rule) for d in report.diagnoses][:1] == [("invalid_arguments", "catalogue-invalid-arguments")]
    block = "  Value error, The model's max seq len (32768) is larger than the maximum number of tokens that can be "
    assert _first(block + "stored in KV cache (2048). [type=value_error, input_value=ArgsKwargs(()), input_type=A]")


@pytest.mark.parametrize(
    "text",
    [
        "WARNING 12-05 06:16:45 [worker.py:1] " + MESSAGE,  # vLLM said it and went on
        "INFO 12-05 06:16:45 [api_server.py:1] Application startup complete.\n" + MESSAGE,  # a server came up
        "The cache is fine, nothing happened here; the engine started as it always does.",  # no message of vLLM's
        "\n".join([f"line {i} of a long log" for i in range(60)] + [MESSAGE]),  # no paste: a whole log
    ],
)
def test_what_is_no_pasted_message_stays_quiet(text):
    assert _first(text) is None
