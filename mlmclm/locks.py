"""One writer at a time in a folder: the lock of a run folder, a checkpoint folder or a data cache.

    with locks.hold(run_dir):
        ...  # check what is done, then write

`hold` takes an exclusive `fcntl.flock` on `<folder>/.lock`, a file that names its holder (pid and command). The
kernel releases a flock when the holder ends, however it ends (SIGKILL included), so a lock is never left stale: the
file a killed process leaves behind is taken over at once. A second process waits for the holder and says once, in
one line, which process it waits for; what the first one wrote is then there for it to find complete. A folder that
holds nothing but the lock when it is released is removed with it, and so are the parents made for it that are left
empty (a refused command leaves no folder behind). Forked workers share their parent's lock (they write for it). A
process that already holds a folder's lock takes it again freely.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
from pathlib import Path

from .io import check_writable, missing_folders, remove_empty

LOCK = ".lock"
_HELD: dict[Path, int] = {}  # folder -> how many nested `hold`s of this process


def holder(folder: str | Path) -> str:
    """Who holds (or last held) the lock of `folder`, as its lock file says: "process PID (COMMAND)"."""
    try:
        pid, _, command = (Path(folder) / LOCK).read_text().strip().partition(" ")
    except OSError:
        return "another process"
    return f"process {pid} ({command})" if pid else "another process"


@contextlib.contextmanager
def hold(folder: str | Path):
    """Hold the lock of `folder` (created, with its parents, when missing) for the duration of the block."""
    folder = Path(folder).absolute()
    if folder in _HELD:
        _HELD[folder] += 1
        try:
            yield
        finally:
            _HELD[folder] -= 1
        return
    made = [p for p in missing_folders(folder) if p != folder]  # its parents that this lock creates
    check_writable(folder)
    path = folder / LOCK
    fd = _acquire(folder, path)
    _HELD[folder] = 1
    try:
        yield
    finally:
        del _HELD[folder]
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # while still held: a waiter that opened this file sees it gone and takes a new one
        remove_empty([folder, *made])  # a folder that only held the lock (work refused before any write) is not
        os.close(fd)                    # left behind, nor the parents made for it


def busy(folder: str | Path) -> str | None:
    """Who is writing `folder` now (`holder`), or None where no other process holds its lock: a reader leaves out
    what is being written rather than read it half-done (a brief shared lock, never waited for)."""
    folder = Path(folder).absolute()
    if folder in _HELD:  # this process writes it
        return None
    try:
        fd = os.open(folder / LOCK, os.O_RDONLY)
    except OSError:  # no lock file: nobody writes it
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return holder(folder)
    finally:
        os.close(fd)  # releases the shared lock where it was taken
    return None


def _acquire(folder: Path, path: Path) -> int:
    told = False
    while True:
        folder.mkdir(parents=True, exist_ok=True)  # again: its last holder may have removed it, empty
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not told:
                print(f"mlmclm: waiting for {holder(folder)}, which is writing {folder}", file=sys.stderr, flush=True)
                told = True
            fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            current = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            current = False
        if current:  # else its holder removed it on release: lock the file that stands there now
            break
        os.close(fd)
    os.ftruncate(fd, 0)
    name = Path(sys.argv[0]).name
    name = "mlmclm" if name in ("cli.py", "__main__.py") else name
    os.write(fd, f"{os.getpid()} {' '.join([name, *sys.argv[1:]])}\n".encode())
    return fd
