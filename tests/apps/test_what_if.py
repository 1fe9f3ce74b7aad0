"""`vllm-triage what-if`: the failed log's figures, the flags applied, vLLM's checks answered (exit 0/1/2)."""

from __future__ import annotations

import io
import json

from conftest import FIXTURES

from triage.apps.cli import main

KV = FIXTURES / "kv_cache_insufficient" / "v1-0.8.3-tp2-qwen3-32b-awq-needs-10-has-1.25-no-estimate.log"
START = FIXTURES / "gpu_memory_utilization_too_high" / "v1-0.11.0-h100-free-18-qwen14b-no-utilization-holds-weights.log"
WARM = FIXTURES / "warmup_oom" / "v1-0.10.1-h100-flashinfer-autotune-pool-holds-one-request.log"


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = main(["what-if", *argv], stdout=out, stderr=err)
    return rc, out.getvalue(), err.getvalue()


def _checks(*argv: str) -> tuple[int, dict]:
    rc, out, _ = _run(*argv, "--format", "json")
    return rc, json.loads(out)


def test_the_worst_case_length_fits_and_the_naive_one_cannot_tell():
    rc, doc = _checks(str(KV), "--max-model-len", "5088")
    assert rc == 0 and doc["verdict"] == "fits"
    [kv] = [c for c in doc["checks"] if c["name"] == "kv_fits_max_model_len"]
    assert kv["margin"] >= 0 and kv["need"]["hi"] <= kv["have"]["lo"]
    rc, doc = _checks(str(KV), "--max-model-len", "5120")
    assert rc == 2 and doc["verdict"] == "cannot tell"


def test_fp8_alone_fails_and_with_a_length_fits():
    assert _checks(str(KV), "--kv-cache-dtype", "fp8")[0] == 1
    assert _checks(str(KV), "--kv-cache-dtype", "fp8", "--max-model-len", "10192")[0] == 0


def test_a_utilization_below_the_weights_fails_the_pool_check():
    rc, doc = _checks(str(START), "--gpu-memory-utilization", "0.22")
    assert rc == 1
    verdicts = {c["name"]: c["verdict"] for c in doc["checks"]}
    assert verdicts["startup_free_memory"] == "fits" and verdicts["kv_pool_positive"] == "fails"
    assert any(c["provenance"] == "estimated" for c in doc["checks"])


def test_a_utilization_cut_needs_a_shorter_context():
    assert _checks(str(WARM), "--gpu-memory-utilization", "0.93")[0] == 1
    rc, doc = _checks(str(WARM), "--gpu-memory-utilization", "0.93", "--max-model-len", "34384")
    assert rc == 0, doc


def test_terminal_output_names_each_check():
    rc, out, _ = _run(str(KV), "--max-model-len", "5088")
    assert rc == 0 and "kv_fits_max_model_len" in out and "verdict: fits" in out


def test_a_log_with_no_figures_cannot_tell(tmp_path):
    log = tmp_path / "empty.log"
    log.write_text("INFO 01-01 00:00:00 [api_server.py:1] vLLM API server version 0.10.1\n")
    rc, out, _ = _run(str(log))
    assert rc == 2 and "cannot tell" in out


def test_a_bad_value_is_a_usage_error():
    rc, _, err = _run(str(KV), "--gpu-memory-utilization", "1.5")
    assert rc == 2 and err.startswith("vllm-triage:") and err[-1] == "\n"
    rc, _, err = _run(str(KV), "--max-model-len", "many")
    assert rc == 2 and err.count("\n") == 1


def test_cannot_tell_names_the_figure_the_log_lacks():
    # a utilization change moves the KV pool by a share of the GPU's total, which this log never prints
    log = FIXTURES / "kv_cache_insufficient" / "v1-0.9.2-tp2-qwen14b-4090-estimated-max-len.log"
    code, out, _ = _run(str(log), "--gpu-memory-utilization", "0.85")
    assert code == 2 and "the GPU's total memory is not in the log" in out


def test_a_tensor_parallel_size_that_does_not_divide_the_heads_fails():
    log = FIXTURES / "parallelism_mismatch" / "v085-qwen14b-40-heads-tp3.log"  # 40 heads, TP 3
    rc, doc = _checks(str(log), "--tensor-parallel-size", "3")
    assert rc == 1 and doc["verdict"] == "fails"
    [check] = [c for c in doc["checks"] if c["name"] == "tensor_parallel_divides"]
    assert check["verdict"] == "fails" and "40 is not a multiple of 3" in check["text"]
    rc, doc = _checks(str(log))  # no change: the log's own TP 3 still fails
    assert rc == 1
    rc, doc = _checks(str(log), "--tensor-parallel-size", "4")
    assert [c["verdict"] for c in doc["checks"] if c["name"] == "tensor_parallel_divides"] == ["fits"]


NO_TOTAL = FIXTURES / "kv_cache_insufficient" / "v1-0.10.1-llama8b-no-gpu-total-estimate-25552.log"


def test_a_lower_utilization_without_the_gpu_total_fails_where_even_the_largest_pool_is_short():
    # the log has no GPU total: lowering --gpu-memory-utilization can only shrink the pool, so a
    # need above the largest pool it can leave fails (it said "cannot tell" before)
    for length in ("32768", "20000"):  # 20000 is under vLLM's estimate at 0.9, over any pool at 0.85
        rc, doc = _checks(str(NO_TOTAL), "--gpu-memory-utilization", "0.85", "--max-model-len", length)
        assert rc == 1 and doc["verdict"] == "fails", length
        [kv] = [c for c in doc["checks"] if c["name"] == "kv_fits_max_model_len"]
        assert kv["need"]["lo"] > kv["have"]["hi"] and kv["have"]["lo"] is None  # bounded above only
        assert abs(kv["have"]["hi"] / 2**30 - 2.119) < 0.005
    # a need under that bound stays open: the pool's lower end needs the total
    rc, doc = _checks(str(NO_TOTAL), "--gpu-memory-utilization", "0.85", "--max-model-len", "8192")
    assert rc == 2 and doc["verdict"] == "cannot tell"
    rc, out, _ = _run(str(NO_TOTAL), "--gpu-memory-utilization", "0.85", "--max-model-len", "20000")
    assert "have at most 2.12 GiB" in out and "inf" not in out
    # the same flags with the utilization kept: vLLM's own estimate answers as before
    assert _checks(str(NO_TOTAL), "--max-model-len", "25552")[0] == 0
