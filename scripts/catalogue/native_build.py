"""Stage 2 for the native layers (pure): native extraction + cause tables -> matchers.

A native text is matched where the layer above prints it, never as loose words: a runtime's
``out of memory`` only after ``CUDA error: ``, ``HIP error: ``, NCCL's ``Cuda failure '``, a
driver name (``CUDA_ERROR_X: ``), Triton's launcher or torch's ``Error N: ``; an NCCL result only
after ``NCCL error in: <where>, `` or vLLM's ``NCCL error: ``. A text of six words or more is a
sentence no other layer prints, and is also matched alone (a pasted line without its wrapper).
Enum names (``cudaErrorNoDevice``, ``CUBLAS_STATUS_ALLOC_FAILED``, ``ncclSystemError``) are
matched as whole words. NCCL's WARN formats are matched like vLLM's templates (``matchers.py``);
one whose literal text is too short to tell apart is matched only after ``NCCL WARN``.
"""

from __future__ import annotations

import hashlib
import re

from matchers import lines_of, longest_literal, pattern, prefix, too_vague
from native_causes import table_cause, warn_cause
from templates import render

NOT_STARTUP = {"benign", "internal"}
SENTENCE_WORDS = 6  # a table text this long is matched without its wrapper
# where each family's text is printed: the wrapper right before it
CONTEXTS = {
    "cuda-runtime": r"(?:(?:CUDA|HIP|Hip|XPU) error:\s+|Cuda failure '|Cuda failure \d{1,4} '|"
    r"CUDA_ERROR_[A-Z_]{1,60}:\s+|cudaError[A-Za-z]{1,60}:\s+|Triton Error \[(?:CUDA|HIP)\]:\s+|"
    r"Cuda error \S{1,200} '|CUDA error \d{1,4} '|Error \d{1,4}:\s+)",
    "nccl": r"NCCL error(?: in: [^,]{0,200},|:)\s*",
}
CONTEXTS["hip"] = CONTEXTS["cuda-runtime"]  # hipified torch prints `HIP error: ` (ROCm builds may say CUDA)
WARN_CONTEXT = r"NCCL WARN\s+"
NAMED_FAMILIES = ("cuda-runtime", "cuda-driver", "hip", "cublas", "cudnn", "nccl")  # enum names are matched as words


def _text_pattern(text: str) -> str:
    body = text.strip()
    tail = r"\.?" if body.endswith(".") else ""
    body = body.rstrip(".")
    return r"\s+".join(re.escape(w) for w in body.split()) + tail


def releases(ext: dict) -> dict[str, list[str]]:
    """Each family's releases, oldest first: the wheels' and the NCCL tags' versions."""
    out: dict[str, list[str]] = {}
    for w in ext["wheels"]:
        out.setdefault(w["family"], []).append(w["version"])
    nccl = [t[1:].rsplit("-", 1)[0] for t in ext["nccl_tags"]]
    out["nccl"] = sorted(set(nccl + out.get("nccl", [])), key=lambda v: tuple(int(x) for x in v.split(".")))
    out["hip"] = [t.removeprefix("rocm-") for t in ext["hip_tags"]]
    out["cuda-driver"] = sorted({d["version"] for d in ext["driver_names"]})
    return out


