"""The studies' design in the paper's units: its budgets, splits, intermediate checkpoints and CPT lengths
(thousands of steps, "k"), mapped onto a scale's sizes and steps (`build_plan`). Runs of several studies that are one
run are merged by id, and a run that continues another names it as its parent, so no segment is trained twice.
"""

from __future__ import annotations

from ..config import (BEYOND, PAPER_CPT_K, PAPER_INTERMEDIATE_K, PAPER_TOTAL_K, REFERENCE, RECIPES_DIR, STUDIES,
                      ScaleConfig)
from ..errors import ConfigError
from ..runs import ModelId
from .plan import Evaluation, Plan, Run

# ---- the paper's units (its Section 3; results/paper/table01.csv): thousands of steps ----
TOTAL, WARMUP, DECAY = PAPER_TOTAL_K, 2, 2
OBJECTIVES = ("clm", "mlm20", "mlm30", "mlm40", "mlm50")
MAIN = "mlm40"                                   # the MLM of every later study (610M + 40%)
INTERMEDIATE = PAPER_INTERMEDIATE_K             # (b) evaluated checkpoints of the middle size's CLM and MLM-40 runs
BUDGETS = {12: (0, 3, 6, 9, 12), 22: (0, 5, 11, 17, 22), 42: (0, 10, 21, 32, 42)}  # (d) CLM steps of each split
SWITCH = 40                                      # (d) CLM 40k + MLM 2k at every masking ratio
CPT = PAPER_CPT_K                                # (e) MLM-40 continued pretraining of the decayed CLM and MLM-40 runs
PAPER_ACCOUNTING = {  # what the paper says it trained (its Sections 2 and 3)
    "models": "15 base + 17 PFS + 6 CPT = 38 final models, + 12 intermediate checkpoints = 50 evaluated",
    "gpu_hours": {"base": 81_000, "biphasic": 16_000, "cpt": 4_000, "finetune": 9_000},
    "steps": {"base": 15 * 42_000, "biphasic": 120_000, "cpt": 26_000},
    "finetune_runs": 15_120,
}


class _Builder:
    """Collects a plan's runs (merged by id: `add`) and evaluations (`evaluate`), in this scale's steps (`k`)."""

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
        """Fine-tune `run` at `step` (None: its final checkpoint) on `grid`; a random-init control (step 0) on the
        scale's control grid where it has one."""
        if step is not None:
            run.checkpoints.add(step)
        if step == 0 and grid == "default" and self.s.control:
            grid = "control"
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
        for seed in s.claim_seeds[1:]:
            for objective in objectives if seed in s.claim_seeds[:s.ratio_seeds] else ("clm", MAIN):
                b.evaluate("scaling", b.base("scaling", size, objective, seed))
    # (b) data efficiency: the middle size's CLM and MLM-40 runs at intermediate checkpoints, and at the end
    # (the scale's `seeded_intermediate_k` at every pretraining seed)
    for objective in ("clm", MAIN) if "data_efficiency" in wanted else ():
        run = b.base("data_efficiency", middle, objective)
        for k in s.intermediate_k or INTERMEDIATE:
            b.evaluate("data_efficiency", run, b.k(k))
        b.evaluate("data_efficiency", run)
        for seed in s.claim_seeds[1:] if s.seeded_intermediate_k else ():
            run = b.base("data_efficiency", middle, objective, seed)
            for k in s.seeded_intermediate_k:
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
    if s.calibration_seed is not None:  # trained for the grids' calibration, evaluated by no study
        for objective in ("clm", MAIN):
            run = b.base(wanted[0], middle, objective, s.calibration_seed, part="calibration")
            run.checkpoints |= b.base(wanted[0], middle, objective).checkpoints
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
    masking ratio beside MLM-only (the scale's `ratio_seeds` pretraining seeds)."""
    for budget, splits in (b.s.budgets or BUDGETS).items():
        for clm in splits:
            b.evaluate("biphasic", b.budget("biphasic", middle, budget, clm))
            if budget == TOTAL and 0 < clm < TOTAL:  # the splits of the full budget (claim 5) with more seeds
                for seed in b.s.claim_seeds[1:b.s.split_cpt_seeds]:
                    b.evaluate("biphasic", b.budget("biphasic", middle, budget, clm, seed))
    t, switch = b.k(TOTAL), b.k(SWITCH)
    for seed in b.s.claim_seeds[:b.s.ratio_seeds]:  # claim 6 with more seeds: each from its seed's CLM run
        clm_run = b.base("biphasic", middle, "clm", seed)
        for objective in objectives[1:]:
            b.evaluate("biphasic", b.base("biphasic", middle, objective, seed))
            run = b.add("biphasic", Run(ModelId(middle, "clm", switch, objective, t, seed=seed), middle,
                                        [("clm", switch), (objective, t - switch)], "biphasic", clm_run.run_id,
                                        switch, True, b.k(WARMUP), b.k(DECAY)))
            b.evaluate("biphasic", run)


def _cpt(b: _Builder, middle: str) -> None:
    """(e) CPT: the decayed CLM and MLM-40 models continued with MLM-40 (the scale's `cpt_k` lengths, or the
    paper's), and each of the scale's `cpt_decoders` continued the same way (and fine-tuned before CPT too)."""
    for objective in ("clm", MAIN):
        b.evaluate("cpt", b.base("cpt", middle, objective))
        for steps in b.s.cpt_k or CPT:
            b.evaluate("cpt", b.cpt("cpt", middle, objective, steps))
        for seed in b.s.claim_seeds[1:b.s.split_cpt_seeds]:  # claim 7 with more seeds: the longest CPT from those bases
            b.evaluate("cpt", b.base("cpt", middle, objective, seed))
            b.evaluate("cpt", b.cpt("cpt", middle, objective, max(b.s.cpt_k or CPT), seed))
    for name in b.s.cpt_decoders:  # models pretrained elsewhere: fine-tuned on the same grid, kept in their own tree
        b.evaluate("cpt", b.decoder_cpt("cpt", name, max(b.s.cpt_k or CPT)), 0, grid=REFERENCE)  # before CPT
        for steps in b.s.cpt_k or CPT:
            b.evaluate("cpt", b.decoder_cpt("cpt", name, steps), grid=REFERENCE)


def _beyond(b: _Builder, middle: str) -> None:
    """Beyond the paper (issues 27, 61), each with the scale's `beyond_seeds` pretraining seeds: its masking-ratio
    ramps (`ratio_schedules`) from scratch at the full budget beside constant MLM-40%; its `mixed` objectives
    from scratch at the full budget beside MLM-only, CLM-only and the 25/75 split of that budget; and the CLM detour
    at each `detour_k` length beside the plain MLM-CPT of the same decayed MLM-40 model. The random-init control
    with them, so that the study alone carries its verdicts' gates."""
    b.evaluate(BEYOND, b.base(BEYOND, middle, MAIN), 0)
    for seed in b.s.claim_seeds[:b.s.beyond_seeds]:
        for objective in b.s.ratio_schedules:  # a masking-ratio ramp beside constant MLM-40% of its seed
            b.evaluate(BEYOND, b.base(BEYOND, middle, objective, seed, part=BEYOND))
            b.evaluate(BEYOND, b.base(BEYOND, middle, MAIN, seed))
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


def run_template(scale: ScaleConfig) -> dict:
    """The scale's run template (`mlmclm/recipes/<run_config>`), read from its file (`build_plan` does, once)."""
    import yaml

    return yaml.safe_load((RECIPES_DIR / scale.run_config).read_text())


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
