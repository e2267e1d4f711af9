"""Fetching by package name: cached, hashed, with clear errors (a small real npm package; the registries are the
only network these machines have)."""

import pytest

from mlmclm.fetch import FetchError, fetch


def test_fetch_npm_is_cached_and_hashed(tmp_path):
    a = fetch("npm", "is-number", "7.0.0", cache=tmp_path)
    assert (a.root / "package" / "package.json").is_file() and len(a.sha256) == 64
    stamp = (a.root.parent / ".complete").stat().st_mtime_ns
    b = fetch("npm", "is-number", "7.0.0", cache=tmp_path)
    assert b == a and (b.root.parent / ".complete").stat().st_mtime_ns == stamp
    assert a.manifest()["package"] == "is-number"


def test_fetch_errors_name_the_package_and_tool(tmp_path, monkeypatch):
    with pytest.raises(FetchError, match="unknown package kind 'cran'"):
        fetch("cran", "x", cache=tmp_path)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(FetchError, match="cannot fetch npm package is-number==7.0.0: the tool 'npm pack' is not"):
        fetch("npm", "is-number", "7.0.0", cache=tmp_path / "other")
    assert not (tmp_path / "other" / "npm" / "is-number-7.0.0").exists()
