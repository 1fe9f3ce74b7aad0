"""The on-disk cache: keys follow their files, names follow their contents, values come back."""

from __future__ import annotations

from triage import cache


def test_a_stamp_follows_the_files_size_and_is_none_for_a_missing_file(tmp_path):
    pack = tmp_path / "pack.yaml"
    pack.write_text("rules: []\n")
    first = cache.stamp([pack], "rules")
    assert first == cache.stamp([pack], "rules")
    pack.write_text("rules: [] # edited\n")
    assert cache.stamp([pack], "rules") != first
    assert cache.stamp([pack], "other") != cache.stamp([pack], "rules")
    assert cache.stamp([tmp_path / "missing.yaml"]) is None


def test_content_names_differ_with_their_parts():
    one = cache.content_name("db", [b"alpha", b"beta"], ".db")
    assert one == cache.content_name("db", [b"alpha", b"beta"], ".db")
    assert one != cache.content_name("db", [b"alpha", b"gamma"], ".db")
    assert one != cache.content_name("db", [b"alphab", b"eta"], ".db")
    assert one.startswith("db-") and one.endswith(".db")


def test_a_saved_value_loads_back_and_a_missing_one_is_none(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    cache.save("thing.pickle", {"rules": [1, 2, 3]})
    assert cache.load("thing.pickle") == {"rules": [1, 2, 3]}
    assert cache.load("absent.pickle") is None
