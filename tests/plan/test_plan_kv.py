"""KV bytes per token (per GPU) for every fixture architecture, against the hand-computed expect files.

Each fixtures/configs/<name>/ holds a config.json (public figures) and an expect.yaml whose
figures were computed by hand, with the arithmetic written beside them.
"""

from __future__ import annotations

import json

import pytest
import yaml
from conftest import ROOT

from triage.plan import kv_layout as kv
from triage.plan import params
from triage.plan.spec import DTYPE_BYTES, TextConfig, kv_dtype_bytes, resolve_dtype

CONFIGS = ROOT / "fixtures" / "configs"
CASES = sorted(p.parent.name for p in CONFIGS.glob("*/expect.yaml"))


def _load(name: str) -> tuple[TextConfig, dict]:
    folder = CONFIGS / name
    return TextConfig.of(json.loads((folder / "config.json").read_text())), yaml.safe_load(
        (folder / "expect.yaml").read_text()
    )


def _layout(cfg: TextConfig, tp: int, kv_dtype: str) -> kv.KvLayout:
    dtype, _ = resolve_dtype(None, cfg.checkpoint_dtype())
    kv_bytes, _ = kv_dtype_bytes(kv_dtype, dtype)
    return kv.kv_layout(cfg, tp, 1, kv_bytes, DTYPE_BYTES[dtype])


def test_a_dozen_architectures_are_covered():
    families = {_load(n)[1]["family"] for n in CASES}
    assert len(CASES) >= 12
    assert {"gqa", "mha", "mla", "gqa+sliding-window", "hybrid-mamba"} <= families


@pytest.mark.parametrize("name", CASES)
def test_kv_bytes_per_token_is_exact(name):
    cfg, expect = _load(name)
    for case in expect["kv_bytes_per_token"]:
        layout = _layout(cfg, case["tp"], case["kv_cache_dtype"])
        assert layout.bytes_per_token == case["bytes"], (case, layout.formula)
        assert layout.family == expect["family"]
        if "attention_bytes" in case:
            assert layout.attention_bytes_per_token == case["attention_bytes"]
        if "block_size" in case:
            assert layout.min_block_size == case["block_size"]


@pytest.mark.parametrize("name", CASES)
def test_parameters_and_default_length(name):
    cfg, expect = _load(name)
    counted = params.count(cfg, kv.mamba_kinds(cfg, cfg.number("num_hidden_layers"))).total
    assert counted / 1e9 == pytest.approx(expect["parameters_billion"], rel=0.01)
    assert cfg.max_length() == expect["max_model_len_default"]


def test_sliding_window_groups_count_more_slots_than_layers():
    cfg, expect = _load("gemma-3-27b-it")
    layout = _layout(cfg, 1, "auto")
    assert layout.attention_bytes_per_token == expect["attention_bytes_per_token"]
    assert {g.kind: g.layers for g in layout.groups} == {"full": 10, "sliding": 52}


def test_mamba_state_is_per_sequence_not_per_token():
    cfg, expect = _load("jamba-v0.1")
    for tp, state in expect["state_bytes_per_sequence"].items():
        layout = _layout(cfg, int(tp), "auto")
        assert layout.state_bytes_per_sequence == state
        assert [g.bytes_per_token for g in layout.groups if g.kind == "mamba"] == [0]


def test_mla_is_not_split_by_tensor_parallelism():
    cfg, _ = _load("deepseek-v3")
    assert len({_layout(cfg, tp, "auto").bytes_per_token for tp in (1, 2, 8, 16)}) == 1


def test_vllm_kv_need_per_request_follows_each_layer_kind():
    """max_memory_usage_bytes: full layers cdiv(len, block) pages, sliding ones their window, Mamba one page."""
    cfg, _ = _load("gemma-3-27b-it")
    layout = _layout(cfg, 1, "auto")  # 8192 B per layer per token, pages of 16 tokens = 131072 B
    need = kv.max_memory_usage(layout, 32768, 16, 2048)
    # 10 full x 2048 pages + 52 sliding x (cdiv(min(1023 + 2048, 32768), 16) + 1 = 193) pages
    assert need == (10 * 2048 + 52 * 193) * 131072
    jamba, _ = _load("jamba-v0.1")
    hybrid = _layout(jamba, 1, "auto")  # block 80: pages of 80 x 4096 = 327680 B >= the 311296 B state
    assert kv.max_memory_usage(hybrid, 8000, 80, 2048) == 4 * 100 * 327680 + 28 * 327680
    assert not kv.uniform(layout) and kv.uniform(_layout(_load("qwen3-4b")[0], 1, "auto"))


