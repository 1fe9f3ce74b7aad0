"""Sizes and rounding: the arithmetic every figure in a report rests on."""

import pytest

from triage.units import GiB, MiB, gib, parse_size, round_down, round_up


@pytest.mark.parametrize(
    "text,expected",
    [
        ("1.96 GiB", round(1.96 * GiB)),
        ("14.99GiB", round(14.99 * GiB)),  # V0 prints no space
        ("512.00 MiB", 512 * MiB),
        ("0 bytes", 0),
        ("1024 bytes", 1024),
        ("14.9889 GB", round(14.9889 * GiB)),  # vLLM's "GB" is GiB
        ("-0.94GiB", -round(0.94 * GiB)),  # a budget overdrawn prints negative
        ("139.75 MiB", round(139.75 * MiB)),
        ("2.00 KiB", 2048),
        ("0.26Gib", round(0.26 * GiB)),  # the 0.6.4 typo
    ],
)
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("bad", ["", "GiB", "1e999 GiB", "12 parsecs", "1" + "0" * 30 + " GiB"])
def test_parse_size_refuses_nonsense(bad):
    with pytest.raises(ValueError):
        parse_size(bad)


def test_round_down_never_rounds_up():
    assert round_down(22537.5, 16) == 22528
    assert round_down(22528, 16) == 22528
    assert round_down(0.8799999, 0.01) == 0.87
    assert round_down(0.88, 0.01) == 0.88  # exact values survive float noise
    assert round_down(7760, 16) == 7760


def test_round_up():
    assert round_up(0.9212, 0.01) == 0.93
    assert round_up(0.92, 0.01) == 0.92


def test_gib_prints_vllm_units():
    assert gib(8.3 * GiB) == "8.30 GiB"
    assert gib(None) == "?"
