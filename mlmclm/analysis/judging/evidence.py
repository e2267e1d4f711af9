"""What a verdict stands on besides its statistic: the controls (a constant predictor and a random-init model of each
size), how far fine-tuning had settled (the last epoch's validation gain), and the calibration criteria of a
fine-tuning grid.

The controls are run-level: a scale's runs fine-tune a random-init control of each size (the step-0 checkpoint of a
base run, objective ``random``) with the same protocol as the pretrained models, and each SC and TC result records what
the training set's majority label scores (``majority``). The paper has neither. No torch import here.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..loading import aggregation
from ..loading import ids
from ..loading import views

CELL = ["source", "scale", "size", "task_group", "dataset"]
MAX_HALF_WIDTH = 2.0  # calibration: the 95% half-width of each group mean, in points
MIN_INTERIOR = 0.8  # calibration: the share of (model, dataset) cells whose selected learning rate is inside the grid
MAX_LAST_GAIN = 1.0  # calibration: validation plateaued, the mean gain over the last fine-tuning epoch, in points


def beyond(a, a_ci, b, b_ci) -> np.ndarray:
    """Whether a - b exceeds the combined 95% half-width sqrt(a_ci^2 + b_ci^2) (False where a half-width is missing)."""
    a, a_ci, b, b_ci = (np.asarray(x, dtype=float) for x in (a, a_ci, b, b_ci))
    return (a - b) > np.hypot(a_ci, b_ci)  # NaN compares False


def random_controls(scores: pd.DataFrame) -> pd.DataFrame:
    """The random-init control's score per source, scale, size, group and dataset (``random_model``, ``random``,
    ``random_ci``): where a size has several step-0 checkpoints, the strongest (the stricter control)."""
    r = scores[(scores["objective"] == "random").fillna(False)].dropna(subset=["score"])
    r = r.loc[r.groupby(CELL, sort=False)["score"].idxmax()]
    return r[[*CELL, "model", "score", "ci"]].rename(
        columns={"model": "random_model", "score": "random", "ci": "random_ci"})


def _majority(runs: pd.DataFrame) -> pd.DataFrame:
    """What the majority-class predictor scores: the mean over the runs of a dataset (default grid); a group's
    average is the mean over its datasets (missing if one lacks it)."""
    runs = aggregation.default_grid(runs)
    keys = ["source", "scale", "task_group", "dataset"]
    m = runs.groupby(keys, sort=False)["majority"].mean().reset_index()
    avg = m.groupby(keys[:3], sort=False)["majority"].agg(lambda x: x.mean(skipna=False)).reset_index()
    return pd.concat([m, avg.assign(dataset=ids.AVG)], ignore_index=True)


def controls(scores: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """One row per run-level source x scale x size x task group x dataset (and the group average ``Avg``): what the
    majority-class predictor scores, the random-init control (``random``, ``random_ci``), the best pretrained model
    (``best_pretrained``, ``best_score``, ``best_ci``: the highest-scoring full-length run, any objective or
    pretraining seed) and ``helped``: whether it beats the random-init control beyond the combined half-width."""
    s = scores[scores["source"].isin(set(runs["source"])) & scores["objective"].notna()]
    pre = s[(s["objective"] != "random") & ~s["intermediate"].astype("boolean").fillna(False)].dropna(subset=["score"])
    best = pre.loc[pre.groupby(CELL, sort=False)["score"].idxmax(), [*CELL, "model", "score", "ci"]]
    best = best.rename(columns={"model": "best_pretrained", "score": "best_score", "ci": "best_ci"})
    out = best.merge(random_controls(s), on=CELL, how="left").merge(
        _majority(runs), on=["source", "scale", "task_group", "dataset"], how="left")
    out["helped"] = beyond(out["best_score"], out["best_ci"], out["random"], out["random_ci"])
    order = pd.DataFrame({"s": out["size"].map(ids.size_key), "g": out["task_group"].map(ids.GROUPS.index),
                          "d": out["dataset"].map(lambda d: (d == ids.AVG, d))})
    out = out.loc[order.sort_values(["s", "g", "d"], kind="stable").index]
    cols = [*CELL, "majority", "random_model", "random", "random_ci", "best_pretrained", "best_score", "best_ci",
            "helped"]
    return out.sort_values(["source", "scale"], kind="stable")[cols].reset_index(drop=True)


def against_control(scores: pd.DataFrame, models, groups) -> pd.DataFrame:
    """Per model of ``scores`` in the families of ``models`` (``family``: each pretraining seed of a compared
    model) and task group of ``groups``: its group average (``score``, ``ci``), the random-init control of its size
    (`random_controls`: ``random``, ``random_ci``; missing where the size has none), ``beats``: whether it is above
    the control beyond the combined half-width, and ``leading``: whether its family scores highest (the mean over its
    seeds) among the compared families of its size and group."""
    avg = ids.group_averages(scores)
    compared = avg[avg["family"].isin(ids.families(avg, models)) & avg["task_group"].isin(set(groups))]
    m = compared.merge(random_controls(avg), on=CELL, how="left")
    cell = ["source", "scale", "size", "task_group"]
    mean = m.groupby([*cell, "family"], sort=False)["score"].transform("mean")
    top = mean.groupby([m[c] for c in cell], sort=False).transform("max")
    return m.assign(beats=beyond(m["score"], m["ci"], m["random"], m["random_ci"]), leading=mean == top)


def signal(scores: pd.DataFrame, models, groups) -> str:
    """"" when, in each of ``groups`` and at each size, the leading model of ``models`` (ids; the family with the
    highest group average, `against_control`) beats the random-init control of its size beyond the combined
    half-width, each of its pretraining seeds: the comparison then measures pretraining, whatever the trailing model
    does (`below_control` names those below it); else the reason, for a "no signal" verdict."""
    m = against_control(scores, models, groups)
    if m.empty:
        return ""
    lacking = m[m["random"].isna()]
    if not lacking.empty:
        where = [size if set(part) == set(groups) else f"{size} ({', '.join(part)})" for size, part in
                 lacking.drop_duplicates(["size", "task_group"]).groupby("size")["task_group"]]
        return f"no random-init control for {', '.join(where)}"
    failed = m[m["leading"] & ~m["beats"]]
    if failed.empty:
        return ""
    shown = "; ".join(f"{r.model} {r.task_group} {r.score:.1f} vs control {r.random:.1f} ± {r.random_ci:.1f}"
                      for r in failed.head(3).itertuples())
    return f"no compared model beats the random-init control beyond the combined interval (the leading: {shown})"


def below_control(scores: pd.DataFrame, models, groups) -> str:
    """The models of ``models``' families (each pretraining seed) whose group average in ``groups`` does not beat
    the random-init control of their size beyond the combined half-width, in words ("" when none): reported beside
    a verdict, not a gate."""
    m = against_control(scores, models, groups).dropna(subset=["random"])
    m = m[~m["beats"]]
    return "; ".join(f"{r.model} {r.task_group} {r.score:.2f} vs control {r.random:.2f} ± {r.random_ci:.2f}"
                     for r in m.itertuples())


def pretraining_effect(scores: pd.DataFrame, models, groups) -> float:
    """What pretraining adds in ``groups``: the leading model of ``models`` (ids; the mean over its pretraining
    seeds) minus the random-init control of its size (group averages), the mean over sizes and groups; NaN without
    a control."""
    m = against_control(scores, models, groups)
    m = m[m["leading"]].groupby(["size", "task_group"], sort=False)[["score", "random"]].mean()
    return float((m["score"] - m["random"]).mean()) if not m.empty else float("nan")


def last_epoch_gains(runs: pd.DataFrame) -> pd.DataFrame:
    """Per source, scale, model family (``family``: pretraining seeds together) and task group, how much the
    selected runs' validation score still rose over their last fine-tuning epoch (``last_gain``, points: the mean over
    seeds and pretraining seeds per dataset, then over the group's datasets; NaN without a validation curve)."""
    sel = aggregation.select_lr(aggregation.default_grid(runs))
    keys = ["source", "scale", "family", "task_group"]
    per = sel.groupby([*keys, "dataset"], sort=False)["last_gain"].agg(lambda g: g.mean(skipna=False))
    return per.groupby(keys, sort=False).agg(lambda g: g.mean(skipna=False)).rename("last_gain").reset_index()


