"""`vllm-triage batch --ray` on a real local Ray (2 CPUs, one cluster for this module) and a
real S3 API (moto's server on 127.0.0.1, a free port, started and stopped by the test).

Few runs, since each starts workers: the corpus's table against the local batch's (and a
rerun that skips every log), a resumed run with poisoned inputs among good ones, and a run
that reads a bucket and writes to another. Nothing here asserts a time."""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import shutil
import socket
from pathlib import Path

import pytest
from conftest import FIXTURES

from triage.apps.cli import main

ray = pytest.importorskip("ray", reason="ray is not installed (the ray extra: pip install '.[ray]')")
pytest.importorskip("ray.data", reason="ray.data is not installed (the ray extra: pip install '.[ray]')")
pytest.importorskip("pyarrow", reason="pyarrow is not installed (the ray extra)")

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus"
FAILED = FIXTURES / "kv_cache_insufficient" / "v1-0.9.2-tp2-qwen14b-4090-estimated-max-len.log"
HEALTHY = FIXTURES / "healthy" / "v1-0.8.5-llama8b-h100-ctrl-c-shutdown-traceback.log"
OTHERS = sorted((FIXTURES / "foreign_gpu_processes").glob("*.log"))[:2]


@pytest.fixture(scope="module", autouse=True)
def cluster():
    import logging

    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False)
    yield
    ray.shutdown()


def batch(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["batch", *argv], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def _body(table: str) -> tuple[str, str]:
    """(the head's counts, the tables under it): what must match whatever ran the logs."""
    head, _, rest = table.partition("\n")
    counts = re.sub(r"^.* with \d+ jobs?: ", "", head)
    return counts, re.sub(r"^skipped \d+ logs already triaged in .*\n", "", rest)


def _rows(folder: Path) -> list[dict]:
    import pyarrow.parquet as pq

    return [row for part in sorted(folder.glob("part-*.parquet")) for row in pq.read_table(part).to_pylist()]


def test_the_corpus_gives_the_local_batchs_table_and_a_rerun_skips_every_log(tmp_path):
    if not CORPUS.is_dir():
        pytest.skip(f"the corpus is not here ({CORPUS})")
    local_code, local, _ = batch(str(CORPUS), "-j", "2")
    code, table, err = batch("--ray", str(CORPUS), "--output", str(tmp_path / "out"))
    assert (code, _body(table)) == (local_code, _body(local))
    assert re.search(r"ray: (\d+)/\1 logs \(0 skipped, 0 unreadable\), \d+ logs/s, [\d.]+ ms of worker CPU a log", err)
    assert (tmp_path / "out" / "cause-table.txt").read_text() == table
    rows = _rows(tmp_path / "out")
    assert len(rows) == len({r["name"] for r in rows}) == int(re.search(r"(\d+) logs in", local).group(1))
    again_code, again, _ = batch("--ray", str(CORPUS), "--output", str(tmp_path / "out"))
    assert (again_code, _body(again)) == (local_code, _body(local))
    assert f"skipped {len(rows)} logs already triaged" in again
    assert len(_rows(tmp_path / "out")) == len(rows)  # nothing written twice


def test_a_resumed_run_with_poisoned_logs_among_good_ones(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    for src in (FAILED, HEALTHY):
        shutil.copy(src, logs / src.name)
    out = tmp_path / "out"
    code, first, _ = batch("--ray", str(logs), "--output", str(out), "--max-bytes", "1MiB")
    assert code == 1 and "2 logs" in first
    (logs / "binary.log").write_bytes(bytes(range(32)) * 400)
    (logs / "huge.log").write_bytes(b"INFO 10-02 16:20:11 [core.py:76] starting\n" * 40000)
    (logs / "broken.log.gz").write_bytes(gzip.compress(FAILED.read_bytes())[:300])
    (logs / "gone.log").symlink_to(logs / "nowhere.log")
    os.mkfifo(logs / "pipe.log")
    for src in OTHERS:
        shutil.copy(src, logs / src.name)
    code, table, _err = batch(logs.as_posix(), "--ray", "--output", str(out), "--max-bytes", "1MiB")
    assert code == 1
    assert "skipped 2 logs already triaged" in table
    local_code, local, _ = batch(str(logs), "-j", "1", "--max-bytes", "1MiB")
    assert (code, _body(table)) == (local_code, _body(local))
    assert "5 unreadable" in table and all(
        name in table for name in ("binary.log", "huge.log", "broken.log.gz", "gone.log", "pipe.log")
    )
    rows = _rows(out)
    assert sorted(r["name"].rsplit("/", 1)[-1] for r in rows) == sorted(p.name for p in logs.iterdir())
    assert all(json.loads(r["report"])["input"]["name"] == r["name"] for r in rows)


@pytest.fixture
def s3():
    pytest.importorskip("moto", reason="moto is not installed (the ray-test extra: pip install '.[ray-test]')")
    pytest.importorskip("s3fs", reason="s3fs is not installed (the ray extra)")
    boto3 = pytest.importorskip("boto3", reason="boto3 is not installed (the ray-test extra)")
    from moto.server import ThreadedMotoServer

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )
    yield client, [f"endpoint_url={endpoint}", "key=testing", "secret=testing"]
    server.stop()


def test_logs_read_from_a_bucket_and_reports_written_to_one(s3, tmp_path):
    client, options = s3
    client.create_bucket(Bucket="fleet-logs")
    client.create_bucket(Bucket="fleet-reports")
    local = tmp_path / "same"
    local.mkdir()
    for i, src in enumerate([FAILED, HEALTHY, *OTHERS]):
        client.put_object(Bucket="fleet-logs", Key=f"2026/12/node{i}/vllm.log", Body=src.read_bytes())
        shutil.copy(src, local / f"node{i}.log")
    client.put_object(Bucket="fleet-logs", Key="2026/12/node9/vllm.log", Body=bytes(range(32)) * 400)
    client.put_object(Bucket="fleet-logs", Key="2026/12/README.md", Body=b"not a log")
    (local / "node9.log").write_bytes(bytes(range(32)) * 400)
    flags = [f"--storage-option={o}" for o in options]
    code, table, _ = batch(
        "--ray", "s3://fleet-logs/2026/", "--output", "s3://fleet-reports/run1", "--output-format", "jsonl", *flags
    )
    _, expected, _ = batch(str(local), "-j", "1")
    counts, tables = _body(table)
    assert code == 1 and counts == _body(expected)[0]
    assert tables.partition("unreadable:")[0] == _body(expected)[1].partition("unreadable:")[0]
    assert "s3://fleet-logs/2026/12/node9/vllm.log: " in table
    keys = [o["Key"] for o in client.list_objects_v2(Bucket="fleet-reports")["Contents"]]
    assert "run1/cause-table.txt" in keys
    lines = [
        json.loads(line)
        for key in keys
        if key.endswith(".jsonl")
        for line in client.get_object(Bucket="fleet-reports", Key=key)["Body"].read().splitlines()
    ]
    assert sorted(r["name"] for r in lines) == [f"s3://fleet-logs/2026/12/node{i}/vllm.log" for i in (0, 1, 2, 3, 9)]
    assert {r["report"]["input"]["name"] for r in lines if "error" not in r["report"]} == {
        r["name"] for r in lines if r["status"] != "error"
    }
