"""The container and the Kubernetes manifests: a versioned image, a numeric non-root user."""

from __future__ import annotations

import re

import yaml
from conftest import ROOT

from triage import __version__


def _container() -> dict:
    deployment = yaml.safe_load((ROOT / "deploy" / "deployment.yaml").read_text(encoding="utf-8"))
    return deployment["spec"]["template"]["spec"]["containers"][0], deployment["spec"]["template"]["spec"]


def test_the_deployment_pins_a_version_not_latest():
    container, _ = _container()
    name, _, tag = container["image"].rpartition(":")
    assert name and tag == __version__, container["image"]
    for path in (ROOT / "Dockerfile", *(ROOT / "deploy").glob("*.yaml")):
        assert "vllm-triage:latest" not in path.read_text(encoding="utf-8"), path


def test_the_image_user_is_numeric_and_the_one_the_pod_runs_as():
    dockerfile = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    users = re.findall(r"^USER\s+(\S+)", dockerfile, flags=re.M)
    assert users and re.fullmatch(r"\d+(:\d+)?", users[-1]), users
    _, pod = _container()
    assert int(users[-1].split(":")[0]) == pod["securityContext"]["runAsUser"] != 0
