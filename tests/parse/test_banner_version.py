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
