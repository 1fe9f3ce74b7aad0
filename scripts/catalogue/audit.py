"""Review aid: the catalogue's matchers whose cause was decided by *place* alone.

Mapping by place (the file a message is raised in) is coarse: an internal assert or a generic
error takes its area's cause. This lists those matchers grouped by (place rule, cause, class),
largest group first, with sample templates, so a reviewer can see what each group really says
and move the ones that do not mean their cause (``causes.py``: ``NOT_A_CAUSE`` / ``WORDING``).

    python scripts/catalogue/audit.py                   # every group, 4 samples each
    python scripts/catalogue/audit.py --samples 10 --cause nccl_failure
    python scripts/catalogue/audit.py --how place --summary
    python scripts/catalogue/audit.py --unmapped 0.33.0       # user-facing startup, no cause

Pure: reads the shipped catalogue (``rules/catalogue/vllm_errors.json``) and ``causes.py``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from build import NOT_STARTUP  # noqa: E402
from causes import PLACES  # noqa: E402

CATALOGUE = HERE.parent.parent / "rules" / "catalogue" / "vllm_errors.json"


def place_of(file: str, cls: str) -> str:
    """The PLACES pattern that decides this file and class (the group's name), or '-'."""
    for where, _cause, *classes in PLACES:
        if re.fullmatch(where, file) and (not classes or re.fullmatch(classes[0], cls)):
            return where
    return "-"


def groups(entries: list[dict], how: str, cause: str | None) -> dict[tuple[str, str, str], list[dict]]:
    """(place, cause, class) -> its entries, for entries decided by `how`."""
    out: dict[tuple[str, str, str], list[dict]] = defaultdict(list)
    for e in entries:
        if e["how"] != how or (cause and e["cause"] != cause):
            continue
        out[(place_of(e["file"], e["exception"]), e["cause"], e["exception"])].append(e)
    return out


def unmapped(doc: dict, release: str) -> dict[tuple[str, str, str], list[dict]]:
    """(file, 'unmapped', class) -> the entries live in `release` of its package that are
    user-facing startup messages (not benign, request-time or internal) and name no cause."""
    out: dict[tuple[str, str, str], list[dict]] = defaultdict(list)
    for e in doc["entries"]:
        order = {v: i for i, v in enumerate(doc["releases"].get(e["package"], []))}
        if release not in order or not order[e["first"]] <= order[release] <= order[e["last"]]:
            continue
        if e["cause"] == "unknown_failure" and e["how"] not in NOT_STARTUP:
            out[(e["file"], "unmapped", e["exception"])].append(e)
    return out


def report(found: dict[tuple[str, str, str], list[dict]], samples: int, summary: bool) -> str:
    lines = [f"{sum(map(len, found.values()))} matchers in {len(found)} groups (place, cause, class)"]
    for (place, cause, cls), mine in sorted(found.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        lines.append(f"\n[{len(mine):>4}] {cause:<28} {cls:<22} {place}")
        if summary:
            continue
        for e in sorted(mine, key=lambda e: (e["file"], e["line"]))[:samples]:
            text = " ".join(e["template"].split())[:150]
            lines.append(f"        {e['file']}:{e['line']} {e['function']}: {text}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--how", default="place", help="how the cause was decided (place, wording, class, override, none)")
    ap.add_argument("--cause", help="only this cause")
    ap.add_argument("--samples", type=int, default=4, help="sample templates a group")
    ap.add_argument("--unmapped", metavar="RELEASE", help="the release's user-facing startup messages with no cause")
    ap.add_argument("--summary", action="store_true", help="group sizes only")
    args = ap.parse_args(argv)
    doc = json.loads(CATALOGUE.read_text(encoding="utf-8"))
    found = unmapped(doc, args.unmapped) if args.unmapped else groups(doc["entries"], args.how, args.cause)
    print(report(found, args.samples, args.summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
