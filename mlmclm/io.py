"""Atomic writes and provenance: what every stored result and checkpoint goes through.

An interrupted job never leaves a half-written file: everything is written under a temporary name in the same folder
and renamed into place (`os.replace` is atomic on POSIX).
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRACKED_PACKAGES = ("mlmclm", "torch", "transformers", "tokenizers", "datasets", "accelerate", "kernels", "numpy")


@contextlib.contextmanager
def atomic_path(path: str | Path, is_dir: bool = False):
    """Yield a temporary path beside `path` (a file, or a folder when `is_dir`); on success, rename it to `path`
    (replacing what was there); on failure, remove it and leave `path` untouched."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if is_dir:
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    else:
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        tmp = Path(name)
    try:
        yield tmp
        if is_dir and path.exists():
            old = path.with_name(f".{path.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True) if is_dir else tmp.unlink(missing_ok=True)
        raise


def write_text(path: str | Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def write_json(path: str | Path, obj) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")


def git_commit(root: Path = ROOT) -> str | None:
    """The commit of the working tree, with `-dirty` when its code has uncommitted changes (what runs write under
    results/ and figures/ does not count); None outside git."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                                timeout=10).stdout.strip()
        if not commit:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
                                ":(exclude)results", ":(exclude)figures"], cwd=root,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return commit + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


def hardware() -> dict:
    import torch

    info = {"platform": platform.platform(), "machine": platform.machine(), "cpu_count": os.cpu_count(),
            "torch_threads": torch.get_num_threads()}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
        info["gpu_count"] = torch.cuda.device_count()
    return info


def versions() -> dict:
    out = {"python": sys.version.split()[0]}
    for name in TRACKED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def provenance(**extra) -> dict:
    """Commit, package versions and hardware, plus whatever the caller adds (attention backend, wall time...)."""
    return {"commit": git_commit(), "versions": versions(), "hardware": hardware(), **extra}


def repo_relative(path: str | Path) -> str:
    """A path as configs and results name it: relative to the repository when inside it (a clone elsewhere reads the
    same; a symlinked data/ inside stays data/), else absolute."""
    for candidate in (Path(path).absolute(), Path(path).resolve()):
        try:
            return str(candidate.relative_to(ROOT))
        except ValueError:
            pass
    return str(Path(path).resolve())
