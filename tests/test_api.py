"""The Python API (`triage.api`, re-exported by `triage`): its surface is a contract.

The names and signatures are snapshot-tested: a change to them is deliberate (and, if it
breaks a caller, raises API_VERSION's major number). The behaviour tests hold every way in
(bytes, binary and text streams, paths) to the same report, and a Triager to working in a
fresh worker process with packs whose files are gone."""

from __future__ import annotations

import inspect
import io
import json
import multiprocessing
import pickle

import msgspec
import pytest
from conftest import FIXTURES

import triage
from triage import api

FAILED = FIXTURES / "kv_cache_insufficient" / "v1-0.9.2-tp2-qwen14b-4090-estimated-max-len.log"
HEALTHY = FIXTURES / "healthy" / "v1-0.8.5-llama8b-h100-ctrl-c-shutdown-traceback.log"
PACK = """schema: 1
rules:
  - id: team-kv-note
    cause: kv_cache_insufficient
    title: Our team's note on a KV cache too small
    when:
      event: kv_needed
    rank: 99
    explanation:
      - "Ask the platform team for a larger GPU."
"""


def _surface() -> str:
    """Every public name with its kind and signature; a class's public methods and properties."""
    lines = [f"API_VERSION = {api.API_VERSION!r}", f"SCHEMA_VERSION = {api.SCHEMA_VERSION!r}"]
    for name in sorted(api.__all__):
        obj = getattr(api, name)
        if name.isupper():
            continue
        if inspect.isclass(obj):
            if issubclass(obj, BaseException):
                lines.append(f"exception {name}({', '.join(b.__name__ for b in obj.__bases__)})")
                continue
            lines.append(f"class {name}{_signature(obj)}")
            for attr, member in sorted(vars(obj).items()):
                if (attr.startswith("_") and attr != "__init__") or attr == "__init__":
                    continue
                if isinstance(member, property):
                    lines.append(f"    property {attr}: {inspect.signature(member.fget).return_annotation}")
                elif callable(member):
                    lines.append(f"    def {attr}{inspect.signature(member)}")
        else:
            lines.append(f"def {name}{inspect.signature(obj)}")
    return "\n".join(lines) + "\n"


def _signature(cls: type) -> str:
    if isinstance(cls, type) and issubclass(cls, msgspec.Struct):  # a value class: its fields
        written = {n: a for c in reversed(cls.__mro__) for n, a in inspect.get_annotations(c).items()}
        return "(" + ", ".join(f"{n}: {written[n]}" for n in cls.__struct_fields__) + ")"
    return str(inspect.signature(cls))


def test_the_api_surface_is_the_published_one(snapshot_txt):
    assert _surface() == snapshot_txt


def test_the_package_root_re_exports_the_api():
    assert all(getattr(triage, name) is getattr(api, name) for name in api.__all__)
    assert set(api.__all__) <= set(dir(triage))
    with pytest.raises(AttributeError):
        triage.no_such_name  # noqa: B018


def test_the_schema_version_is_the_reports():
    report = api.triage(FAILED)
    assert report.schema_version == api.SCHEMA_VERSION == api.to_dict(report)["schema_version"]
    assert api.API_VERSION.split(".")[0].isdigit()


def test_every_way_in_gives_the_same_report():
    t = api.Triager()
    data = FAILED.read_bytes()
    by_bytes = t.triage_bytes(data, "x.log")
    assert by_bytes.diagnoses[0].id == "kv_cache_insufficient"
    assert t.triage_stream(io.BytesIO(data), "x.log") == by_bytes
    assert t.triage_stream(io.StringIO(data.decode("utf-8")), "x.log") == by_bytes
    assert t.triage_path(FAILED, name="x.log") == by_bytes
    assert api.triage(data, "x.log") == by_bytes
    assert t.record(data, "x.log") == json.loads(by_bytes.model_dump_json())


def test_record_makes_a_bad_log_an_error_row_and_never_raises():
    t = api.Triager(max_bytes=1000)
    assert "binary" in t.record(bytes(range(32)) * 400, "bin.log")["error"]
    big = t.record(FAILED.read_bytes(), "big.log")
    assert set(big) == {"input", "error"} and "limit" in big["error"]
    assert "error" in t.record(b"\x1f\x8b\x08\x00broken gzip" * 10, "x.log.gz")
    assert api.summarize(big).status == "error"
    with pytest.raises(api.InputError):
        t.triage_bytes(bytes(range(32)) * 400, "bin.log")


def test_error_records_hide_secrets_in_names():
    token = "hf_" + "b" * 34
    row = api.Triager().record(bytes(range(32)) * 400, f"logs/{token}/vllm.log")
    assert token not in json.dumps(row)


def test_summary_reads_a_report_and_its_dict_alike():
    t = api.Triager()
    for path in (FAILED, HEALTHY):
        report = t.triage_path(path)
        assert api.summarize(report) == api.summarize(api.to_dict(report))
    failed = api.summarize(t.triage_path(FAILED))
    assert (failed.status, failed.cause, failed.model, failed.vllm_version) == (
        "failed",
        "kv_cache_insufficient",
        "Qwen/Qwen2.5-14B-Instruct",
        "0.9.2",
    )
    assert api.summarize(t.triage_path(HEALTHY)).status == "healthy"


def test_a_path_needs_no_name_and_bytes_do():
    with pytest.raises(TypeError):
        api.triage(FAILED.read_bytes())


def _record_in_worker(args: tuple[bytes, bytes, str]) -> dict:
    triager_bytes, data, name = args
    return pickle.loads(triager_bytes).record(data, name)


def test_a_triager_works_in_a_fresh_process_with_its_packs_files_gone(tmp_path):
    pack = tmp_path / "team.yaml"
    pack.write_text(PACK)
    t = api.Triager([pack])
    assert t.rules == (str(pack),)
    data = FAILED.read_bytes()
    here = t.record(data, "x.log")
    assert here["diagnoses"][0]["rule"] == "team-kv-note"
    shipped = pickle.dumps(t)
    pack.unlink()  # the compiled rules travel with the Triager
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        there = pool.map(_record_in_worker, [(shipped, data, "x.log")])[0]
    assert there == here


def test_the_readmes_api_example_prints_what_its_comments_say(monkeypatch, capsys):
    """The first python block of README's "The Python API" runs as written (from the checkout's root)."""
    import re

    from conftest import ROOT

    section = (ROOT / "README.md").read_text(encoding="utf-8").split("### The Python API", 1)[1]
    block = re.search(r"```python\n(.*?)```", section, flags=re.S).group(1)
    monkeypatch.chdir(ROOT)
    exec(compile(block, "README.md", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    said = [line.split("#", 1)[1].strip() for line in block.splitlines() if line.startswith("print(")]
    assert len(printed) == len(said) == 4
    for out, comment in zip(printed, said, strict=False):
        assert out.startswith(comment.split("...", 1)[0].rstrip(", ")), (out, comment)
