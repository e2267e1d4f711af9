"""A fine-tuning grid's runs and whether each is done, torch-free (`mlmclm.evaluation.finetune` runs them; `mlmclm
study plan` reads them without importing torch): the (protocol, training task, evaluated tasks) of a grid, the
results.json each writes and where, why one is not complete, which jobs are still to do, and the context a protocol
fine-tunes at.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from ..config import FinetuneConfig, finetune_protocol, to_dict
from ..errors import FinetuneError, ResultFileError
from ..io import load_result
from ..paths import RESULTS, cell, misplaced, run_folder
from .tasks import GROUPS, Task, select_tasks


def result_fault(path: Path, cfg: FinetuneConfig) -> str | None:
    """Why `path` is not a complete result of `cfg`'s protocol (None when it is one): "missing", a damaged file (the
    reader's message), or the settings it was computed with that differ from `cfg`'s."""
    if not path.is_file():
        return "missing"
    try:
        doc = load_result(path)
    except ResultFileError as e:
        return str(e)
    if fault := misplaced(path, doc):
        return fault
    stored = (doc.get("meta") or {}).get("config")
    if not isinstance(stored, dict):
        return f"{path}: no meta.config (the settings it was computed with)"
    ours, theirs = finetune_protocol(json.loads(json.dumps(to_dict(cfg)))), finetune_protocol(stored)
    changed = [f"{k} {theirs[k]} -> {ours[k]}" for k in ours if theirs[k] != ours[k]]
    return f"{path}: computed with other settings ({', '.join(changed)})" if changed else None


def plan_grid(cfg: FinetuneConfig) -> list[tuple[FinetuneConfig, Task, list[Task]]]:
    """(protocol, training task, evaluated tasks): one per training dataset, a dataset's own, or for a zero-shot one
    (IR) its `train_on` dataset, so every dataset trained on the same one shares one training; the protocol is the
    training dataset's (`FinetuneConfig.for_dataset`)."""
    unknown = sorted(set(cfg.per_dataset) - set(t.name for t in select_tasks(cfg.suite, GROUPS)))
    if unknown:
        raise FinetuneError(f"per_dataset names {unknown[0]!r}, which is not a dataset of the {cfg.suite} suite")
    trainings = {}
    for t in select_tasks(cfg.suite, cfg.groups, cfg.datasets):
        trainer = select_tasks(cfg.suite, [t.group], [t.train_on])[0] if t.train_on else t
        trainings.setdefault(trainer.name, (trainer, []))[1].append(t)
    return [(cfg.for_dataset(trainer.name), trainer, evaluated) for trainer, evaluated in trainings.values()]


def grid_runs(cfg: FinetuneConfig) -> dict[Path, FinetuneConfig]:
    """Every results.json of `cfg`'s grid for a model (relative to `results_dir/scale/<model_id>`), with the
    protocol it is computed with."""
    return {cell(t.group, t.name, lr, sd) / RESULTS: c
            for c, _, evaluated in plan_grid(cfg) for t in evaluated for lr in c.lrs for sd in c.seeds}


# ---- screening seeds (`FinetuneConfig.screen_seeds`) ----
# A screened protocol trains its first k seeds at every rate (the screen), each later seed only at the rate the
# screen chose for each evaluated dataset: the best mean validation score over the screen's seeds. Its cells, and the
# results required for it to be complete, are the screen's and the later seeds' at the chosen rates (`required_runs`);
# a later seed's result at another rate (a full grid's, made before) is set aside once the screen is complete
# (`stale_runs`), so that every model of a comparison is selected from the same grid.
UNCHOSEN = "lr-chosen-by-screen"  # the cell folder prefix of a later seed's result while the screen is not complete


def screen_split(cfg: FinetuneConfig) -> tuple[list[int], list[int]]:
    """(the seeds trained at every rate, the later seeds trained at the screen's choice only) of one protocol: with
    `screen_seeds` k, 0 < k < len(seeds), the first k and the rest; else every seed and none."""
    k = cfg.screen_seeds
    return (cfg.seeds[:k], cfg.seeds[k:]) if 0 < k < len(cfg.seeds) else (list(cfg.seeds), [])


def best_lr(validation: dict[float, list[float]]) -> float:
    """The learning rate with the best mean validation score over its seeds (`validation`: rate -> scores), ties to
    the smaller rate: the rule of `mlmclm.analysis.loading.aggregation.select_lr(rule="seed_average")`, without
    pandas (tests/test_finetune.py checks that the two agree)."""
    return min(validation, key=lambda lr: (-sum(validation[lr]) / len(validation[lr]), lr))


