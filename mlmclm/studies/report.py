"""The plan as `mlmclm study plan` prints it (`format_plan`): its runs and grids with their status, each part's
steps, tokens and FLOPs, the paper's own accounting at the paper scale, and the compute of what is missing.
"""

from __future__ import annotations

import collections

from ..config import REFERENCE
from ..io import shown
from ..paths import Paths
from ..evaluation.grid import screen_split
from .configs import grid_configs
from .design import PAPER_ACCOUNTING
from .estimate import compute, estimate, part_totals
from .plan import Plan, Run
from .state import COMPLETE, Work, work


def format_plan(plan: Plan, paths: Paths, rate: tuple[float, str] | None = None) -> str:
    """The plan as `mlmclm study plan` prints it: its runs and grids with their status, their steps, tokens and
    FLOPs (`compute`, `part_totals`), and the wall time of what is missing and of a full run (`estimate`; `rate`:
    this machine's matmul rate, measured when needed and not given)."""
    grids = grid_configs(plan, paths)
    state = work(plan, paths, grids)
    c = compute(plan, grids)
    parts = part_totals(plan, c)
    lines = [*_header_lines(plan, paths), "", *_run_lines(plan, state), "", *_parts_table(parts), "",
             *_finetune_lines(plan, grids, state, c)]
    if plan.scale.scale == "paper":
        lines += ["", *_paper_accounting_lines(parts)]
    return "\n".join(lines + ["", *_compute_lines(estimate(plan, paths, grids, state, c, rate), state)])


def _status_line(status: str) -> str:
    return "" if status == COMPLETE else f"\n      {status}"


def _header_lines(plan: Plan, paths: Paths) -> list[str]:
    s, template = plan.scale, plan.template
    tokens_per_step = template["batch_size"] * template["data"]["seq_len"]
    return [f"Study plan: {', '.join(plan.studies)} at scale {s.scale} ({s.purpose})",
            f"  sizes {' / '.join(s.sizes)} stand for the paper's "
            f"{'210M / 610M / 1B' if len(s.sizes) > 1 else '610M (the middle size)'}; 1k of the paper's steps = "
            f"{s.steps_per_k:,} steps here; {template['batch_size']} x {template['data']['seq_len']} = "
            f"{tokens_per_step:,} tokens a step (the paper: 2,359,296)",
            f"  results: {shown(paths.results / s.scale)}; checkpoints: {shown(paths.checkpoints / s.scale)}"]


def _run_lines(plan: Plan, state: Work) -> list[str]:
    """The pretraining runs, with where each starts and its status, and how many models are evaluated."""
    def start(r: Run) -> str:
        return f"{r.parent} @{r.parent_step}" if r.parent else f"{r.decoder} (its weights)" if r.decoder else "scratch"

    runs = list(plan.runs.values())
    w = max([len("run"), *(len(r.run_id) for r in runs)])  # the columns fit the longest name
    wp = max([len("phases (steps)"), *(len(r.phases_text) - len(" steps") for r in runs)])
    ws = max([len("starts from"), *(len(start(r)) for r in runs)])
    lines = [f"Pretraining runs ({len(plan.runs)}; a run that starts from another trains only its own steps):",
             f"  {'run':<{w}} {'phases (steps)':<{wp}} {'starts from':<{ws}} {'trains':>7}  {'status':<10} studies"]
    for r in runs:
        status = state.status[r.run_id]
        lines.append(f"  {r.run_id:<{w}} {r.phases_text[:-len(' steps')]:<{wp}} {start(r):<{ws}} {r.trained:>7,}  "
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


def _parts_table(parts: dict) -> list[str]:
    w = max(10, *map(len, parts))
    return [f"  {'part':<{w}} {'runs':>5} {'steps':>11} {'tokens':>18} {'FLOPs':>10}",
            *(f"  {part:<{w}} {n:>5} {steps:>11,} {tokens:>18,} {f:>10.2e}"
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
                     f"lrs {cfg.lrs}; {_seeds_text(cfg)}; " + _steps_text(cfg))
        for name in [n for n in cfg.per_dataset if not cfg.datasets or n in cfg.datasets]:
            d = cfg.for_dataset(name)
            lines.append(f"    {name}: lrs {d.lrs}; {_seeds_text(d)}; " + _steps_text(d))
    w = max([len("evaluated model"), *(len(e.model_id) for e in plan.evaluations.values())])
    lines.append(f"  {'evaluated model':<{w}} {'grid':<10} status")
    for key, e in plan.evaluations.items():
        status = state.status[key]
        lines.append(f"  {e.model_id:<{w}} {e.grid:<10} {status.split(':')[0]}" + _status_line(status))
    return lines


def _seeds_text(cfg) -> str:
    screen, later = screen_split(cfg)
    return f"seeds {cfg.seeds}" + (f" (seeds {later} at the rate seeds {screen} chose)" if later else "")


def _steps_text(cfg) -> str:
    epochs = f"{cfg.epochs} epochs" if cfg.epochs > 1 else "one epoch"
    train = f" of {cfg.max_train:,} examples" if cfg.max_train else ""
    cap = f", at most {cfg.max_steps} steps" if cfg.max_steps > 0 else ""
    evaluated = f"; {cfg.max_eval:,} validation and test examples" if cfg.max_eval else ""
    return f"{epochs}{train} in batches of {cfg.batch_size}{cap}{evaluated}"


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


def _hours(seconds: float) -> str:
    return (f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min" if seconds < 5400 else
            f"{seconds / 3600:,.1f} h")
