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


def test_a_write_keeps_only_the_newest_files_of_its_kind(tmp_path, monkeypatch):
    """Every pack edit or upgrade names a new file: without pruning the folder only grows."""
    import os

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    folder = tmp_path / "vllm-triage"
    for i in range(cache.KEEP_PER_KIND + 3):
        cache.save(f"rules-{i:04d}.pickle", i)
        os.utime(folder / f"rules-{i:04d}.pickle", ns=(i * 10**9, i * 10**9))  # oldest first
    cache.save("hyperscan-0001.db", b"other kind")
    cache.save("rules-newest.pickle", "new")
    names = sorted(p.name for p in folder.iterdir())
    rules = [n for n in names if n.startswith("rules-")]
    assert len(rules) == cache.KEEP_PER_KIND and "rules-newest.pickle" in rules
    assert "rules-0000.pickle" not in rules and f"rules-{cache.KEEP_PER_KIND + 2:04d}.pickle" in rules
    assert "hyperscan-0001.db" in names  # another kind is left alone
    assert cache.load("rules-newest.pickle") == "new"
