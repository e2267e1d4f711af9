"""Results as one tidy table: the paper's Tables 1-17, this repository's runs and EncodEval-format folders (`load`).

Two levels of data, both pandas DataFrames with a ``source`` column:

- **scores** (table level): one row per source x model x dataset, ``score`` and ``ci`` (the 95% half-width) in
  points, with one extra row per task group, ``dataset == "Avg"``, for the group average.
- **runs** (run level): one row per fine-tuning run (model x dataset x learning rate x seed), ``validation`` and
  ``test`` scores in points.

The work is done by one module a job, and their names are re-exported here, where notebooks and users find them
(``from mlmclm import results``): `ids` (columns, model ids, sizes and steps as printed), `published` (the paper's
tables and the authors' sample), `run_tree` (results.json files, pretraining logs, run folders' parameter counts),
`aggregation` (runs -> scores by the paper's rule), `views` (what each study compares) and `compute` (FLOPs and
tokens per parameter). No torch import here: this module must stay cheap to import.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ...errors import ConfigError
from ...paths import grid_root
from .aggregation import (T95, Z95, aggregate, dedupe, default_grid, mean_ci, pool_pretraining_seeds,
                          required_datasets, select_lr, stability_grid, summarize, t95)
from .compute import AXES, flops_per_step, with_flops
from .ids import (ATTRIBUTES, AVG, BEYOND_OBJECTIVES, DATASETS, GRIDS, GROUPS, METRICS, PAPER_DATASETS, PAPER_SEEDS,
                  REFERENCE, RUN_COLUMNS, SCORE_COLUMNS, SOURCES, dataset_order, families, group_averages,
                  ordered_sizes, output_subdir, parse_model_id, sequential, size_key, step_label, with_attributes)
from .published import architecture, load_architecture, load_paper, load_run_csv
from .run_tree import load_pretrain_logs, load_run_tree, run_parameters
from .views import (SEQUENTIAL, STABILITY_LRS, biphasic_view, centered_scores, cpt_loss_curves, cpt_view,
                    data_efficiency_view, detour_view, is_clm_or_mlm40, masking_ratio_spread, mixed_view, ramp_view,
                    scaling_view)

__all__ = [
    "Results", "load",
    "T95", "Z95", "aggregate", "dedupe", "default_grid", "mean_ci", "pool_pretraining_seeds", "required_datasets",
    "select_lr", "stability_grid", "summarize", "t95",
    "AXES", "flops_per_step", "with_flops",
    "ATTRIBUTES", "AVG", "BEYOND_OBJECTIVES", "DATASETS", "GRIDS", "GROUPS", "METRICS", "PAPER_DATASETS",
    "PAPER_SEEDS", "REFERENCE", "RUN_COLUMNS", "SCORE_COLUMNS", "SOURCES", "dataset_order", "families",
    "group_averages", "ordered_sizes", "output_subdir", "parse_model_id", "sequential", "size_key", "step_label",
    "with_attributes",
    "architecture", "load_architecture", "load_paper", "load_run_csv",
    "load_pretrain_logs", "load_run_tree", "run_parameters",
    "SEQUENTIAL", "STABILITY_LRS", "biphasic_view", "centered_scores", "cpt_loss_curves", "cpt_view",
    "data_efficiency_view", "detour_view", "is_clm_or_mlm40", "masking_ratio_spread", "mixed_view", "ramp_view",
    "scaling_view",
]


@dataclass
class Results:
    """What the notebooks read: scores (table level, all sources) and runs (run level, sources with runs)."""

    scores: pd.DataFrame
    runs: pd.DataFrame

    def summary(self) -> pd.DataFrame:
        """What was loaded: per source and scale, the number of models, datasets and fine-tuning runs."""
        s = self.scores[self.scores["dataset"] != AVG].groupby(["source", "scale"], sort=False).agg(
            models=("model", "nunique"), datasets=("dataset", "nunique"))
        r = self.runs.groupby(["source", "scale"], sort=False).size().rename("runs")
        return s.join(r, how="left").fillna({"runs": 0}).astype("int64").reset_index()


def load(results_dir: str | Path = "results", sources=("paper", "ours", "encodeval"), scale: str = "mini",
         encodeval_dir: str | Path | None = None, sample_csv: str | Path | None = None,
         rule: str = "per_seed") -> Results:
    """The paper's tables, this repository's runs (``results/runs/<scale>/``) and an EncodEval folder, as Results.

    Sources: ``paper`` (results/paper), ``ours`` (results/runs/<scale>, if present, and the scale's stability grid
    results/runs/stability/<scale>, if present, as ``grid == "stability"``), ``reference`` (models pretrained
    elsewhere, fine-tuned under the scale's protocol on a grid of their own: results/runs/reference/<scale>, if
    present; they carry no claim and enter no control), ``encodeval`` (``encodeval_dir``, if given) and
    ``encodeval-sample`` (``sample_csv``: the authors' per-run sample, if given). Scores are aggregated from the
    default grids.
    """
    results_dir = Path(results_dir)
    unknown = set(sources) - set(SOURCES)
    if unknown:
        raise ConfigError(f"unknown source(s) {', '.join(sorted(unknown))}: use {', '.join(SOURCES)}")
    runs = []
    trees = [("ours", "default", grid_root(results_dir / "runs", "default") / scale),
             ("ours", "stability", grid_root(results_dir / "runs", "stability") / scale),
             (REFERENCE, "default", grid_root(results_dir / "runs", REFERENCE) / scale)]
    for source, grid, tree in trees:
        if source in sources and tree.is_dir():
            runs.append(load_run_tree(tree, source, scale, relative_to=results_dir.parent, grid=grid,
                                      records=trees[0][2] if source == "ours" else tree))
    if "encodeval" in sources and encodeval_dir is not None:
        runs.append(load_run_tree(encodeval_dir, "encodeval", "paper", paper_datasets_only=True))
    if "encodeval-sample" in sources and sample_csv is not None:
        runs.append(load_run_csv(sample_csv, "encodeval-sample"))
    runs = pd.concat(runs, ignore_index=True) if runs else pd.DataFrame(columns=RUN_COLUMNS)
    scores = [dedupe(load_paper(results_dir / "paper")).drop(columns="table")] if "paper" in sources else []
    if not runs.empty:
        scores.append(aggregate(runs, rule))
    scores = pd.concat(scores, ignore_index=True) if scores else pd.DataFrame(columns=SCORE_COLUMNS)
    return Results(scores=scores, runs=runs)
