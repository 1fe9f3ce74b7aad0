"""Stage 1 for the native layers (network): the message tables of CUDA, cuBLAS, cuDNN and NCCL.

Maintainer tooling, never run by users or tests. Writes ``scripts/catalogue/native_extraction.json``:
the texts as facts with their provenance (package, version, file in the wheel or repository, the
table's accessor or the source line), never a binary and never NVIDIA's code.

* Error tables of the shipped libraries: each wheel is downloaded (``pip download --no-deps``), the
  one shared object is unpacked, its own accessor (``cudaGetErrorName``/``cudaGetErrorString``,
  ``cublasGetStatusName``/``String``, ``cudnnGetErrorString``, ``ncclGetErrorString``) is called
  through ctypes for every code in the table's range (a pure lookup: no GPU or driver needed),
  and the wheel and the object are deleted at once. The dump runs in a child process: a library
  that aborts on load costs that table only.
* The driver API's ``CUDA_ERROR_*`` names and codes, from cuda-bindings' ``cydriver.pxd``.
* HIP's ``hipGetErrorString`` table: read the same way from ROCm/clr release tags (``--rocm-clr-repo``).
* NCCL's ``WARN(...)`` formats and older ``ncclGetErrorString`` texts: read with ``git show``
  from a clone of the NVIDIA/nccl repository at several release tags (``--nccl-repo``).

    python scripts/catalogue/native.py --cache /tmp/native-src --nccl-repo /path/to/nccl.git \\
        --rocm-clr-repo /path/to/clr.git
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "native_extraction.json"

# (table family, wheel, version, shared object in the wheel, objects it needs loaded first)
WHEELS: list[tuple[str, str, str, str, tuple[str, ...]]] = [
    ("cuda-runtime", "nvidia-cuda-runtime-cu12", "12.9.79", "nvidia/cuda_runtime/lib/libcudart.so.12", ()),
    ("cuda-runtime", "nvidia-cuda-runtime", "13.5.37", "nvidia/cu13/lib/libcudart.so.13", ()),
    (
        "cublas",
        "nvidia-cublas-cu12",
        "12.9.3.13",
        "nvidia/cublas/lib/libcublas.so.12",
        ("nvidia/cublas/lib/libcublasLt.so.12",),
    ),
    (
        "cudnn",
        "nvidia-cudnn-cu12",
        "8.9.7.29",
        "nvidia/cudnn/lib/libcudnn.so.8",
        ("nvidia/cudnn/lib/libcudnn_ops_infer.so.8",),
    ),
    (
        "cudnn",
        "nvidia-cudnn-cu12",
        "9.27.0.42",
        "nvidia/cudnn/lib/libcudnn.so.9",
        ("nvidia/cudnn/lib/libcudnn_graph.so.9",),
    ),
    ("nccl", "nvidia-nccl-cu12", "2.32.3", "nvidia/nccl/lib/libnccl.so.2", ()),
]
# NCCL release tags whose sources are read (the WARN formats changed across them; 2.11 is the
# last with posix_fallocate, 2.29 the last with "Duplicate GPU detected").
NCCL_TAGS = ["v2.11.4-1", "v2.18.6-1", "v2.21.5-1", "v2.26.6-1", "v2.29.7-1", "v2.30.7-1"]
# ROCm/clr tags whose hipGetErrorString table (hipamd/src/hip_error.cpp) is read; the repository
# starts at 5.6 (texts replaced the enum names in 2022, errors.md §2.2)
HIP_TAGS = ["rocm-5.6.0", "rocm-6.0.0", "rocm-6.1.0", "rocm-6.2.2"]
HIP_FILE = "hipamd/src/hip_error.cpp"

# The driver API's CUresult names (CUDA_ERROR_*): its texts live in the driver (libcuda), in no
# wheel; the names and codes are in cuda-bindings' declarations. A driver code has the runtime
# code's number and meaning (errors.md §2.5), so the build names its cause through the runtime's.
DRIVER_WHEEL = ("cuda-bindings", "12.9.4", "cuda/bindings/cydriver.pxd")
_CURESULT = re.compile(r"^\s+(CUDA_ERROR_[A-Z0-9_]+) = (\d+)\s*$", re.M)

# The accessor of each family, and the codes tried: (name function or None, text function, codes)
ACCESSORS = {
    "cuda-runtime": ("cudaGetErrorName", "cudaGetErrorString", range(1, 1000)),
    "cublas": ("cublasGetStatusName", "cublasGetStatusString", range(1, 64)),
    "cudnn": (None, "cudnnGetErrorString", range(1, 10000)),
    "nccl": (None, "ncclGetErrorString", range(1, 64)),
}
# What an accessor answers for a code the table does not hold.
NOT_IN_TABLE = re.compile(r"unrecognized|unknown result code|^CUDNN_UNKNOWN_STATUS|^CUDNN_STATUS_UNKNOWN", re.I)

_DUMP = r"""
import ctypes, json, sys
lib_path, deps, name_fn, text_fn, lo, hi = json.loads(sys.argv[1])
for d in deps:
    ctypes.CDLL(d, mode=ctypes.RTLD_GLOBAL)
