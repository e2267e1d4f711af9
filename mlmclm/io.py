"""Atomic writes and provenance: what every stored result and checkpoint goes through.

An interrupted job never leaves a half-written file: everything is written under a temporary name in the same folder
and renamed into place (`os.replace` is atomic on POSIX), a file's bytes flushed to disk (`fsync`) before the rename.
What is written gets the permissions of the user's umask, as any other tool's files (not the temporary files' 0600).
A temporary name holds its writer's process id (`.<name>.<pid>.<random>.tmp`): what a killed writer left is removed
by the next write of the same path, and a live writer's is left alone.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import glob
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

from .errors import ConfigError, ResultFileError

PACKAGE_ROOT = Path(__file__).resolve().parents[1]  # the folder holding the package: a checkout, or site-packages


def working_root() -> Path:
    """The folder every relative path resolves against (runs, checkpoints, data, figures, notebooks, and the folders a
    config names): `$MLMCLM_ROOT` when set; else the nearest folder at or above the working directory that holds
    `results/paper/` (a checkout, or a folder `mlmclm init` wrote), so a command run from a subfolder finds it; else
    the working directory. Never the package's folder: an installed wheel writes nothing into site-packages. Read
    once by each entrance (the command line, a public function given no root), which passes it down: no module keeps
    it, and nothing changes the working directory."""
    if os.environ.get("MLMCLM_ROOT"):
        return Path(os.environ["MLMCLM_ROOT"]).absolute()
    here = Path.cwd()
    return next((p for p in (here, *here.parents) if (p / "results" / "paper").is_dir()), here)


def cache_dir() -> Path:
    """Where downloads are cached (registry packages, converted weights): `$MLMCLM_CACHE`, else
    `$XDG_CACHE_HOME/mlmclm`, else `~/.cache/mlmclm`: one per user, shared by every checkout and working folder."""
    if os.environ.get("MLMCLM_CACHE"):
        return Path(os.environ["MLMCLM_CACHE"]).absolute()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mlmclm"


TRACKED_PACKAGES = ("mlmclm", "torch", "transformers", "tokenizers", "datasets", "accelerate", "kernels", "numpy")
_HUB_PART = r"\w(?:[\w.-]*\w)?"  # a hub owner's or name's rule: no '.' or '-' at either end (./x is a path)
HUB_ID = re.compile(rf"^{_HUB_PART}/{_HUB_PART}$")  # "owner/name": a hub id (a path that does not exist may be one)


@contextlib.contextmanager
def atomic_path(path: str | Path, is_dir: bool = False):
    """Yield a temporary path beside `path` (a file, or a folder when `is_dir`); on success, rename it to `path`
    (replacing what was there); on failure, remove it and leave `path` untouched."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    clear_leftovers(path)
    prefix = f".{path.name}.{os.getpid()}."
    if is_dir:
        tmp = Path(tempfile.mkdtemp(prefix=prefix, suffix=".tmp", dir=path.parent))
        os.chmod(tmp, 0o777 & ~umask())
    else:
        fd, name = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=path.parent)
        os.fchmod(fd, 0o666 & ~umask())
        os.close(fd)
        tmp = Path(name)
    try:
        yield tmp
        if not is_dir:
            with open(tmp, "rb+") as f:  # on disk before the rename: a crash leaves the old file or the new one
                os.fsync(f.fileno())
        if is_dir and path.exists():
            old = path.with_name(f".{path.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True) if is_dir else tmp.unlink(missing_ok=True)
        if isinstance(e, OSError) and disk_full(e):  # named by what was being written, not its temporary name
            raise OSError(e.errno, e.strerror, str(path)) from None
        raise


def clear_leftovers(path: str | Path) -> list[Path]:
    """Remove the temporary files and folders that writers of `path` killed before their rename left beside it
    (those whose process is gone; a name without a process id is from before ids were written). Returns them."""
    path = Path(path)
    removed = []
    for tmp in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        pid = tmp.name[len(path.name) + 2:].split(".")[0]
        if pid.isdigit() and _alive(int(pid)):
            continue
        shutil.rmtree(tmp, ignore_errors=True) if tmp.is_dir() else tmp.unlink(missing_ok=True)
        removed.append(tmp)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def umask() -> int:
    """The process's umask (read without changing it where /proc allows; threads may be writing files meanwhile)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def disk_full(e: BaseException) -> bool:
    """Whether `e` says the disk (or the user's quota) is full: an `OSError`'s errno, or the text that libraries
    which wrap it (safetensors, for one) carry."""
    return getattr(e, "errno", None) in (errno.ENOSPC, errno.EDQUOT) or any(
        text in str(e) for text in ("No space left on device", "StorageFull", "Disk quota exceeded"))


def missing_folders(folder: str | Path) -> list[Path]:
    """`folder` and those of its parents that do not exist yet, deepest first (what `mkdir(parents=True)` makes)."""
    folder = Path(folder).absolute()
    return [p for p in (folder, *folder.parents) if not p.exists()]


def remove_empty(folders) -> None:
    """Remove `folders` (deepest first) while they are empty: what a refused command created, it does not leave."""
    for folder in folders:
        try:
            Path(folder).rmdir()
        except OSError:  # not empty, or gone
            return


def check_writable(folder: str | Path, create: bool = True) -> None:
    """Check that files can be written in `folder`: with `create`, by writing a file there (creating the folder and
    its parents for it, removed again); with `create=False`, the nearest folder that exists must let one create it.
    Nothing is left behind. A `ConfigError` naming the folder otherwise, before any work, also for a name that is not
    valid UTF-8 (run records and lock files write it)."""
    folder = Path(folder)
    check_encodable(folder)
    try:
        existing = next(p for p in (folder.absolute(), *folder.absolute().parents) if p.exists())
        if not existing.is_dir():
            raise OSError(errno.ENOTDIR, f"{existing} is a file, not a folder")
        if not create:
            if not os.access(existing, os.W_OK | os.X_OK):
                raise OSError(errno.EACCES, f"{existing} is not a folder you can write in")
            return
        made = []
        try:
            for attempt in range(5):  # another process's check of the same new folder may remove it under ours
                made += [p for p in missing_folders(folder) if p not in made]
                try:
                    folder.mkdir(parents=True, exist_ok=True)
                    with tempfile.TemporaryFile(dir=folder):
                        break
                except FileNotFoundError:
                    if attempt == 4:
                        raise
        finally:
            remove_empty(made)
    except OSError as e:
        raise ConfigError(f"cannot write in {folder}: {e.strerror or e}; choose a folder you can write to") from None


def check_encodable(path: str | Path) -> None:
    """A `ConfigError` for a path whose name is not valid UTF-8 (a byte the file system kept, Python could not read)."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        shown = str(path).encode("utf-8", "backslashreplace").decode()
        raise ConfigError(f"{shown}: not valid UTF-8 (a path's name is written into run records and lock files); "
                          "choose a name that is") from None


def read_json(path: str | Path):
    """A JSON file's content; a file that cannot be read or parsed is a `ResultFileError` naming it."""
    path = Path(path)
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ResultFileError(f"{path}: not valid JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ResultFileError(f"{path}: cannot be read ({e})") from None


def load_result(path: str | Path) -> dict:
    """A fine-tuning `results.json`, checked for what every reader needs: a JSON object whose `validation` and `test`
    objects hold a `score` in [0, 1], and a `meta` object when there is one. Anything else is a `ResultFileError`
    naming the file and the fault."""
    doc = read_json(path)
    if not isinstance(doc, dict):
        raise ResultFileError(f"{path}: expected a JSON object with 'validation' and 'test', got {type(doc).__name__}")
    if "meta" in doc and not isinstance(doc["meta"], dict):
        raise ResultFileError(f"{path}: 'meta' must be an object, got {type(doc['meta']).__name__}")
    for split in ("validation", "test"):
        block = doc.get(split)
        if not isinstance(block, dict):
            raise ResultFileError(f"{path}: no '{split}' object")
        if "score" not in block:
            raise ResultFileError(f"{path}: '{split}' has no 'score'")
        score = block["score"]
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not 0 <= score <= 1:
            raise ResultFileError(f"{path}: {split}.score is {score!r}, expected a number in [0, 1]")
    return doc


def write_text(path: str | Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def write_json(path: str | Path, obj) -> None:
    write_text(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")


@functools.cache
def git_commit(root: Path = PACKAGE_ROOT) -> str | None:
    """The commit of the code's working tree, with `-dirty` when its code has uncommitted changes (what runs write under
    results/ and figures/ does not count); None outside a checkout (an installed package has no commit). Read once a
    process (the command line reads it as it starts): a long run records the code it loaded, not where the checkout
    has moved since."""
    if not (Path(root) / "pyproject.toml").is_file():
        return None
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


def launched() -> bool:
    """Whether this process is one of several of a launch (`accelerate launch`, torchrun: each process's WORLD_SIZE)."""
    return int(os.environ.get("WORLD_SIZE") or 1) > 1


def provenance(**extra) -> dict:
    """Commit, package versions and hardware, plus whatever the caller adds (attention backend, wall time...)."""
    return {"commit": git_commit(), "versions": versions(), "hardware": hardware(), **extra}


def repo_relative(path: str | Path, root: Path) -> str:
    """A path as configs and results name it: relative to the working root `root` when inside it (a clone elsewhere
    reads the same; a symlinked data/ inside stays data/), else absolute."""
    for candidate in (Path(path).absolute(), Path(path).resolve()):
        try:
            return str(candidate.relative_to(root))
        except ValueError:
            pass
    return str(Path(path).resolve())


def shown(path: str | Path) -> str:
    """A path as a command prints it to whoever ran it: relative to the working directory when inside it, else
    absolute, so that it can be pasted where they stand (records name paths by `repo_relative` instead)."""
    here = Path.cwd()
    for candidate in (Path(path).absolute(), Path(path).resolve()):
        with contextlib.suppress(ValueError):
            return str(candidate.relative_to(here)) if candidate != here else "."
    return str(Path(path).absolute())


def quoted(value) -> str:
    """A value read from a record, as a line of a message shows it (JSON, cut short)."""
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def typed_path(text: str | None, root: Path) -> str | None:
    """A folder typed on the command line (read from the working directory, as any command reads a path) as a config
    names it: relative to the working root `root` when inside it, else absolute (`repo_relative`)."""
    return None if text is None else repo_relative(Path(text), root)


def lr_text(lr: float) -> str:
    """A learning rate as run folders spell it: one significant digit where that is exact (`1e-03`), else the
    fewest digits that give it back (`1.5e-03`), so that two learning rates never share a folder."""
    for digits in range(17):
        if float(text := f"{lr:.{digits}e}") == lr:
            return text
    return repr(lr)
