"""Pretraining checkpoints on disk: the one module that knows their layout, what makes one complete, and how to find,
read, publish and prune them.

    <checkpoints_dir>/<scale>/<run_id>/          a run's checkpoints (`run_root`)
        run.json                                 the run they belong to: identity, run id, results folder (`claim`)
        step_NNNNNN/                             the checkpoint after step N (six digits, zero-padded: `step_dir`)
            model.safetensors, optimizer.bin,    accelerate state (model, optimizer, RNG): what a resume loads;
            random_states_*.pkl                  under FSDP (SHARDED_STATE_DICT) pytorch_model_fsdp_0/ and
                                                 optimizer_0/, each process's shard (*.distcp) and a .metadata
            trainer_state.json                   step, objective, lr, tokens_seen, wall_time_s, named, the run's
                                                 identity, the sha256 of every *.safetensors ("weights") and of
                                                 every other file of the folder ("files"; `read_state`)
            hf/                                  the model and tokenizer in transformers format (`hf_dir`)
        .tmp-step_NNNNNN/                        a checkpoint being written (`tmp_dir`)
        .removed-step_NNNNNN.<pid>/              a checkpoint being deleted (`remove`)

A checkpoint is written whole under its temporary name, the accelerate state first, then `hf/`, then
`trainer_state.json`, and renamed to `step_NNNNNN` last (`publish`), so a `step_NNNNNN` folder is whole unless it was
damaged afterwards. A checkpoint is *complete* (`complete`) when its folder holds a `trainer_state.json` that parses
with its step, an `hf/config.json` and `hf/model.safetensors` (or its shards' index), and every weights file it
records (or, in a checkpoint written before weights were recorded, every one present) is a whole safetensors file:
its header parses and the file has the size the header gives, and every other file it records is there. With
`verify=True` every recorded file's sha256 must also be the one recorded at save time: what loading a checkpoint
(resume, `init.kind=run`, the studies' fine-tuning) asks; so every file a resume reads (the model, optimizer and RNG
states, under FSDP each process's shard) is checked before it is loaded. Every
reader counts complete checkpoints only: resuming a run, `init.kind=run`, fine-tuning a run's checkpoint, the
studies' bookkeeping of what is on disk, pruning and rewinding. Anything else in a run's folder (a temporary folder, a
damaged step folder) is no checkpoint: the run's writer removes it (`clear_temporary`, `last_verified`), naming a
damaged one, and trains its steps again. The writer holds the folder's lock (`mlmclm.locks`) meanwhile.

A checkpoint folder is removed as it is written: renamed aside first (`.removed-step_NNNNNN.<pid>`, one atomic rename
in the same parent, out of every reader's sight), then deleted (`remove`), so a reader finds a checkpoint whole or
not at all, never half written or half deleted. Pruning (`prune`) removes periodic checkpoints only, never a named one
(the final checkpoint, the named steps, the one before the decay): named ones are what fine-tuning and later runs
read, periodic ones the resume points of the run's own writer. A named checkpoint is removed only by its run's writer,
under the folder's lock, when it is damaged or when the run is rewound to write a lost one again (`drop_after`; a
study reads what is lost under that lock, so it never rewinds a run another study run has just trained).

Which checkpoint a path asks for (`requested`): a step folder (or its `hf/`), that step; a run's checkpoint folder,
its *final* checkpoint (`final_step`: the total of the phases in its run's record, `run_record`: the config.yaml of
the results folder its `run.json` names, else the one its step folders hold, else its highest step folder). A reader gets that checkpoint or a refusal in one line (`unreadable`: damaged,
being trained, or not on disk, with the command that writes it again), never an earlier one in its place.

A run is its resolved config, named by a hash of it (its *identity*, `pretrain.identity`). The folder's `run.json`
names the run it belongs to, and each checkpoint's trainer state its run's identity. Before a writer removes or
writes anything in a folder it `claim`s it: a folder that belongs to another identity (by `run.json`, or by any
checkpoint's trainer state) is refused in one line naming both, so a run's checkpoints are never deleted, overwritten
or resumed by another run. A folder written before identities existed (no `run.json`, no identity in its trainer
states) is legacy: the first run that writes in it claims it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

from .. import locks
from ..errors import ConfigError, ResultFileError
from ..fetch import sha256
from ..io import read_json, working_root, write_json, write_text
from ..runs import CONFIG, Record, read_record, run_folder

STATE = "trainer_state.json"
HF = "hf"
OWNER = "run.json"
WEIGHTS = "model.safetensors"
REMOVED = ".removed-"  # a checkpoint folder renamed aside to be deleted (`remove`)
_STEP = re.compile(r"step_(\d+)")


# ---- the layout ----
def run_root(checkpoints_dir: str | Path, scale: str, run_id: str) -> Path:
    """The folder of a run's checkpoints (`runs.run_folder`)."""
    return run_folder(checkpoints_dir, scale, run_id)


