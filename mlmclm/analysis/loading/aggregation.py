"""Runs -> scores, the paper's rule (results/README.md, "Aggregation (runs -> scores)"): for each seed, the learning
rate with the best validation score (`select_lr`); the mean test score over seeds; +- t x s / sqrt(n), s the sample
standard deviation and t Student's 97.5% quantile with n - 1 degrees of freedom (`t95`; the paper's 1.96 for runs at
the paper's scale, EncodEval's, so that they reproduce its printed ±); group averages (`summarize`). Scores come from
each scale's default grid only (``grid == "default"``; a stability grid is its own comparison). Also: models that
differ only in their pretraining seed pooled (`pool_pretraining_seeds`). No torch import here.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ...errors import ConfigError
from .ids import ATTRIBUTES, AVG, PAPER_DATASETS, SCORE_COLUMNS

Z95 = 1.96
# Student's t, 97.5% quantile, for 1 .. 30 degrees of freedom (beyond: the Cornish-Fisher series in `t95`)
T95 = (12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281, 2.2010, 2.1788, 2.1604,
       2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860, 2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518,
       2.0484, 2.0452, 2.0423)

_KEYS = ["source", "scale", "model", "task_group", "dataset"]


def t95(dof: int) -> float:
    """Student's t 97.5% quantile with ``dof`` degrees of freedom: a table up to 30, then the Cornish-Fisher series
    (within 2e-4 of the exact value beyond 30, and 1.96 in the limit)."""
    if dof < 1:
        return math.nan
    if dof <= len(T95):
        return T95[dof - 1]
    z = Z95
    return z + (z ** 3 + z) / (4 * dof) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * dof ** 2)


def mean_ci(values, student: bool = True) -> tuple[float, float, int]:
    """(mean, 95% half-width, n) of the non-missing values: t95(n - 1) x s / sqrt(n), s with ddof 1 (``student=False``:
    the paper's 1.96 x s / sqrt(n)); the half-width missing when n < 2."""
    x = np.asarray(pd.to_numeric(pd.Series(values), errors="coerce").dropna(), dtype=float)
    n = len(x)
    if n == 0:
        return math.nan, math.nan, 0
    if n == 1:
        return float(x.mean()), math.nan, 1
    return float(x.mean()), (t95(n - 1) if student else Z95) * float(x.std(ddof=1)) / math.sqrt(n), n


def select_lr(runs: pd.DataFrame, rule: str = "per_seed") -> pd.DataFrame:
    """One run per source x model x dataset x seed: the run at the chosen learning rate.

    ``per_seed`` (the paper's rule): for each seed, the learning rate with the best validation score of that seed.
    ``seed_average``: one learning rate per model and dataset, the best on the seed-averaged validation score.
    Ties go to the smaller learning rate. Grids (``grid``) are kept apart: a run is chosen within its own grid.
    """
    keys = [*_KEYS, "grid"] if "grid" in runs else _KEYS
    runs = runs.dropna(subset=["validation"]).sort_values([*keys, "lr", "seed"], ignore_index=True)
    if rule == "per_seed":
        return runs.loc[runs.groupby([*keys, "seed"], sort=False)["validation"].idxmax()].reset_index(drop=True)
    if rule == "seed_average":
        mean_val = runs.groupby([*keys, "lr"], sort=False, as_index=False)["validation"].mean()
        best = mean_val.loc[mean_val.groupby(keys, sort=False)["validation"].idxmax(), [*keys, "lr"]]
        return runs.merge(best, on=[*keys, "lr"])
    raise ConfigError(f"unknown learning-rate rule {rule!r}: use 'per_seed' or 'seed_average'")


def summarize(selected: pd.DataFrame) -> pd.DataFrame:
    """Scores from selected runs (of one grid): mean test score over seeds +- the 95% half-width, group averages and
    the ``flag`` of cells with fewer seeds than their neighbours.

    The half-width is Student's (``mean_ci``), the paper's 1.96 x s / sqrt(n) for runs at the paper's scale. A group
    average (``dataset == "Avg"``) is the mean of the group's dataset scores (as the paper's printed averages are);
    its half-width comes from the per-seed group means, over the seeds that have every dataset. A model missing one of
    the group's datasets gets no average: the paper's three when the source uses the paper's datasets, else every
    dataset its source has in that group. ``flag`` is "" or, for a cell with fewer seeds than the most any cell of its
    source, scale, group and dataset has, "n=2 of 4 seeds": the claims leave such cells out (never averaged over
    fewer seeds silently).
    """
    if selected.empty:
        return pd.DataFrame(columns=SCORE_COLUMNS)
    attrs = selected.drop_duplicates("model").set_index("model")[ATTRIBUTES]
    rows = []
    for key, part in selected.groupby(_KEYS, sort=False):
        score, ci, n = mean_ci(part["test"], student=key[1] != "paper")
        rows.append({**dict(zip(_KEYS, key)), "score": score, "ci": ci, "n": n})
    scores = pd.DataFrame(rows)
    group_sets = scores.groupby(["source", "task_group"])["dataset"].agg(frozenset)
    for (source, scale, model, group), part in scores.groupby(_KEYS[:4], sort=False):
        if frozenset(part["dataset"]) != required_datasets(group_sets[(source, group)], group):
            continue
        runs = selected[(selected["model"] == model) & (selected["task_group"] == group)
                        & (selected["source"] == source)]
        per_seed = runs.pivot_table(index="seed", columns="dataset", values="test").dropna()
        _, ci, n = mean_ci(per_seed.mean(axis=1), student=scale != "paper")
        rows.append({"source": source, "scale": scale, "model": model, "task_group": group, "dataset": AVG,
                     "score": float(part["score"].mean()), "ci": ci, "n": n})
    out = pd.DataFrame(rows).merge(attrs, left_on="model", right_index=True, how="left")
    out["n"] = out["n"].astype("Int64")
    most = out.groupby(["source", "scale", "task_group", "dataset"])["n"].transform("max")
    out["flag"] = [f"n={n} of {m} seeds" if n < m else "" for n, m in zip(out["n"], most)]
    return out[SCORE_COLUMNS]


def required_datasets(datasets, group: str) -> frozenset:
    """The datasets a group average needs, given those a source has in the group: the paper's three when they are
    among the paper's, else all of them."""
    datasets = frozenset(datasets)
    return PAPER_DATASETS[group] if datasets <= PAPER_DATASETS.get(group, frozenset()) else datasets


def aggregate(runs: pd.DataFrame, rule: str = "per_seed") -> pd.DataFrame:
    """Runs -> scores with the paper's aggregation (``rule="seed_average"`` for the alternative), from the default
    grid's runs only."""
    return summarize(select_lr(default_grid(runs), rule))


def pool_pretraining_seeds(scores: pd.DataFrame) -> pd.DataFrame:
    """Scores with the models that differ only in their pretraining seed pooled into one row under the seed-0 id:
    ``score`` the mean over the pretraining seeds (each seed's mean over fine-tuning seeds), ``ci`` the 95%
    half-width of that mean, t95(k - 1) x sd / sqrt(k) over the k seeds (a seed's own mean carries its fine-tuning
    noise, so this counts both; one seed keeps its own half-width), ``pretrain_seeds`` = k; ``n`` stays seed 0's
    number of fine-tuning seeds. Rows are pooled per source, scale, dataset and family (``family``), only where every
    seed has the cell."""
    if scores.empty:
        return scores.assign(pretrain_seeds=pd.Series(dtype="int64"))
    keys = ["source", "scale", "family", "task_group", "dataset"]
    g = scores.groupby(keys, sort=False, dropna=False)["score"]
    k = g.transform("size")
    sd = g.transform("std")
    t = pd.Series([t95(int(n) - 1) if n > 1 else math.nan for n in k], index=scores.index)
    pooled = scores.assign(score=g.transform("mean"), ci=np.where(k > 1, t * sd / np.sqrt(k), scores["ci"]),
                       pretrain_seeds=k.astype("int64"))
    seed0 = pooled["model"] == pooled["family"]
    return pooled[seed0].reset_index(drop=True)


def default_grid(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs of the default fine-tuning grid (every comparison but the stability study's)."""
    return runs[runs["grid"] == "default"] if "grid" in runs else runs


def stability_grid(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs the stability study compares: each source and scale's stability grid where it has one, else its
    default grid (the ``mini`` scale's stability study reads its default grid)."""
    if "grid" not in runs:
        return runs
    stability = runs["grid"] == "stability"
    if not stability.any():
        return runs[runs["grid"] == "default"]
    has = pd.MultiIndex.from_arrays([runs["source"], runs["scale"]]).isin(
        set(zip(runs.loc[stability, "source"], runs.loc[stability, "scale"])))
    return runs[np.where(has, stability, runs["grid"] == "default")]


def dedupe(scores: pd.DataFrame) -> pd.DataFrame:
    """One row per source x model x dataset: the paper prints some models in several tables (same numbers)."""
    return scores.drop_duplicates(["source", "scale", "model", "task_group", "dataset"]).reset_index(drop=True)
