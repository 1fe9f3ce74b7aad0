"""The CLI runs end to end on a log and says what it found."""

import io

from triage.apps.cli import main


def test_kv_failure_found_exit_code_1(tmp_path):
    log = tmp_path / "startup.log"
    log.write_text(
        "INFO 05-02 11:00:00 worker.py:1] Loading model weights took 14.9888 GB\n"
        "ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be "
        "stored in KV cache (21456). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` "
        "when initializing the engine.\n"
    )
    out = io.StringIO()
    code = main([str(log), "--format", "json"], stdout=out, stderr=io.StringIO())
    assert code == 1
    assert '"kv_cache_insufficient"' in out.getvalue()


def test_missing_file_is_exit_2_with_one_line(tmp_path):
    err = io.StringIO()
    code = main([str(tmp_path / "nope.log")], stdout=io.StringIO(), stderr=err)
    assert code == 2
    assert err.getvalue().count("\n") == 1 and "no such file" in err.getvalue()


def test_no_regex_uses_syntax_python_310_lacks():
    """requires-python is 3.10: possessive quantifiers and atomic groups came in 3.11."""
    import ast
    import re as _re
    from pathlib import Path

    bad = []
    for path in sorted((Path(__file__).resolve().parent.parent / "triage").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                bare = _re.sub(r"\\.", "E", node.value)  # an escape is one atom
                bare = _re.sub(r"\[\^?\]?[^\]]*\]", "C", bare)  # so is a character class
                if _re.search(r"\(\?>|[*+?}]\+", bare):
                    bad.append(f"{path.name}:{node.lineno}: {node.value[:60]!r}")
    assert bad == []
