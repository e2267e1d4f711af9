"""A figure point and its interval: models that differ only in their pretraining seed pooled into one point
(`pool`), the one function that computes every point's estimate and 95% half-width (`interval`), and MLM-40% minus
CLM per checkpoint with the difference's half-width (`mlm_lead`, for Fig. 4 across scales and the crossover tables:
the verdicts' interval of it, `bootstrap.seed_test` on the two families' seeds, or where one has a single seed
`bootstrap.seed_mean_replicas`, where the scale has pretraining seeds to pool).
No torch import here.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..judging import bootstrap
from ..loading import aggregation
from ..loading import ids
from ..loading import views


def interval(rows: pd.DataFrame, minus: pd.DataFrame | None = None) -> tuple[float, float]:
    """(estimate, 95% half-width) of one figure point: the only place a figure computes an interval.

    ``rows`` are the score rows (`aggregation.summarize`: ``score`` = the mean over fine-tuning seeds at the selected
    learning rate, ``ci`` its half-width) of the pretraining seeds of one model and cell, one row a seed; with
    ``minus``, the same for a second model, and the point is the difference (``rows`` minus ``minus``). One seed: its
    own score and half-width; k seeds: their mean and t95(k - 1) x sd / sqrt(k) over the seed means (a seed's mean
    carries its fine-tuning noise, so this counts both sources); a difference: the two half-widths in quadrature. The
    half-width is NaN where there is none (one pretraining seed with one fine-tuning seed)."""
    def one(r: pd.DataFrame) -> tuple[float, float]:
        if len(r) == 1:
            return float(r["score"].iloc[0]), float(r["ci"].iloc[0])
        mean, half, _ = aggregation.mean_ci(r["score"])
        return mean, half
    estimate, half = one(rows)
    if minus is None:
        return estimate, half
    other, other_half = one(minus)
    return estimate - other, math.hypot(half, other_half)


def pool(scores: pd.DataFrame) -> pd.DataFrame:
    """Scores with the models that differ only in their pretraining seed (``family``) pooled into one row under
    the seed-0 id, per source, scale, task group and dataset: ``score`` and ``ci`` from `interval` over the seeds'
    rows, ``pretrain_seeds`` = k, ``members`` = the index labels of those rows in ``scores`` (for a difference of two
    pooled models, `mlm_lead`). A family without its seed-0 row is left out (the views select by the seed-0 id)."""
    if not scores.index.is_unique:
        scores = scores.reset_index(drop=True)
    out = []
    for _, rows in scores.groupby(["source", "scale", "family", "task_group", "dataset"], sort=False, dropna=False):
        seed0 = rows.index[rows["model"] == rows["family"]]
        if len(seed0):
            score, ci = interval(rows)
            out.append((seed0[0], score, ci, len(rows), tuple(rows.index)))
    index = [o[0] for o in out]
    pooled = scores.loc[index]
    return pooled.assign(score=[o[1] for o in out], ci=[o[2] for o in out],
                         pretrain_seeds=pd.Series([o[3] for o in out], index=index, dtype="int64"),
                         members=pd.Series([o[4] for o in out], index=index, dtype=object)).reset_index(drop=True)


def _seed_mean_half_widths(scores: pd.DataFrame, pairs: pd.DataFrame) -> list[float]:
    """Per row of ``pairs`` (``model_mlm`` minus ``model_clm``, seed-0 ids), the 95% half-width of the difference that
    the verdicts give it: where both families have 2+ pretraining seeds, the test on them (`bootstrap.seed_test`,
    paired by seed where they share their seeds); else the pooled interval (`bootstrap.seed_mean_replicas` and
    `bootstrap.percentile_interval`, the judge's defaults: the same replicas, so the same interval); NaN where the
    scale's task group has no model with 2+ pretraining seeds."""
    out = []
    for (source, scale), part in pairs.groupby(["source", "scale"], sort=False):
        avg = ids.group_averages(scores[(scores["source"] == source) & (scores["scale"] == scale)])
        fams, draws = bootstrap.seed_mean_replicas(avg)
        col = {(g, f): i for i, (g, f) in enumerate(zip(fams["task_group"], fams["model"]))}
        for r in part.itertuples():
            coefs = pd.DataFrame({"model": [r.model_mlm, r.model_clm], "task_group": r.task_group, "coef": [1.0, -1.0]})
            values, _ = bootstrap.seed_contributions(avg, coefs)
            if values is not None:
                t = bootstrap.seed_test(values)
                out.append((r.Index, (t["hi"] - t["lo"]) / 2))
                continue
            a, b = col.get((r.task_group, r.model_mlm)), col.get((r.task_group, r.model_clm))
            gap = pd.DataFrame({"scope": "gap", "value": draws[:, a] - draws[:, b] if None not in (a, b) else np.nan})
            bounds = bootstrap.percentile_interval(gap)
            out.append((r.Index, float((bounds["hi"] - bounds["lo"]).iloc[0]) / 2 if len(bounds) else np.nan))
    return [h for _, h in sorted(out)]


def mlm_lead(scores: pd.DataFrame) -> pd.DataFrame:
    """MLM-40% minus CLM (``gap``, from `interval` over the two models' pretraining seeds; its 95% half-width
    ``gap_ci``, the verdicts' where the scale's task group has models with 2+ pretraining seeds,
    `_seed_mean_half_widths`, else `interval`'s; and the larger ``pretrain_seeds`` of the two) per source, scale, size and task group: at each
    intermediate checkpoint and, as ``final``, at the full budget, for the sizes with intermediate checkpoints."""
    scores = scores.reset_index(drop=True)
    pooled = ids.group_averages(pool(scores))
    early = views.data_efficiency_view(pooled)
    final = views.scaling_view(pooled).merge(early[["source", "scale", "size"]].drop_duplicates())
    both = pd.concat([early.assign(final=False), final[views.is_clm_or_mlm40(final)].assign(final=True)])
    keys = ["source", "scale", "size", "task_group", "steps", "final"]
    cols = [*keys, "model", "members", "pretrain_seeds"]
    m = both[both["objective"] == "mlm"][cols].merge(both[both["objective"] == "clm"][cols], on=keys,
                                                     suffixes=("_mlm", "_clm"))
    gaps = [interval(scores.loc[list(a)], minus=scores.loc[list(b)]) for a, b in zip(m["members_mlm"],
                                                                                       m["members_clm"])]
    seed_means = _seed_mean_half_widths(scores, m)
    gaps = [(g, h if np.isnan(s) else s) for (g, h), s in zip(gaps, seed_means)]
    return m.assign(gap=[g for g, _ in gaps], gap_ci=[h for _, h in gaps],
                    pretrain_seeds=np.maximum(m["pretrain_seeds_mlm"], m["pretrain_seeds_clm"]))[
        [*keys, "gap", "gap_ci", "pretrain_seeds"]]
