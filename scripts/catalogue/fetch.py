"""Stage 1a (network): download wheels and keep only their Python sources.

Maintainer tooling, never run by users or tests.  For each release it runs
``pip download PKG==X --no-deps``, copies the ``.py`` files under the package's
top-level directory out of the wheel into ``CACHE/PKG/X/`` and deletes the
wheel at once (vLLM wheels are 200-400 MB; the sources are a few MB).

    python scripts/catalogue/fetch.py --cache /tmp/catalogue-src
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

# One release per minor (the last patch of each), 0.6 .. 0.33: what users run; and the older
# V0 releases still deployed (0.4.3, 0.5.5, 0.6.1.post2, 0.6.3.post1), oldest first.
VLLM_RELEASES = [
    "0.4.3",
    "0.5.5",
    "0.6.1.post2",
    "0.6.3.post1",
    "0.6.6.post1",
    "0.7.3",
    "0.8.5.post1",
    "0.9.2",
    "0.10.2",
    "0.11.2",
    "0.12.0",
    "0.13.0",
    "0.14.1",
    "0.15.1",
    "0.16.0",
    "0.17.1",
    "0.18.1",
    "0.19.1",
    "0.20.2",
    "0.21.0",
    "0.22.1",
    "0.23.0",
    "0.24.0",
    "0.25.1",
    "0.26.0",
    "0.27.1",
    "0.28.0",
    "0.29.0",
    "0.30.0",
    "0.31.0",
    "0.32.0",
    "0.33.0",
]

# The layers under vLLM that fail at start-up: one recent release of each.
LAYERS = {
    "huggingface_hub": "2.4.0",
    "transformers": "5.25.0",
    "safetensors": "0.8.0",
    "torch": "2.14.1",
    "triton": "3.9.0",  # the kernels' JIT compiler: vLLM compiles Triton kernels while it warms up
}

# Top-level directories kept from each wheel.
TOP_DIRS = {
    "vllm": "vllm/",
    "huggingface_hub": "huggingface_hub/",
    "transformers": "transformers/",
    "safetensors": "safetensors/",
    "torch": "torch/",
    "triton": "triton/",
}


def fetch(package: str, version: str, cache: Path) -> Path:
    """Download one wheel, keep its ``.py`` sources, delete it; return the source dir."""
    dest = cache / package / version
    if (dest / ".done").exists():
        return dest
    with tempfile.TemporaryDirectory(prefix="catwheel-") as tmp:
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "download",
            f"{package}=={version}",
            "--no-deps",
            "--only-binary=:all:",
            "-q",
            "-d",
            tmp,
        ]
        subprocess.run(cmd, check=True)
        wheels = sorted(Path(tmp).glob("*.whl"))
        if not wheels:
            raise SystemExit(f"no wheel for {package}=={version}")
        with zipfile.ZipFile(wheels[0]) as zf:
            for name in zf.namelist():
                if name.startswith(TOP_DIRS[package]) and name.endswith(".py"):
                    target = dest / name
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(zf.read(name))
        wheels[0].unlink()
    (dest / ".done").write_text("ok\n")
    return dest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", type=Path, required=True)
    ap.add_argument("--only", nargs="*", help="PKG==VERSION items instead of the default set")
    args = ap.parse_args(argv)
    items = (
        [tuple(s.split("==")) for s in args.only]
        if args.only
        else ([("vllm", v) for v in VLLM_RELEASES] + list(LAYERS.items()))
    )
    for package, version in items:
        print(f"{package} {version}: {fetch(package, version, args.cache)}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
