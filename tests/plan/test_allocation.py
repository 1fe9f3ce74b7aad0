"""What the allocator holds for a checkpoint's tensors: the bytes vLLM's weights figure counts."""

from __future__ import annotations

import json

from conftest import ROOT

from triage.plan.allocation import block_bytes, load_overhead, rope_cache_bytes
from triage.plan.spec import TextConfig
from triage.units import MiB

CONFIGS = ROOT / "fixtures" / "configs"


def _cfg(name: str) -> TextConfig:
    return TextConfig.of(json.loads((CONFIGS / name / "config.json").read_text()))


def test_blocks_round_to_512_and_large_segments_keep_a_remainder_of_1_mib_or_less():
    assert block_bytes(1) == 512 and block_bytes(513) == 1024
    assert block_bytes(8 * MiB + 1) == 8 * MiB + 512  # under 10 MiB: split from a 20 MiB segment
    assert block_bytes(35 * MiB) == 36 * MiB  # 1 MiB left: not split off
    assert block_bytes(135 * MiB) == 136 * MiB
    assert block_bytes(67 * MiB + MiB // 2) == 68 * MiB
    assert block_bytes(742 * MiB + MiB // 2) == 742 * MiB + MiB // 2  # 1.5 MiB left: split off
    assert block_bytes(24 * MiB) == 24 * MiB


def test_qwen2_5_14b_at_tp2_holds_3_5_mib_a_layer_of_rounding_and_its_rope_cache():
    """vLLM 0.7.2 printed 13.9281 GiB per GPU for a 29,540,067,328-byte checkpoint at TP 2 in fp16:
    the share 14,770,033,664 B plus 48 x 3.5 MiB of blocks, the 8 MiB rotary cache and half the norms."""
    cfg = _cfg("qwen2.5-coder-14b-instruct")
    extra, how = load_overhead(cfg, 2, 2, False)
    assert rope_cache_bytes(cfg, 2) == 32768 * 128 * 2
    norms = (2 * 48 + 1) * 5120 * 2 // 2
    assert extra == 48 * 7 * MiB // 2 + 8 * MiB + norms
    assert abs(29540067328 // 2 + extra - 13.9281 * 2**30) < 0.0001 * 2**30
    assert "block rounding" in how


def test_llama_3_1_8b_rounds_nothing_on_one_gpu_and_its_vocab_shards_at_tp2():
    cfg = _cfg("llama-3.1-8b-instruct")
    assert load_overhead(cfg, 2, 1, False)[0] == rope_cache_bytes(cfg, 2) == 131072 * 128 * 2
    norms = 65 * 4096 * 2 // 2
    assert load_overhead(cfg, 2, 2, False)[0] == 32 * MiB + 2 * MiB + norms  # 501 MiB vocab shards -> 502


def test_quantized_and_mla_layouts_keep_the_rope_cache_alone():
    cfg = _cfg("deepseek-v2-lite-chat")
    assert load_overhead(cfg, 2, 1, False)[0] == rope_cache_bytes(cfg, 2)
    llama = _cfg("llama-3.1-8b-instruct")
    assert load_overhead(llama, 2, 2, True)[0] == rope_cache_bytes(llama, 2)


def test_learned_and_alibi_positions_have_no_rotary_cache():
    assert (
        rope_cache_bytes(TextConfig.of({"model_type": "gpt2", "n_embd": 768, "n_head": 12, "n_positions": 1024}), 2)
        == 0
    )
    falcon = {"model_type": "falcon", "hidden_size": 4544, "num_attention_heads": 71, "alibi": True}
    assert rope_cache_bytes(TextConfig.of(falcon), 2) == 0
    assert (
        rope_cache_bytes(TextConfig.of({**falcon, "alibi": False, "max_position_embeddings": 2048}), 2) == 2048 * 64 * 2
    )