def step_dir(root: Path, step: int) -> Path:
    """The checkpoint after `step` in the run folder `root`."""
    return Path(root) / f"step_{step:06d}"


def tmp_dir(root: Path, step: int) -> Path:
    """Where the checkpoint after `step` is written before `publish` renames it."""
    return Path(root) / f".tmp-step_{step:06d}"


def hf_dir(path: Path) -> Path:
    """A checkpoint's model and tokenizer in transformers format."""
    return Path(path) / HF


def step_of(path: str | Path) -> int | None:
    """The step a folder named `step_N` stands for; None for any other name."""
    m = _STEP.fullmatch(Path(path).name)
    return int(m[1]) if m else None


# ---- what a checkpoint is ----
def complete(path: str | Path, verify: bool = False) -> bool:
    """Whether `path` holds a complete checkpoint (see the module's docstring); `verify`: its weights' hashes too."""
    return damage(path, verify) is None


def damage(path: str | Path, verify: bool = False) -> str | None:
    """What makes `path` no complete checkpoint (None when it is one); `verify`: every recorded file's sha256 too."""
    path = Path(path)
    if not (hf_dir(path) / "config.json").is_file():
        return f"no {HF}/config.json"
    if not any((hf_dir(path) / name).is_file() for name in (WEIGHTS, f"{WEIGHTS}.index.json")):  # whole or sharded
        return f"no {HF}/{WEIGHTS}"
    try:
        state = read_json(path / STATE)
    except ResultFileError as e:
        return f"{STATE}: {str(e).removeprefix(f'{path / STATE}: ')}"
    if not isinstance(state, dict) or not isinstance(state.get("step"), int):
        return f"{STATE} has no step"
    recorded = state.get("weights")
    if recorded is None:  # written before weights were recorded: the files present, by header and size
        recorded = {str(p.relative_to(path)): None for p in sorted(path.rglob("*.safetensors"))}
    if not isinstance(recorded, dict):
        return f"{STATE}: 'weights' is not a mapping of files to hashes"
    for name, digest in recorded.items():
        if fault := safetensors_fault(path / name):
            return f"{name}: {fault}"
        if verify and digest is not None and sha256(path / name) != digest:
            return f"{name}: its sha256 is not the one recorded when it was saved"
    others = state.get("files", {})  # absent in checkpoints written before every file was recorded
    if not isinstance(others, dict):
        return f"{STATE}: 'files' is not a mapping of files to hashes"
    for name, digest in others.items():
        if not (path / name).is_file():
            return f"{name}: missing"
        if verify and sha256(path / name) != digest:
            return f"{name}: its sha256 is not the one recorded when it was saved"
    return None


def safetensors_fault(path: str | Path) -> str | None:
    """What makes `path` no whole safetensors file (None when it is one): a missing file, a header that does not
    parse, or a size other than the header's (a file cut short, or with bytes after its data)."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, 2)
            f.seek(0)
            if size < 8:
                return f"{size} bytes, shorter than a safetensors header"
            n = int.from_bytes(f.read(8), "little")
            if 8 + n > size:
                return f"{size} bytes, cut short inside its {n}-byte header"
            header = json.loads(f.read(n))
    except FileNotFoundError:
        return "missing"
    except OSError as e:
        return f"cannot be read ({e.strerror or e})"
    except (UnicodeDecodeError, json.JSONDecodeError):
        return "its safetensors header does not parse"
    try:
        end = max((int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"), default=0)
    except (AttributeError, KeyError, IndexError, TypeError, ValueError):
        return "its safetensors header does not parse"
    if 8 + n + end != size:
        return f"{size} bytes, its header says {8 + n + end}"
    return None


def checkpoint_steps(root: str | Path) -> list[int]:
    """The steps of the complete checkpoints in the run folder `root`, in order (none when it does not exist)."""
    steps = ((step_of(p), p) for p in Path(root).glob("step_*"))
    return sorted(step for step, p in steps if step is not None and complete(p))


def last(root: str | Path) -> Path | None:
    """The run's last complete checkpoint, if any."""
    steps = checkpoint_steps(root)
    return step_dir(root, steps[-1]) if steps else None