def test_kv_heads_are_replicated_never_below_one_per_gpu():
    cfg, _ = _load("qwen2.5-1.5b-instruct")  # 2 KV heads
    assert _layout(cfg, 4, "auto").bytes_per_token == _layout(cfg, 2, "auto").bytes_per_token


def test_kv_dtype_auto_follows_the_model_dtype():
    assert kv_dtype_bytes("auto", "float32") == (4, "auto: the model dtype float32")
    assert kv_dtype_bytes("fp8_e5m2", "bfloat16")[0] == 1
    assert resolve_dtype(None, "float32")[0] == "bfloat16"
    assert resolve_dtype("half", "bfloat16")[0] == "float16"
    with pytest.raises(ValueError):
        kv_dtype_bytes("int3", "bfloat16")


def test_quantized_checkpoints_count_fewer_bytes():
    cfg, _ = _load("llava-1.5-7b-hf-awq")
    w = params.weights(cfg, None, None, None, "float16", None, 1, None)
    # ~6.7B text parameters at 4 bits plus fp16 embeddings, and the 0.3B CLIP encoder in fp16
    assert w.estimated and 4.0 * 2**30 < w.total_bytes < 4.5 * 2**30
    assert params.encoder_params(cfg) == 24 * (4 * 1024**2 + 2 * 1024 * 4096) + 1024 * 4096 + 4096**2
    fp8, _ = _load("deepseek-v3")
    w8 = params.weights(fp8, None, None, None, "bfloat16", None, 8, None)
    assert w8.total_bytes == pytest.approx(671e9, rel=0.03)  # one byte per linear weight


def test_chunked_local_attention_groups_like_a_window():
    """Llama 4's shape: RoPE layers attend in chunks (ChunkedLocalAttentionSpec), NoPE layers globally."""
    cfg = TextConfig.of(
        {
            "model_type": "llama4_text",
            "num_hidden_layers": 8,
            "num_attention_heads": 8,
            "num_key_value_heads": 2,
            "head_dim": 64,
            "hidden_size": 512,
            "attention_chunk_size": 64,
            "no_rope_layers": [1, 1, 1, 0, 1, 1, 1, 0],
            "torch_dtype": "bfloat16",
        }
    )
    layout = _layout(cfg, 1, "auto")
    per_layer = 2 * 2 * 64 * 2
    assert layout.family == "gqa+chunked-local"
    assert layout.bytes_per_token == per_layer * 2 * (1 + 3)  # group_size 2: 1 full group + 3 chunked groups
    # full: 2 x cdiv(1000, 16) pages; chunked: 6 x cdiv(min(64 + 256, 1000), 16) pages
    assert kv.max_memory_usage(layout, 1000, 16, 256) == (2 * 63 + 6 * 20) * 16 * per_layer


def test_linear_attention_layers_hold_a_state_not_tokens():
    """A gated delta-net hybrid (`layer_types` with linear_attention): state layers in vLLM's groups."""
    cfg = TextConfig.of(
        {
            "model_type": "hybrid_test",
            "num_hidden_layers": 8,
            "num_attention_heads": 8,
            "num_key_value_heads": 2,
            "head_dim": 64,
            "hidden_size": 512,
            "layer_types": ["linear_attention"] * 3
            + ["full_attention"]
            + ["linear_attention"] * 3
            + ["full_attention"],
            "linear_num_key_heads": 2,
            "linear_num_value_heads": 4,
            "linear_key_head_dim": 32,
            "linear_value_head_dim": 32,
            "linear_conv_kernel_dim": 4,
        }
    )
    layout = _layout(cfg, 1, "auto")
    per_layer = 2 * 2 * 64 * 2
    assert layout.family == "hybrid-mamba" and layout.attention_bytes_per_token == 2 * per_layer
    assert layout.bytes_per_token == per_layer * 2 * (1 + 3)
    assert layout.state_bytes_per_sequence == 6 * (3 * (2 * 2 * 32 + 4 * 32) + 4 * 32 * 32) * 2


def test_a_bare_model_architecture_is_served_without_an_lm_head():
    """vLLM serves `MistralModel` (e5-mistral) as a pooling model and deletes the head its causal
    class built; the causal Mistral with the same body keeps one, untied."""
    pooling, _ = _load("e5-mistral-7b-instruct")
    causal, _ = _load("mistral-7b-instruct-v0.3")
    assert params.count(pooling).lm_head == 0
    assert params.count(causal).lm_head == causal.number("vocab_size") * causal.number("hidden_size")
