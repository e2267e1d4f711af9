"""Pretraining checkpoints on disk, written: a checkpoint begun, its config and trainer state written, published,
pruned and removed, and a run's claim on its checkpoint folder. `mlmclm.store` reads them (what makes one complete,
which one a path asks for) and `mlmclm.paths` names their folders; the run's writer holds the folder's lock
(`mlmclm.locks`) meanwhile.

A checkpoint is written whole under its temporary name (`begin`), the accelerate state first, then `hf/`, then its
config (`write_config`) and `trainer_state.json` (`write_state`), and renamed to `step_NNNNNN` last (`publish`).
Anything else in a run's folder (a temporary folder, a damaged step folder) is no checkpoint: the run's writer
removes it (`clear_temporary`, `last_verified`), naming a damaged one, and trains its steps again.

A checkpoint folder is removed as it is written: renamed aside first (`.removed-step_NNNNNN.<pid>`, one atomic rename
in the same parent, out of every reader's sight), then deleted (`remove`), so a reader finds a checkpoint whole or
not at all, never half written or half deleted. Pruning (`prune`) removes periodic checkpoints only, never a named one
(the final checkpoint, the named steps, the one before the decay): named ones are what fine-tuning and later runs
read, periodic ones the resume points of the run's own writer. A named checkpoint is removed only by its run's writer,
under the folder's lock, when it is damaged or when the run is rewound to write a lost one again (`drop_after`; a
study reads what is lost under that lock, so it never rewinds a run another study run has just trained).

A run is its config, named by a hash of it (its *identity*, `runs.config_identity`; where its files go left out).
The folder's `run.json` names the run it belongs to, and each checkpoint's trainer state its run's identity. Before
a writer removes or writes anything in a folder it `claim`s it: a folder that belongs to another identity (by
`run.json`, or by any checkpoint's trainer state) is refused in one line naming both, so a run's checkpoints are
never deleted, overwritten or resumed by another run. A folder written before identities existed (no `run.json`, no
identity in its trainer states) is legacy: the first run that writes in it claims it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..errors import ConfigError
from ..fetch import sha256
from ..io import write_json, write_text
from ..paths import CONFIG, OWNER, REMOVED, STATE, TMP, removed_dir, step_dir, step_folders, step_of, tmp_dir
from ..store import checkpoint_steps, complete, damage, last, owner, read_state


def last_verified(root: str | Path) -> Path | None:
    """The run's last complete checkpoint, with it every one before it matching the hashes recorded when it was
    saved: from the first that does not (`first_damaged`, named in one line), every checkpoint is removed (the run's
    writer, before it resumes: their steps are trained again, which writes them again)."""
    if (bad := first_damaged(root)) is not None:
        path, fault = bad
        later = sum(s > step_of(path) for s in checkpoint_steps(root))
        print(f"{path}: damaged checkpoint ({fault}); removed{f' with the {later} after it' if later else ''}, "
              "its steps are trained again", flush=True)
        drop_after(root, step_of(path) - 1)
    return last(root)


def first_damaged(root: str | Path) -> tuple[Path, str] | None:
    """The run's first complete checkpoint whose files do not match the hashes recorded when it was saved, and what
    is wrong (`store.damage` with `verify`); None when every one matches."""
    for step in checkpoint_steps(root):
        if fault := damage(step_dir(root, step), verify=True):
            return step_dir(root, step), fault
    return None




# ---- writing, pruning ----
def begin(root: Path, step: int) -> Path:
    """An empty `tmp_dir(root, step)` to write the checkpoint after `step` into (what a killed writer left is
    dropped)."""
    tmp = tmp_dir(root, step)
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    return tmp


def write_config(path: Path, config: str) -> None:
    """Write into the checkpoint folder `path` the config that trained it (the run's config.yaml, whose text is its
    identity), so that a checkpoint copied elsewhere still describes itself (`run_record`). Before `write_state`,
    which records its sha256."""
    write_text(Path(path) / CONFIG, config)


def write_state(path: Path, state: dict) -> None:
    """Write a checkpoint's trainer state, with the sha256 of every file written before it: its *.safetensors files
    ("weights", which readers before "files" was recorded check) and every other one ("files")."""
    path = Path(path)
    written = sorted(p for p in path.rglob("*") if p.is_file() and p != path / STATE)
    weights = {str(p.relative_to(path)): sha256(p) for p in written if p.suffix == ".safetensors"}
    files = {str(p.relative_to(path)): sha256(p) for p in written if p.suffix != ".safetensors"}
    write_json(path / STATE, {**state, "weights": weights, "files": files})




# ---- whose checkpoints ----
def claim(root: str | Path, run: dict, write: bool = True, legacy: str | None = None) -> None:
    """Make `root` the checkpoint folder of `run` ({"identity", "run_id", "results"}) before anything in it is
    removed or written: a `ConfigError` naming both runs when it belongs to another identity (its `run.json`, or a
    complete checkpoint's trainer state, says so). `legacy`: the identity this run had before identities left out
    where its files go (`runs.legacy_identity`), as its folder may record it: equally the run's. A folder without
    `run.json` is claimed (written, when `write`)."""
    root = Path(root)
    mine = {run["identity"], legacy} - {None}
    theirs = owner(root)
    if not isinstance(theirs, dict) or not isinstance(theirs.get("identity"), str):
        if theirs is not None:
            raise ConfigError(f"{root / OWNER} does not name the run these checkpoints belong to; delete {root} to "
                              "start over")
        foreign = [p for p in step_folders(root) if complete(p) and read_state(p).get("identity") not in
                   {None, *mine}]
        theirs = {"identity": read_state(foreign[0])["identity"], "run_id": root.name,
                  "results": f"a run whose {foreign[0] / STATE} says so"} if foreign else None
    else:
        same = mine if theirs["identity"] in mine else {theirs["identity"]}  # a legacy run resumed: both its own
        stray = [p for p in step_folders(root) if complete(p) and read_state(p).get("identity") not in {None, *same}]
        if stray:
            raise ConfigError(f"{stray[0]} is a checkpoint of run identity {read_state(stray[0])['identity']}, not "
                              f"of {theirs['identity']} that {root / OWNER} names; remove it (or {root}) by hand")
    if theirs is not None and theirs["identity"] not in mine:
        raise ConfigError(f"{root} holds the checkpoints of run {theirs.get('run_id')!r} of identity "
                          f"{theirs['identity']} (results: {theirs.get('results')}), not of this run "
                          f"{run['run_id']!r} of identity {run['identity']} (results: {run['results']}); its config "
                          f"differs: choose another run_id or checkpoints_dir, or delete that folder to start over")
    if theirs is None and write:
        write_json(root / OWNER, run)


def clear_temporary(root: str | Path) -> None:
    """Remove the temporary folders of checkpoints whose writing was interrupted, those a killed remover left aside,
    and step folders damaged since they were written (each named in one line). The folder's writer only, under its
    lock: no other process writes or removes anything there meanwhile."""
    for stale in [*Path(root).glob(f"{TMP}step_*"), *Path(root).glob(f"{REMOVED}*")]:
        shutil.rmtree(stale, ignore_errors=True)
    for path in step_folders(root):
        if fault := damage(path):
            print(f"{path}: damaged checkpoint ({fault}); removed, its steps are trained again", flush=True)
            remove(path)


def withdraw(path: Path) -> Path | None:
    """Rename the checkpoint folder `path` aside for deletion, in one atomic rename in the same parent (None when
    there is none): from then on no reader finds it, whole or in part. (Not the setting aside of results,
    `mlmclm.evaluation.grid.set_result_aside`, which keeps a file on record under another name.)"""
    aside = removed_dir(path, os.getpid())
    shutil.rmtree(aside, ignore_errors=True)
    try:
        path.rename(aside)
    except FileNotFoundError:
        return None
    return aside


def remove(path: Path) -> None:
    """Delete the checkpoint folder `path` without a reader ever seeing it half deleted: renamed aside first
    (`withdraw`), then deleted."""
    if (aside := withdraw(Path(path))) is not None:
        shutil.rmtree(aside, ignore_errors=True)


def publish(root: Path, step: int) -> Path:
    """Rename the written `tmp_dir(root, step)` to its checkpoint folder. One of the same step is renamed aside first
    and deleted after: a reader finds the old checkpoint, none (between the two renames) or the new one, each whole."""
    final = step_dir(root, step)
    old = withdraw(final)
    tmp_dir(root, step).rename(final)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    return final


def prune(root: Path, named: set[int], keep_last: int) -> None:
    """Keep the named checkpoints and the last `keep_last` others. Only periodic checkpoints are pruned, those the
    run's writer resumes from; fine-tuning and later runs read named ones (the final one among them), which stay.
    Each pruned one is removed whole (`remove`): a reader that named it finds it whole or gone."""
    periodic = [s for s in checkpoint_steps(root) if s not in named]
    for s in periodic[:-keep_last]:
        remove(step_dir(root, s))


def drop_after(root: Path, step: int) -> None:
    """Remove every checkpoint after `step`, each whole (`remove`): a resume restarts from the last one before it.
    The folder's writer only, under its lock, for a run rewound to write a lost checkpoint again."""
    for s in checkpoint_steps(root):
        if s > step:
            remove(step_dir(root, s))

