"""Write triage/timeline/errno_table.py: every errno's name and its Linux text, from Python itself.

    python scripts/gen_errno_table.py            # rewrite the module
    python scripts/gen_errno_table.py --check    # exit 1 if the module differs from this output

The table is not typed by hand: CPython's `errno` module gives each number's name
(`errno.errorcode`) and `os.strerror` the C library's text for it, which is what Python prints
in `[Errno N] <text>` and Rust in `<text> (os error N)`. Generate it on Linux with glibc (vLLM
runs there); the module's header records the Python, platform and C library it came from, and
tests/timeline/test_errno_table.py holds the committed module to this script's output.
"""

from __future__ import annotations

import errno
import json
import os
import platform
import sys
from pathlib import Path

TARGET = Path(__file__).resolve().parent.parent / "triage" / "timeline" / "errno_table.py"


def provenance() -> str:
    libc, libc_version = platform.libc_ver()
    return (
        f"CPython {platform.python_version()}, {platform.system()} {platform.machine()}, "
        f"{libc or 'unknown libc'} {libc_version}".strip()
    )


def render() -> str:
    """The module's text: number -> name and number -> text, sorted by number."""
    numbers = sorted(errno.errorcode)
    lines = [
        '"""Every errno of this platform: its name and the text the C library gives it (generated: do not edit).',
        "",
        "Written by scripts/gen_errno_table.py from Python's `errno.errorcode` and `os.strerror`:",
        f"{provenance()}.",
        "Python prints these as `[Errno N] <text>`, Rust as `<text> (os error N)`, torch as `<text> (N)`.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "NAMES: dict[int, str] = {",
        *(f"    {n}: {json.dumps(errno.errorcode[n])}," for n in numbers),
        "}",
        "TEXTS: dict[int, str] = {",
        *(f"    {n}: {json.dumps(os.strerror(n))}," for n in numbers),
        "}",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    text = render()
    if "--check" in argv:
        same = TARGET.exists() and TARGET.read_text(encoding="utf-8") == text
        print("errno table current" if same else f"{TARGET} differs from this script's output ({provenance()})")
        return 0 if same else 1
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET} ({len(errno.errorcode)} errnos; {provenance()})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