def unsettled(runs: pd.DataFrame, models, groups, difference: float, spread: bool = False,
              interval: tuple[float, float] = (np.nan, np.nan)) -> str:
    """"" unless fine-tuning had not settled by as much as a verdict's margin: the statistic's 95% ``interval``
    excludes 0 but its end nearer 0 lies within the difference's own change over the last fine-tuning epoch, so one
    more such epoch could move it onto 0; the reason says so. An interval that holds 0 claims nothing such a change
    could undo ("inconclusive" stays), and a precise difference near 0 is settled. Without an interval: ``difference``
    itself smaller than that change. The change is measured on validation scores at the selected learning rates
    (`last_epoch_gains`) in each of ``groups``: for a difference of models, the largest gap between the last-epoch
    gains of two compared families (``models``, seed-0 ids; of two families, the difference's own change); for claim
    4's difference of spreads (``spread``), the MLM-minus-CLM standard deviation of centered validation scores
    (`views.centered_scores`) at the last epoch minus the same one epoch before. A gain that both models share moves
    neither difference."""
    low, high = interval
    known = not (np.isnan(low) or np.isnan(high))
    if np.isnan(difference) or (known and low <= 0 <= high):
        return ""
    change, where = (_spread_change(runs, groups) if spread else _difference_change(runs, models, groups))
    margin = min(abs(low), abs(high)) if known else abs(difference)
    if np.isnan(change) or margin >= abs(change):
        return ""
    if not known:
        return (f"the difference ({difference:+.2f}) is smaller than its own change over the last fine-tuning epoch "
                f"({change:+.2f}, {where}): fine-tuning had not settled by that much")
    return (f"its 95% interval [{low:+.2f}, {high:+.2f}] ends nearer 0 than the difference's own change over the last "
            f"fine-tuning epoch ({change:+.2f}, {where}): one more such epoch could move it onto 0, fine-tuning had "
            f"not settled by that much")


