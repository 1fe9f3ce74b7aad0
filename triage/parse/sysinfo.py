"""Evidence that is not a vLLM log: nvidia-smi (table and CSV), `fuser -v /dev/nvidia*`, and
vLLM's collect_env.py report, pasted into the log or given as extra files.

These are tables and key/value reports, not messages, so they are read by a small
stateful reader (a CSV header names the columns of the rows after it) rather than by the
message grammar. What they yield is typed events like the grammar's: the GPUs with
their capacity and use, the processes holding GPU memory, driver/CUDA/torch/vLLM versions.
"""

from __future__ import annotations

import heapq
import re
from functools import lru_cache

from triage.ingest.lines import Line
from triage.model import events as ev
from triage.patterns import LazyPattern
from triage.units import MiB

# Literal words one of which every line this module reads contains (the cheap prefilter).
WORDS = (
    "MiB",
    "NVIDIA-SMI",
    "Driver Version",
    "/dev/nvidia",
    "PyTorch version:",
    "vLLM Version:",
    "Nvidia driver version:",
    "CUDA used to build PyTorch:",
    "GPU models and configuration:",
    "memory.total",
    "used_memory",
    "used_gpu_memory",
    "GPU 0:",
    "GPU 1:",
    "GPU 2:",
    "GPU 3:",
    "00000000:",
)

# The readers' patterns are compiled on first use (most logs carry no nvidia-smi output).
_SMI_HEADER = LazyPattern(r"NVIDIA-SMI\s+(\S+)\s+Driver Version:\s+(\S+)(?:\s+CUDA Version:\s+(\S+))?")
# Each `\s+` is followed by something that cannot be a space (a digit, `\S`, a word), and each
# lazy name ends on `(?<=\S)`, so every split is forced and matching stays linear: with a
# plain `(.+?)` after `\s+`, a line of spaces made the match cubic (seconds for 2 KB).
# (Possessive quantifiers would say the same, but Python 3.10 has none.)
_SMI_GPU = LazyPattern(r"^\|\s+(\d+)\s+(\S.*?)(?<=\S)\s+(?:On|Off)\s+\|")
_SMI_MEMORY = LazyPattern(r"\|\s+(\d+)MiB\s*/\s*(\d+)MiB\s+\|")
_SMI_PROCESS = LazyPattern(
    r"^\|\s+(\d+)\s+(?:(?:N/A|\d+)\s+(?:N/A|\d+)\s+)?(\d+)\s+(C|G|C\+G|M|M\+C)\s+(\S.*?)(?<=\S)\s+"
    r"(\d+|N/A)(?:MiB)?\s+\|"
)
_FUSER = LazyPattern(r"^(?:/dev/nvidia[\w-]*:)?\s+(\S+)\s+(\d+)\s+[FfmMrRcCeE.]{4,6}\s+(\S+)")
_ENV = {
    "PyTorch version:": "torch_version",
    "vLLM Version:": "vllm_version",
    "Nvidia driver version:": "driver_version",
    "CUDA used to build PyTorch:": "torch_cuda_version",
    "CUDA runtime version:": "cuda_runtime_version",
}
_ENV_GPU = LazyPattern(r"^GPU (\d+): (.+?)(?: \(UUID[^()]*\))?$")
KEPT_ROWS = 32  # rows of a block of process rows read whole (the largest): a report lists 16