lib = ctypes.CDLL(lib_path)
rows = []
for code in range(lo, hi):
    get = getattr(lib, text_fn); get.restype = ctypes.c_char_p
    text = get(code).decode("utf-8", "replace")
    name = None
    if name_fn:
        getn = getattr(lib, name_fn); getn.restype = ctypes.c_char_p
        name = getn(code).decode("utf-8", "replace")
    rows.append([code, name, text])
print(json.dumps(rows))
"""


def _download_wheel(wheel: str, version: str, folder: str) -> Path:
    """One binary wheel, without its dependencies, into `folder` (the caller deletes it once read)."""
    pip = [sys.executable, "-m", "pip", "download", f"{wheel}=={version}", "--no-deps", "--only-binary=:all:"]
    subprocess.run([*pip, "-q", "-d", folder], check=True)
    return next(Path(folder).glob("*.whl"))


def _cached_table(
    wheel: str, version: str, members: tuple[str, ...], cache: Path, make: Callable[[Path], list[dict]]
) -> list[dict]:
    """Rows made from some members of a wheel, cached as JSON: the wheel is downloaded into a
    temporary folder, the members extracted, the wheel deleted, `make(folder)` run, all removed."""
    done = cache / "tables" / f"{wheel}-{version}.json"
    if done.exists():
        return json.loads(done.read_text())
    with tempfile.TemporaryDirectory(prefix="nativewheel-") as tmp:
        whl = _download_wheel(wheel, version, tmp)
        with zipfile.ZipFile(whl) as zf:
            for member in members:
                zf.extract(member, tmp)
        whl.unlink()
        rows = make(Path(tmp))
    done.parent.mkdir(parents=True, exist_ok=True)
    done.write_text(json.dumps(rows))
    return rows


def dump_wheel(family: str, wheel: str, version: str, obj: str, deps: tuple[str, ...], cache: Path) -> list[dict]:
    """The table of one wheel's library (cached as JSON; the wheel and objects are deleted)."""
    return _cached_table(wheel, version, (obj, *deps), cache, lambda tmp: _dump(family, wheel, version, obj, deps, tmp))


def _dump(family: str, wheel: str, version: str, obj: str, deps: tuple[str, ...], tmp: Path) -> list[dict]:
    name_fn, text_fn, codes = ACCESSORS[family]
    arg = [str(tmp / obj), [str(tmp / d) for d in deps], name_fn, text_fn, codes.start, codes.stop]
    out = subprocess.run(
        [sys.executable, "-c", _DUMP, json.dumps(arg)], check=True, capture_output=True, text=True, timeout=600
    )
    rows = []
    for code, name, text in json.loads(out.stdout):
        if NOT_IN_TABLE.search(text) or (name and NOT_IN_TABLE.search(name)):
            continue
        if family == "cuda-runtime" and name == "cudaErrorUnknown" and code != 999:
            continue
        rows.append({"family": family, "package": wheel, "version": version, "file": obj, "function": text_fn,
                     "code": code, "name": name or text, "text": text})  # fmt: skip
    return rows


