"""The key texts of ../shared/errors.md and ../shared/formats.md as one-line pastes, with the causes they expect.

The reference documents are third-party text that stays in ../shared: they are read at test
time, never copied. errors.md's tables name a cause per key text (Cause column); formats.md's
quick table names a level (INFO lines must stay silent) and, for errors, the taxonomy's own
`signs` say which cause a message is a sign of. Placeholders are filled as the Notation
paragraphs define them, so the line reads as a real log prints it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from triage.diagnose.excerpt import MEMORY_CAUSES

# The memory causes ("memory causes" in errors.md): the causes whose remedies come from the memory figures.
MEMORY = MEMORY_CAUSES
# errors.md §8: proposals that taxonomy v2 adopted under another id.
ADOPTED_AS = {"distributed_port_conflict": "port_in_use", "gpu_hardware_fault": "gpu_runtime_fault"}
SILENT = "-"  # the expectation "no diagnosis at all"
WRAPPER = frozenset({SILENT, "unknown_failure"})

# errors.md Notation: <S> size, <N> integer, <P> path, <U> URL, <R> repo id, <H> host, <T> free text, <i> small int.
# The other angle-bracket names in its tables are filled with a plausible value of their kind.
ANGLE = {
    "S": "2.00 GiB",
    "N": "4",
    "P": "/models/llama-3-8b",
    "U": "https://huggingface.co/org/model/resolve/main/config.json",
    "R": "org/model",
    "H": "node-1",
    "h": "0.0.0.0",
    "p": "8000",
    "T": "something went wrong",
    "i": "0",
    "X": "unknown error",
    "pid": "1234",
    "n": "1",
    "lib": "libcudart",
    "mod": "flash_attn",
    "name": "NVIDIA A100-SXM4-80GB",
    "busid": "1000",
    "comm": "python3",
    "a": "0",
    "b": "1",
    "M": "7",
    "m": "0",
    "V": "12.4",
    "v": "bogus",
    "x": "max-model-len",
    "t": "llama4",
    "model_type": "llama4",
    "prog": "vllm",
    "args": "--bogus-flag",
    "file": "ProcessGroupNCCL.cpp",
    "line": "1970",
    "nccl text": "unhandled system error",
    "script": "/app/run.sh",
    "ip:port": "10.0.0.2:43000",
    "ip": "10.0.0.2",
    "cmd": "python3 -m vllm.entrypoints.openai.api_server",
}
# formats.md: bare capital placeholders in its examples (figures illustrative).
BARE = {"X": "2.50", "Y": "79.25", "Z": "71.33", "N": "4096", "M": "2048", "U": "0.9", "C": "1", "W": "0", "P": "12345"}


@dataclass(frozen=True)
class Row:
    """One key text of a reference table, shaped as a paste, and the top causes that are right for it."""

    doc: str
    layer: str
    line: str
    expected: frozenset[str]  # a taxonomy id, SILENT, or both
    source: str  # the raw key text, for the report


def taxonomy_ids(shared: Path) -> dict[str, str]:
    """Cause id -> its `signs` text."""
    doc = yaml.safe_load((shared / "taxonomy.yaml").read_text(encoding="utf-8"))
    return {k: str(v.get("signs", "")) for k, v in doc["causes"].items()}


def _tables(text: str):
    """(section heading, header cells, body rows as cell lists) for each markdown table."""
    section, lines = "", text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("#"):
            section = lines[i].lstrip("#").strip()
        if lines[i].startswith("|") and i + 1 < len(lines) and lines[i + 1].startswith("|---"):
            header, body = _cells(lines[i]), []
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                body.append(_cells(lines[i]))
                i += 1
            yield section, header, body
            continue
        i += 1


def _cells(line: str) -> list[str]:
    # A `|` inside backticks is text (``a | b``), not a column boundary.
    cells, cur, tick = [], "", False
    for ch in line.strip()[1:-1]:
        if ch == "`":
            tick = not tick
        if ch == "|" and not tick:
            cells.append(cur.strip())
            cur = ""
        else:
            cur += ch
    cells.append(cur.strip())
    return cells


# The column that holds the text as the log prints it (the others quote flags, functions, paths).
TEXT_COLUMNS = ("CUDA text", "Shell, script (non-interactive)")


def _text_column(header: list[str]) -> int:
    return next((header.index(h) for h in TEXT_COLUMNS if h in header), 0)


def _first_code(cells: list[str]) -> str | None:
    """The cell's first code span; where the cell opens with prose, its first span that reads as a
    printed line (has a space): `safe_open` in "safetensors `safe_open` mmap failure: ... printed as
    `OSError: ...`" names a function, the text the log holds comes later."""
    for cell in cells[:1]:
        spans = [(m.group(1) or m.group(2)).strip() for m in re.finditer(r"``(.+?)``|`([^`]+)`", cell)]
        if not spans:
            return None
        if cell.lstrip().startswith("`"):
            return spans[0]
        return next((s for s in spans if " " in s), spans[0])
    return None


def _fill_angles(text: str) -> str:
    text = re.sub(r"(?<=\w)\((\w)\)(?=\w)", r"\1", text)  # `capac(i)ty`: both spellings exist; use one
    text = re.sub(r"\(([^()|]+)\|[^()]*\)", r"\1", text)  # `(creating|attaching to)`: the first alternative
    text = re.sub(r"\[(: [^\]]*)\]", r"\1", text)  # `[: '<P>']`: an optional tail, shown
    text = text.replace("...", " ").replace("…", " ").replace("\\n", "\n")
    text = re.sub(r"<([A-Za-z_ :]+)>", lambda m: ANGLE.get(m.group(1), m.group(1)), text)
    return re.sub(r"[ \t]{2,}", " ", text).strip()


