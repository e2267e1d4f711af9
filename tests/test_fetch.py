"""Fetching by package name: cached, hashed, with clear errors (a small real npm package; the registries are the
only network these machines have)."""

from pathlib import Path

import pytest

from mlmclm.errors import FetchError
from mlmclm.fetch import fetch


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


def test_pip_refusing_a_direct_url_dependency_falls_back_to_pip_25_0(tmp_path, monkeypatch):
    """pip >= 25.1 will not download bigbench==1.0.0 (`bleurt @ file://...`): fetch retries with pip 25.0.1."""
    import io
    import tarfile
    import zipfile

    from mlmclm import fetch as fetch_module

    calls = []

    def fake_run(cmd, cwd, what, tool=None):
        calls.append((cmd[1:3], cmd[-1]))
        dest = Path(cmd[cmd.index("-d") + 1])
        if cmd[-1] == "pip==25.0.1":  # the legacy pip itself: a wheel
            with zipfile.ZipFile(dest / "pip-25.0.1-py3-none-any.whl", "w") as z:
                z.writestr("pip/__main__.py", "")
        elif cmd[1] == "-m":
            raise FetchError(f"cannot fetch {what} with pip download: bigbench depends on bleurt @ file://x.zip")
        else:
            with tarfile.open(dest / "bigbench-1.0.0.tar.gz", "w:gz") as t:
                t.addfile(tarfile.TarInfo("bigbench-1.0.0/PKG-INFO"), io.BytesIO(b""))

    monkeypatch.setattr(fetch_module, "_run", fake_run)
    a = fetch("pypi", "bigbench", "1.0.0", cache=tmp_path)
    assert (a.root / "bigbench-1.0.0" / "PKG-INFO").is_file()
    assert calls[0] == (["-m", "pip"], "bigbench==1.0.0") and calls[1] == (["-m", "pip"], "pip==25.0.1")
    assert calls[2][0][0].endswith("pip-25.0.1-py3-none-any.whl/pip") and calls[2][1] == "bigbench==1.0.0"