def last_verified(root: str | Path) -> Path | None:
    """The run's last complete checkpoint whose weights match their recorded hashes; later ones that do not are
    named and removed (the run's writer, before it resumes: their steps are trained again)."""
    while (path := last(root)) is not None and (fault := damage(path, verify=True)):
        print(f"{path}: damaged checkpoint ({fault}); removed, its steps are trained again", flush=True)
        remove(path)
    return path


def read_state(path: Path) -> dict:
    """A checkpoint's trainer state (step, objective, lr, tokens_seen, wall_time_s, named)."""
    return read_json(Path(path) / STATE)


def find_checkpoint(path: str | Path, step: int | None = None) -> Path:
    """A run's checkpoint folder at `step`. `path` is a run's checkpoint folder or a step; without `step`, the
    checkpoint it asks for (`requested`: a run folder's final one), or a one-line `ConfigError` when that one cannot be
    read (`unreadable`), never an earlier one in its place."""
    path = Path(path)
    found = requested(path) if step is None else None
    if found is not None:
        if fault := unreadable(*found):
            raise ConfigError(fault)
        return step_dir(*found)
    steps = checkpoint_steps(path)
    if not steps:
        raise ConfigError(f"init.path={str(path)!r} holds no checkpoint (expected step_NNNNNN folders)")
    if step not in steps:
        raise ConfigError(f"{path} has no checkpoint at step {step}; it has steps {', '.join(map(str, steps))}")
    return step_dir(path, step)


def requested(path: str | Path) -> tuple[Path, int] | None:
    """(the run folder, the step) of the checkpoint `path` asks for: a `step_NNNNNN` folder or its `hf/`, that step; a
    run's checkpoint folder (one with step folders or a run.json), its final checkpoint (`final_step`), whether or not
    it is on disk. None for any other path."""
    path = Path(path)
    if path.name == HF and step_of(path.parent) is not None:
        path = path.parent
    if step_of(path) is not None:
        return path.parent, step_of(path)
    step = final_step(path) if path.is_dir() else None
    return (path, step) if step is not None else None


def final_step(root: str | Path) -> int | None:
    """The step of the final checkpoint of the run whose checkpoint folder is `root`: the total of the phases in its
    record (`run_record`); without one that reads, its highest step folder, complete or not. None: neither."""
    try:
        record = run_record(root)
    except ResultFileError:  # a damaged or edited record: what is on disk
        record = None
    if record is not None and record.final_step is not None:
        return record.final_step
    steps = [step_of(p) for p in Path(root).glob("step_*")]
    return max((s for s in steps if s is not None), default=None)


def run_record(root: str | Path, step: Path | None = None) -> Record | None:
    """The record of the run whose checkpoint folder is `root` (`runs.read_record`): in the results folder its
    `run.json` names (`recorded_results`: a relative one under the working root, `io.working_root()`); where that is
    absent (a checkpoint copied elsewhere), in the step folder `step`, else the newest step folder that holds one
    (each checkpoint holds the config.yaml that trained it). None: neither (checkpoints saved before they held their
    config, and no results folder). A record that does not read whole is a one-line `ResultFileError`."""
    results = recorded_results(root)
    record = read_record(working_root() / results) if results else None
    if record is None:
        folders = [step] if step is not None else sorted(Path(root).glob("step_*"), reverse=True)
        record = next((r for r in map(read_record, folders) if r is not None), None)
    return record


def recorded_results(root: str | Path) -> str | None:
    """The results folder that the `run.json` of the checkpoint folder `root` names (a relative one: under the working
    root); None where it names none or does not parse."""
    try:
        run = owner(root)
    except ResultFileError:
        return None
    results = run.get("results") if isinstance(run, dict) else None
    return results if isinstance(results, str) else None


def repair_command(root: str | Path) -> str:
    """The command that writes the run's checkpoints again: its pretraining, from its recorded config.yaml."""
    results = recorded_results(root)
    return f"mlmclm pretrain {results}/config.yaml" if results else "mlmclm pretrain <the run's config.yaml>"


def unreadable(root: str | Path, step: int, verify: bool = False) -> str | None:
    """Why the checkpoint of the run folder `root` at `step` cannot be read, in one line that says what to do (None
    when it can be; `verify`: its weights' hashes too): damaged, being trained, or not on disk."""
    path = step_dir(root, step)
    if path.exists():
        fault = damage(path, verify)
        return fault and (f"{path}: damaged checkpoint ({fault}); write it again by re-running its run's pretraining: "
                          f"{repair_command(root)}")
    if writer := locks.busy(root):
        return f"{path} is not written yet: {writer} is training its run; wait for it to finish"
    steps = ", ".join(map(str, checkpoint_steps(root))) or "none"
    return (f"{path} does not exist (complete checkpoints of the run: steps {steps}); write it by re-running its "
            f"run's pretraining: {repair_command(root)}")