def driver_names(cache: Path) -> list[dict]:
    """CUresult names and codes from cuda-bindings' declarations (the wheel is deleted at once)."""
    wheel, version, member = DRIVER_WHEEL

    def make(tmp: Path) -> list[dict]:
        text = (tmp / member).read_text(encoding="utf-8", errors="replace")
        return [
            {"family": "cuda-driver", "package": wheel, "version": version, "file": member, "function": "CUresult",
             "code": int(m.group(2)), "name": m.group(1), "line": text[: m.start(1)].count("\n") + 1}
            for m in _CURESULT.finditer(text)
        ]  # fmt: skip

    return _cached_table(wheel, version, (member,), cache, make)


# C string literals (adjacent ones concatenate), a preprocessor stringification, or anything else
_C_LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')
_WARN_CALL = re.compile(r"\bWARN\(\s*((?:\"(?:[^\"\\]|\\.)*\"\s*|[A-Za-z_]\w*\s*)+)[,)]")
_C_FORMAT = re.compile(r"%[-+ #0]*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|z|j|t|L)?([diouxXeEfFgGcsp%])")
_SYSCHECK = re.compile(r"\bSYSCHECK\w*\([^;]*?,\s*\"(\w+)\"")
_ERROR_CASE = re.compile(r"case\s+(nccl\w+)\s*:\s*return\s+\"((?:[^\"\\]|\\.)*)\"")


def c_template(fmt_args: str) -> list | None:
    """A WARN's format (adjacent literals joined; a macro argument is a field) as template parts."""
    parts: list = []
    pos = 0
    for m in re.finditer(r'"((?:[^"\\]|\\.)*)"|([A-Za-z_]\w*)', fmt_args):
        if m.group(1) is not None:
            text = bytes(m.group(1), "utf-8").decode("unicode_escape")
            last = 0
            for f in _C_FORMAT.finditer(text):
                parts.append(text[last : f.start()])
                parts.append("%" if f.group(1) == "%" else ["arg"])
                last = f.end()
            parts.append(text[last:])
        else:
            parts.append([m.group(2)])
        pos = m.end()
    del pos
    out: list = []
    for p in parts:
        if isinstance(p, str) and out and isinstance(out[-1], str):
            out[-1] += p
        elif p != "":
            out.append(p)
    return out or None


def nccl_sources(repo: Path) -> tuple[list[dict], list[dict]]:
    """(WARN formats, ncclGetErrorString texts) of every tag: source file, line, the tags holding it."""
    formats: dict[tuple[str, str], dict] = {}
    tables: dict[tuple[str, str], dict] = {}
    for tag in NCCL_TAGS:
        version = tag[1:].rsplit("-", 1)[0]
        files = subprocess.run(["git", "-C", str(repo), "ls-tree", "-r", "--name-only", tag, "src"],
                               check=True, capture_output=True, text=True).stdout.split()  # fmt: skip
        for path in files:
            if not path.endswith((".cc", ".h", ".cu", ".cpp")):
                continue
            text = subprocess.run(["git", "-C", str(repo), "show", f"{tag}:{path}"],
                                  capture_output=True, text=True, errors="replace").stdout  # fmt: skip
            for kind, found in _warns(text):
                parts, line = found
                key = (kind if kind == "syscheck" else path, json.dumps(parts))
                rec = formats.setdefault(key, {"package": "nccl", "parts": parts, "versions": []})
                rec.update(file=path, line=line, function="WARN")
                if version not in rec["versions"]:
                    rec["versions"].append(version)
            if path == "src/init.cc":
                for m in _ERROR_CASE.finditer(text):
                    rec = tables.setdefault((m.group(1), m.group(2)), {"family": "nccl", "package": "nccl",
                                            "file": path, "function": "ncclGetErrorString", "code": m.group(1),
                                            "name": m.group(1), "text": m.group(2), "versions": []})  # fmt: skip
                    rec["line"] = text[: m.start()].count("\n") + 1
                    if version not in rec["versions"]:
                        rec["versions"].append(version)
    return list(formats.values()), list(tables.values())