class BundleReader:
    """Reads one evidence line at a time; keeps the CSV header and the last GPU row seen."""

    def __init__(self) -> None:
        self.csv_columns: list[str] | None = None
        self.gpu_index: int | None = None
        self.gpu_name: str | None = None
        self.in_fuser = False

    def read(self, line: Line) -> list[ev.Event]:
        text = line.text.strip()
        if not text:
            return []
        where = {"line": line.no, "origin": line.origin}
        # nvidia-smi's table readers need its header words or a `|`: a CSV row of a long process
        # list skips them (each a regex), it is what such a list is made of
        table = "|" in text or "NVIDIA-SMI" in text
        for reader in (self._smi_header, self._smi_gpu, self._smi_process) * table + (
            self._csv,
            self._fuser,
            self._env,
        ):
            try:
                made = reader(text, where)
            except (ValueError, ArithmeticError):  # a figure of 5000 digits, or out of range: not evidence
                continue
            if made is not None:
                return made
        return []

    def tally(self, rows: list[str]) -> tuple[list[int], int, int] | None:
        """For a block of process rows past a CSV's first ones (ingest/rows.py): the indexes of
        the rows to read whole (the KEPT_ROWS largest and the last), and how many the others are
        and the bytes they hold. None when a row is not exactly what `_csv` reads as a process
        (the block is then read row by row): pid first, figures in MiB, nothing a peeler or
        another reader would take (brackets, colons, `|`, parentheses, backslashes)."""
        pattern = _row_pattern(tuple(self.csv_columns or ()))
        block = "\n".join(rows) + "\n"
        if pattern is None or self.in_fuser or any(w in block for w in _NOT_ROWS):
            return None
        found = pattern.findall(block)
        if len(found) != len(rows):
            return None
        sizes = [int(float(f) * MiB) for f in found]
        keep = sorted(heapq.nlargest(KEPT_ROWS, range(len(sizes) - 1), key=sizes.__getitem__)) + [len(sizes) - 1]
        kept = sum(sizes[i] for i in keep)
        return keep, len(sizes) - len(keep), sum(sizes) - kept

    def _smi_header(self, text: str, where: dict) -> list[ev.Event] | None:
        m = _SMI_HEADER.search(text)
        if not m:
            return None
        return [ev.SystemInfo(**where, driver_version=m.group(2), cuda_version=m.group(3))]

    def _smi_gpu(self, text: str, where: dict) -> list[ev.Event] | None:
        m = _SMI_GPU.match(text)
        if m and "MiB" not in text:
            self.gpu_index, self.gpu_name = int(m.group(1)), m.group(2).strip()
            return []
        m = _SMI_MEMORY.search(text)
        if not m or self.gpu_index is None:
            return None
        used, total = int(m.group(1)) * MiB, int(m.group(2)) * MiB
        gpu = ev.GpuInfo(**where, index=self.gpu_index, name=self.gpu_name, total=total, used=used, free=total - used)
        self.gpu_index = None
        return [gpu]

    def _smi_process(self, text: str, where: dict) -> list[ev.Event] | None:
        m = _SMI_PROCESS.match(text)
        if not m:
            return None
        nbytes = int(m.group(5)) * MiB if m.group(5).isdigit() else None
        return [ev.GpuProcess(**where, gpu=int(m.group(1)), pid=int(m.group(2)), name=m.group(4).strip(), bytes=nbytes)]

    def _csv(self, text: str, where: dict) -> list[ev.Event] | None:
        if "memory.total" in text or "used_memory" in text or "used_gpu_memory" in text:
            self.csv_columns = [c.strip().split(" [")[0] for c in text.split(",")]
            return []
        if self.csv_columns is None or text.count(",") + 1 != len(self.csv_columns):
            return None
        row = dict(zip(self.csv_columns, (c.strip() for c in text.split(",")), strict=True))
        if "pid" in row:
            used = _mib(row.get("used_memory") or row.get("used_gpu_memory"))
            if not row["pid"].isdigit():
                return None
            return [
                ev.GpuProcess(**where, pid=int(row["pid"]), name=row.get("process_name") or row.get("name"), bytes=used)
            ]
        total = _mib(row.get("memory.total"))
        if total is None:
            return None
        used, free = _mib(row.get("memory.used")), _mib(row.get("memory.free"))
        index = row.get("index")
        out: list[ev.Event] = [
            ev.GpuInfo(
                **where,
                index=int(index) if index and index.isdigit() else None,
                name=row.get("name"),
                total=total,
                used=used,
                free=free,
            )
        ]
        if row.get("driver_version"):
            out.append(ev.SystemInfo(**where, driver_version=row["driver_version"]))
        return out

    def _fuser(self, text: str, where: dict) -> list[ev.Event] | None:
        if "/dev/nvidia" not in text and not self.in_fuser:
            return None
        if text.startswith("USER") or text.endswith("COMMAND"):
            self.in_fuser = True
            return []
        m = _FUSER.match(text if "/dev/nvidia" in text else " " + text)
        if not m:
            self.in_fuser = "/dev/nvidia" in text
            return None if "/dev/nvidia" not in text else []
        self.in_fuser = True
        return [ev.GpuProcess(**where, pid=int(m.group(2)), name=m.group(3), user=m.group(1))]

    def _env(self, text: str, where: dict) -> list[ev.Event] | None:
        for key, field in _ENV.items():
            if text.startswith(key):
                value = text[len(key) :].strip()
                if field == "vllm_version":
                    return [ev.EngineConfig(**where, source="env", version=value.lstrip("v"))]
                return [ev.SystemInfo(**where, **{field: value})]  # type: ignore[arg-type]
        m = _ENV_GPU.match(text)
        if m:
            return [ev.GpuInfo(**where, index=int(m.group(1)), name=m.group(2))]
        return None


_NOT_ROWS = ("memory.total", "used_memory", "used_gpu_memory", "NVIDIA-SMI", "/dev/nvidia")  # other readers' words
_ROW_FIELD = r" *[^,\n\[\]()\\:|\x1b]*"


@lru_cache(maxsize=8)
def _row_pattern(columns: tuple[str, ...]) -> re.Pattern[str] | None:
    """One process row of a CSV with these columns, its used memory (MiB) the one group."""
    memory = "used_memory" if "used_memory" in columns else "used_gpu_memory"
    if len(columns) < 2 or columns[0] != "pid" or memory not in columns or len(set(columns)) != len(columns):
        return None
    fields = [r"\d{1,18}"] + [_ROW_FIELD] * (len(columns) - 1)
    fields[columns.index(memory)] = r" *(\d{1,15}(?:\.\d{1,15})?) *MiB *"
    return re.compile("(?m)^" + ",".join(fields) + r"\n")


_MIB = LazyPattern(r"(\d+(?:\.\d+)?)\s*MiB")


def _mib(value: str | None) -> int | None:
    if not value:
        return None
    m = _MIB.match(value)
    return int(float(m.group(1)) * MiB) if m else None