def _records(ext: dict) -> list[dict]:
    """One record per (family, name, text): its versions and its latest place."""
    wheel_of = {(w["family"], w["version"]): w["package"] for w in ext["wheels"]}
    merged: dict[tuple[str, str, str], dict] = {}
    nccl_names = {t["text"]: t["name"] for t in ext["nccl_source_tables"]}  # the wheel's accessor gives no name
    for t in ext["tables"]:
        if t["family"] == "nccl":
            t = {**t, "name": nccl_names.get(t["text"], t["name"])}
        rec = merged.setdefault((t["family"], t["name"], t["text"]), {**t, "versions": []})
        rec["versions"].append(t["version"])
        rec.update(
            file=t["file"], code=t["code"], line=0, wheel=f"{wheel_of[(t['family'], t['version'])]}=={t['version']}"
        )
    for t in ext["nccl_source_tables"]:
        rec = merged.setdefault(("nccl", t["name"], t["text"]), {**t, "versions": [], "code": t["name"]})
        rec["versions"] = sorted(set(rec["versions"]) | set(t["versions"]))
        if "wheel" not in rec:
            rec.update(file=t["file"], line=t["line"], wheel=f"NVIDIA/nccl v{max(t['versions'])}")
    runtime = {r["code"]: r for r in merged.values() if r["family"] == "cuda-runtime"}
    for d in ext["driver_names"]:  # a driver code is the runtime code of its number (errors.md §2.5)
        same = runtime.get(d["code"])
        merged[("cuda-driver", d["name"], d["name"])] = {
            **d,
            "versions": [d["version"]],
            "text": same["text"] if same else d["name"],
            "as_runtime": same["name"] if same else None,
            "wheel": f"{d['package']}=={d['version']}",
        }
    for t in ext["hip_source_tables"]:
        merged[("hip", t["name"], t["text"])] = {**t, "wheel": f"ROCm/clr rocm-{t['versions'][-1]}"}
    return list(merged.values())


def _matchers(rec: dict) -> list[tuple[str, str]]:
    """(pattern, literal) pairs of one table record."""
    fam, text, name = rec["family"], rec["text"], rec["name"]
    out: list[tuple[str, str]] = []
    if fam in CONTEXTS and name != text:
        out.append((CONTEXTS[fam] + _text_pattern(text), " ".join(text.split()).rstrip(".")))
        if len(text.split()) >= SENTENCE_WORDS:
            out.append((_text_pattern(text), " ".join(text.split()).rstrip(".")))
    if fam in NAMED_FAMILIES and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{5,}", name):
        out.append((rf"\b{name}\b", name))
    return out


def table_entries(ext: dict, rel: dict[str, list[str]], stats: dict) -> list[dict]:
    out = []
    for rec in _records(ext):
        if rec["family"] == "cuda-driver":  # its cause is the runtime code's of the same number
            cause, how = table_cause("cuda-runtime", rec["as_runtime"] or "")
        else:
            cause, how = table_cause(rec["family"], rec["name"])
        stats["native"].append((rec["family"], rec["versions"], cause, how in NOT_STARTUP))
        for pat, literal in _matchers(rec):
            out.append(
                {
                    "cause": cause,
                    "how": how,
                    "pattern": pat,
                    "literal": literal,
                    "exception": rec["name"],
                    "template": rec["text"][:400],
                    "package": rec["family"],
                    "file": rec["file"],
                    "line": rec["line"],
                    "function": rec["function"],
                    "code": rec["code"],
                    "wheel": rec["wheel"],
                    "versions": rec["versions"],
                }
            )
    return out


def warn_entries(ext: dict, stats: dict) -> list[dict]:
    out = []
    for rec in ext["formats"]:
        text = render(rec["parts"])
        cause, how = warn_cause(rec["file"], text)
        kept = False
        for line in lines_of(rec["parts"]):
            head = prefix(line)
            if not too_vague(head):
                pat, literal = pattern(head), longest_literal(head)
            elif isinstance(head[0], str) and len(head[0].strip()) >= 8:
                pat, literal = WARN_CONTEXT + pattern(head), "NCCL WARN " + " ".join(head[0].split())
            else:
                continue
            kept = True
            out.append(
                {
                    "cause": cause,
                    "how": how,
                    "pattern": pat,
                    "literal": literal,
                    "exception": "NCCL WARN",
                    "template": text[:400],
                    "package": "nccl",
                    "file": rec["file"],
                    "line": rec["line"],
                    "function": rec["function"],
                    "wheel": f"NVIDIA/nccl v{rec['versions'][-1]}",
                    "versions": rec["versions"],
                }
            )
        stats["native"].append(("nccl", rec["versions"], cause if kept else None, how in NOT_STARTUP))
        stats["native_vague"] += 0 if kept else 1
    return out