def _difference_change(runs: pd.DataFrame, models, groups) -> tuple[float, str]:
    """The largest last-epoch change of a difference between two of the compared families, over ``groups``, and
    where it is (its families and group); NaN with fewer than two families with a validation curve."""
    gains = last_epoch_gains(runs)
    gains = gains[gains["family"].isin(set(models)) & gains["task_group"].isin(set(groups))]
    best, where = np.nan, ""
    for group, g in gains.dropna(subset=["last_gain"]).groupby("task_group", sort=False):
        if len(g) < 2:
            continue
        hi, lo = g.loc[g["last_gain"].idxmax()], g.loc[g["last_gain"].idxmin()]
        change = hi["last_gain"] - lo["last_gain"]
        if np.isnan(best) or change > abs(best):
            best, where = change, f"{hi['family']} minus {lo['family']} on {group}"
    return best, where


def _spread_change(runs: pd.DataFrame, groups) -> tuple[float, str]:
    """The change of claim 4's statistic (MLM-40% sd minus CLM sd of centered validation scores, mean over datasets)
    over the last fine-tuning epoch, in ``groups``; NaN without validation curves."""
    runs = runs[runs["task_group"].isin(set(groups))].dropna(subset=["validation", "last_gain"])

    def statistic(r):
        m = views.model_spreads(views.centered_scores(r, split="validation", every_seed=True))
        sd = m.groupby(["dataset", "family"])["sd"].mean().unstack() if not m.empty else m
        return float((sd["MLM"] - sd["CLM"]).mean()) if {"CLM", "MLM"} <= set(sd.columns) else np.nan

    if runs.empty:
        return np.nan, ""
    before = runs.assign(validation=runs["validation"] - runs["last_gain"])
    return statistic(runs) - statistic(before), f"the spread difference on {', '.join(groups)}"


# ----------------------------------------------------------------------------------------------- calibration


