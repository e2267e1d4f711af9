"""Running a plan: train the runs that are missing in order and fine-tune each evaluated model as soon as its run is
trained (`run`). Safe to interrupt and re-run: pretraining resumes from its last checkpoint, fine-tuning skips every
results.json already written, and every writer holds the lock of the folder it writes (`mlmclm.locks`).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from .. import locks
from ..config import PretrainConfig
from ..errors import ConfigError
from ..io import check_writable, launched, shown
from ..paths import Paths
from ..evaluation.grid import plan_grid
from ..evaluation.offline_suite import build_offline
from ..evaluation.tasks import tasks_dir
from ..training import checkpoints
from ..training.ownership import claim
from .configs import grid_configs, run_config
from .plan import Evaluation, Plan, Run
from .state import ASIDE, Work, has_checkpoint, set_aside, work


def _rewind(plan: Plan, paths: Paths, run: Run, wanted: list[int], cfg: PretrainConfig) -> None:
    """A run that must produce a named checkpoint it no longer has restarts from its last checkpoint before it (in
    a checkpoint folder of its own identity only: another run's is refused, untouched). What is missing is read
    again under the folder's lock: another study run may have trained the run meanwhile (this one's `work` was read
    before), and its checkpoints, which that process may be fine-tuning now, are not dropped then. Nothing is dropped
    before pretraining's own checks before work pass, and the folder's claim is checked, not written (pretraining
    writes it as it starts): a run refused leaves no folder behind (issue 63)."""
    from ..training.pretrain import check_before_work

    def missing() -> list[int]:
        return [s for s in wanted if not has_checkpoint(plan, paths, run.run_id, s)]
    if missing():
        check_before_work(cfg, cfg.schedule(), paths.root, create=False)
        root = paths.checkpoints_of(plan.scale.scale, run.id)
        with locks.hold(root):
            if lost := missing():
                claim(root, cfg, write=False)
                checkpoints.drop_after(root, min(lost))


def task_names(plan: Plan, grids: dict) -> list[str]:
    names = []
    for grid in {e.grid for e in plan.evaluations.values()}:
        for _, trainer, evaluated in plan_grid(grids[grid]):
            names += [t.name for t in (trainer, *evaluated)]
    return list(dict.fromkeys(names))


def run(plan: Plan, paths: Paths, data_dir: Path | None = None, progress: bool = True,
        pretrain_only: bool = False, narrowed: bool = False) -> dict:
    """Train and fine-tune what `plan` (`build_plan(scale).for_studies(names)`) still misses; `pretrain_only`: train,
    fine-tune nothing; `narrowed`: the grids are cut to some groups (`--groups`), so the results of the other groups
    are left where they are (those of the groups run that lie outside the grid, old learning rates', are set aside). Safe to interrupt and re-run: pretraining resumes from its last checkpoint,
    fine-tuning skips every results.json already written. `paths`: the study's folders (in the working root the
    entrance read, `io.working_root`); the configs it trains and fine-tunes with name them relative to `paths.root`, against
    which pretraining and fine-tuning resolve them."""
    if launched() and not pretrain_only:  # every process would run every fine-tuning grid
        raise ConfigError("study run under a multi-process launch pretrains only (every process trains each run "
                          "together): add --pretrain-only; then fine-tune in one process, without accelerate launch: "
                          f"mlmclm study run {plan.studies[0] if len(plan.studies) == 1 else 'all'} --scale "
                          f"{plan.scale.scale} (it finds the runs trained)")
    start = time.perf_counter()
    grids = grid_configs(plan, paths, data_dir)
    aside = [] if launched() else set_aside(plan, grids, paths.root, narrowed)  # launched: fine-tunes nothing
    if aside:
        print(f"{len(aside)} results.json outside the configured grids set aside as {ASIDE}, e.g. "
              f"{shown(aside[0])}", flush=True)
    state = work(plan, paths, grids)
    evals = [] if pretrain_only else state.evals
    todo = 0 if pretrain_only else sum(map(len, state.missing.values()))
    for folder in ([paths.results, paths.checkpoints, paths.data] if state.runs else [paths.results] if evals else []):
        check_writable(folder)
    names, scale = ", ".join(plan.studies), plan.scale.scale
    print(f"study {names} at scale {scale}: {len(plan.runs)} pretraining runs ({len(state.runs)} to train), "
          f"{len(plan.evaluations)} evaluated checkpoints ({len(evals)} with {todo} fine-tuning results to write)",
          flush=True)
    if evals and any(cfg.suite == "offline" for cfg in grids.values()):
        build_offline(task_names(plan, grids), data_dir or tasks_dir(paths.root), progress=progress)
    _Runner(plan, paths, grids, evals, progress).train_and_finetune(state)
    seconds = time.perf_counter() - start
    print(f"study {names} at scale {scale}: done in {seconds / 60:.1f} min; results in "
          f"{shown(paths.results / scale)}", flush=True)
    return {"trained": len(state.runs), "evaluated": len(evals), "results": todo, "seconds": seconds}


@dataclass
class _Runner:
    """The work of `run`: pretraining runs in order and fine-tuning grids (`evals`), counted as they go."""
    plan: Plan
    paths: Paths
    grids: dict
    evals: list[Evaluation]
    progress: bool
    finetuned: int = 0

    def __post_init__(self):
        self.pairs = {g: plan_grid(cfg) for g, cfg in self.grids.items()}  # each grid's trainings, found once

    def train_and_finetune(self, state: Work) -> None:
        """Each model is fine-tuned as soon as its run is trained (first those whose runs need no training): what a
        run of many hours has written is its results, even where its checkpoints do not outlive the machine."""
        from ..training.pretrain import pretrain  # torch: `study plan` stays without it

        trained = {r.run_id for r in state.runs}
        self.finetune([e for e in self.evals if e.run_id not in trained])
        for i, r in enumerate(state.runs, 1):
            print(f"[pretrain {i}/{len(state.runs)}] {r.run_id}: {r.phases_text}"
                  + (f" from {r.parent} step {r.parent_step}" if r.parent else "") + f" ({state.status[r.run_id]})",
                  flush=True)
            cfg = run_config(self.plan, r, self.paths)
            if os.environ.get("RANK", "0") == "0":  # under a launch, the main process alone (as it holds the locks)
                _rewind(self.plan, self.paths, r, state.wanted[r.run_id], cfg)
            pretrain(cfg, root=self.paths.root)
            self.finetune([e for e in self.evals if e.run_id == r.run_id])

    def finetune(self, batch: list[Evaluation]) -> None:
        from ..evaluation.finetune import run_grid  # torch: `study plan` stays without it

        for e in batch:
            self.finetuned += 1
            print(f"[finetune {self.finetuned}/{len(self.evals)}] {e.model_id} ({e.grid} grid)", flush=True)
            step = self.plan.checkpoint_step(e)
            run_grid(self.paths.checkpoint(self.plan.scale.scale, e.run_id, step), self.grids[e.grid],
                     model_id=e.model_id, progress=self.progress, pairs=self.pairs[e.grid], root=self.paths.root)
