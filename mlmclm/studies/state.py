"""What of a plan is complete, read from the results on disk: a run when its meta.json and pretrain.csv are whole, an
evaluation when every results.json its grid needs is complete (a screened dataset's later seeds at the screen's
chosen rate only: `required_results`), a checkpoint when it is on disk and loadable. `work`
says what is still to do and why; `set_aside` renames the results of an evaluated model that lie outside its grid.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .. import locks
from .. import runlog
from ..paths import Paths, run_folder
from ..evaluation.grid import OUTSIDE_GRID as ASIDE
from ..evaluation.grid import grid_runs, plan_grid, required_runs, result_fault, set_aside_outside, stale_runs
from ..store import damage
from .plan import Evaluation, Plan, Run


def run_fault(run: Run, plan: Plan, paths: Paths) -> str | None:
    """Why `run` is not complete (None when it is): `runlog.run_fault`."""
    return runlog.run_fault(paths.run(plan.scale.scale, run.id, run.grid), run.total)


def checkpoint_fault(plan: Plan, paths: Paths, run_id: str, step: int) -> str | None:
    """Why the checkpoint is not on disk and loadable (None when it is; its weights' hashes verified: a damaged one
    is retrained)."""
    path = paths.checkpoint(plan.scale.scale, run_id, step)
    return "not on disk" if not path.exists() else damage(path, verify=True)


def has_checkpoint(plan: Plan, paths: Paths, run_id: str, step: int) -> bool:
    return checkpoint_fault(plan, paths, run_id, step) is None


def grid_results(e: Evaluation, cfg, root: Path) -> dict:
    """The results.json files of every cell of `e`'s grid (every rate x seed), each with its dataset's protocol
    (`cfg.results_dir` under the working root `root`): what lies inside the grid, never set aside; but a screened
    grid's later seed at a rate other than its screen's choice, or an older protocol's result it never redoes
    (`grid.stale_runs`), is not."""
    tree = run_folder(root / cfg.results_dir, cfg.scale, e.model)
    stale = stale_runs(plan_grid(cfg), tree)
    return {tree / path: c for path, c in grid_runs(cfg).items() if tree / path not in stale}


def required_results(e: Evaluation, cfg, root: Path) -> dict:
    """The results.json files `e`'s grid needs to be complete, each with its dataset's protocol: `grid_results`, but
    for a screened dataset its later seeds at the screen's choice only (`grid.required_runs`)."""
    return required_runs(cfg, run_folder(root / cfg.results_dir, cfg.scale, e.model))


def result_faults(e: Evaluation, cfg, root: Path) -> dict[Path, str]:
    """The results.json files `e`'s grid needs (`required_results`) not yet complete (missing, damaged or computed
    with other settings), each with why (`grid.result_fault`)."""
    faults = {p: result_fault(p, c) for p, c in required_results(e, cfg, root).items()}
    return {p: f for p, f in faults.items() if f}


def missing_results(e: Evaluation, cfg, root: Path) -> set[Path]:
    return set(result_faults(e, cfg, root))


def set_aside(plan: Plan, grids: dict, root: Path, narrowed: bool = False) -> list[Path]:
    """Set the results.json of the plan's evaluated models that lie outside their grid aside as `ASIDE` (the
    notebooks read every results.json of a model; `mlmclm.evaluation.grid.set_aside_outside`), and put back those the
    grid holds again. `narrowed`: the grids are cut to some groups (`--groups`): only their datasets' results are
    judged (an old learning rate's among them set aside all the same), the other groups' left as they are. Returns
    the paths set aside."""
    moved, covered = [], {}
    for e in plan.evaluations.values():
        cfg = grids[e.grid]
        if narrowed and e.grid not in covered:
            covered[e.grid] = {(t.group, t.name) for _, _, evaluated in plan_grid(cfg) for t in evaluated}
        tree = run_folder(root / cfg.results_dir, cfg.scale, e.model)
        if not tree.is_dir() or locks.busy(tree):  # one another process writes (a run in training) is left as it is:
            continue                                # no waiting here for a run of hours; its grid sets aside its own
        with locks.hold(tree):
            moved += set_aside_outside(tree, grid_results(e, cfg, root), covered.get(e.grid))
    return moved


COMPLETE = "complete"


@dataclass
class Work:
    """What is still to do (`work`): the runs to train (in order), the evaluations to fine-tune, the named
    checkpoints each run to train must produce for later work, and the status of every run (by id) and evaluation
    (by (model_id, grid)): "complete", or "to run: why" or "to retrain: why"."""
    runs: list[Run]
    evals: list[Evaluation]
    wanted: dict[str, list[int]]
    status: dict
    missing: dict                                # evaluation key -> the results.json it is to write

    def counts(self) -> str:
        """One line: what is to do, or "nothing to do" and what is complete."""
        runs = [s for k, s in self.status.items() if isinstance(k, str)]
        grids = [s for k, s in self.status.items() if not isinstance(k, str)]
        if not self.runs and not self.evals:
            return f"nothing to do: {len(runs)} runs complete, {len(grids)} grids complete"
        retrain = sum(s.startswith("to retrain") for s in runs)
        again = f" ({retrain} to retrain)" if retrain else ""
        return (f"to do: {len(self.runs)} of {len(runs)} runs to train{again}, {len(self.evals)} of {len(grids)} grids "
                "to fine-tune")


def work(plan: Plan, paths: Paths, grids: dict) -> Work:
    """What to do, and why. A run is trained when it is incomplete ("to run"), or when work still to do needs one
    of its checkpoints and it is not on disk ("to retrain"; then the runs it starts from may be needed too). An
    evaluation is fine-tuned when results.json of its grid are missing or incomplete. `grids`: the plan's
    `grid_configs`."""
    status, needs, missing = {}, {}, {}          # needs: (run_id, step) -> the work that needs that checkpoint
    for key, e in plan.evaluations.items():
        faults = result_faults(e, grids[e.grid], paths.root)
        total = len(required_results(e, grids[e.grid], paths.root))
        other = [f for f in faults.values() if f != "missing"]
        status[key] = (f"to run: {len(faults)} of {total} results missing" + (f" or incomplete ({other[0]})"
                                                                             if other else "")) if faults else COMPLETE
        if faults:
            missing[key] = set(faults)
            needs.setdefault((e.run_id, plan.checkpoint_step(e)), f"the fine-tuning of {e.model_id}")
    for r in plan.runs.values():
        fault = run_fault(r, plan, paths)
        status[r.run_id] = f"to run: {fault}" if fault else COMPLETE
    train = {r for r in plan.runs if status[r] != COMPLETE}
    while True:
        for r in sorted(train):
            if plan.runs[r].parent:
                needs.setdefault((plan.runs[r].parent, plan.runs[r].parent_step), r)
        more = {}
        for (run_id, step), who in needs.items():
            if run_id not in train and run_id not in more and (fault := checkpoint_fault(plan, paths, run_id, step)):
                more[run_id] = f"to retrain: its checkpoint at step {step} is needed by {who} and {fault}"
        if not more:
            break
        train |= set(more)
        status.update(more)
    wanted = {r: sorted(step for run_id, step in needs if run_id == r) for r in train}
    return Work([r for r in plan.runs.values() if r.run_id in train],
                [e for k, e in plan.evaluations.items() if status[k] != COMPLETE], wanted, status, missing)