@dataclass
class Calibration:
    """The calibration criteria of one source's default grid (issue "Evidence that holds"):

    (a) ``unequal``: the models whose (learning rate, seed) runs differ from their comparison's grid (per source,
        scale and dataset; the grid most of its models have; random-init controls aside): empty when they are equal;
    (b) ``interior``: the share of (model, dataset) cells whose selected learning rate is not at the grid's smallest
        or largest (at least ``MIN_INTERIOR``); ``edge_cells`` lists the others;
    (c) ``wide``: the group means whose 95% half-width exceeds ``MAX_HALF_WIDTH`` points (or is missing);
    (d) ``unconverged``: the (model, dataset) cells, controls included, where validation had not plateaued: the
        selected runs gained more than ``MAX_LAST_GAIN`` points over their last epoch (mean over seeds), or have no
        validation curve to show it (fine-tuned for one epoch). Only the datasets a model was fine-tuned on: a
        zero-shot set (a run's ``zero_shot``) is scored along another set's training, whose plateau is the one
        checked; its own drift still counts where a verdict's difference is compared with the last-epoch gain
        (`unsettled`).
    """

    unequal: pd.DataFrame
    interior: float
    edge_cells: pd.DataFrame
    wide: pd.DataFrame
    unconverged: pd.DataFrame

    @property
    def passed(self) -> bool:
        return bool(self.summary()["passed"].all())

    def summary(self) -> pd.DataFrame:
        """One row per criterion: whether it holds and the numbers behind it."""
        n_edge = len(self.edge_cells)
        return pd.DataFrame([
            {"criterion": "equal grids within each comparison", "passed": self.unequal.empty,
             "detail": f"{len(self.unequal)} model x dataset grid(s) differ"},
            {"criterion": f"selected learning rate inside the grid in >= {MIN_INTERIOR:.0%} of cells",
             "passed": bool(self.interior >= MIN_INTERIOR),
             "detail": f"{self.interior:.0%} inside ({n_edge} cell(s) at an edge)"},
            {"criterion": f"95% half-width of each group mean <= {MAX_HALF_WIDTH:g} points", "passed": self.wide.empty,
             "detail": f"{len(self.wide)} group mean(s) wider"},
            {"criterion": f"validation plateaued on the datasets fine-tuned on: gain over the last epoch <= "
                          f"{MAX_LAST_GAIN:g} point(s)",
             "passed": self.unconverged.empty,
             "detail": f"{len(self.unconverged)} cell(s) still rising or without a validation curve"},
        ])


def _grid_text(grid) -> str:
    pairs, protocols = grid[:2]
    later = sorted(sd for lr, sd in pairs if lr is None)  # seeds at one chosen rate each (`_grid_runs`)
    lrs, seeds = sorted({lr for lr, _ in pairs if lr is not None}), sorted({sd for lr, sd in pairs if lr is not None})
    full = len(pairs) - len(later) == len(lrs) * len(seeds)
    shown = "; ".join(p for p in sorted(protocols) if p)
    return (f"lr {', '.join(f'{lr:g}' for lr in lrs)} x seeds {', '.join(map(str, seeds))}"
            + ("" if full else f" ({len(pairs) - len(later)} runs, not every pair)")
            + (f", seeds {', '.join(map(str, later))} at one chosen rate each" if later else "")
            + (f" at {shown}" if shown else ""))


def _unequal_grids(runs: pd.DataFrame) -> pd.DataFrame:
    """(a): per source, scale and dataset, each model's set of (lr, seed) runs, and the protocols they were trained
    with (``protocol``: epochs, sizes), against the most common set of the pretrained models. A random-init control
    is held to its seeds and protocols only: no claim compares it, and a scale may give it more rates
    (`ScaleConfig.control`: a random model wants others), which can only raise the bar pretrained models clear."""
    keys = ["source", "scale", "task_group", "dataset"]
    runs = runs if "protocol" in runs else runs.assign(protocol="")
    grids = runs.groupby([*keys, "model"], sort=False).apply(
        lambda r: (_grid_runs(r), frozenset(r["protocol"]), (r["objective"] == "random").all()),
        include_groups=False).rename("runs").reset_index()
    rows = []
    for key, part in grids.groupby(keys, sort=False):
        pretrained = part[~part["runs"].map(lambda g: g[2])]
        counts = (pretrained if len(pretrained) else part)["runs"].value_counts()
        reference = max(counts.index, key=lambda g: (counts[g], len(g[0])))
        for r in part[part["runs"].map(lambda g: not _same_grid(g, reference))].itertuples():
            rows.append({**dict(zip(keys, key)), "model": r.model, "grid": _grid_text(r.runs),
                         "reference": _grid_text(reference)})
    return pd.DataFrame(rows, columns=[*keys, "model", "grid", "reference"])