def build_native(ext: dict) -> tuple[dict, dict]:
    """(native catalogue document, statistics): entries merged by pattern, ambiguous ones left out."""
    rel = releases(ext)
    order = {(f, v): i for f, vs in rel.items() for i, v in enumerate(vs)}
    stats: dict = {"native": [], "native_vague": 0, "native_ambiguous": 0}
    merged: dict[tuple[str, str], dict] = {}
    for e in table_entries(ext, rel, stats) + warn_entries(ext, stats):
        key = (e["package"], e["pattern"])
        have = merged.get(key)
        if have is None:
            merged[key] = {**e, "causes": {e["cause"]}, "versions": set(e["versions"])}
            continue
        have["causes"].add(e["cause"])
        have["versions"] |= set(e["versions"])
        if e["line"] > have["line"]:  # the latest place: a newer tag keeps the higher line, as a rule
            have.update({k: v for k, v in e.items() if k not in ("versions",)})
    entries = []
    for (package, pat), e in sorted(merged.items()):
        if len(e.pop("causes")) > 1:
            stats["native_ambiguous"] += 1
            continue
        versions = sorted(e.pop("versions"), key=lambda v: order[(package, v)])
        e["id"] = f"{package}-{hashlib.sha1(pat.encode()).hexdigest()[:10]}"
        e["first"], e["last"] = versions[0], versions[-1]
        entries.append(e)
    doc = {
        "schema_version": 1,
        "generated_by": "scripts/catalogue/build.py (native_build.py)",
        "releases": rel,
        "wheels": ext["wheels"],
        "entries": entries,
    }
    return doc, stats


def coverage(doc: dict, stats: dict) -> list[str]:
    """COVERAGE.txt's native section: per family and release, its codes and formats naming a cause."""
    lines = [
        "",
        "Native layers (scripts/catalogue/native.py, native_build.py): the error tables of the",
        "shipped libraries (cudaGetErrorString, cublasGetStatusName, cudnnGetErrorString,",
        "ncclGetErrorString), HIP's hipGetErrorString (ROCm/clr tags) and NCCL's WARN formats",
        "(NVIDIA/nccl tags). 'kept': codes and formats matched (less",
        "teardown, internal and carry-on ones, under 'not startup'); 'named': those naming a cause.",
        "",
        f"{'family':<16} {'release':<12} {'kept':>5} {'named':>6} {'share':>7} {'vague':>6} {'not startup':>12}",
    ]
    for family, rels in doc["releases"].items():
        for v in rels:
            mine = [(c, ns) for f, vs, c, ns in stats["native"] if f == family and v in vs]
            lines.append(coverage_row(family, v, mine))
    by_cause: dict[str, int] = {}
    for e in doc["entries"]:
        by_cause[e["cause"]] = by_cause.get(e["cause"], 0) + 1
    lines += ["", f"Native matchers shipped: {len(doc['entries'])}; per cause:"]
    lines += [f"  {c:<34} {n:>5}" for c, n in sorted(by_cause.items(), key=lambda cn: (-cn[1], cn[0]))]
    lines.append(f"Native matcher lines shared by texts of different causes, left out: {stats['native_ambiguous']}.")
    return lines


def coverage_row(name: str, release: str, mine: list[tuple[str | None, bool]], overall: bool = False) -> str:
    """One release's line of a coverage table, from (cause or None when too vague, not startup)
    per matcher: kept, named, share, vague, not startup (and, with `overall`, named among all)."""
    every = [c for c, _ in mine if c is not None]
    kept = [c for c, ns in mine if c is not None and not ns]
    named = sum(c != "unknown_failure" for c in kept)
    share = f"{100 * named / len(kept):.1f}%" if kept else "-"
    row = f"{name:<16} {release:<12} {len(kept):>5} {named:>6} {share:>7} {len(mine) - len(every):>6} "
    row += f"{len(every) - len(kept):>12}"
    return row + (f" {f'{100 * named / len(every):.1f}%' if every else '-':>7}" if overall else "")