def _expected(
    cell: str, ids: dict[str, str], previous: frozenset[str], table: frozenset[str] = frozenset()
) -> frozenset[str] | None:
    """The causes a Cause cell allows; None where it names none the taxonomy has (left unscored)."""
    plain = cell.replace("*", "")
    if plain.startswith("same") and ", by " in plain:
        return table  # "same as above, by library": the cause of the row above that names this thing
    if plain.startswith("same"):
        return previous
    named = {ADOPTED_AS.get(w, w) for w in re.findall(r"[a-z][a-z_]+[a-z]", plain)}
    found = {w for w in named if w in ids}
    if "memory causes" in plain or "an OOM" in plain:
        found |= MEMORY
    if plain.startswith(("→ see", "per ")):
        return WRAPPER
    if not found:
        return None
    if found and found <= MEMORY:
        found.add("gpu_out_of_memory")  # taxonomy v3: an OOM whose phase a one-line paste cannot show
    if "unknown_failure" in found:
        found.add(SILENT)
        if "kernel" in plain:
            found.add("gpu_runtime_fault")  # §8: adopted as gpu_runtime_fault, "kernel faults of any origin"
    return frozenset(found)


def errors_rows(shared: Path) -> list[Row]:
    ids = taxonomy_ids(shared)
    rows: list[Row] = []
    for section, header, body in _tables((shared / "errors.md").read_text(encoding="utf-8")):
        if "Cause" not in header:
            continue
        layer = _layer(section)
        wrap_cuda = "CUDA text" in header  # §2.2: torch prints the runtime's text after `CUDA error: ` (§2.1)
        nccl_warn = header[0].startswith("WARN text")  # §3.4: NCCL prints them in its WARN line format (§3.3)
        previous: frozenset[str] = WRAPPER
        table: frozenset[str] = frozenset()  # every cause the table's rows so far name
        for cells in body:
            if len(cells) != len(header):
                continue
            key = _first_code(cells[_text_column(header) : header.index("Cause")])
            want = _expected(cells[header.index("Cause")], ids, previous, table)
            if want is not None:
                previous = want
                table |= want - WRAPPER
            if key is None or want is None:
                continue
            line = _fill_angles(key)
            if wrap_cuda:
                line = "RuntimeError: CUDA error: " + line
            if nccl_warn and "NCCL WARN" not in line:
                line = f"node-1:1234:1290 [0] transport/net.cc:812 NCCL WARN {line}"
            rows.append(
                Row("errors.md", layer if section != "Quick table" else _quick_layer(cells[1]), line, want, key)
            )
    return rows


def _layer(section: str) -> str:
    for prefix, layer in (
        ("1.", "torch"),
        ("2.", "CUDA/HIP"),
        ("3.", "NCCL"),
        ("4.", "OS"),
        ("5.", "hubs"),
        ("6.", "Python"),
    ):
        if section.startswith(prefix):
            return layer
    return "other"


def _quick_layer(cell: str) -> str:
    low = cell.lower()
    for words, layer in (
        (("nccl", "c10d", "gloo"), "NCCL"),
        (("cuda", "hip", "nvml", "container", "loader"), "CUDA/HIP"),
        (("hf_hub", "transformers", "safetensors", "tokenizers"), "hubs"),
        (("pydantic", "argparse", "python", "pyzmq", "uvicorn"), "Python"),
        (("shell", "kernel", "kubernetes", "systemd", "ray", "os", "torch shm"), "OS"),
    ):
        if any(w in low for w in words):
            return layer
    return "torch"


def _sign_cause(text: str, ids: dict[str, str]) -> str | None:
    """The cause whose taxonomy signs quote this message (its first 24 letters, figures aside)."""

    def key(s: str) -> str:
        return re.sub(r"[^a-z ]", "", s.lower()).strip()[:24]

    k = key(text)
    for cause, signs in ids.items():
        if any(key(q) == k for q in re.findall(r'"([^"]{12,})"', signs)):
            return cause
    return None


def formats_rows(shared: Path) -> list[Row]:
    """formats.md's quick table: INFO/DEBUG/progress lines stay silent; errors take their taxonomy sign's cause."""
    ids = taxonomy_ids(shared)
    rows: list[Row] = []
    for section, _header, body in _tables((shared / "formats.md").read_text(encoding="utf-8")):
        if not section.startswith("Quick table"):
            continue
        for cells in body:
            key, level = _first_code(cells[:1]), cells[-1]
            if key is None:
                continue
            text = key.replace("(vX)", "(v0.8.5)").replace("<DEV>", "GPU").replace("<VllmConfig>", "")
            text = re.sub(r"\b(NAME)\b", "EngineCore_DP0", text)
            text = re.sub(r"http://H:P|\bURL\b", "http://0.0.0.0:8000", text)
            text = re.sub(r"\b([XYZNMUCWP])\b", lambda m: BARE[m.group(1)], text)
            text = _fill_angles(text.replace("{...}", "{'EngineCore_DP0': 1}"))
            cls = re.search(r"\b(\w+Error)\b", level)
            if cls:
                text = f"{cls.group(1)}: {text}"
            if re.search(r"INFO|DEBUG|progress", level) and "ERROR" not in level:
                want = frozenset({SILENT})
            else:
                cause = _sign_cause(key, ids)
                if cause is None:
                    continue
                want = frozenset({cause} | (MEMORY if cause in MEMORY else set()))
            rows.append(Row("formats.md", "vLLM formats", text, want, key))
    return rows