def _grid_runs(runs: pd.DataFrame) -> frozenset:
    """A model's (lr, seed) runs on one dataset, a seed fine-tuned at one rate of the model's several (a screened
    grid's later seed, at the rate its screen chose: `FinetuneConfig.screen_seeds`) as (None, seed): models whose
    screens chose different rates ran the same grid."""
    one_rate = (runs.groupby("seed")["lr"].transform("nunique") == 1) & (runs["lr"].nunique() > 1)
    return frozenset((None if one else lr, sd) for lr, sd, one in zip(runs["lr"], runs["seed"], one_rate))


def _same_grid(grid, reference) -> bool:
    """Whether a model's (runs, protocols, is a control) `grid` matches `reference`: a control's seeds and protocols,
    every other model's runs and protocols."""
    if grid[2]:
        return {sd for _, sd in grid[0]} == {sd for _, sd in reference[0]} and grid[1] == reference[1]
    return grid[:2] == reference[:2]


def _edge_cells(runs: pd.DataFrame) -> tuple[float, pd.DataFrame]:
    """(b): per (model, dataset) cell, the learning rate most seeds select (paper's per-seed rule; on a tie, an edge
    one if tied: a cell counts as inside only when an inside rate clearly leads); edges are the smallest and largest
    rate the model was fine-tuned with (a one-rate grid is all edge). The random-init controls are left out: a random
    model may well want an edge rate."""
    keys = ["source", "scale", "task_group", "dataset"]
    lo = runs.groupby([*keys, "model"])["lr"].transform("min")
    hi = runs.groupby([*keys, "model"])["lr"].transform("max")
    runs = runs.assign(edge=np.isclose(runs["lr"], lo) | np.isclose(runs["lr"], hi))
    sel = aggregation.select_lr(runs[runs["objective"] != "random"])
    votes = sel.groupby([*keys, "model", "lr", "edge"], sort=False).size().rename("seeds").reset_index()
    votes = votes.sort_values(["seeds", "edge"], ascending=False, kind="stable").drop_duplicates([*keys, "model"])
    if votes.empty:
        return float("nan"), votes
    return float(1 - votes["edge"].mean()), votes[votes["edge"]].drop(columns="edge").reset_index(drop=True)


def _unconverged(runs: pd.DataFrame) -> pd.DataFrame:
    """(d): per (model, dataset) cell of a dataset fine-tuned on (not scored ``zero_shot``), the mean over seeds of the
    selected runs' validation gain over their last epoch; the cells above ``MAX_LAST_GAIN`` or without a curve (NaN)."""
    keys = ["source", "scale", "task_group", "dataset", "model"]
    trained = runs[~runs["zero_shot"].astype(bool)]
    gain = aggregation.select_lr(trained).groupby(keys, sort=False)["last_gain"].agg(lambda g: g.mean(skipna=False))
    gain = gain.rename("last_gain").reset_index()
    return gain[~(gain["last_gain"] <= MAX_LAST_GAIN)].reset_index(drop=True)


def calibration_report(runs: pd.DataFrame) -> Calibration:
    """The calibration criteria on the default grid of ``runs`` (one source's, e.g. a scale's committed runs)."""
    runs = aggregation.default_grid(runs)
    avg = ids.group_averages(aggregation.aggregate(runs))
    wide = avg[~(avg["ci"] <= MAX_HALF_WIDTH)][["source", "scale", "model", "task_group", "score", "ci", "n"]]
    interior, edges = _edge_cells(runs)
    return Calibration(unequal=_unequal_grids(runs), interior=interior, edge_cells=edges,
                       wide=wide.reset_index(drop=True), unconverged=_unconverged(runs))