def screen_choice(tree: Path, cfg: FinetuneConfig, task: Task) -> float | None:
    """The rate the screen of `cfg` (a dataset's protocol) chose for the evaluated `task` in the model folder `tree`
    (`best_lr` over its screen cells' validation scores); None while one of those is not complete."""
    scores = {}
    for lr in cfg.lrs:
        for seed in screen_split(cfg)[0]:
            path = tree / cell(task.group, task.name, lr, seed) / RESULTS
            if result_fault(path, cfg):
                return None
            scores.setdefault(lr, []).append(load_result(path)["validation"]["score"])
    return best_lr(scores)


def required_runs(cfg: FinetuneConfig, tree: Path) -> dict[Path, FinetuneConfig]:
    """The results.json that `cfg`'s grid needs in the model folder `tree` to be complete, each with its protocol:
    every cell of a dataset without a screen (`grid_runs`); with one, the screen's cells and each later seed's at the
    rate the screen chose (`screen_choice`), or, while the screen is not complete, one placeholder a seed
    (`UNCHOSEN`: never on disk, so it counts as one missing result)."""
    out = {}
    for c, _, evaluated in plan_grid(cfg):
        screen, later = screen_split(c)
        for t in evaluated:
            out.update({tree / cell(t.group, t.name, lr, sd) / RESULTS: c for lr in c.lrs for sd in screen})
            lr = screen_choice(tree, c, t) if later else None
            for sd in later:
                unchosen = Path(t.group, t.name, f"{UNCHOSEN}_sd{sd}")
                folder = cell(t.group, t.name, lr, sd) if lr is not None else unchosen
                out[tree / folder / RESULTS] = c
    return out


def stale_runs(pairs: list[tuple[FinetuneConfig, Task, list[Task]]], tree: Path) -> set[Path]:
    """The results.json in the model folder `tree` of a screened dataset's later seeds that its grid does not hold:
    once the screen is complete, those at every rate but its choice (a full grid's, made before the screen, so that
    every model is selected from the same grid); while it is not, those that are no complete result of its protocol
    (an older protocol's), or would not be one if put back from `OUTSIDE_GRID`. No run of the grid redoes them, so
    they are set aside (`grid_cells`) or left aside, never read beside it."""
    out = set()
    for c, _, evaluated in pairs:
        later = screen_split(c)[1]
        for t in evaluated if later else []:
            chosen = screen_choice(tree, c, t)
            for p in (tree / cell(t.group, t.name, lr, sd) / RESULTS for lr in c.lrs if lr != chosen for sd in later):
                held = p if p.is_file() else p.with_name(OUTSIDE_GRID)
                if chosen is not None or (held.is_file() and result_fault(held, c)):
                    out.add(p)
    return out


def context_length(cfg: FinetuneConfig, limit: int) -> int:
    """The tokens a sequence of `cfg`'s protocol holds on a model of context `limit`: cfg.max_length, or 0.99 x the
    context as EncodEval; never beyond the context."""
    return min(cfg.max_length or math.floor(0.99 * limit), limit)


def cell_dir(root: Path, cfg: FinetuneConfig, model_id: str, task: Task, lr: float, seed: int) -> Path:
    """The folder of one run of the grid, its cell, where its results.json goes (`cfg.results_dir` under the working
    root `root`; `paths.cell`)."""
    return run_folder(root / cfg.results_dir, cfg.scale, model_id) / cell(task.group, task.name, lr, seed)


# ---- results set aside: the one mechanism ----
# A results.json that must not count is set aside: renamed beside itself, in one atomic rename, to a name that says
# why, which no reader counts (they read results.json only). Two reasons, two names on disk: one that does not belong
# in its folder (`MISPLACED`, `set_aside_misplaced`: its run is done anew), one of an evaluated model outside its
# configured grid (`OUTSIDE_GRID`, `mlmclm.studies.state.set_aside`: put back when the grid holds it again).
MISPLACED = "results.misplaced.json"
OUTSIDE_GRID = "results.outside-grid.json"
ASIDE_NAMES = (MISPLACED, OUTSIDE_GRID)


def set_result_aside(path: Path, name: str) -> Path:
    """Rename the results.json `path` to `name` (one of `ASIDE_NAMES`) beside it, replacing one set aside there
    before; returns the new path."""
    if name not in ASIDE_NAMES:
        raise ValueError(f"{name!r} is no name a result is set aside under ({', '.join(ASIDE_NAMES)})")
    return path.rename(path.with_name(name))


