"""Where everything lives on disk: the one module that names the folders and files of a run, its checkpoints, a
fine-tuning grid and its cells. Torch- and pandas-free; it builds paths and reads nothing (`store` and
`runs.read_record` read what lies there).

    <runs>/<scale>/<model id>/                a run's record (`run_folder`: config.yaml, meta.json, pretrain.csv)
                                              and a model's fine-tuning results of the default grid
        <group>/<dataset>/lr{LR}_sd{seed}/    one fine-tuning run of the grid, a *cell* (`cell`: results.json)
    <runs>/stability/<scale>/<model id>/      the stability grid's results (`grid_root`)
    <runs>/reference/<scale>/<model id>/      models pretrained elsewhere and their CPT runs
    <checkpoints>/<scale>/<run id>/           a run's checkpoints (`run_folder` under a checkpoints folder)
        run.json                              the run they belong to: identity, run id, results folder (`OWNER`)
        step_NNNNNN/                          the checkpoint after step N (six digits, zero-padded: `step_dir`)
            trainer_state.json, config.yaml   its trainer state (`STATE`) and the config that trained it
            hf/                               the model and tokenizer in transformers format (`hf_dir`)
        .tmp-step_NNNNNN/                     a checkpoint being written (`tmp_dir`)
        .removed-step_NNNNNN.<pid>/           a checkpoint being deleted (`removed_dir`)

`Paths` holds a study's three folders (runs, checkpoints, data) in a working root (`io.working_root`, read by the
entrances and passed down) and gives a run's folders in them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .config import REFERENCE
from .io import lr_text

CONFIG, META, LOG = "config.yaml", "meta.json", "pretrain.csv"  # a run's record in its run folder
RESULTS = "results.json"  # a fine-tuning cell's result
OWNER = "run.json"  # in a run's checkpoint folder: the run the checkpoints belong to
STATE, HF, WEIGHTS = "trainer_state.json", "hf", "model.safetensors"  # in a checkpoint step folder
TMP, REMOVED = ".tmp-", ".removed-"  # a checkpoint folder being written, one renamed aside to be deleted
_STEP = re.compile(r"step_(\d+)")


# ---- runs and grids ----
def run_folder(root: str | Path, scale: str, model) -> Path:
    """`<root>/<scale>/<model id>`: a run's record or a model's fine-tuning results (`root`: a runs folder, or a grid's
    tree in it, `grid_root`), or a run's checkpoints (`root`: a checkpoints folder)."""
    return Path(root) / scale / str(model)


def grid_root(runs: str | Path, grid: str) -> Path:
    """Where a grid's results go under a runs folder: the stability and reference grids in their own trees (never
    mixed with the default grid's)."""
    return Path(runs) / grid if grid in ("stability", REFERENCE) else Path(runs)


# ---- fine-tuning cells ----
def cell_folder(lr: float, seed: int) -> str:
    """The folder name of one fine-tuning run of a grid: `lr{LR}_sd{seed}` (LR: `io.lr_text`)."""
    return f"lr{lr_text(lr)}_sd{seed}"


def cell(group: str, dataset: str, lr: float, seed: int) -> Path:
    """One fine-tuning run's folder, relative to its model's folder (`run_folder`): `<group>/<dataset>/lr.._sd..`."""
    return Path(group) / dataset / cell_folder(lr, seed)


PLACE = ("scale", "model_id", "group", "dataset", "lr", "seed")  # what a results.json's meta says of where it lies


def misplaced(path: str | Path, doc: dict) -> str | None:
    """Why the results.json `doc` read from `path` does not belong there (None when it does): its `meta` names the
    folder it was written to, `<scale>/<model_id>/<group>/<dataset>/lr{LR}_sd{SEED}/`, and that is not where it lies
    (a copy, a move, a hand edit). A result whose meta names no folder (none of ours: EncodEval's) is not judged."""
    meta = doc.get("meta")
    if not isinstance(meta, dict) or not all(k in meta for k in PLACE):
        return None
    try:
        want = (*(str(meta[k]) for k in PLACE[:4]), cell_folder(float(meta['lr']), int(meta['seed'])))
    except (TypeError, ValueError):
        return f"{path}: its meta names no folder (lr {meta['lr']!r}, seed {meta['seed']!r})"
    if Path(path).parent.parts[-5:] != want:
        return f"{path}: its meta names {'/'.join(want)}/, not the folder it lies in"
    return None


# ---- a run's checkpoints ----
def step_dir(root: str | Path, step: int) -> Path:
    """The checkpoint after `step` in the run's checkpoint folder `root`."""
    return Path(root) / f"step_{step:06d}"


def step_folders(root: str | Path) -> list[Path]:
    """The step folders in the run's checkpoint folder `root`, complete or not, in order (none when it does not
    exist)."""
    return sorted(p for p in Path(root).glob("step_*") if step_of(p) is not None)


def step_of(path: str | Path) -> int | None:
    """The step a folder named `step_N` stands for; None for any other name."""
    m = _STEP.fullmatch(Path(path).name)
    return int(m[1]) if m else None


def tmp_dir(root: str | Path, step: int) -> Path:
    """Where the checkpoint after `step` is written before it is renamed to its `step_dir`."""
    return Path(root) / f"{TMP}step_{step:06d}"


def removed_dir(path: str | Path, pid: int) -> Path:
    """Where the process `pid` renames the checkpoint folder `path` aside to delete it."""
    return Path(path).with_name(f"{REMOVED}{Path(path).name}.{pid}")


def hf_dir(path: str | Path) -> Path:
    """A checkpoint's model and tokenizer in transformers format."""
    return Path(path) / HF


@dataclass
class Paths:
    """The folders of a study: runs (results), checkpoints and data (corpora, tokenizers, shards, the task suite),
    each by default in the working root `root` (`io.working_root`, read by the entrance and passed down), which the
    configs a study writes name their folders relative to."""
    root: Path
    results: Path | None = None  # default root/results/runs
    checkpoints: Path | None = None  # default root/checkpoints
    data: Path | None = None  # default root/data

    def __post_init__(self):
        self.results = self.results or self.root / "results" / "runs"
        self.checkpoints = self.checkpoints or self.root / "checkpoints"
        self.data = self.data or self.root / "data"

    def run(self, scale: str, model, grid: str = "default") -> Path:
        """A run's record and its model's fine-tuning results of `grid` (a decoder's CPT: the reference grid)."""
        return run_folder(grid_root(self.results, grid), scale, model)

    def checkpoints_of(self, scale: str, run) -> Path:
        """A run's checkpoint folder."""
        return run_folder(self.checkpoints, scale, run)

    def checkpoint(self, scale: str, run, step: int) -> Path:
        """A run's checkpoint after `step`."""
        return step_dir(self.checkpoints_of(scale, run), step)
