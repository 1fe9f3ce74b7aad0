"""`vllm-triage plan` end to end: exit codes, the ways to name a model and a GPU, bad input,
the published JSON contract (schema file and snapshots), and help."""

from __future__ import annotations

import io
import json
import re
import struct

import pytest
from conftest import ROOT

from triage.apps.cli import main
from triage.plan.schema import PlanReport, plan_json_schema

CONFIGS = ROOT / "fixtures" / "configs"
LLAMA = str(CONFIGS / "llama-3.1-8b-instruct")
QWEN7 = str(CONFIGS / "qwen2.5-7b-instruct")


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["plan", *argv], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def plan_json(*argv: str) -> tuple[int, dict]:
    code, out, err = run("--format", "json", *argv)
    assert not err, err
    return code, json.loads(out)


def test_a_launch_that_fits_exits_0():
    code, p = plan_json("--model", LLAMA, "--gpu", "H100", "--max-model-len", "32768")
    assert code == 0 and p["fits"] is True and p["verdict"] == "fits"
    assert p["kv_bytes_per_token"] == 131072
    assert p["max_model_len_fit"] >= 32768 and p["max_concurrency"] > 1


def test_weights_larger_than_the_gpu_exit_1_with_the_cause_and_remedies():
    code, p = plan_json("--model", QWEN7, "--gpu-memory", "6GiB", "--dtype", "half")
    assert code == 1 and p["fits"] is False and p["reason"] == "weights_exceed_memory"
    assert any("quantized checkpoint" in r["text"] for r in p["remedies"])


def test_kv_too_small_for_max_model_len_offers_a_verified_length():
    code, p = plan_json("--model", LLAMA, "--gpu", "L4", "--max-model-len", "131072")
    assert code == 1 and p["reason"] == "kv_cache_insufficient"
    fix = next(r for r in p["remedies"] if "--max-model-len" in r["flags"])
    assert int(fix["flags"]["--max-model-len"]) % 16 == 0 and "fits" in fix["checked"]
    code2, p2 = plan_json("--model", LLAMA, "--gpu", "L4", "--max-model-len", fix["flags"]["--max-model-len"])
    assert p2["checks"][-2]["verdict"] == "fits" or code2 == 0


def test_a_whole_command_line_after_double_dash():
    code, p = plan_json(
        "--gpu",
        "A100-80GB",
        "--",
        "vllm",
        "serve",
        LLAMA,
        "--max-model-len",
        "8k",
        "-tp",
        "2",
        "--kv-cache-dtype",
        "fp8",
        "--served-model-name",
        "x",
    )
    assert code == 0
    assert p["flags"]["tensor_parallel_size"] == 2 and p["flags"]["max_model_len"] == 8192
    assert p["kv_bytes_per_token"] == 2 * 4 * 128 * 1 * 32
    assert "--served-model-name x" in p["flags"]["ignored"]


def test_heads_not_divisible_by_tp_do_not_fit():
    code, p = plan_json("--model", QWEN7, "--gpu", "H100", "-tp", "8")  # 28 heads
    assert code == 1 and p["reason"] == "parallelism_mismatch"


def test_max_model_len_beyond_the_model_is_refused_as_vllm_does():
    code, p = plan_json("--model", QWEN7, "--gpu", "H100", "--max-model-len", "65536")
    assert code == 1 and p["reason"] == "invalid_arguments"


def test_nvidia_smi_free_memory_drives_the_startup_check(tmp_path):
    smi = tmp_path / "smi.csv"
    smi.write_text(
        "index, name, memory.total [MiB], memory.used [MiB], memory.free [MiB]\n"
        "0, NVIDIA L4, 23034 MiB, 9000 MiB, 14034 MiB\n"
    )
    code, p = plan_json(
        "--model", str(CONFIGS / "qwen2.5-1.5b-instruct"), "--nvidia-smi", str(smi), "--max-model-len", "8192"
    )
    assert code == 1 and p["reason"] == "gpu_memory_utilization_too_high"
    assert p["gpu"]["free_bytes"] == 14034 << 20
    fix = next(r for r in p["remedies"] if "--gpu-memory-utilization" in r["flags"])
    assert float(fix["flags"]["--gpu-memory-utilization"]) < 0.9
    code2, _ = plan_json(
        "--model",
        str(CONFIGS / "qwen2.5-1.5b-instruct"),
        "--nvidia-smi",
        str(smi),
        "--max-model-len",
        "8192",
        "--gpu-memory-utilization",
        fix["flags"]["--gpu-memory-utilization"],
    )
    assert code2 == 0