def put_result_back(path: Path, name: str) -> bool:
    """Rename the result set aside as `name` beside `path` back to `path`, where there is one and `path` is missing;
    whether it did."""
    aside = path.with_name(name)
    if path.exists() or not aside.is_file():
        return False
    aside.rename(path)
    return True


def set_aside_outside(tree: Path, wanted, datasets: set[tuple[str, str]] | None = None) -> list[Path]:
    """Set aside as `OUTSIDE_GRID` the results.json in the model folder `tree` that its grid (`wanted`: the paths of
    its cells) does not hold, those of old learning rates or seeds after the grid changed, and put back those it
    holds again; `datasets`: only those of these (group, dataset) pairs (a grid cut to some groups leaves the other
    groups' results as they are). The caller holds the folder's lock. Returns the paths set aside."""
    wanted = set(wanted)
    moved = []
    for path in sorted(set(tree.glob(f"*/*/*/{RESULTS}")) - wanted):
        if datasets is None or (path.parts[-4], path.parts[-3]) in datasets:
            set_result_aside(path, OUTSIDE_GRID)
            moved.append(path)
    for path in wanted:
        put_result_back(path, OUTSIDE_GRID)
    return moved


def grid_cells(root: Path, model_id: str, pairs: list[tuple[FinetuneConfig, Task, list[Task]]]
               ) -> tuple[set[Path], set[tuple[str, str]]]:
    """(the results.json of every cell of a grid's `pairs` (`plan_grid`) for `model_id`, each dataset under its own
    protocol's rates and seeds, but a screened grid's older results it never redoes (`stale_runs`); the (group,
    dataset) pairs they cover), under the working root `root`."""
    cells = {cell_dir(root, c, model_id, t, lr, sd) / RESULTS
             for c, _, evaluated in pairs for t in evaluated for lr in c.lrs for sd in c.seeds}
    for c, _, _ in pairs[:1]:  # the protocols of one grid share its model folder
        cells -= stale_runs(pairs, run_folder(root / c.results_dir, c.scale, model_id))
    return cells, {(t.group, t.name) for _, _, evaluated in pairs for t in evaluated}


def set_aside_misplaced(path: Path) -> Path | None:
    """Set a results.json that does not belong in its folder (`paths.misplaced`: its meta names another model,
    dataset, learning rate or seed) aside as `MISPLACED`, saying so in one line; its run is then done anew."""
    try:
        fault = path.is_file() and misplaced(path, load_result(path))
    except ResultFileError:
        return None  # a damaged file: `result_fault` names it and its run is redone
    if not fault:
        return None
    print(f"{fault}; set aside as {MISPLACED}", flush=True)
    return set_result_aside(path, MISPLACED)


def jobs_to_do(model_id: str, cfg: FinetuneConfig, pairs: list[tuple[Task, list[Task]]], root: Path,
               seeds: list[int] | None = None, rates: dict[str, float] | None = None) -> list[tuple]:
    """The (trainer, evaluated tasks, lr, seed) jobs with a results.json that is not complete (`result_fault`), each
    with only those evaluated tasks; a misplaced file is set aside first, a faulty one named (it is redone).
    `seeds`: only these (default: every seed of `cfg`); `rates`: an evaluated task's one rate (a screen's choice,
    `screen_choice`) instead of every rate of `cfg`."""
    seeds = cfg.seeds if seeds is None else seeds
    paths = {(e.name, lr, seed): cell_dir(root, cfg, model_id, e, lr, seed) / RESULTS
             for _, evaluated in pairs for e in evaluated
             for lr in ([rates[e.name]] if rates is not None else cfg.lrs) for seed in seeds}
    for path in paths.values():
        set_aside_misplaced(path)
    faults = {key: result_fault(path, cfg) for key, path in paths.items()}
    redo = sorted(f for f in faults.values() if f and f != "missing")
    for fault in redo[:5]:
        print(f"{fault}; it is redone", flush=True)
    if len(redo) > 5:
        print(f"... and {len(redo) - 5} more results.json of {model_id} redone likewise", flush=True)
    jobs = [(trainer, [e for e in evaluated if faults.get((e.name, lr, seed))], lr, seed)
            for trainer, evaluated in pairs for lr in cfg.lrs for seed in seeds]
    return [j for j in jobs if j[1]]