def hip_sources(repo: Path) -> list[dict]:
    """hipGetErrorString's table (``ihipGetErrorString``'s switch) at each ROCm/clr tag."""
    rows: dict[tuple[str, str], dict] = {}
    for tag in HIP_TAGS:
        version = tag.removeprefix("rocm-")
        text = subprocess.run(["git", "-C", str(repo), "show", f"{tag}:{HIP_FILE}"],
                              check=True, capture_output=True, text=True).stdout  # fmt: skip
        start = text.index("ihipGetErrorString(")
        body = text[start : text.index("\n}", start)]
        for m in re.finditer(r"case\s+(hip\w+)\s*:\s*return\s+\"((?:[^\"\\]|\\.)*)\"", body):
            if m.group(1) == "hipSuccess":
                continue
            rec = rows.setdefault((m.group(1), m.group(2)), {"family": "hip", "package": "ROCm/clr", "file": HIP_FILE,
                                  "function": "hipGetErrorString", "code": m.group(1), "name": m.group(1),
                                  "text": m.group(2), "versions": []})  # fmt: skip
            rec["line"] = text[: start + m.start()].count("\n") + 1
            rec["versions"].append(version)
    return sorted(rows.values(), key=lambda r: (r["line"], r["name"]))


def _warns(text: str):
    """('warn', (parts, line)) per WARN call; ('syscheck', ...) per SYSCHECK call site: the macro's
    WARN("Call to " name " failed: %s") expanded with the name that site passes."""
    for m in _WARN_CALL.finditer(text):
        parts = c_template(m.group(1))
        if parts and any(isinstance(p, str) for p in parts):
            yield "warn", (parts, text[: m.start()].count("\n") + 1)
    for m in _SYSCHECK.finditer(text):
        yield "warn", (["Call to " + m.group(1) + " failed: ", ["strerror"]], text[: m.start()].count("\n") + 1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", type=Path, required=True)
    ap.add_argument("--nccl-repo", type=Path, required=True, help="a clone (or bare git dir) of NVIDIA/nccl")
    ap.add_argument("--rocm-clr-repo", type=Path, required=True, help="a clone (or bare git dir) of ROCm/clr")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    tables: list[dict] = []
    for family, wheel, version, obj, deps in WHEELS:
        rows = dump_wheel(family, wheel, version, obj, deps, args.cache)
        print(f"{wheel} {version}: {len(rows)} codes", flush=True)
        tables += rows
    formats, nccl_tables = nccl_sources(args.nccl_repo)
    doc = {
        "schema_version": 1,
        "wheels": [{"family": f, "package": w, "version": v, "file": o} for f, w, v, o, _ in WHEELS],
        "driver_names": driver_names(args.cache),
        "nccl_tags": NCCL_TAGS,
        "hip_tags": HIP_TAGS,
        "hip_source_tables": hip_sources(args.rocm_clr_repo),
        "tables": tables,
        "nccl_source_tables": sorted(nccl_tables, key=lambda r: (r["line"], r["text"])),
        "formats": sorted(formats, key=lambda r: (r["file"], r["line"], json.dumps(r["parts"]))),
    }
    args.out.write_text(json.dumps(doc, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"{len(tables)} table codes, {len(formats)} NCCL WARN formats -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