def _held(folder) -> int:
    """What the allocator holds beyond the checkpoint's bytes on one GPU (triage.plan.allocation)."""
    from triage.plan.allocation import load_overhead
    from triage.plan.spec import TextConfig

    return load_overhead(TextConfig.of(json.loads((folder / "config.json").read_text())), 2, 1, False)[0]


def test_a_model_id_is_found_in_the_local_hf_cache(tmp_path, monkeypatch):
    snap = tmp_path / "hub" / "models--acme--tiny" / "snapshots" / "0123abc"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text((CONFIGS / "llama-3.2-1b-instruct" / "config.json").read_text())
    (snap / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 2471645184}}))
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    code, p = plan_json("--model", "acme/tiny", "--gpu", "A100-40GB")
    assert code == 0 and p["weights_bytes_per_gpu"] == 2471645184 + _held(CONFIGS / "llama-3.2-1b-instruct")
    assert "index" in p["weights_source"]
    code, _out, err = run("--model", "acme/absent", "--gpu", "T4")
    assert code == 2 and "not in the local Hugging Face cache" in err and err.count("\n") == 1


def test_safetensors_headers_are_read_without_the_tensors(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "config.json").write_text((CONFIGS / "llama-3.2-1b-instruct" / "config.json").read_text())
    header = json.dumps(
        {
            "__metadata__": {"format": "pt"},
            "w": {"dtype": "BF16", "shape": [1024, 1024], "data_offsets": [0, 2 << 20]},
            "s": {"dtype": "F32", "shape": [1024], "data_offsets": [2 << 20, (2 << 20) + 4096]},
        }
    )
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header.encode())  # no tensor data
    _code, p = plan_json("--model", str(folder), "--gpu", "T4")
    held = _held(CONFIGS / "llama-3.2-1b-instruct")
    assert p["weights_bytes_per_gpu"] == (2 << 20) + 4096 + held and "headers" in p["weights_source"]
    assert p["model"]["parameters"] == 1024 * 1024 + 1024


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["--model", "/nonexistent/model", "--gpu", "T4"], "neither a folder"),
        (["--model", LLAMA, "--gpu-memory", "banana"], "not a size"),
        (["--model", LLAMA, "--gpu", "TPU9000"], "unknown --gpu"),
        (["--model", LLAMA], "needs the GPU"),
        (["--gpu", "T4"], "needs a model"),
        (["--model", LLAMA, "--gpu", "T4", "--gpu-memory-utilization", "1.5"], "out of range"),
        (["--model", LLAMA, "--gpu", "T4", "--dtype", "int3"], "unknown --dtype"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(argv, needle):
    code, _out, err = run(*argv)
    assert code == 2 and needle in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_broken_config_is_one_line(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    code, _, err = run("--model", str(tmp_path), "--gpu", "T4")
    assert code == 2 and "not valid JSON" in err
    (tmp_path / "config.json").write_text("{}")
    code, out, err = run("--format", "json", "--model", str(tmp_path), "--gpu", "T4")
    assert code == 2 and json.loads(out)["verdict"] == "cannot tell"


def test_published_schema_file_matches_the_model():
    published = json.loads((ROOT / "docs" / "plan-v1.schema.json").read_text())
    assert published == plan_json_schema()
    assert published["properties"]["schema_version"]["default"] == 1
    code, out, _ = run("--schema")
    assert code == 0 and json.loads(out) == published


SNAPSHOT_CASES = {
    "llama8b-h100-32k": ["--model", LLAMA, "--gpu", "H100", "--max-model-len", "32768"],
    "qwen7b-fp16-6gib": ["--model", QWEN7, "--gpu-memory", "6GiB", "--dtype", "half", "--max-model-len", "2048"],
    "gemma3-27b-tp2-l4": ["--model", str(CONFIGS / "gemma-3-27b-it"), "--gpu", "L4", "-tp", "2"],
    "llama8b-3090-29k-v064": [
        "--model",
        LLAMA,
        "--gpu-memory",
        "23.58GiB",
        "--vllm-version",
        "0.6.4",
        "--max-model-len",
        "29000",
    ],
    "deepseek-v3-tp8-h200": [
        "--model",
        str(CONFIGS / "deepseek-v3"),
        "--gpu",
        "H200",
        "-tp",
        "8",
        "--max-model-len",
        "65536",
    ],
}


def _portable(p: dict) -> dict:
    p["model"]["name"] = p["model"]["name"].replace(str(ROOT), "<root>")
    p["tool"] = "vllm-triage"
    return p


@pytest.mark.parametrize("case", sorted(SNAPSHOT_CASES))
def test_plan_json_snapshot(case, snapshot_json):
    _, p = plan_json(*SNAPSHOT_CASES[case])
    PlanReport.model_validate(p)
    assert _portable(p) == snapshot_json


def test_plan_terminal_snapshot(snapshot_txt):
    _, out, _ = run(*SNAPSHOT_CASES["qwen7b-fp16-6gib"])
    assert out.replace(str(ROOT), "<root>") == snapshot_txt


def test_markdown_has_the_verdict_and_checks():
    _, out, _ = run(*SNAPSHOT_CASES["llama8b-h100-32k"], "--format", "markdown")
    assert out.startswith("## vllm-triage plan: fits") and "**Checks**" in out


def test_help_shows_plan(capsys):
    out = io.StringIO()
    assert main(["--help"], stdout=out) == 0
    assert re.search(r"^  plan +--model PATH_OR_ID", out.getvalue(), re.M)
    out = io.StringIO()
    assert main(["plan", "--help"], stdout=out) == 0
    text = out.getvalue()
    assert "--gpu-memory" in text and "Exit status: 0 fits, 1 does not fit, 2 cannot tell" in text


@pytest.mark.parametrize(
    "config",
    [
        {"num_hidden_layers": 10**12, "num_attention_heads": 8, "hidden_size": 64},
        {"num_hidden_layers": "many", "hidden_size": [1], "num_attention_heads": {"a": 1}},
        {"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64, "head_dim": "x"},
        {
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "hidden_size": 64,
            "rope_scaling": {"type": "yarn", "factor": "x"},
            "max_position_embeddings": 10,
        },
        {
            "num_hidden_layers": 2,
            "num_attention_heads": 4,
            "hidden_size": 64,
            "mlp_only_layers": 5,
            "num_experts": 2,
            "layer_types": [1, None],
            "text_config": "not a dict",
            "quantization_config": [1],
        },
        [1, 2, 3],
    ],
)
def test_hostile_configs_give_a_report_or_one_line(tmp_path, config):
    (tmp_path / "config.json").write_text(json.dumps(config))
    code, out, err = run("--model", str(tmp_path), "--gpu-memory", "24GiB")
    assert code in (0, 1, 2) and "Traceback" not in err and "internal error" not in err
    assert out or err.count("\n") == 1


def test_a_broken_safetensors_header_falls_back_to_counting(tmp_path):
    (tmp_path / "config.json").write_text((CONFIGS / "llama-3.2-1b-instruct" / "config.json").read_text())
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", 1 << 60) + b"{}")
    code, p = plan_json("--model", str(tmp_path), "--gpu", "A100-40GB")
    assert code == 0 and p["weights_source"].startswith("estimated")
    assert any("could not be read" in n for n in p["notes"])


def test_the_readme_example_is_what_the_tool_prints():
    readme = (ROOT / "README.md").read_text()
    code, out, _ = run("--gpu", "L4", "--", "vllm", "serve", str(CONFIGS / "llama-3.1-8b-instruct"))
    assert code == 1
    for line in (
        "DOES NOT FIT [kv_cache_insufficient]",
        "KV cache         4.35 GiB -> 35,584 tokens",
        "--max-model-len 29952: the longest length",
        "--kv-cache-dtype fp8 with --max-model-len 59904",
    ):
        assert line in out and line in readme


SMI_TABLE = """\
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 570.133.20             Driver Version: 570.133.20     CUDA Version: 12.8     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|=========================================+========================+======================|
|   0  NVIDIA H100 80GB HBM3          On  |   00000000:18:00.0 Off |                    0 |
| N/A   36C    P0            118W /  700W |   30001MiB /  81559MiB |     41%      Default |
+-----------------------------------------+------------------------+----------------------+
|   1  NVIDIA H100 80GB HBM3          On  |   00000000:2A:00.0 Off |                    0 |
| N/A   31C    P0             70W /  700W |       1MiB /  81559MiB |      0%      Default |
+-----------------------------------------+------------------------+----------------------+

+-----------------------------------------------------------------------------------------+
| Processes:                                                                              |
|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |
|        ID   ID                                                               Usage      |
|=========================================================================================|
|    0   N/A  N/A            4242      C   python3                                30000MiB |
+-----------------------------------------------------------------------------------------+
"""


def test_an_nvidia_smi_table_with_another_process_is_foreign_memory(tmp_path):
    smi = tmp_path / "smi.txt"
    smi.write_text(SMI_TABLE)
    code, p = plan_json("--model", LLAMA, "--nvidia-smi", str(smi), "-tp", "2", "--max-model-len", "32768")
    assert code == 1 and p["reason"] == "foreign_gpu_processes"
    assert p["gpu"]["free_bytes"] == (81559 - 30001) << 20 and p["gpu"]["other_processes_bytes"] == 30000 << 20
    assert any("in use before vLLM starts" in r["text"] for r in p["remedies"])
    code, p = plan_json("--model", LLAMA, "--nvidia-smi", str(smi), "-tp", "4")
    assert code == 1 and p["reason"] == "parallelism_mismatch"  # 4 GPUs asked, 2 listed


def test_a_pinned_kv_cache_memory_sizes_the_pool(tmp_path):
    qwen3 = str(CONFIGS / "qwen3-4b")
    code, p = plan_json("--model", qwen3, "--gpu", "L4", "--kv-cache-memory", "2GiB", "--max-model-len", "8192")
    assert code == 0 and p["kv_cache_bytes"] == 2 << 30
    assert p["kv_tokens"] == (2 << 30) // (147456 * 16) * 16
    code, p = plan_json("--model", qwen3, "--gpu", "L4", "--kv-cache-memory", str(2 << 30), "--max-model-len", "32768")
    assert code == 1 and p["reason"] == "kv_cache_insufficient"
    assert {"--max-model-len": str(p["max_model_len_fit"])} in [r["flags"] for r in p["remedies"]]


def test_secrets_on_the_command_line_never_reach_the_report():
    secret = "sk-" + "a1b2c3d4" * 4
    for fmt in ("json", "terminal", "markdown"):
        code, out, _err = run(
            "--format",
            fmt,
            "--gpu",
            "H100",
            "--",
            "vllm",
            "serve",
            LLAMA,
            "--api-key",
            secret,
            "--max-model-len",
            "8192",
        )
        assert code == 0 and secret not in out and "--api-key" in out


def test_gpu_sizes_read_gb_as_gib():
    from triage.plan.gpu import from_name, from_size

    assert from_size("24GB").total_bytes == 24 << 30 == from_size("24 GiB").total_bytes
    assert from_name("NVIDIA A100-80GB").name == "A100-80GB" and from_name("rtx 4090").name == "RTX-4090"


def test_a_misspelled_flag_is_a_usage_error_not_a_fit():
    code, out, err = run("--model", LLAMA, "--gpu", "L4", "--max-modle-len", "200000")
    assert code == 2 and not out
    assert err.count("\n") == 1 and "--max-modle-len" in err and "did you mean --max-model-len" in err
    code, _, err = run("--gpu", "L4", "--", "vllm", "serve", LLAMA, "--tensor-paralel-size=2")
    assert code == 2 and "--tensor-paralel-size" in err


def test_real_serve_flags_the_plan_does_not_use_are_listed_not_refused():
    code, p = plan_json(
        "--model", LLAMA, "--gpu", "H100", "--port", "8001", "--trust-remote-code", "--no-enable-prefix-caching"
    )
    assert code == 0
    assert p["flags"]["ignored"] == ["--port 8001", "--trust-remote-code", "--no-enable-prefix-caching"]


def test_the_serve_flag_list_is_data_with_its_provenance():
    from importlib import resources

    from triage.vllm_flags import serve_flags

    text = resources.files("triage.plan").joinpath("vllm_serve_flags.txt").read_text(encoding="utf-8")
    header = [line for line in text.splitlines() if line.startswith("#")]
    assert any("scripts/catalogue/serve_flags.py" in line for line in header)
    releases = next(line for line in header if line.startswith("# Releases read:")).split(":")[1].strip(" .").split()
    assert len(releases) >= 20 and releases[0] == "0.6.6.post1"
    rows = [line.split() for line in text.splitlines() if line and not line.startswith("#")]
    assert [r[0] for r in rows] == sorted({r[0] for r in rows})  # sorted, no duplicates
    for name, first, last in rows:  # every row: a bare name and a span of releases read, in order
        assert re.fullmatch(r"[a-z0-9][a-z0-9-]*", name), name
        assert releases.index(first) <= releases.index(last), name
    every = {r[0] for r in rows if r[1] == releases[0] and r[2] == releases[-1]}
    assert {"model", "tensor-parallel-size", "max-model-len", "gpu-memory-utilization", "port"} <= every
    assert {"served-model-name", "max-num-seqs", "kv-cache-dtype"} <= serve_flags()


def test_a_typo_is_still_refused_with_the_real_flag_suggested():
    code, out, err = run("--model", LLAMA, "--gpu", "L4", "--max-modle-len", "1")
    assert code == 2 and not out and "did you mean --max-model-len" in err


def test_a_flag_vllm_dropped_is_listed_with_the_releases_that_had_it():
    from triage.vllm_flags import _serve_flag_table

    table, newest = _serve_flag_table()
    dropped = next(name for name, (_, last) in sorted(table.items()) if last != newest)
    code, p = plan_json("--model", LLAMA, "--gpu", "H100", f"--{dropped}=1", "--port", "8001")
    assert code == 0 and p["flags"]["ignored"] == [f"--{dropped}=1", "--port 8001"]
    first, last = table[dropped]
    note = next(n for n in p["notes"] if n.startswith("not taken into account"))
    assert f"--{dropped}=1 (vLLM {first} to {last} only" in note
    assert note.endswith(", --port 8001")  # a flag every release has: no span


def test_a_json_flag_key_is_a_real_flag():
    code, p = plan_json("--model", LLAMA, "--gpu", "H100", "--compilation-config.cudagraph_mode", "NONE")
    assert code == 0 and p["flags"]["ignored"] == ["--compilation-config.cudagraph_mode NONE"]


@pytest.mark.parametrize(
    "card,smi_name,smi_mib",
    [
        ("L4", "NVIDIA L4", 23034),
        ("H100", "NVIDIA H100 80GB HBM3", 81559),
        ("4090", "NVIDIA GeForce RTX 4090", 24564),
        ("A100-80GB", "NVIDIA A100-SXM4-80GB", 81920),
    ],
)
def test_nvidia_smi_and_the_card_name_agree_on_the_total(tmp_path, card, smi_name, smi_mib):
    smi = tmp_path / "smi.csv"
    smi.write_text(
        "index, name, memory.total [MiB], memory.used [MiB], memory.free [MiB]\n"
        f"0, {smi_name}, {smi_mib} MiB, 0 MiB, {smi_mib} MiB\n"
    )
    _, by_smi = plan_json("--model", LLAMA, "--nvidia-smi", str(smi), "--max-model-len", "8192")
    _, by_name = plan_json("--model", LLAMA, "--gpu", card, "--max-model-len", "8192")
    assert by_smi["gpu"]["total_bytes"] == by_name["gpu"]["total_bytes"]
    assert by_smi["max_model_len_fit"] == by_name["max_model_len_fit"]


def test_an_unknown_card_in_nvidia_smi_keeps_its_total(tmp_path):
    smi = tmp_path / "smi.csv"
    smi.write_text(
        "index, name, memory.total [MiB], memory.used [MiB], memory.free [MiB]\n"
        "0, NVIDIA Future X, 50000 MiB, 0 MiB, 50000 MiB\n"
    )
    _, p = plan_json("--model", LLAMA, "--nvidia-smi", str(smi))
    assert p["gpu"]["total_bytes"] == 50000 << 20


def test_vllm_version_picks_v0s_arithmetic_before_0_8():
    """V0 profiles the whole max(max_model_len, 2048) batch (no chunked prefill up to 32K) with 256
    sequences; V1 0.10 profiles its batched-token default. A bad release is one line, exit 2."""
    base = ["--model", LLAMA, "--gpu-memory", "23.58GiB", "--max-model-len", "29000"]
    _, v1 = plan_json(*base)
    _, v0 = plan_json(*base, "--vllm-version", "0.6.4")
    _, v07 = plan_json(*base, "--vllm-version", "v0.7.2")
    _, v08 = plan_json(*base, "--vllm-version", "0.8.0")
    assert (v0["flags"]["max_num_batched_tokens"], v0["flags"]["max_num_seqs"]) == (29000, 256)
    assert v1["flags"]["max_num_batched_tokens"] == v08["flags"]["max_num_batched_tokens"] == 2048
    assert "V0 engine" in v0["assumptions"][-1] and "V1 engine" in v08["assumptions"][-1]
    assert v0["activation_bytes"]["bytes"] > 2 * v1["activation_bytes"]["bytes"]
    assert v0["non_torch_bytes"]["bytes"] != v07["non_torch_bytes"]["bytes"]  # 0.6 counted the CUDA context
    code, out, err = run(*base, "--vllm-version", "latest")
    assert code == 2 and out == "" and "--vllm-version 'latest'" in err and err.count("\n") == 1


def test_v0_turns_chunked_prefill_on_above_32k_by_release():
    base = ["--model", LLAMA, "--gpu-memory", "44GiB", "-tp", "2", "--max-model-len", "65536"]
    batch = {v: plan_json(*base, "--vllm-version", v)[1]["flags"]["max_num_batched_tokens"] for v in ("0.6.4", "0.7.3")}
    assert batch == {"0.6.4": 512, "0.7.3": 2048}


def test_vllm_engine_v0_plans_a_v1_release_with_v0s_arithmetic():
    """0.8-0.9 fell back to V0 below compute capability 8.0 (and with VLLM_USE_V1=0): --vllm-engine v0."""
    base = ["--model", LLAMA, "--gpu-memory", "14.74GiB", "--max-model-len", "2048", "--vllm-version", "0.8.2"]
    _, v1 = plan_json(*base)
    _, v0 = plan_json(*base, "--vllm-engine", "v0")
    assert "V1 engine" in v1["assumptions"][-1] and v0["assumptions"][-1] == "vLLM 0.8.2 (V0 engine) arithmetic"
    assert v0["activation_bytes"]["assumption"].startswith("estimated (V0)")
    assert not v1["activation_bytes"]["assumption"].startswith("estimated (V0)")
    code, _out, err = run(*base, "--vllm-engine", "v2")
    assert code == 2 and err.count("\n") == 1
