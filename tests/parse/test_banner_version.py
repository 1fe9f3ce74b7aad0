"""vLLM 0.11+ prints an ASCII-art logo whose last row ends in `version X`: the version is X."""

from __future__ import annotations

from conftest import triage_text

BANNER = (
    "(APIServer pid=1) INFO 10-01 12:00:00 [__init__.py:1]        \u2588     \u2588     \u2588\u2584   \u2584\u2588\n"
    "(APIServer pid=1) INFO 10-01 12:00:00 [utils.py:233] \u2584\u2584 \u2584\u2588 \u2588     \u2588     \u2588 "
    "\u2580\u2584\u2580 \u2588  version 0.11.1\n"
    "(APIServer pid=1) INFO 10-01 12:00:00 [utils.py:233]   \u2588\u2584\u2588\u2580 \u2588     \u2588     \u2588     "
    "\u2588  model   Qwen/Qwen3-8B\n"
)


def test_the_logo_row_gives_the_version_not_the_logo():
    assert triage_text(BANNER).vllm.version == "0.11.1"


def test_a_dev_build_in_the_logo():
    assert (
        triage_text(BANNER.replace("0.11.1", "0.11.1rc2.dev141+g38f225c2a")).vllm.version
        == "0.11.1rc2.dev141+g38f225c2a"
    )


def _engine(line: str) -> str | None:
    return triage_text(
        f"INFO 10-15 02:46:34 llm_engine.py:237] {line} with config: model='m', max_seq_len=32768\n"
    ).vllm.engine


def test_the_engine_from_the_banners_words():
    """V0's llm_engine.py said "an LLM engine" up to 0.6 ("a V0 LLM engine" from 0.7); V1 names itself.
    0.6.6's experimental V1 core shared the old wording, so there only the version decides (not here)."""
    assert _engine("Initializing an LLM engine (vdev)") == "v0"
    assert _engine("Initializing an LLM engine (v0.6.3.post1)") == "v0"
    assert _engine("Initializing a V0 LLM engine (v0.8.5)") == "v0"
    assert _engine("Initializing a V1 LLM engine (v0.8.5)") == "v1"
    assert _engine("Initializing an LLM engine (v0.6.6)") != "v1"
