"""Print (or check) the README's table of rules, generated from the rule packs themselves.

python scripts/rules_table.py          # print the table
python scripts/rules_table.py --check  # exit 1 when README.md's table is out of date
python scripts/rules_table.py --write  # rewrite the table in README.md
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- rules-table:begin -->", "<!-- rules-table:end -->"


def table() -> str:
    sys.path.insert(0, str(ROOT))
    from triage.pipeline import load_rules

    # One pack per cause: the cause names its pack, `rules/<cause>.yaml` (the error catalogue's signs: one pack).
    rows = [
        "| cause (pack `rules/<cause>.yaml`; `catalogue-*` rules: `rules/catalogue.yaml`) | rule | what it says |",
        "|---|---|---|",
    ]
    for rule in sorted(load_rules(), key=lambda r: (r.cause, r.id)):
        rows.append(f"| `{rule.cause}` | `{rule.id}` | {rule.title} |")
    return "\n".join(rows)


def main() -> int:
    text = table()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    if "--write" in sys.argv:
        head, rest = readme.split(BEGIN, 1)
        tail = rest.split(END, 1)[1]
        (ROOT / "README.md").write_text(f"{head}{BEGIN}\n{text}\n{END}{tail}", encoding="utf-8")
        return 0
    if "--check" not in sys.argv:
        print(text)
        return 0
    current = readme.split(BEGIN, 1)[1].split(END, 1)[0].strip() if BEGIN in readme else ""
    if current != text:
        print("README.md's rule table is out of date: run python scripts/rules_table.py and paste it", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
