"""The paper's numbers for the comparisons our models make: each model of a scale of ours stands for one configuration
of the paper (`config.ScaleConfig.stands_for` and `paper_steps`: the paper's size it stands for, at the same fraction
of the 42k budget), and `paper_at` reads the paper's group averages there, so that a claim's check, run on them,
compares the paper's models exactly as it compares ours (`claims.verdicts`: the ``paper_*`` columns of a row of ours).

Where the paper did not evaluate that place (a checkpoint at 30K between its 20K and 40K, a 10K CPT between its 2K and
12K), a row of ours is set beside the next place the paper printed (its 40K checkpoint, its 12K CPT), named as such
with the printed place before it: never a value the paper did not print (an interpolation between 2K and 12K of CPT
reads a transient that flips the sign of the paper's 12K SC and IR). Beyond its last printed place, nothing. A scale
whose places are all the paper's own (the twin) meets none of this. No torch here.
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd

from ...config import scale_config
from ...errors import ConfigError
from ..loading import ids


def placement(scale: str):
    """The scale's config (`config.scale_config`), or None for the paper's own and for a scale without one."""
    if scale == "paper":
        return None
    try:
        return scale_config(scale)
    except ConfigError:
        return None


@functools.lru_cache(maxsize=None)
def seeded_steps(scale: str) -> frozenset[int]:
    """The intermediate checkpoints (in the scale's steps) that the scale evaluates at every pretraining seed
    (`seeded_intermediate_k`); empty where it names none (every checkpoint then has the seeds it has). Cached: the
    claims' checks read it for every bootstrap replica."""
    s = placement(scale)
    return frozenset(round(k * s.steps_per_k) for k in s.seeded_intermediate_k) if s is not None else frozenset()


def _same_ratio(a: pd.Series, ratio) -> pd.Series:
    return a.fillna(-1).astype(float) == (-1.0 if pd.isna(ratio) else float(ratio))


def _candidates(paper: pd.DataFrame, row, size: str, to_paper) -> tuple[pd.DataFrame, str, float]:
    """The paper's models that ``row`` (one of ours) lies among: the same size, objective and masking ratio and the
    same kind of model, and the coordinate they differ in (``steps`` along a run, ``cpt_steps`` along CPT, none for
    a final model or a split: those match exactly), with ``row``'s place on it in the paper's steps."""
    p = paper[(paper["size"] == size) & (paper["objective"] == row.objective)
              & _same_ratio(paper["mask_ratio"], row.mask_ratio)
              & (paper["intermediate"].astype(bool) == bool(row.intermediate))]
    if row.cpt_steps > 0:
        start = to_paper(row.steps - row.cpt_steps)
        p = p[np.isclose((p["steps"] - p["cpt_steps"]).astype(float), start)
              & ((p["clm_steps"] > 0) == (row.clm_steps > 0)) & (p["cpt_steps"] > 0)]
        return p, "cpt_steps", to_paper(row.cpt_steps)
    if row.intermediate:
        return p, "steps", to_paper(row.steps)
    p = p[np.isclose(p["steps"].astype(float), to_paper(row.steps))
          & np.isclose(p["clm_steps"].astype(float), to_paper(row.clm_steps)) & (p["cpt_steps"] == 0)]
    return p, "steps", to_paper(row.steps)


def _read(points: pd.DataFrame, axis: str, x: float) -> tuple[float, float, str] | None:
    """The score, printed ± and name of the point of ``points`` (one task group's, a curve along ``axis``) at ``x``;
    where the paper printed none there, the next point after ``x`` it printed, named with ``x`` and the point before
    it; None beyond its last point."""
    points = points.sort_values(axis)
    xs = points[axis].to_numpy(dtype=float)
    exact = np.isclose(xs, x)
    if exact.any():
        r = points[exact].iloc[0]
        return float(r["score"]), float(r["ci"]), str(r["model"])
    if not len(xs) or x > xs[-1]:
        return None
    i = int(np.searchsorted(xs, x))
    r = points.iloc[i]
    before = f"; before it: {points.iloc[i - 1]['model']}" if i else ""
    name = f"{r['model']} (the next point the paper printed after ours at {x / 1000:g}K{before})"
    return float(r["score"]), float(r["ci"]), name


def paper_at(ours: pd.DataFrame, paper: pd.DataFrame) -> pd.DataFrame:
    """The paper's group averages at each of our models' places: per model of ours (pretraining seed 0; not a
    random-init control, nor a schedule beyond the paper's) and task group, a row of ours (its id, attributes, scale)
    with the paper's ``score`` and printed ``ci`` of the configuration it stands for (`placement`: the size, and the
    same objective, masking ratio and CLM steps at the same fraction of the budget; for a checkpoint or CPT length the
    paper did not evaluate, the next one it did, `_read`), ``source`` "paper" and ``paper_config`` naming the paper's
    model(s). Empty where no scale of ``ours`` has a placement or the paper has nothing there."""
    cols = [*ids.SCORE_COLUMNS, "paper_config"]
    ours = ids.group_averages(ours)
    ours = ours[ids.sequential(ours) & (ours["pretrain_seed"] == 0).fillna(False)]
    paper = ids.group_averages(paper[paper["source"] == "paper"]).drop_duplicates(["model", "task_group"])
    rows = []
    for scale, part in ours.groupby("scale", sort=False):
        cfg = placement(str(scale))
        if cfg is None:
            continue
        for r in part.itertuples():
            size = cfg.stands_for.get(r.size)
            if size is None:
                continue
            cand, axis, x = _candidates(paper[paper["task_group"] == r.task_group], r, size, cfg.paper_steps)
            got = _read(cand, axis, x)
            if got is not None:
                ours_row = {k: v for k, v in r._asdict().items() if k != "Index"}
                rows.append({**ours_row, "source": "paper", "score": round(got[0], 2), "ci": round(got[1], 2),
                             "n": ids.PAPER_SEEDS, "flag": "", "paper_config": got[2]})
    return pd.DataFrame(rows, columns=cols) if rows else pd.DataFrame(columns=cols)
