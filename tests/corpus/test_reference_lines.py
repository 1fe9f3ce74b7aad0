"""The reference's key texts as one-line pastes, end to end (users paste one line from a chat).

../shared/errors.md (the layers under vLLM) and ../shared/formats.md (vLLM's own messages)
list the real formats with the cause each points to. Each key text, its placeholders filled,
is shaped as a traceback prints it and run through the tool: its top cause must be one the
row allows (recall, with a floor at what the tool reaches), and never one outside it
(precision), except the rows listed in STANDING with the reason, from the taxonomy.
"""

from __future__ import annotations

from collections import Counter

import pytest
from conftest import SHARED, triage_text
from reference_rows import SILENT, Row, errors_rows, formats_rows

pytestmark = pytest.mark.skipif(not (SHARED / "errors.md").exists(), reason="../shared is not present")

# Measured: rows whose top cause is one the reference allows, of 223 scored
# (166 before this branch's fixes: NCCL WARN family, cut old-format OOM, NCCL fallocate, CUDA
# peer-access and device-ordinal families, missing names in packages; 184 -> 187: c10d's rendezvous
# port, bash's non-interactive Killed job report, transformers' remote-code refusal; 187 -> 195: the OS
# layer's errnos by name and by what they are about, a bare `Bus error`, SIGILL as a build for another
# CPU, torch's DataLoader bus error, glibc's loader line for an executable, the reference's
# `printed as` key text and its "same as above, by library" rows read as written; 196: a bare
# `undefined symbol: <mangled>` paste; the blind set's families add none beyond these; then the
# native layers' catalogue: NCCL WARNs of a CUDA allocation, two ranks on one GPU, an unmappable or
# unopenable segment, read as failures and named by NCCL's own WARN formats; a cuBLAS status, the
# runtime's invalid device function / peer access and NCCL's result sentences pasted bare; a watchdog
# timeout line cut inside its WorkNCCL fields: 206 with the OS layer's; 211: the other accelerators'
# OOM heads (HIP cut after `Tried to allocate`, MPS cut inside its figures, Habana PT_DEVMEM, XLA's
# hbm) and torch's NVML assert from the caching allocator, all read as the torch OOM; 213: torch's
# device-index assert and cudaGetDeviceCount's failure read by its error code; 215: torch's GPU
# capability warnings pasted alone, any sm_N and the 2.11 `(CC)` wording).
FLOOR = 215

# Rows whose named cause differs from the reference's, keyed by the reference's key text: why the tool is right.
STANDING = {
    "OSError: [Errno 28] No space left on device[: '<P>']": "the row is for a path under /dev/shm (its Where column); "
    "the generic <P> is a model folder, where disk_space_exhausted is right",
    "an illegal memory access was encountered": "taxonomy v2 adopted gpu_runtime_fault for kernel faults of any "
    "origin (errors.md §8); the row predates it",
    "device-side assert triggered": "the same: a kernel fault, gpu_runtime_fault since taxonomy v2",
    "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\\n  Value error, <inner>": (
        "taxonomy v3 tie-break: every config validation error is invalid_arguments, whatever the inner text"
    ),
    "ModuleNotFoundError: No module named '<mod>'": "taxonomy v3 adopted dependency_missing for a package that "
    "is not installed at all (the row predates v3)",
}


def _rows() -> list[Row]:
    if not (SHARED / "errors.md").exists():
        return []
    return errors_rows(SHARED) + formats_rows(SHARED)


def _verdict(row: Row) -> tuple[str, str]:
    """(right | none | wrong, the top cause or '-')."""
    got = [d.id for d in triage_text(row.line + "\n").diagnoses][:1]
    top = got[0] if got else SILENT
    if top in row.expected:
        return "right", top
    return ("none" if top in (SILENT, "unknown_failure") else "wrong"), top


@pytest.fixture(scope="module")
def verdicts() -> list[tuple[Row, str, str]]:
    return [(r, *_verdict(r)) for r in _rows()]


def test_the_reference_tables_are_read(verdicts):
    """A format change in the reference must not silently empty the test."""
    layers = Counter(r.layer for r, _, _ in verdicts)
    assert len(verdicts) >= 200, layers
    assert set(layers) >= {"torch", "CUDA/HIP", "NCCL", "OS", "hubs", "Python", "vLLM formats"}, layers


def test_recall_floor(verdicts, capsys):
    counts: Counter[tuple[str, str]] = Counter((r.layer, v) for r, v, _ in verdicts)
    with capsys.disabled():
        print("\nreference rows by layer (right / no diagnosis / wrong cause):")
        for layer in sorted({r.layer for r, _, _ in verdicts}):
            print(f"  {layer:13} {counts[layer, 'right']:4} {counts[layer, 'none']:4} {counts[layer, 'wrong']:4}")
        for r, v, top in verdicts:
            if v != "right":
                print(f"  {v:5} {r.layer:12} got {top:26} want {'/'.join(sorted(r.expected))[:50]:50} {r.line[:90]!r}")
    right = sum(1 for _, v, _ in verdicts if v == "right")
    assert right >= FLOOR, f"{right} of {len(verdicts)} reference lines get an allowed cause (floor {FLOOR})"


def test_no_line_names_a_cause_outside_its_row(verdicts):
    wrong = [(r.source, top) for r, v, top in verdicts if v == "wrong" and r.source not in STANDING]
    assert not wrong, wrong


def test_standing_rows_still_differ(verdicts):
    """A STANDING entry that the tool now gets right (or that the reference dropped) is removed."""
    wrong = {r.source for r, v, _ in verdicts if v == "wrong"}
    assert set(STANDING) <= wrong, set(STANDING) - wrong