def pretrained_model(path: str | Path, verify: bool = False) -> tuple[Path, str, int] | None:
    """For a pretraining run's checkpoint folder (`checkpoints/<scale>/<run_id>`: its final checkpoint), one of its
    `step_NNNNNN` folders, or that folder's `hf/`: (the transformers folder, the model id, the step). The model id is
    the run id for the run's final checkpoint (`final_step`) and `<run_id>-<step>` for another one, as the paper's
    names. None when `path` is not such a folder; a one-line `ConfigError` when its checkpoint cannot be read
    (`unreadable`; `verify`: the weights' hashes too)."""
    found = requested(path)
    if found is None:
        return None
    root, step = found
    if fault := unreadable(root, step, verify):
        raise ConfigError(fault)
    model_id = root.name if step == final_step(root) else f"{root.name}-{step}"
    return hf_dir(step_dir(root, step)), model_id, step


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
def owner(root: str | Path) -> dict | None:
    """The run a checkpoint folder belongs to, as its `run.json` says ({"identity", "run_id", "results"}); None when
    it has none (a new folder, or one written before identities)."""
    path = Path(root) / OWNER
    return read_json(path) if path.is_file() else None


def claim(root: str | Path, run: dict, write: bool = True) -> None:
    """Make `root` the checkpoint folder of `run` ({"identity", "run_id", "results"}) before anything in it is
    removed or written: a `ConfigError` naming both runs when it belongs to another identity (its `run.json`, or a
    complete checkpoint's trainer state, says so). A folder without `run.json` is claimed (written, when `write`)."""
    root = Path(root)
    mine = run["identity"]
    theirs = owner(root)
    if not isinstance(theirs, dict) or not isinstance(theirs.get("identity"), str):
        if theirs is not None:
            raise ConfigError(f"{root / OWNER} does not name the run these checkpoints belong to; delete {root} to "
                              "start over")
        foreign = [p for p in sorted(root.glob("step_*")) if complete(p) and read_state(p).get("identity") not in
                   (None, mine)]
        theirs = {"identity": read_state(foreign[0])["identity"], "run_id": root.name,
                  "results": f"a run whose {foreign[0] / STATE} says so"} if foreign else None
    else:
        stray = [p for p in sorted(root.glob("step_*")) if complete(p) and read_state(p).get("identity") not in
                 (None, theirs["identity"])]
        if stray:
            raise ConfigError(f"{stray[0]} is a checkpoint of run identity {read_state(stray[0])['identity']}, not "
                              f"of {theirs['identity']} that {root / OWNER} names; remove it (or {root}) by hand")
    if theirs is not None and theirs["identity"] != mine:
        raise ConfigError(f"{root} holds the checkpoints of run {theirs.get('run_id')!r} of identity "
                          f"{theirs['identity']} (results: {theirs.get('results')}), not of this run "
                          f"{run['run_id']!r} of identity {mine} (results: {run['results']}); its config differs: "
                          f"choose another run_id or checkpoints_dir, or delete that folder to start over")
    if theirs is None and write:
        write_json(root / OWNER, run)


def clear_temporary(root: str | Path) -> None:
    """Remove the temporary folders of checkpoints whose writing was interrupted, those a killed remover left aside,
    and step folders damaged since they were written (each named in one line). The folder's writer only, under its
    lock: no other process writes or removes anything there meanwhile."""
    for stale in [*Path(root).glob(".tmp-step_*"), *Path(root).glob(f"{REMOVED}*")]:
        shutil.rmtree(stale, ignore_errors=True)
    for path in Path(root).glob("step_*"):
        if step_of(path) is not None and (fault := damage(path)):
            print(f"{path}: damaged checkpoint ({fault}); removed, its steps are trained again", flush=True)
            remove(path)


def withdraw(path: Path) -> Path | None:
    """Rename the checkpoint folder `path` aside for deletion, in one atomic rename in the same parent (None when
    there is none): from then on no reader finds it, whole or in part. (Not the setting aside of results,
    `mlmclm.evaluation.grid.set_result_aside`, which keeps a file on record under another name.)"""
    aside = path.with_name(f"{REMOVED}{path.name}.{os.getpid()}")
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
