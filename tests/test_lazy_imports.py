"""What a plain run must not import: the heavy libraries stay behind the features that need them.

Start-up is most of a run on a small log; pydantic (~100 ms) is for checking a report against
its contract, rich (~50 ms) for the terminal format. Checked in a fresh interpreter by name,
never by time."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("pydantic", "rich")


def _modules(code: str) -> set[str]:
    """Every module loaded once `code` has run in a fresh interpreter."""
    probe = f"{code}\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return set(json.loads(out.splitlines()[-1]))


def _imported(code: str) -> set[str]:
    """The top-level packages loaded by `code`."""
    return {name.split(".")[0] for name in _modules(code)}


def test_the_report_and_its_plain_formats_import_no_validation_or_terminal_library():
    code = """
from triage.model.report import Diagnosis, Failure, InputInfo, Remedy, Report
from triage.render import render
r = Report(input=InputInfo(name="x.log", lines=3, bytes=30), outcome="failed",
           failure=Failure(line=2, message="CUDA out of memory"),
           diagnoses=[Diagnosis(id="oom", title="t", confidence=1, explanation="e", remedies=[Remedy(text="r")])])
for fmt in ("json", "markdown", "github", "junit", "slack"):
    render(r, fmt)
"""
    assert not _imported(code) & set(HEAVY)


def test_the_command_line_imports_no_heavy_library_before_it_knows_the_command():
    assert not _imported("import triage.apps.cli") & {*HEAVY, "lark"}


def test_a_failure_the_memory_model_has_no_say_in_does_not_load_it():
    from conftest import FIXTURES

    log = sorted((FIXTURES / "cuda_driver_mismatch").glob("*.log"))[0]
    code = f"""
import io
from triage.apps.cli import main
main([{str(log)!r}, "-f", "json"], stdout=io.StringIO())
"""
    assert not _modules(code) & {"triage.memory.model", "triage.memory.solve", "triage.plan", "triage.apps.what_if"}


def test_a_plain_run_imports_no_path_or_resource_library():
    """pathlib (~3 ms with urllib and ipaddress), importlib.resources (zipfile and its readers)
    and platform are not needed to triage a log: the grammar is read with pkgutil, the rule
    packs listed with os, the machine named by os.uname. (An editable install's import hook
    loads pathlib before any of triage: only what the run itself adds is counted.)"""
    from conftest import FIXTURES

    log = FIXTURES / "foreign_gpu_processes" / "v1-0.10.2-oom-with-nvidia-smi-bundle.log"
    code = f"""
import io, json, sys
before = set(sys.modules)
from triage.apps.cli import main
main([{str(log)!r}, "-f", "json"], stdout=io.StringIO())
print(json.dumps(sorted(set(sys.modules) - before)))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    added = set(json.loads(out.splitlines()[-1]))
    assert "triage.pipeline" in added
    # msgspec (the value classes) imports uuid, which loads platform before Python 3.12: what
    # the library itself loads is not the run's doing
    library = _modules("import msgspec")
    assert not (added - library) & {"pathlib", "platform", "importlib.resources", "zipfile"}


def test_a_plain_run_names_its_cache_files_without_hashlib():
    """hashlib loads OpenSSL (~3 ms): the cache's file names are zlib checksums (triage/cache.py
    says why that is enough), so a run with its caches in place imports no hashlib."""
    from conftest import FIXTURES

    log = FIXTURES / "foreign_gpu_processes" / "v1-0.10.2-oom-with-nvidia-smi-bundle.log"
    code = f"""
import io
from triage.apps.cli import main
for _ in range(2):  # the first run may write the caches; the second reads them
    main([{str(log)!r}, "-f", "json"], stdout=io.StringIO())
"""
    assert not _imported(code) & {"hashlib", "_hashlib"}


def test_a_plain_run_imports_no_logging_or_command_suggestions():
    """lark's logger (its runtime, triage/parse/lark_runtime.py) is made on first use: logging,
    traceback and string stay unloaded; difflib is for a first word that may be a mistyped
    command; base64 was for compressed parser tables, which the parsers do not use (zlib is
    loaded: the cache's file names are its checksums, ~0.3 ms where hashlib was ~3); the start
    rules are written beside the tables (no pkgutil read of the grammar); gzip is for a gzipped
    input; shutil (with bz2, lzma) only told argparse the terminal's width; tomllib only for a
    settings file (run from this repository, whose pyproject.toml names the tool but holds no
    [tool.vllm-triage] table)."""
    from conftest import FIXTURES

    log = FIXTURES / "foreign_gpu_processes" / "v1-0.10.2-oom-with-nvidia-smi-bundle.log"
    code = f"""
import sys
from triage.apps.cli import main
main([{str(log)!r}, "-f", "json"], stdout=open("/dev/null", "w"))
"""
    library = _modules("import msgspec")  # what msgspec itself loads is not the run's doing
    assert not (_modules(code) - library) & {
        "logging",
        "traceback",
        "difflib",
        "base64",
        "pkgutil",
        "gzip",
        "shutil",
        "lzma",
        "tomllib",
    }
