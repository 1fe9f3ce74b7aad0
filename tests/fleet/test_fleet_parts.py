"""`batch --ray` without a cluster: its options, the worker body and the store on plain pyarrow.

The Ray runs themselves are in test_ray_batch.py (one cluster for the module); these hold the
parts to what they promise in milliseconds, and the default install to importing none of it."""

from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys

import pytest
from conftest import FIXTURES

from triage.apps.cli import main

FAILED = FIXTURES / "kv_cache_insufficient" / "v1-0.9.2-tp2-qwen14b-4090-estimated-max-len.log"
HEALTHY = FIXTURES / "healthy" / "v1-0.8.5-llama8b-h100-ctrl-c-shutdown-traceback.log"
HEAVY = {"ray", "pyarrow", "fsspec", "s3fs", "pandas", "numpy"}


def run(argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(["batch", *argv], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def _modules_after(code: str) -> set[str]:
    probe = f"{code}\nimport sys, json\nprint(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return set(json.loads(out.splitlines()[-1]))


def test_the_command_line_and_a_local_batch_import_no_ray_or_arrow(tmp_path):
    (tmp_path / "a.log").write_bytes(FAILED.read_bytes())
    assert not _modules_after("import triage.apps.cli, triage") & HEAVY
    code = f"import io\nfrom triage.apps.cli import main\nmain(['batch', {str(tmp_path)!r}, '-j', '1'], stdout=io.StringIO())"
    assert not _modules_after(code) & HEAVY


def test_ray_options_that_cannot_work_are_usage_errors(tmp_path):
    for argv, said in (
        (["--ray", str(tmp_path)], "--output"),
        (["--ray", str(tmp_path), "--output", "o", "--jsonl", "x"], "--output-format jsonl"),
        ([str(tmp_path), "--output", "o"], "go with --ray"),
        (["--ray"], "required"),
    ):
        code, _, err = run(argv)
        assert code == 2 and said in err and err.count("\n") == 1, (argv, err)


def test_an_input_after_a_bare_ray_is_an_input_not_an_address():
    from triage.apps.batch import _parser, _ray_args

    for given, address, inputs in (
        (["--ray", "logs/"], "local", ["logs/"]),
        (["--ray", "s3://b/logs/", "x"], "local", ["s3://b/logs/", "x"]),
        (["--ray=10.0.0.1:6379", "logs/"], "10.0.0.1:6379", ["logs/"]),
        (["logs/", "--ray", "auto"], "auto", ["logs/"]),
        (["--ray", "ray://head:10001", "logs/"], "ray://head:10001", ["logs/"]),
    ):
        args = _parser().parse_args([*given, "--output", "o"])
        _ray_args(args)
        assert (args.ray, args.inputs) == (address, inputs), given


def test_storage_options_read_json_values_and_refuse_a_bare_word():
    from triage.apps.fleet.run import storage_options
    from triage.errors import UsageError

    assert storage_options(["anon=true", "endpoint_url=http://127.0.0.1:9", 'client_kwargs={"region_name": "x"}']) == {
        "anon": True,
        "endpoint_url": "http://127.0.0.1:9",
        "client_kwargs": {"region_name": "x"},
    }
    with pytest.raises(UsageError):
        storage_options(["anon"])


@pytest.fixture
def parts():
    pytest.importorskip("pyarrow", reason="the ray extra is not installed (pip install '.[ray]')")
    pytest.importorskip("fsspec", reason="the ray extra is not installed (pip install '.[ray]')")
    from triage.apps.fleet import sources, store, worker

    return sources, store, worker


def _inputs(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "a-failed.log").write_bytes(FAILED.read_bytes())
    (logs / "b-healthy.log.gz").write_bytes(gzip.compress(HEALTHY.read_bytes()))
    (logs / "c-binary.log").write_bytes(bytes(range(32)) * 400)
    (logs / "d-huge.log").write_bytes(FAILED.read_bytes() * 100)
    (logs / "e-gone.log").symlink_to(logs / "nowhere.log")
    return logs


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_the_worker_body_writes_rows_and_skips_what_the_store_holds(tmp_path, parts, fmt):
    import pyarrow as pa

    from triage.api import Triager

    sources, store_mod, worker = parts
    found = sources.list_sources([str(_inputs(tmp_path))], {})
    assert [s.name.rsplit("/", 1)[-1] for s in found] == [
        "a-failed.log",
        "b-healthy.log.gz",
        "c-binary.log",
        "d-huge.log",
        "e-gone.log",
    ]
    store = store_mod.Store(str(tmp_path / "out"), fmt, {})
    store.prepare()
    batch = pa.Table.from_pylist(
        [{"index": i, "name": s.name, "url": s.url, "size": s.size} for i, s in enumerate(found)]
    )
    limit = len(FAILED.read_bytes()) * 10
    first = worker.TriageBatch((Triager(max_bytes=limit), frozenset(store.index())), store, {}, limit)(batch)
    rows = {r["name"].rsplit("/", 1)[-1]: r for r in first.to_pylist()}
    assert rows["a-failed.log"]["cause"] == "kv_cache_insufficient" and rows["b-healthy.log.gz"]["status"] == "healthy"
    assert "binary" in rows["c-binary.log"]["error"] and "limit" in rows["d-huge.log"]["error"]
    assert "no such file" in rows["e-gone.log"]["error"] and not any(r["skipped"] for r in rows.values())
    assert len(store.parts()) == 1
    index = store.index()  # the logs read whole (the unreadable ones are tried again next time)
    assert len(index) == 3 and {k[0].rsplit("/", 1)[-1] for k in index} == {
        "a-failed.log",
        "b-healthy.log.gz",
        "c-binary.log",
    }
    again = worker.TriageBatch((Triager(max_bytes=limit), frozenset(index)), store, {}, limit)(batch).to_pylist()
    assert [r["skipped"] for r in again] == [True, True, True, False, False]
    assert len(store.parts()) == 2  # only the unreadable two were written again


def test_a_report_row_holds_the_whole_report(tmp_path, parts):
    import pyarrow.parquet as pq

    from triage.api import Triager

    sources, store_mod, worker = parts
    log = tmp_path / "a.log"
    log.write_bytes(FAILED.read_bytes())
    store = store_mod.Store(str(tmp_path / "out"), "parquet", {})
    store.prepare()
    body = worker.TriageBatch((Triager(), frozenset()), store, {}, 1 << 20)
    _, row = body.one(sources.list_sources([str(log)], {})[0])
    table = pq.read_table(store.write([row]))
    assert table.schema.names == list(store_mod.COLUMNS)
    report = json.loads(table.column("report")[0].as_py())
    assert report == Triager().record(FAILED.read_bytes(), str(log))
    assert table.column("schema_version")[0].as_py() == report["schema_version"] == 1


def test_without_the_extra_ray_is_one_line_saying_how_to_get_it(tmp_path):
    (tmp_path / "a.log").write_bytes(FAILED.read_bytes())
    code = f"""
import io, sys
sys.modules["ray"] = None  # as if the extra were not installed
from triage.apps.cli import main
err = io.StringIO()
rc = main(["batch", "--ray", {str(tmp_path)!r}, "--output", {str(tmp_path / "out")!r}], stdout=io.StringIO(), stderr=err)
print(rc, err.getvalue(), end="")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.startswith("2 vllm-triage: --ray needs the [ray] extra") and out.count("\n") == 1
    assert "pip install '.[ray]'" in out
