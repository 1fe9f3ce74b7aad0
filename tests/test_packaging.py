"""The wheel holds every folder of the package, named in pyproject.toml (else setuptools warns
that a folder "is absent from the `packages` configuration" and may drop it one day)."""

from __future__ import annotations

import sys

from conftest import ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def test_every_folder_of_the_package_is_listed():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    listed = set(config["packages"])
    folders = {
        ".".join(d.relative_to(ROOT).parts)
        for d in (ROOT / "triage").rglob("*")
        if d.is_dir() and d.name != "__pycache__" and any(f.is_file() for f in d.iterdir())
    }
    assert folders - listed == set(), "add these to [tool.setuptools] packages"
    data = config["package-data"]
    assert all(pkg in listed for pkg in data)
    static = ROOT / "triage" / "apps" / "serve" / "static"
    patterns = data["triage.apps.serve.static"]
    assert all(any(f.match(p) for p in patterns) for f in static.iterdir() if f.is_file())
