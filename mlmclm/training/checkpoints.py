"""Pretraining checkpoints on disk: the one module that knows their layout, what makes one complete, and how to find,
read, publish and prune them.

    <checkpoints_dir>/<scale>/<run_id>/          a run's checkpoints (`run_root`)
        step_NNNNNN/                             the checkpoint after step N (six digits, zero-padded: `step_dir`)
            model.safetensors, optimizer.bin,    accelerate state (model, optimizer, RNG): what a resume loads
            random_states_*.pkl
            trainer_state.json                   step, objective, lr, tokens_seen, wall_time_s, named (`read_state`)
            hf/                                  the model and tokenizer in transformers format (`hf_dir`)
        .tmp-step_NNNNNN/                        a checkpoint being written (`tmp_dir`)

A checkpoint is written whole under its temporary name, the accelerate state first, then `hf/`, then
`trainer_state.json`, and renamed to `step_NNNNNN` last (`publish`), so a `step_NNNNNN` folder is whole unless it was
damaged afterwards. A checkpoint is *complete* (`complete`) when its folder holds a `trainer_state.json` that parses
with its step and an `hf/config.json`. Every reader counts complete checkpoints only: resuming a run, `init.kind=run`, fine-tuning a run's
checkpoint, the studies' bookkeeping of what is on disk, pruning and rewinding. Anything else in a run's folder (a
temporary folder, a damaged step folder) is no checkpoint: the run's writer removes it (`clear_temporary`), naming a
damaged one, and trains its steps again. The writer holds the folder's lock (`mlmclm.locks`) meanwhile.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from ..errors import ConfigError, ResultFileError
from ..io import read_json, write_json

STATE = "trainer_state.json"
HF = "hf"
_STEP = re.compile(r"step_(\d+)")


# ---- the layout ----
def run_root(checkpoints_dir: str | Path, scale: str, run_id: str) -> Path:
    """The folder of a run's checkpoints."""
    return Path(checkpoints_dir) / scale / run_id


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
def complete(path: str | Path) -> bool:
    """Whether `path` holds a complete checkpoint: a `trainer_state.json` that parses, with its step, and
    `hf/config.json`."""
    return damage(path) is None


def damage(path: str | Path) -> str | None:
    """What makes `path` no complete checkpoint (None when it is one)."""
    path = Path(path)
    if not (hf_dir(path) / "config.json").is_file():
        return f"no {HF}/config.json"
    try:
        state = read_json(path / STATE)
    except ResultFileError as e:
        return f"{STATE}: {str(e).removeprefix(f'{path / STATE}: ')}"
    if not isinstance(state, dict) or not isinstance(state.get("step"), int):
        return f"{STATE} has no step"
    return None


def checkpoint_steps(root: str | Path) -> list[int]:
    """The steps of the complete checkpoints in the run folder `root`, in order (none when it does not exist)."""
    steps = ((step_of(p), p) for p in Path(root).glob("step_*"))
    return sorted(step for step, p in steps if step is not None and complete(p))


def last(root: str | Path) -> Path | None:
    """The run's last complete checkpoint, if any."""
    steps = checkpoint_steps(root)
    return step_dir(root, steps[-1]) if steps else None


def read_state(path: Path) -> dict:
    """A checkpoint's trainer state (step, objective, lr, tokens_seen, wall_time_s, named)."""
    return read_json(Path(path) / STATE)


def find_checkpoint(path: str | Path, step: int | None = None) -> Path:
    """A run's checkpoint folder at `step` (default: the last one). `path` is a run's checkpoint folder or a step."""
    path = Path(path)
    if complete(path) and step is None:
        return path
    steps = checkpoint_steps(path)
    if not steps:
        raise ConfigError(f"init.path={str(path)!r} holds no checkpoint (expected step_NNNNNN folders)")
    if step is None:
        step = steps[-1]
    if step not in steps:
        raise ConfigError(f"{path} has no checkpoint at step {step}; it has steps {', '.join(map(str, steps))}")
    return step_dir(path, step)


def pretrained_model(path: str | Path) -> tuple[Path, str, int] | None:
    """For a pretraining run's checkpoint folder (`checkpoints/<scale>/<run_id>`, its last checkpoint), one of its
    `step_NNNNNN` folders, or that folder's `hf/`: (the transformers folder, the model id, the step). The model id is
    the run id for the run's last checkpoint and `<run_id>-<step>` for an intermediate one, as the paper's names.
    None when `path` is not such a folder, or the checkpoint is not complete."""
    path = Path(path)
    if path.name == HF and step_of(path.parent) is not None:
        path = path.parent
    if step_of(path) is None:
        if not checkpoint_steps(path):
            return None
        path = find_checkpoint(path)
    if step_of(path) is None or not complete(path):
        return None
    step, run_id = step_of(path), path.parent.name
    last_step = checkpoint_steps(path.parent)[-1]
    return hf_dir(path), (run_id if step == last_step else f"{run_id}-{step}"), step


# ---- writing, pruning ----
def begin(root: Path, step: int) -> Path:
    """An empty `tmp_dir(root, step)` to write the checkpoint after `step` into (what a killed writer left is
    dropped)."""
    tmp = tmp_dir(root, step)
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    return tmp


def write_state(path: Path, state: dict) -> None:
    write_json(Path(path) / STATE, state)


def clear_temporary(root: str | Path) -> None:
    """Remove the temporary folders of checkpoints whose writing was interrupted, and step folders damaged since they
    were written (each named in one line)."""
    for stale in Path(root).glob(".tmp-step_*"):
        shutil.rmtree(stale, ignore_errors=True)
    for path in Path(root).glob("step_*"):
        if step_of(path) is not None and (fault := damage(path)):
            print(f"{path}: damaged checkpoint ({fault}); removed, its steps are trained again", flush=True)
            shutil.rmtree(path, ignore_errors=True)


def publish(root: Path, step: int) -> Path:
    """Rename the written `tmp_dir(root, step)` to its checkpoint folder (replacing one of the same step)."""
    final = step_dir(root, step)
    shutil.rmtree(final, ignore_errors=True)
    tmp_dir(root, step).rename(final)
    return final


def prune(root: Path, named: set[int], keep_last: int) -> None:
    """Keep the named checkpoints and the last `keep_last` others."""
    periodic = [s for s in checkpoint_steps(root) if s not in named]
    for s in periodic[:-keep_last]:
        shutil.rmtree(step_dir(root, s), ignore_errors=True)


def drop_after(root: Path, step: int) -> None:
    """Remove every checkpoint after `step`: a resume restarts from the last one before it."""
    for s in checkpoint_steps(root):
        if s > step:
            shutil.rmtree(step_dir(root, s))
