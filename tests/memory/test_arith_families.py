"""The memory model's answers for the remedy families of issue 24, on hand-made inputs with the hand
arithmetic beside each: vLLM's printed estimate bounds lengths (need per token never rises), the
0.21+ CUDA-graph estimate inside the budget, vLLM's graph advice, Mamba state blocks, and a
utilization cut measured against the printed pool."""

from __future__ import annotations

from triage.memory import FAILS, FITS, KV_FIT, Config, MemoryInputs, Quantity, evaluate, solve, verify
from triage.memory.from_facts import build
from triage.memory.inputs import GRAPHS, MAMBA
from triage.units import GiB, MiB


def gib(x: float) -> Quantity:
    return Quantity.printed_bytes(round(x * GiB))


class F:
    """A fact as the timeline gives it."""

    def __init__(self, value: object, line: int = 1) -> None:
        self.value, self.line = value, line


def _kv(fig: str, cfg: Config | None, inp: MemoryInputs):
    return next(c for c in evaluate(inp, cfg) if c.name == fig)


def test_a_hybrid_models_estimate_caps_lengths_at_any_dtype():
    # 13.66 GiB for 131072 tokens, 8.50 GiB left: linear would be 81,472; vLLM's search says 63392
    inp = MemoryInputs(
        engine="v1", failure=KV_FIT, pool=gib(8.50), kv_needed=gib(13.66), max_model_len=131072, kv_estimate=63392
    )
    assert solve.fit_len(inp) == 63392
    assert _kv(KV_FIT, Config(max_model_len=63408), inp).verdict == FAILS  # one block over vLLM's own bound
    # fp8: need(L) <= need(est) x L / est, so 2 x 63392 fits whatever the layer kinds
    assert _kv(KV_FIT, Config(max_model_len=126784, kv_cache_dtype="fp8"), inp).verdict == FITS


def test_eager_returns_the_graph_estimate_to_the_pool():
    # 0.21+: pool = budget - non-KV - graph estimate; enforce_eager captures nothing, so + 0.91 GiB
    inp = MemoryInputs(
        engine="v1", failure=KV_FIT, pool=gib(9.20), kv_needed=gib(9.75), max_model_len=106496, graph_estimate=gib(0.91)
    )
    assert solve.eager_fits(inp)  # 9.195 + 0.905 = 10.10 >= 9.755
    short = MemoryInputs(
        engine="v1",
        failure=KV_FIT,
        pool=gib(9.20),
        kv_needed=gib(11.25),
        max_model_len=122880,
        graph_estimate=gib(0.91),
    )
    assert not solve.eager_fits(short)  # 10.12 at best < 11.245


def test_total_from_vllms_graph_advice_and_the_advice_checked():
    facts = {
        "cuda_graph_estimate_bytes": F(round(0.91 * GiB)),
        "cuda_graph_suggested_util": F(0.9115),
        "gpu_memory_utilization": F(0.9),
        "cuda_graph_profiling": F(True),
        "kv_cache_bytes": F(round(9.20 * GiB)),
        "kv_needed_bytes": F(round(11.25 * GiB)),
        "max_model_len": F(122880),
        "engine": F("v1"),
    }
    inp = build(facts, KV_FIT)
    assert 78.3 * GiB < inp.total.lo < inp.total.hi < 80.0 * GiB  # 0.91 / (0.9115 - 0.9), both rounded
    assert solve.advice_holds(inp) is False  # 9.195 + 0.0115 x 78.35 = 10.10 < 11.255
    assert solve.kv_util(inp) == 0.93  # 0.9 + 2.06 / 78.35 = 0.9263
    facts["kv_needed_bytes"] = F(round(9.75 * GiB))
    assert solve.advice_holds(build(facts, KV_FIT)) is True


def test_graph_estimate_is_not_in_the_budget_when_profiling_is_off():
    facts = {"cuda_graph_estimate_bytes": F(round(0.91 * GiB)), "cuda_graph_profiling": F(False)}
    assert build(facts, KV_FIT).graph_estimate is None


def test_mamba_blocks_bound_max_num_seqs():
    # 0.2x config/compilation.py: each decode sequence needs one block; the pool holds 200, 256 asked
    inp = MemoryInputs(
        engine="v1",
        failure=MAMBA,
        pool=gib(2.00),
        mamba_blocks=200,
        max_num_seqs=256,
        total=gib(79.19),
        util=Quantity.exact(0.9),
    )
    assert solve.mamba_seqs(inp) == 200
    assert not verify(inp, {"--max-num-seqs": "201"}).ok
    # 256 blocks need at most 2.005 x 256 / 200 = 2.566 GiB: 0.9 + 0.561 / 79.185 = 0.9071 -> 0.91
    assert solve.mamba_util(inp) == 0.91
    assert not verify(inp, {"--max-model-len": "4096"}).ok  # a shorter context leaves the blocks as they are


def test_a_cut_at_the_default_utilization_is_checked_against_the_printed_pool():
    # util not printed (0.9 default), pool 1.20 GiB = 22,464 tokens; 0.86 takes 0.94 GiB of it
    inp = MemoryInputs(
        engine="v1",
        failure=GRAPHS,
        total=gib(23.53),
        pool=gib(1.20),
        kv_tokens=22464,
        max_model_len=16384,
        oom_requested=gib(1.00),
        oom_free=Quantity.printed_bytes(300 * MiB),
    )
    assert not verify(inp, {"--gpu-memory-utilization": "0.86"}).ok
    u, n = solve.outside_util_with_len(inp)
    assert u == 0.86 and 4096 <= n < 16384


def test_graphs_beyond_vllms_estimate_are_said_to_sit_outside_the_budget():
    from conftest import triage_text

    pre = "(EngineCore pid=264) INFO 05-06 08:31:54 [gpu_model_runner.py:6536] "
    log = (
        "\n".join(
            [
                "(APIServer pid=1) INFO 05-06 08:30:11 [api_utils.py:341]  version 0.25.0",
                pre + "Estimated CUDA graph memory: 0.84 GiB total",
                pre + "Available KV cache memory: 10.87 GiB",
                pre + "Graph capturing finished in 25 secs, took 1.02 GiB",
                pre + "CUDA graph pool memory: 1.02 GiB (actual), 0.84 GiB (estimated), difference: 0.18 GiB (17.6%).",
                "(EngineCore pid=264) ERROR 05-06 08:32:20 [core.py:1203] torch.OutOfMemoryError: CUDA out of memory. Tried to "
                "allocate 400.00 MiB. GPU 0 has a total capacity of 79.19 GiB of which 100.00 MiB is free.",
                "(EngineCore pid=264) ERROR 05-06 08:32:20 [core.py:1203] RuntimeError: CUDA out of memory occurred when warming "
                "up sampler with 1024 dummy requests. Please try lowering `max_num_seqs` or `gpu_memory_utilization` when "
                "initializing the engine.",
            ]
        )
        + "\n"
    )
    report = triage_text(log)
    said = " ".join(d.explanation for d in report.diagnoses)
    assert "took 1.02 GiB, 0.18 GiB more than the estimate" in said, said
    # 0.18 GiB beyond the 0.84 reserved, outside the budget: what --enforce-eager returns covers the 0.29 GiB missing
    assert any(dict(r.flags) == {"--enforce-eager": ""} for d in report.diagnoses for r in d.remedies)
