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

The package, one job a module: `plan` (what a plan holds), `design` (the studies in the paper's units -> a plan),
`configs` (each run's and grid's config), `state` (what is complete, what is to do), `runner` (train and fine-tune
what is missing), `estimate` (FLOPs and wall time), `report` (the plan printed); here, the public names and the jobs
of the `mlmclm study` verb (`add_options`) and of `mlmclm reproduce` (`reproduce`), which call them as this package's
names (a test that replaces `studies.run` replaces what `study run` and `reproduce` call).
"""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

from .. import workspace
from ..analysis.drawing import notebooks
from ..commands import runs_dir
from ..config import (BEYOND, GRID_SECTIONS, NOTEBOOK_STUDY, STUDIES, ScaleConfig,  # STUDIES: the one list
                      scale_config, scale_names)
from ..errors import ConfigError
from ..evaluation.tasks import group_datasets
from ..io import check_writable, repo_relative, shown
from ..paths import Paths
from .configs import decoder_path, grid_config, grid_configs, run_config
from .design import PAPER_ACCOUNTING, build_plan, resolve_names, run_template, scale_studies
from .estimate import compute, estimate, machine_rate, measured_finetune_rate, measured_rate, part_totals
from .plan import Evaluation, Plan, Run
from .report import format_plan
from .runner import run, task_names
from .state import (ASIDE, COMPLETE, Work, checkpoint_fault, grid_results, has_checkpoint,
                    missing_results, required_results, result_faults, run_fault, set_aside, work)

__all__ = ["ASIDE", "BEYOND", "COMPLETE", "NOTEBOOK_STUDY", "PAPER_ACCOUNTING", "STUDIES", "Evaluation", "Paths",
           "Plan", "Run", "Work", "add_options", "build_plan", "check_overrides", "checkpoint_fault",
           "compute", "decoder_path", "estimate", "format_plan", "grid_config", "grid_configs", "grid_results",
           "group_overrides", "has_checkpoint", "machine_rate", "measured_finetune_rate", "measured_rate",
           "missing_results", "part_totals", "paths_from", "print_verdicts", "reproduce", "resolve_names", "result_faults",
           "required_results", "run", "run_config",
           "run_fault", "run_template", "scale_studies", "set_aside", "task_names", "work"]


def add_options(p) -> None:
    """`mlmclm study plan|run`."""
    sp = p.add_subparsers(dest="action", required=True)
    for action, help_ in (("plan", "print the runs, shared segments, fine-tuning runs and compute"),
                          ("run", "train and fine-tune what is missing (safe to interrupt and re-run)")):
        a = sp.add_parser(action, help=help_)
        a.add_argument("name", nargs="?", default="all", help=f"{', '.join(STUDIES)} or all (default: all)")
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


def paths_from(args, root: Path) -> Paths:
    """The study's folders: those the command line names (from the working directory), else in the working root."""
    given = (args.runs_dir, args.checkpoints_dir, args.data_dir)
    return Paths(root, *(Path(d).resolve() if d else None for d in given))


def group_overrides(scale: ScaleConfig, groups: str) -> list[str]:
    """The scale fields that cut its grids to the datasets of `groups` ("IR", "SC,TC")."""
    wanted = [g.strip() for g in groups.split(",") if g.strip()]
    out = [f"finetune.groups=[{','.join(wanted)}]"]
    if scale.finetune.datasets:  # else every dataset of the groups (the paper's suite)
        kept = group_datasets(scale.finetune.suite, scale.finetune.datasets, wanted)
        out.append(f"finetune.datasets=[{','.join(kept)}]")
    return out


def check_overrides(overrides, plan: Plan, names) -> None:
    """Every `--set` on a grid must reach a grid that `names` fine-tune with: `finetune.X` where their only grid is
    the stability (or control) grid and it sets its own X, or `stability.X` (`control.X`) where none of them uses
    that grid, is refused."""
    grids = {e.grid for e in plan.evaluations.values()}
    whose = {"stability": "the stability study's own grid", "control": "the random-init controls' own grid"}
    for item in overrides:
        key = item.partition("=")[0]
        section, _, name = key.partition(".")
        name = name.split(".")[0]
        own = [g for g in grids if g in GRID_SECTIONS and name in getattr(plan.scale, g)]
        if section == "finetune" and own and len(own) == len(grids):
            raise ConfigError(f"--set {key} does not reach the {own[0]} grid, which sets its own {name}; set "
                              f"{own[0]}.{name} instead")
        if section in GRID_SECTIONS and section not in grids:
            raise ConfigError(f"--set {key} reaches only {whose[section]}, which the studies run "
                              f"here ({', '.join(names)}) do not use; set finetune.{name} instead")


def _cli(args) -> int:
    paths = paths_from(args, args.root)
    scale = scale_config(args.scale, args.overrides)  # read once; the plan carries it
    if args.groups is not None:  # `--groups ''` names no group: refused as `--groups ,` is, not read as all
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


def reproduce(scale: str, root: Path, *, results_dir: str | None = None, output_dir: str | None = None,
              checkpoints_dir: str | None = None, data_dir: str | None = None) -> None:
    """The main job (`mlmclm reproduce`): the five studies at a scale, then the five notebooks, so that every figure
    and table is regenerated with this scale's results beside the paper's: in place, beside every other committed
    scale, when this scale's runs are committed (the committed notebooks are what `make reproduce SCALE=...` of a
    committed scale writes); else (tiny, a user's own scale), or with `output_dir` or `results_dir`, this scale's
    alone, in its own folder (`results/local/<scale>/`, which git ignores, unless `output_dir` names another), so the
    checkout stays clean. The folders are as typed on the command line (read from the working directory), None for
    their default in the working root `root`."""
    start = time.perf_counter()
    results = Path(results_dir).resolve() if results_dir else root / "results"
    out = Path(output_dir).resolve() if output_dir else None
    for folder in (results, out):  # before the studies, not after them
        if folder is not None:
            check_writable(folder)
    plan = build_plan(scale_config(scale))  # the scale resolved once, here; the plan carries it
    print(f"mlmclm reproduce --scale {scale}: the {len(plan.studies)} studies of this scale ({', '.join(plan.studies)}:"
          f" train and fine-tune what is missing under {shown(results / 'runs' / scale)}), then the five notebooks."
          "\n", flush=True)
    if not (results / "paper").exists():  # a new working folder or results dir: the paper's tables beside ours
        workspace.init(root)
        if results != root / "results":
            results.mkdir(parents=True, exist_ok=True)
            (results / "paper").symlink_to(root / "results" / "paper", target_is_directory=True)
    paths = Paths(root, results / "runs", *(Path(d).resolve() if d else None for d in (checkpoints_dir, data_dir)))
    run(plan, paths, data_dir=paths.data / "tasks" if data_dir else None)
    if out is None:  # not committed, or a results folder of one's own: its own notebooks, figures and tables
        out = notebooks.local_folder(results, [scale], own=results.resolve() != (root / "results").resolve())
    figures = out / "figures" if out else root / "figures"
    tables = out / "tables" if out else results / "tables"
    sub = "" if scale == "paper" else f"ours-{scale}"
    parameters = {"scales": [scale], **{name: repo_relative(path, root) for name, path in (  # no machine path
        ("results_dir", results), ("figures_dir", figures), ("tables_dir", tables))}} if out or results_dir else {}
    printed = {name: shown(path) for name, path in (
        ("notebooks", out / "notebooks" if out else root / "notebooks"), ("figures", figures), ("tables", tables),
        ("figures_sub", figures / sub), ("tables_sub", tables / sub), ("runs", paths.results / scale))}
    print(f"\nnotebooks (papermill), into {printed['notebooks']}/:", flush=True)
    done = notebooks.execute(parameters=parameters, output_dir=out / "notebooks" if out else None,
                             progress=lambda text: print(text, flush=True), root=root)
    for name, seconds in done.items():
        print(f"  {name:<20} {seconds:5.1f} s", flush=True)
    print_verdicts(results, scale)
    print(f"\ndone in {(time.perf_counter() - start) / 60:.1f} min.\n"
          f"  notebooks: {printed['notebooks']}/ (executed)\n"
          f"  figures:   {printed['figures']}/ (the paper's) and {printed['figures_sub']}/ (this scale's)\n"
          f"  tables:    {printed['tables']}/ (the paper's) and {printed['tables_sub']}/ (this scale's)\n"
          f"  runs:      {printed['runs']}/ (pretraining logs, fine-tuning results)\n"
          f"  verdicts:  the last section of each notebook")


def print_verdicts(results_dir: Path, scale: str) -> None:
    """The paper's claims: the paper's verdict and this scale's, with the statistic and its interval."""
    from ..analysis.judging import claims
    from ..analysis.loading import results

    data = results.load(results_dir, sources=["paper", "ours"], scale=scale)
    v = claims.verdicts(data.scores, data.runs, list(claims.CLAIMS), numbers=True)
    print(f"\nverdicts (statistic > 0 where the claim holds; 95% interval). paper: the claim as the paper prints "
          f"it, over its sizes (the README's table sets the 610M beside the twin instead); ours: {scale}.")
    for claim, rows in v.groupby("claim", sort=False):
        print("\n".join(textwrap.wrap(claim, 116, initial_indent="  ", subsequent_indent="     ")))
        for scope, part in rows.groupby("scope", sort=False):
            cells = []
            for source in ("paper", "ours"):
                row = part[part["source"] == source]
                if row.empty or row["value"].isna().iloc[0]:
                    cells.append(f"{source}: {row['verdict'].iloc[0] if len(row) else 'not checkable'}")
                    continue
                r = row.iloc[0]
                cells.append(f"{source}: {r['verdict']} ({r['value']:+.2f} [{r['ci_low']:+.2f}, {r['ci_high']:+.2f}])")
            print(f"     {'every group' if scope == 'all' else scope:<11} " + "; ".join(cells))
