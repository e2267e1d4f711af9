"""Pretraining checkpoints on disk, read: what makes one complete, which one a path asks for, and the run they
belong to. Torch-free, beside the run record (`runs`): evaluation and the studies find checkpoints here without
importing training, which writes them (`mlmclm.training.checkpoints`: writing, publishing, pruning, claiming a
folder). Their folders and files are named by `mlmclm.paths`.

A checkpoint is written whole under its temporary name, the accelerate state first, then `hf/`, then
`trainer_state.json`, and renamed to `step_NNNNNN` last, so a `step_NNNNNN` folder is whole unless it was damaged
afterwards. A checkpoint is *complete* (`complete`) when its folder holds a `trainer_state.json` that parses with its
step, an `hf/config.json` and `hf/model.safetensors` (or its shards' index), and every weights file it records (or,
in a checkpoint written before weights were recorded, every one present) is a whole safetensors file: its header
parses and the file has the size the header gives, and every other file it records is there. With `verify=True`
every recorded file's sha256 must also be the one recorded at save time: what loading a checkpoint (resume,
`init.kind=run`, the studies' fine-tuning) asks; so every file a resume reads (the model, optimizer and RNG states,
under FSDP each process's shard) is checked before it is loaded. Every reader counts complete checkpoints only:
resuming a run, `init.kind=run`, fine-tuning a run's checkpoint, the studies' bookkeeping of what is on disk, pruning
and rewinding. Anything else in a run's folder (a temporary folder, a damaged step folder) is no checkpoint.

Which checkpoint a path asks for (`requested`): a step folder (or its `hf/`), that step; a run's checkpoint folder,
its *final* checkpoint (`final_step`: the total of the phases in its run's record, `run_record`: the config.yaml of
the results folder its `run.json` names, a relative one under the working root `working` the caller passes, else the
one its step folders hold, else its highest step folder). A reader gets that checkpoint or a refusal in one line
(`unreadable`: damaged, being trained, or not on disk, with the command that writes it again), never an earlier one
in its place. The folder's `run.json` names the run it belongs to (`owner`), and each checkpoint's trainer state its
run's identity (`runs.config_identity`).
"""

from __future__ import annotations

import json
from pathlib import Path

from . import locks
from .errors import ConfigError, ResultFileError
from .fetch import sha256
from .io import read_json
from .paths import HF, OWNER, STATE, WEIGHTS, hf_dir, step_dir, step_folders, step_of
from .runs import Record, read_record


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
    return [step_of(p) for p in sorted(step_folders(root), key=step_of) if complete(p)]


def last(root: str | Path) -> Path | None:
    """The run's last complete checkpoint, if any."""
    steps = checkpoint_steps(root)
    return step_dir(root, steps[-1]) if steps else None


def read_state(path: Path) -> dict:
    """A checkpoint's trainer state (step, objective, lr, tokens_seen, wall_time_s, named)."""
    return read_json(Path(path) / STATE)


def find_checkpoint(path: str | Path, working: Path, step: int | None = None) -> Path:
    """A run's checkpoint folder at `step`. `path` is a run's checkpoint folder or a step; without `step`, the
    checkpoint it asks for (`requested`: a run folder's final one, its record found under the working root
    `working`), or a one-line `ConfigError` when that one cannot be read (`unreadable`), never an earlier one in its
    place."""
    path = Path(path)
    found = requested(path, working) if step is None else None
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


def requested(path: str | Path, working: Path) -> tuple[Path, int] | None:
    """(the run folder, the step) of the checkpoint `path` asks for: a `step_NNNNNN` folder or its `hf/`, that step; a
    run's checkpoint folder (one with step folders or a run.json), its final checkpoint (`final_step`), whether or not
    it is on disk (its record found under the working root `working`). None for any other path."""
    path = Path(path)
    if path.name == HF and step_of(path.parent) is not None:
        path = path.parent
    if step_of(path) is not None:
        return path.parent, step_of(path)
    step = final_step(path, working) if path.is_dir() else None
    return (path, step) if step is not None else None


def final_step(root: str | Path, working: Path) -> int | None:
    """The step of the final checkpoint of the run whose checkpoint folder is `root`: the total of the phases in its
    record (`run_record`, under the working root `working`); without one that reads, its highest step folder, complete
    or not. None: neither."""
    try:
        record = run_record(root, working)
    except ResultFileError:  # a damaged or edited record: what is on disk
        record = None
    if record is not None and record.final_step is not None:
        return record.final_step
    return max(map(step_of, step_folders(root)), default=None)


def run_record(root: str | Path, working: Path, step: Path | None = None) -> Record | None:
    """The record of the run whose checkpoint folder is `root` (`runs.read_record`): in the results folder its
    `run.json` names (`recorded_results`: a relative one under the working root `working`); where that is
    absent (a checkpoint copied elsewhere), in the step folder `step`, else the newest step folder that holds one
    (each checkpoint holds the config.yaml that trained it). None: neither (checkpoints saved before they held their
    config, and no results folder). A record that does not read whole is a one-line `ResultFileError`."""
    results = recorded_results(root)
    record = read_record(Path(working) / results) if results else None
    if record is None:
        folders = [step] if step is not None else step_folders(root)[::-1]
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


def pretrained_model(path: str | Path, working: Path, verify: bool = False) -> tuple[Path, str, int] | None:
    """For a pretraining run's checkpoint folder (`checkpoints/<scale>/<run_id>`: its final checkpoint), one of its
    `step_NNNNNN` folders, or that folder's `hf/`: (the transformers folder, the model id, the step). The model id is
    the run id for the run's final checkpoint (`final_step`) and `<run_id>-<step>` for another one, as the paper's
    names (its record found under the working root `working`). None when `path` is not such a folder; a one-line `ConfigError` when its checkpoint cannot be read
    (`unreadable`; `verify`: the weights' hashes too)."""
    found = requested(path, working)
    if found is None:
        return None
    root, step = found
    if fault := unreadable(root, step, verify):
        raise ConfigError(fault)
    model_id = root.name if step == final_step(root, working) else f"{root.name}-{step}"
    return hf_dir(step_dir(root, step)), model_id, step


def owner(root: str | Path) -> dict | None:
    """The run a checkpoint folder belongs to, as its `run.json` says ({"identity", "run_id", "results"}); None when
    it has none (a new folder, or one written before identities)."""
    path = Path(root) / OWNER
    return read_json(path) if path.is_file() else None

