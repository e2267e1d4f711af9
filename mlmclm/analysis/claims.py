"""The paper's headline claims (``CLAIMS``: one line each, as the paper states them) checked on any source's results.

Each claim has a check, the comparison behind it (one row per source x size x task group ..., shown in the notebooks),
and a statistic computed from it that is positive when the claim holds, with a 95% interval: for a source with per-run
results (this repository's, EncodEval's) a hierarchical bootstrap over test instances and fine-tuning seeds, the
learning rate chosen again in each replica, with a Student-t term for pretraining seeds from their spread pooled over
the models with 2+ of them (`pretraining_seed_spread`; where there is none, the reason says so); for the paper, its
printed half-widths (a difference of two independent means gets sqrt(ci_a^2 + ci_b^2); a mean of k such values
sqrt(sum of squares) / k; a minimum over values the minimum of their bounds). Task-group averages (``dataset ==
"Avg"``) are compared, as in the paper's figures, and models that differ only in their pretraining seed are compared
by their mean. Where a source's results cannot carry a claim (one model size, no IR task, no biphasic runs ...) the
verdict is "not checkable at this scale", with the reason.

Runs of this repository's scales also need evidence that the comparison measures pretraining: the leading compared
model must beat the random-init control of its size beyond the combined half-width (`evidence.signal`; a trailing one
below it is named in the row, not a gate), the difference must be larger than the compared models' last-epoch
validation gain (`evidence.unsettled`) and the fine-tuning calibration must pass; otherwise the verdict is "no signal",
with the reason. A row of ours also sits beside the paper's estimate of the same comparison (`matching.paper_at`: the
paper's scores at the configuration our models stand for, through the same check and statistic), with what
pretraining adds in its group and which pretraining-seed term its interval used (`BESIDE_PAPER`). Cells with fewer
fine-tuning seeds than their neighbours (``flag``) are left out, with their model's task group, and the evidence says
so.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass
from itertools import combinations
from statistics import NormalDist
from typing import Callable

import numpy as np
import pandas as pd

from . import evidence
from . import matching
from . import aggregation
from . import ids
from . import views

CELL = ["source", "scale", "size", "task_group"]


def _sorted(df: pd.DataFrame, *keys: str) -> pd.DataFrame:
    order = df.assign(_size=df["size"].map(ids.size_key))
    return df.loc[order.sort_values(["source", "_size", *keys], kind="stable").index].reset_index(drop=True)


def _calls(diff, ci, words: tuple[str, str]) -> list[str]:
    """Per difference: ``words[0]`` when it is above its half-width, ``words[1]`` when below, else "within CI"."""
    return ["within CI" if not (abs(d) > c) else words[0] if d > 0 else words[1] for d, c in zip(diff, ci)]


def _compare(a: pd.DataFrame, b: pd.DataFrame, on: list[str], names: tuple[str, str]) -> pd.DataFrame:
    """a - b on the ``on`` keys, with the difference's half-width and a call (ahead, or within the CI)."""
    m = a[[*on, "score", "ci"]].merge(b[[*on, "score", "ci"]], on=on, suffixes=("_a", "_b"))
    diff = (m["score_a"] - m["score_b"]).round(2)
    ci = np.hypot(m["ci_a"].astype(float), m["ci_b"].astype(float)).round(2)
    return pd.DataFrame({**{k: m[k] for k in on}, names[0]: m["score_a"], names[1]: m["score_b"],
                         "diff": diff, "diff ±": ci, "call": _calls(diff, ci, tuple(f"{n} ahead" for n in names))})


# ----------------------------------------------------------------------------------------------- checks


def check_mlm_vs_clm(scores: pd.DataFrame, runs=None, split="test") -> pd.DataFrame:
    """Claim 1: MLM-40% minus CLM at the full budget, per source, size and task group."""
    v = ids.group_averages(views.scaling_view(scores))
    out = _compare(v[v["mask_ratio"] == 40], v[v["objective"] == "clm"], ["source", "scale", "size", "task_group"],
                   ("MLM", "CLM"))
    return _sorted(out)


def ratio_margins(scores: pd.DataFrame, runs=None, split="test") -> pd.DataFrame:
    """Claims 2 and 2b: each masking ratio's margin over the best other ratio (``margin``, with its half-width), per
    source, size and task group (full-budget MLM runs, cells with two ratios or more)."""
    v = ids.group_averages(views.scaling_view(scores))
    v = v[v["objective"] == "mlm"].sort_values(["score", "mask_ratio"], ascending=[False, True])
    v = v[v.groupby(CELL)["mask_ratio"].transform("size") > 1]
    g = v.groupby(CELL, sort=False)
    top = v.merge(g.nth(0)[[*CELL, "score", "ci"]], on=CELL, suffixes=("", "_1")).merge(
        g.nth(1)[[*CELL, "score", "ci"]], on=CELL, suffixes=("", "_2"))
    first = top.groupby(CELL, sort=False).cumcount() == 0
    other, other_ci = np.where(first, top["score_2"], top["score_1"]), np.where(first, top["ci_2"], top["ci_1"])
    out = top[[*CELL, "mask_ratio", "score", "ci"]].assign(
        margin=(top["score"] - other).round(2), **{"margin ±": np.hypot(top["ci"].astype(float), other_ci).round(2)})
    return _sorted(out, "mask_ratio")


def check_masking_ratio(scores: pd.DataFrame, runs=None, split="test") -> pd.DataFrame:
    """Claim 2: the best masking ratio per source, size and task group, with the runner-up and the gap to it."""
    m = ratio_margins(scores)
    best = m.sort_values(["margin", "mask_ratio"], ascending=[False, True], kind="stable").drop_duplicates(CELL)
    runner = m.merge(best[[*CELL, "mask_ratio"]], on=CELL, suffixes=("", "_best"))
    runner = runner[runner["mask_ratio"] != runner["mask_ratio_best"]].sort_values(
        ["score", "mask_ratio"], ascending=[False, True]).drop_duplicates(CELL)
    highest = m.groupby(CELL)["mask_ratio"].max().rename("highest tested")
    out = best.merge(runner[[*CELL, "mask_ratio"]], on=CELL, suffixes=("", "_r")).merge(highest, on=CELL)
    out = out.rename(columns={"mask_ratio": "best ratio", "mask_ratio_r": "runner-up", "margin": "gap",
                              "margin ±": "gap ±"})
    out["call"] = np.where(out["gap"] > out["gap ±"], "beyond CI", "within CI")
    cols = [*CELL, "best ratio", "score", "runner-up", "gap", "gap ±", "call", "highest tested"]
    return _sorted(out[cols].astype({"best ratio": int, "runner-up": int, "highest tested": int}))


def check_data_efficiency(scores: pd.DataFrame, runs=None, split="test") -> pd.DataFrame:
    """Claim 3: CLM minus MLM-40% at each intermediate checkpoint, per source, size and task group; ``total`` is the
    runs' full budget (the steps of the size's full-budget models)."""
    v = ids.group_averages(views.data_efficiency_view(scores))
    out = _compare(v[v["objective"] == "clm"], v[v["objective"] == "mlm"],
                   ["source", "scale", "size", "task_group", "steps"], ("CLM", "MLM"))
    keys = ["source", "scale", "size"]
    total = views.scaling_view(scores).groupby(keys)["steps"].max().rename("total").reset_index()
    return _sorted(out.merge(total, on=keys, how="left"), "steps")


def check_lr_sensitivity(scores, runs: pd.DataFrame, split: str = "test") -> pd.DataFrame:
    """Claim 4: sd of centered scores over seeds and learning rates in [1e-5, 1e-4] (a scale of ours: its stability
    grid), CLM vs MLM-40%, per dataset."""
    c = views.centered_scores(runs, split=split)
    cols = ["source", "scale", "size", "task_group", "dataset", "CLM sd", "MLM sd", "CLM runs", "MLM runs", "call"]
    if c.empty:
        return pd.DataFrame(columns=cols)
    c = c.assign(obj=np.where(c["objective"] == "clm", "CLM", "MLM"))
    g = c.groupby(["source", "scale", "size", "task_group", "dataset", "obj"])["centered"]
    sd, n = g.std().unstack(), g.size().unstack()
    if not {"CLM", "MLM"} <= set(sd.columns):
        return pd.DataFrame(columns=cols)
    out = pd.DataFrame({"CLM sd": sd["CLM"].round(2), "MLM sd": sd["MLM"].round(2), "CLM runs": n["CLM"],
                        "MLM runs": n["MLM"]}).dropna().reset_index()
    out["call"] = np.where(out["CLM sd"] < out["MLM sd"], "CLM tighter", "MLM tighter")
    return out[cols]


def check_biphasic(scores: pd.DataFrame, runs=None, split="test") -> pd.DataFrame:
    """Claim 5: per source, size, budget and task group, the best split strictly between CLM-only (100%) and
    MLM-only (0%) and its gain over the better of the two (``diff``, with its half-width)."""
    v = ids.group_averages(views.biphasic_view(scores))
    keys = ["source", "scale", "size", "budget", "task_group"]
    cols = [*keys, "best split", "split", "MLM-only", "CLM-only", "diff", "diff ±", "call"]
    inner = v[v["clm_share"].between(1, 99)].sort_values(["score", "clm_share"], ascending=[False, True])
    best = inner.drop_duplicates(keys)[[*keys, "clm_share", "score", "ci"]]
    ends = {share: v[v["clm_share"] == share][[*keys, "score", "ci"]] for share in (0, 100)}
    m = best.merge(ends[0], on=keys, suffixes=("", "_mlm")).merge(ends[100], on=keys, suffixes=("", "_clm"))
    if m.empty:
        return pd.DataFrame(columns=cols)
    mlm_better = m["score_mlm"] >= m["score_clm"]
    end, end_ci = np.where(mlm_better, m["score_mlm"], m["score_clm"]), np.where(mlm_better, m["ci_mlm"], m["ci_clm"])
    diff, ci = (m["score"] - end).round(2), np.hypot(m["ci"].astype(float), end_ci.astype(float)).round(2)
    out = m[keys].assign(**{"best split": m["clm_share"], "split": m["score"], "MLM-only": m["score_mlm"],
                            "CLM-only": m["score_clm"], "diff": diff, "diff ±": ci},
                         call=_calls(diff, ci, ("split ahead", "extreme ahead")))
    return _sorted(out[cols], "budget")


def check_split_vs_mlm(scores: pd.DataFrame, runs=None, split="test") -> pd.DataFrame:
    """Claim 5 as the paper states it: the 25/75 split (the first quarter of the steps CLM, then MLM-40%) minus
    MLM-only, per source, size, budget and task group."""
    v = ids.group_averages(views.biphasic_view(scores))
    out = _compare(v[v["clm_share"] == 25], v[v["clm_share"] == 0], ["source", "scale", "size", "budget",
                                                                       "task_group"], ("25/75 split", "MLM-only"))
    return _sorted(out, "budget")


def check_clm_only_worst(scores: pd.DataFrame, runs=None, split="test") -> pd.DataFrame:
    """Claim 5b: on SC and QA at each budget, the lowest other split's lead over CLM-only (``diff``, with its
    half-width: positive when CLM-only is the lowest)."""
    v = ids.group_averages(views.biphasic_view(scores))
    v = v[v["task_group"].isin(["SC", "QA"])]
    keys = ["source", "scale", "size", "budget", "task_group"]
    lowest = v[v["clm_share"] != 100].sort_values(["score", "clm_share"]).drop_duplicates(keys)
    m = lowest[[*keys, "clm_share", "score", "ci"]].merge(v[v["clm_share"] == 100][[*keys, "score", "ci"]],
                                                           on=keys, suffixes=("", "_clm"))
    diff, ci = (m["score"] - m["score_clm"]).round(2), np.hypot(m["ci"].astype(float), m["ci_clm"].astype(float))
    out = m[keys].assign(**{"lowest other": m["clm_share"], "other": m["score"], "CLM-only": m["score_clm"],
                            "diff": diff, "diff ±": ci.round(2)},
                         call=_calls(diff, ci.round(2), ("CLM-only lowest", "other split lowest")))
    return _sorted(out, "budget")


def check_masking_robustness(scores, runs: pd.DataFrame, split: str = "test") -> pd.DataFrame:
    """Claim 6: sd over masking ratios and seeds of centered scores, CLM+MLM vs MLM-only, per dataset."""
    c = views.masking_ratio_spread(runs, split=split)
    cols = ["source", "scale", "size", "task_group", "dataset", "CLM+MLM sd", "MLM sd", "call"]
    if c.empty:
        return pd.DataFrame(columns=cols)
    sd = c.groupby(["source", "scale", "size", "task_group", "dataset", "family"])["centered"].std().unstack()
    if not {"CLM+MLM", "MLM"} <= set(sd.columns):  # one family only (results still coming in)
        return pd.DataFrame(columns=cols)
    sd = sd.dropna()
    out = pd.DataFrame({"CLM+MLM sd": sd["CLM+MLM"].round(2), "MLM sd": sd["MLM"].round(2)}).reset_index()
    out["call"] = np.where(out["CLM+MLM sd"] < out["MLM sd"], "CLM+MLM tighter", "MLM tighter")
    return out[cols]


def check_cpt(scores: pd.DataFrame, runs=None, split="test") -> pd.DataFrame:
    """Claim 7: CLM-based minus MLM-based model before CPT (``cpt_steps == 0``, the base models) and after each CPT
    length, per source, size and task group."""
    v = ids.group_averages(views.cpt_view(scores))
    out = _compare(v[v["base"] == "CLM"], v[v["base"] == "MLM"], ["source", "scale", "size", "cpt_steps", "task_group"],
                   ("CLM-based", "MLM-based"))
    return _sorted(out, "cpt_steps")


# Beyond the paper (issue 27): not claims of the paper, judged with the same statistics, intervals and gates.


def _best(v: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """The highest-scoring row of each ``keys`` cell (ties: the first schedule by name)."""
    return v.sort_values(["score", "schedule"], ascending=[False, True]).drop_duplicates(keys)


def check_mixed(scores: pd.DataFrame, runs=None, split="test") -> pd.DataFrame:
    """Claim B1: per source, size, budget and task group, the best mixed or alternating model minus the best of the
    sequential schedules of that budget (MLM-only, CLM-only, the 25/75 split; cells with all three), both chosen
    on the scores at hand (in a bootstrap replica: chosen again, so the interval counts the choice, as claim 5's)."""
    v = ids.group_averages(views.mixed_view(scores))
    keys = ["source", "scale", "size", "budget", "task_group"]
    cols = [*keys, "best mixed", "mixed", "best sequential", "sequential", "diff", "diff ±", "call"]
    seq = v[~v["mixed"].astype(bool)]
    seq = seq[seq.groupby(keys)["schedule"].transform("nunique") == len(views.SEQUENTIAL)]
    m = _best(v[v["mixed"].astype(bool)], keys)[[*keys, "schedule", "score", "ci"]].merge(
        _best(seq, keys)[[*keys, "schedule", "score", "ci"]], on=keys, suffixes=("", "_seq"))
    if m.empty:
        return pd.DataFrame(columns=cols)
    diff, ci = (m["score"] - m["score_seq"]).round(2), np.hypot(m["ci"].astype(float), m["ci_seq"].astype(float))
    out = m[keys].assign(**{"best mixed": m["schedule"], "mixed": m["score"], "best sequential": m["schedule_seq"],
                            "sequential": m["score_seq"], "diff": diff, "diff ±": ci.round(2)},
                         call=_calls(diff, ci.round(2), ("mixed ahead", "sequential ahead")))
    return _sorted(out[cols], "budget")


def check_detour(scores: pd.DataFrame, runs=None, split="test") -> pd.DataFrame:
    """Claim B2: the CLM detour minus the plain MLM-CPT of the same decayed MLM-40% model and CPT length, per source,
    size, CPT length and task group."""
    v = ids.group_averages(views.detour_view(scores))
    out = _compare(v[v["schedule"] == "detour"], v[v["schedule"] == "MLM-CPT"],
                   ["source", "scale", "size", "cpt_steps", "task_group"], ("detour", "MLM-CPT"))
    return _sorted(out, "cpt_steps")


# ----------------------------------------------------------------------------------------------- statistics
# A statistic reads a check's rows (one source's, or the bootstrap replicas', each replica a ``source``) and returns
# one row per source and scope: ``value``, and ``lo`` / ``hi`` from the rows' half-widths (used for the paper).


def _mean(rows: pd.DataFrame, values, scope: str | None = None, hw=None) -> pd.DataFrame:
    """Mean of ``values`` per source (and ``scope`` column); bounds +- sqrt(sum of squared half-widths) / count."""
    hw = rows["diff ±"] if hw is None and "diff ±" in rows else hw
    d = pd.DataFrame({"source": rows["source"], "scope": rows[scope] if scope else "all",
                      "v": np.asarray(values, dtype=float),
                      "h2": np.asarray(hw, dtype=float) ** 2 if hw is not None else np.nan})
    g = d.groupby(["source", "scope"], sort=False)
    out = g["v"].agg(["mean", "size"]).join(g["h2"].agg(["sum", "count"]))
    half = np.where(out["count"] == out["size"], np.sqrt(out["sum"]) / out["size"], np.nan)
    return pd.DataFrame({"value": out["mean"], "lo": out["mean"] - half, "hi": out["mean"] + half}).reset_index()


def _min(rows: pd.DataFrame, values, hw) -> pd.DataFrame:
    """Minimum of ``values`` per source; bounds the minimum of the values' lower and of their upper bounds."""
    v, h = np.asarray(values, dtype=float), np.asarray(hw, dtype=float)
    d = pd.DataFrame({"source": rows["source"].to_numpy(), "v": v, "lo": v - h, "hi": v + h})
    out = d.groupby("source", sort=False).agg(value=("v", "min"), lo=("lo", "min"), hi=("hi", "min")).reset_index()
    return out.assign(scope="all")


def _stat_mlm_vs_clm(rows, point=None):
    return _mean(rows, rows["diff"], "task_group")


def _stat_widening(rows, point=None):
    """1b: the smallest widening of the SC gap from one size to the next (positive when it widens at every step)."""
    sc = rows[rows["task_group"] == "SC"]
    rank = {size: i for i, size in enumerate(ids.ordered_sizes(sc["size"]))}
    sc = sc.assign(_rank=sc["size"].map(rank).astype(int)).sort_values(["source", "_rank"], kind="stable")
    prev = sc.groupby("source", sort=False)[["diff", "diff ±"]].shift()
    keep = prev["diff"].notna().to_numpy()
    return _min(sc[keep], (sc["diff"] - prev["diff"])[keep], np.hypot(sc["diff ±"], prev["diff ±"])[keep])


def _best_cells(point: pd.DataFrame) -> pd.DataFrame:
    """The best ratio of each cell (on the point estimates), with its margin's lower bound."""
    best = point.sort_values(["score", "mask_ratio"], ascending=[False, True]).drop_duplicates(CELL)
    return best.assign(lo=best["margin"] - best["margin ±"].fillna(0))


def _claim2_pairs(point: pd.DataFrame) -> list[tuple]:
    """The pairs of cells whose best ratios differ (on the point estimates): claim 2 picks the best of them."""
    best = _best_cells(point)
    return [(i, j) for i, j in combinations(best.index, 2) if best.at[i, "mask_ratio"] != best.at[j, "mask_ratio"]]


def _claim2_choices(point: pd.DataFrame) -> int:
    """How many pairs claim 2 chose from (1 when one ratio is best everywhere: a minimum, no choice)."""
    return max(len(_claim2_pairs(point)), 1)


def _widen(choices: int) -> float:
    """The factor turning a 95% half-width into a Bonferroni one for the best of ``choices`` comparisons."""
    return NormalDist().inv_cdf(1 - 0.025 / choices) / NormalDist().inv_cdf(0.975)


def _claim2_cells(point: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """The cells claim 2 is judged on, and its sign: the pair of cells with different best ratios whose weaker
    margin's lower bound is highest (+1); or, when one ratio is best in every cell, every cell (-1)."""
    best, pairs = _best_cells(point), _claim2_pairs(point)
    if not pairs:
        return best, -1
    i, j = max(pairs, key=lambda p: min(best.at[p[0], "lo"], best.at[p[1], "lo"]))
    return best.loc[[i, j]], 1


def _stat_best_ratio(rows, point=None):
    """2: the weaker of two cells' margins of their (different) best ratios over the runner-up; minus the weakest
    margin when one ratio is best everywhere. Cells and ratios are chosen on the point estimates."""
    cells, sign = _claim2_cells(rows if point is None else point)
    picked = rows.merge(cells[[*CELL[1:], "mask_ratio"]], on=[*CELL[1:], "mask_ratio"])
    widen = _widen(_claim2_choices(rows if point is None else point))
    out = _min(picked, picked["margin"], picked["margin ±"] * widen)
    return out if sign > 0 else out.assign(value=-out["value"], lo=-out["hi"], hi=-out["lo"])


def _stat_ir_highest(rows, point=None):
    """2b: the smallest margin, over sizes, of the highest ratio tested over the best other ratio on IR."""
    ir = rows[rows["task_group"] == "IR"]
    ir = ir[ir["mask_ratio"] == ir.groupby(CELL)["mask_ratio"].transform("max")]
    return _min(ir, ir["margin"], ir["margin ±"])


def _early(rows):
    return rows[(rows["steps"] > 0) & (rows["steps"] <= rows["total"] / 4)]


def _last(rows):
    return rows[rows["steps"] == rows.groupby(CELL)["steps"].transform("max")]


def _stat_early(rows, point=None):
    """3: CLM minus MLM-40% over the checkpoints of the first quarter of training, per task group."""
    e = _early(rows)
    return _mean(e, e["diff"], "task_group")


def _late(rows):
    """The last checkpoint's rows outside TC (the paper excepts TC: its CLM stays ahead at every checkpoint)."""
    last = _last(rows)
    return last[last["task_group"] != "TC"]


def _stat_catch_up(rows, point=None):
    """3b: MLM-40% minus CLM at the last intermediate checkpoint, per task group but TC."""
    last = _late(rows)
    return _mean(last, -last["diff"], "task_group")


def _stat_sd(first: str, second: str):
    return lambda rows, point=None: _mean(rows, rows[first] - rows[second])


def _stat_mean_diff(rows, point=None):
    """5, B1, B2: the rows' ``diff`` (5: the best inner split's lead over the better extreme), mean over budgets or
    CPT lengths (and sizes), per task group."""
    return _mean(rows, rows["diff"], "task_group")


def _stat_clm_lowest(rows, point=None):
    return _min(rows, rows["diff"], rows["diff ±"])


def _cpt_ends(rows) -> pd.DataFrame:
    """Claim 7's rows before CPT and after the longest CPT, side by side (``_0``: before)."""
    longest = rows["cpt_steps"] == rows.groupby(["source", "scale", "size"])["cpt_steps"].transform("max")
    after = rows[longest & (rows["cpt_steps"] > 0)]
    return after.merge(rows[rows["cpt_steps"] == 0], on=CELL, suffixes=("", "_0"))


def _stat_level(rows, point=None):
    """7: CLM-based minus MLM-based model after the longest CPT (the same length for both), mean over sizes, per
    task group."""
    m = _cpt_ends(rows)
    return _mean(m, m["diff"], "task_group")


# ----------------------------------------------------------------------------------------------- details


def _none(rows) -> str:
    return ""


def _detail_widening(rows):
    sc = _sorted(rows[rows["task_group"] == "SC"])
    return "SC gap MLM - CLM by size: " + " -> ".join(f"{s} {g:+.2f}" for s, g in zip(sc["size"], sc["diff"]))


def _detail_best_ratio(rows):
    best = _best_cells(rows)
    spread = ", ".join(f"{ratio}% in {n}" for ratio, n in best["mask_ratio"].value_counts().sort_index().items())
    cells, sign = _claim2_cells(rows)
    shown = "; ".join(f"{r['size']} {r['task_group']}: {r['mask_ratio']}% ({r['margin']:+.2f} ± {r['margin ±']:.2f} "
                      "over the runner-up)" for _, r in cells.iterrows())
    judged = f"judged on {shown}" if sign > 0 else f"one ratio best in every cell: {shown}"
    return f"best ratio over {len(best)} size x group cells: {spread}; {judged}"


def _detail_ir(rows):
    ir = _best_cells(rows[rows["task_group"] == "IR"])
    return "best IR ratio by size: " + ", ".join(f"{s} {r}%" for s, r in zip(ir["size"], ir["mask_ratio"]))


def _detail_early(rows):
    e = _early(rows)
    steps = ", ".join(ids.step_label(s) for s in sorted(set(e["steps"])))
    return f"checkpoints {steps} of {ids.step_label(e['total'].max())}"


def _detail_last(rows):
    last = _late(rows)
    return (f"the last checkpoint: {ids.step_label(last['steps'].max())} of "
            f"{ids.step_label(last['total'].max())}")


def _detail_biphasic(rows):
    shares = ", ".join(f"{s}% in {n}" for s, n in rows["best split"].value_counts().sort_index().items())
    ahead = int((rows["call"] == "split ahead").sum())
    return f"best inner split: {shares}; ahead of both extremes beyond the CI in {ahead}/{len(rows)} cells"


def _detail_mixed(rows):
    def counts(col):
        return ", ".join(f"{name} in {n}" for name, n in rows[col].value_counts().sort_index().items())
    ahead = int((rows["call"] == "mixed ahead").sum())
    return (f"best mixed: {counts('best mixed')}; best sequential: {counts('best sequential')}; mixed ahead beyond "
            f"the CI in {ahead}/{len(rows)} cells")


def _detail_cpt(rows):
    """The level before CPT and the difference in gains beside the verdict's level (a detail, not the verdict)."""
    m = _cpt_ends(rows)
    before, after = m["diff_0"].mean(), m["diff"].mean()
    return (f"after {ids.step_label(m['cpt_steps'].max())} of CPT; before CPT {before:+.2f}, so the CLM-based "
            f"model gained {after - before:+.2f} more than the MLM-based one")


# ----------------------------------------------------------------------------------------------- the claims


def _empty(reason: str):
    return lambda rows: reason if rows.empty else ""


def _one_size(rows) -> str:
    sc = rows[rows["task_group"] == "SC"]
    return "no SC task" if sc.empty else ("one model size" if sc["size"].nunique() < 2 else "")


def _one_cell(rows) -> str:
    return "no size x task group cell with two masking ratios" if rows.empty else (
        "one size x task group cell" if len(rows.drop_duplicates(CELL)) < 2 else "")


def _no_ir(rows) -> str:
    return "no IR task" if (rows["task_group"] != "IR").all() else ""


def _no_early(rows) -> str:
    return "no intermediate checkpoints" if rows.empty else (
        "no checkpoint in the first quarter of training" if _early(rows).empty else "")


def _no_late(rows) -> str:
    if rows.empty:
        return "no intermediate checkpoints"
    if (_last(rows)["steps"] <= _last(rows)["total"] / 4).all():
        return "no checkpoint past the first quarter of training"
    return "no SC, QA or IR result (the claim excepts TC)" if _late(rows).empty else ""


def _no_cpt(rows) -> str:
    return "no CPT runs" if rows.empty else ("no CPT run beside its base model" if _cpt_ends(rows).empty else "")


# The pretrained models each claim compares (in ``groups``, where the comparison picks models per group: only those
# in the difference): the leading one must beat its size's random-init control, and the difference must exceed their
# last-epoch validation gain (`evidence.signal`, `evidence.unsettled`). Claims 3 and 3b compare intermediate
# checkpoints: those checkpoints themselves (an early MLM checkpoint below the control while CLM's beats it is the
# strong form of claim 3, and its row says so).


def _clm_mlm40_models(scores, runs=None, groups=None) -> set:
    v = views.scaling_view(scores)
    return set(v[views.is_clm_or_mlm40(v)]["model"])


def _checkpoint_models(pick):
    """The intermediate checkpoints claim 3 (``_early``) or 3b (``_late``) compares."""
    def models(scores, runs=None, groups=None) -> set:
        rows = check_data_efficiency(scores)
        keys = ["source", "scale", "size", "task_group", "steps"]
        if not len(rows):
            return set()
        return set(views.data_efficiency_view(scores).merge(pick(rows)[keys], on=keys)["model"])
    return models


def _mlm_models(scores, runs=None, groups=None) -> set:
    v = views.scaling_view(scores)
    return set(v[v["objective"] == "mlm"]["model"])


def _biphasic_models(scores, runs=None, groups=None) -> set:
    return set(views.biphasic_view(scores)["model"])


def _split_models(scores, runs=None, groups=None) -> set:
    """Claim 5's: the 25/75 splits and the MLM-only models of their budgets."""
    v = views.biphasic_view(scores)
    return set(v[v["clm_share"].isin([0, 25])]["model"])


def _chosen(view: pd.DataFrame, rows: pd.DataFrame, keys: list[str], picks: dict, groups) -> set:
    """The models of ``view`` that a check's ``rows`` chose (``picks``: view column -> the rows' column holding the
    chosen value, one pick per entry), in ``groups`` (default all)."""
    rows = rows if groups is None else rows[rows["task_group"].isin(set(groups))]
    out = set()
    for col, chosen in picks.items():
        pick = rows[[*keys, chosen]].rename(columns={chosen: col})
        out |= set(view.merge(pick, on=[*keys, col])["model"])
    return out


def _best_split_models(scores, runs=None, groups=None) -> set:
    """Claim 5s's: per cell, the best inner split and the better of MLM-only and CLM-only (the models in the
    difference)."""
    rows = check_biphasic(scores)
    rows = rows.assign(end=np.where(rows["MLM-only"] >= rows["CLM-only"], 0, 100))
    keys = ["source", "scale", "size", "budget", "task_group"]
    v = ids.group_averages(views.biphasic_view(scores))
    return _chosen(v, rows, keys, {"clm_share": "best split"}, groups) | _chosen(v, rows, keys, {"clm_share": "end"},
                                                                                  groups)


def _cpt_models(scores, runs=None, groups=None) -> set:
    """The models claim 7's level compares: the CLM- and MLM-based models after the longest CPT (not the bases)."""
    ends = _cpt_ends(check_cpt(scores))[["source", "scale", "size", "cpt_steps"]].drop_duplicates()
    return set(views.cpt_view(scores).merge(ends, on=["source", "scale", "size", "cpt_steps"])["model"])


def _mixed_models(scores, runs=None, groups=None) -> set:
    """Claim B1's: per cell, the best mixed or alternating model and the best sequential one (the models in the
    difference)."""
    rows = check_mixed(scores)
    keys = ["source", "scale", "size", "budget", "task_group"]
    v = ids.group_averages(views.mixed_view(scores))
    return (_chosen(v, rows, keys, {"schedule": "best mixed"}, groups)
            | _chosen(v, rows, keys, {"schedule": "best sequential"}, groups))


def _detour_models(scores, runs=None, groups=None) -> set:
    return set(views.detour_view(scores)["model"])


def _stability_models(scores, runs, groups=None) -> set:
    return set(views.centered_scores(runs)["model"])


def _masking_models(scores, runs, groups=None) -> set:
    return set(views.masking_ratio_spread(runs)["model"])


@dataclass(frozen=True)
class Claim:
    """One headline claim: its text, the check behind it, and its statistic.

    ``measure`` maps the rows of ``table`` (default: the check; one source's rows or the bootstrap replicas', each a
    ``source``) to ``value`` (the statistic: positive when the claim holds), ``lo`` and ``hi`` (bounds from the rows'
    printed half-widths) per source and scope (a task group, or "all"); claims whose cells are chosen on the point
    estimates get those as ``point``, and ``choices`` says among how many comparisons they were chosen (the interval is
    widened to Bonferroni's for that many). ``unavailable`` says why a source's rows cannot carry the claim ("" when
    they can); ``describe`` gives the evidence beyond the statistic; ``models`` names the pretrained models compared;
    ``paper`` names the paper's tables and figures behind it and quotes the paper's sentence where
    the project's notes on the paper quote it (in quotation marks), else says "paraphrased".
    """

    text: str
    check: Callable[..., pd.DataFrame]
    statistic: str
    measure: Callable[..., pd.DataFrame]
    models: Callable[..., set]
    unavailable: Callable[[pd.DataFrame], str]
    describe: Callable[[pd.DataFrame], str] = _none
    table: Callable[..., pd.DataFrame] | None = None
    per_run: bool = False  # needs run-level results (the paper prints no numbers for it)
    choices: Callable[[pd.DataFrame], int] = lambda point: 1
    paper: str = ""

    def rows(self, scores, runs=None, split: str = "test") -> pd.DataFrame:
        return (self.table or self.check)(scores, runs, split=split)


BEYOND_PAPER = "not a claim of the paper; issue 27"  # ``paper`` of the claims beyond it (their keys: B1, B2)

# Each claim as the paper states it (``paper``: its tables and figures, the paper's words where the notes on the paper
# quote them, else a paraphrase; results/paper holds the numbers), and the statistic that judges it as stated.
CLAIMS = {
    "1": Claim("MLM generally outperforms CLM", check_mlm_vs_clm,
               statistic="MLM-40% minus CLM at the full budget, mean over sizes (points)",
               measure=_stat_mlm_vs_clm, models=_clm_mlm40_models,
               unavailable=_empty("no group averages of CLM and MLM-40% at the full budget"),
               paper="Tables 2-5, Fig. 2 (§3), paraphrased: at 42K steps MLM-40% is ahead of CLM on SC, QA and IR at "
                     "every size; TC about even"),
    "1b": Claim("The SC gap between MLM and CLM widens with model size", check_mlm_vs_clm,
                statistic="smallest widening of the SC gap (MLM-40% - CLM) from one size to the next (points)",
                measure=_stat_widening, models=_clm_mlm40_models, unavailable=_one_size, describe=_detail_widening,
                paper="Table 2 (§3), paraphrased: the SC gap widens with size, 2.09 -> 3.42 -> 5.55 from 210M to 1B"),
    "2": Claim("No masking ratio is best for every size and task group", check_masking_ratio,
               statistic="the weaker margin of two cells' different best ratios over their runner-up, widened to "
                         "Bonferroni's interval for the number of pairs chosen from (points)",
               measure=_stat_best_ratio, models=_mlm_models, unavailable=_one_cell, describe=_detail_best_ratio,
               table=ratio_margins, choices=_claim2_choices,
               paper="Tables 2-5, Fig. 3 (§3), paraphrased: no masking ratio is universally best; the best differs by "
                     "size and task group, larger models preferring higher ratios"),
    "2b": Claim("IR prefers the highest masking ratio at every size", check_masking_ratio,
                statistic="smallest margin over sizes of the highest ratio over the best other on IR (points)",
                measure=_stat_ir_highest, models=_mlm_models, unavailable=_no_ir, describe=_detail_ir,
                table=ratio_margins,
                paper="Table 5, Fig. 3 (§3), paraphrased: IR prefers higher masking ratios at every size (50% best)"),
    "3": Claim("CLM is more data-efficient early in pretraining", check_data_efficiency,
               statistic="CLM minus MLM-40% over the checkpoints of the first quarter of training, mean (points)",
               measure=_stat_early, models=_checkpoint_models(_early), unavailable=_no_early,
               describe=_detail_early,
               paper="Tables 6-9, Figs. 4 and 10 (§4), paraphrased: CLM is ahead early, up to about 10K steps on SC "
                     "and QA, 20K on IR, the whole run on TC (610M); Fig. 10: CLM \"is also more efficient in terms "
                     "of training FLOPs\""),
    "3b": Claim("MLM catches up and ends ahead of CLM (SC, QA, IR)", check_data_efficiency,
                statistic="MLM-40% minus CLM at the last intermediate checkpoint, SC, QA and IR (points)",
                measure=_stat_catch_up, models=_checkpoint_models(_late), unavailable=_no_late,
                describe=_detail_last,
                paper="Tables 6, 8, 9, Fig. 4 (§4), paraphrased: MLM catches up and passes CLM later, by 10K-20K "
                      "steps on SC, QA and IR; on TC CLM stays ahead at every checkpoint, so TC is excepted"),
    "4": Claim("CLM-pretrained models are less sensitive to the fine-tuning learning rate", check_lr_sensitivity,
               statistic="MLM sd minus CLM sd of centered scores, mean over datasets (points)",
               measure=_stat_sd("MLM sd", "CLM sd"), models=_stability_models,
               unavailable=_empty("no CLM and MLM-40% runs over two or more shared learning rates"), per_run=True,
               paper="Fig. 5 (§4), paraphrased: CLM's centered scores over seeds and learning rates in [1e-5, 1e-4] "
                     "spread less (no numbers printed)"),
    "5": Claim("The 25/75 CLM-then-MLM split beats MLM-only at a fixed budget", check_split_vs_mlm,
               statistic="the 25/75 split (25% of the steps CLM, then MLM-40%) minus MLM-only, mean over budgets "
                         "(points)",
               measure=_stat_mean_diff, models=_split_models,
               unavailable=_empty("no 25/75 split beside MLM-only at its budget"),
               paper="Tables 10-13, Fig. 6 (§5): \"the 25%-75% split reliably surpasses the MLM baseline, while even "
                     "a 75% CLM allocation maintains comparable results\""),
    "5s": Claim("(ours, stricter) The best CLM-then-MLM split beats both MLM-only and CLM-only", check_biphasic,
                statistic="best split strictly between CLM-only and MLM-only minus the better of the two, mean over "
                          "budgets (points)",
                measure=_stat_mean_diff, models=_best_split_models, unavailable=_empty("no biphasic runs"),
                describe=_detail_biphasic,
                paper="not the paper's sentence (claim 5 is): a stricter reading of Tables 10-13 that this "
                      "repository adds, the split against the better single objective"),
    "5b": Claim("CLM-only is the worst split on SC and QA at every budget", check_clm_only_worst,
                statistic="smallest lead of the lowest other split over CLM-only, SC and QA budgets (points)",
                measure=_stat_clm_lowest, models=_biphasic_models,
                unavailable=_empty("no biphasic runs with SC or QA"),
                paper="Tables 10 and 12, Fig. 6 (§5), paraphrased: pure CLM is the worst split on SC and QA at every "
                      "budget"),
    "6": Claim("CLM+MLM is less sensitive to the masking ratio than MLM-only", check_masking_robustness,
               statistic="MLM-only sd minus CLM+MLM sd over masking ratios, mean over datasets (points)",
               measure=_stat_sd("MLM sd", "CLM+MLM sd"), models=_masking_models,
               unavailable=_empty("no masking-ratio runs of both families (MLM-only, CLM+MLM)"), per_run=True,
               paper="Fig. 7 (§5), paraphrased: CLM+MLM is less sensitive to the masking ratio than MLM-only (no "
                     "numbers printed)"),
    "7": Claim("MLM continued pretraining of a CLM model beats continued MLM of an MLM model", check_cpt,
               statistic="CLM-based minus MLM-based model after the same (longest) MLM-CPT, mean over sizes (points)",
               measure=_stat_level, models=_cpt_models, unavailable=_no_cpt, describe=_detail_cpt,
               paper="Tables 14-17, Figs. 8-9 (§5), paraphrased: after the same MLM-CPT the CLM-based model matches "
                     "or beats the MLM-based one; at 22K the 610M CLM-based model leads on SC, TC and IR (+0.93, "
                     "+0.59, +0.25) and trails on QA (-1.04)"),
    # beyond the paper (issue 27): the same statistics, intervals and gates, on runs of the "beyond" study
    "B1": Claim("Mixed or alternating CLM+MLM beats the best sequential schedule at a fixed budget", check_mixed,
                statistic="best mixed or alternating model minus the best of MLM-only, CLM-only and the 25/75 split "
                          "of its budget, both chosen again in each replica, mean over budgets (points)",
                measure=_stat_mean_diff, models=_mixed_models, describe=_detail_mixed,
                unavailable=_empty("no mixed or alternating run beside MLM-only, CLM-only and the 25/75 split of "
                                   "its budget"),
                paper=BEYOND_PAPER + "; GPT-BERT (Charpentier & Samuel, BabyLM 2024) mixed batches, AntLM "
                                     "alternating objectives"),
    "B2": Claim("The CLM detour beats plain MLM continued pretraining of an MLM model", check_detour,
                statistic="CLM detour (CLM then MLM-40% CPT) minus plain MLM-40% CPT of the same decayed MLM-40% "
                          "model, mean over CPT lengths (points)",
                measure=_stat_mean_diff, models=_detour_models,
                unavailable=_empty("no CLM-detour run beside the plain MLM-CPT of its model and length"),
                paper=BEYOND_PAPER + "; Touchent & de la Clergerie, arXiv 2605.12438"),
}


# ----------------------------------------------------------------------------------------------- bootstrap


def _stream(seed: int, *names) -> np.random.Generator:
    """The bootstrap's random stream for one named part of it (a split of a dataset, the fine-tuning seeds, a family's
    pretraining-seed term): a part draws the same numbers whatever other models are on record, so that a model landing
    does not move the interval of a comparison it is not in."""
    return np.random.default_rng([seed, *(zlib.crc32(str(n).encode()) for n in names)])


def _instance_replicas(runs: pd.DataFrame, split: str, n_boot: int, seed: int) -> np.ndarray:
    """Per run, ``n_boot`` replicas of its ``split`` score, (runs, n_boot): the split's instances resampled, the same
    draw for every run of a dataset. A replica is the run's score plus the change of its instances' weighted mean
    (weights ``<split>_w``: a tag accuracy's words, a span F1's spans, so that the replica is that score recomputed
    exactly; none: the plain mean, exact for accuracy, QA F1 and NDCG, an approximation for a span F1 written without
    its weights, as EncodEval's are). A dataset without per-instance scores
    (or whose runs scored different sets) keeps its scores: only its seeds are resampled. Each dataset's draw comes
    from its own stream (`_stream`)."""
    reps = np.repeat(runs[split].to_numpy(dtype=float)[:, None], n_boot, axis=1)
    per, wts = runs[f"{split}_i"].to_numpy(dtype=object), runs[f"{split}_w"].to_numpy(dtype=object)
    for dataset, idx in runs.groupby("dataset", sort=True).indices.items():
        sizes = {len(a) if isinstance(a, np.ndarray) else -1 for a in per[idx]}
        if len(sizes) != 1 or -1 in sizes:
            continue
        n = sizes.pop()
        draws = _stream(seed, split, dataset).integers(0, n, size=(n_boot, n)) + n * np.arange(n_boot)[:, None]
        counts = np.bincount(draws.ravel(), minlength=n_boot * n).reshape(n_boot, n)  # (n_boot, n)
        a = np.stack(list(per[idx]))
        w = np.stack([x if isinstance(x, np.ndarray) and len(x) == n else np.ones(n) for x in wts[idx]])
        resampled = (a * w) @ counts.T / (w @ counts.T)  # (runs, n_boot)
        reps[idx] += 100 * (resampled - ((a * w).sum(1) / w.sum(1))[:, None])
    return reps


def _seed_draws(seeds: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """(n_boot, len(seeds)): per replica how often each entry's seed is drawn, the seeds resampled with replacement
    (the same draw for every entry with the same seed)."""
    uniq = np.sort(np.unique(seeds))
    mult = _stream(seed, "fine-tuning seeds").multinomial(len(uniq), np.full(len(uniq), 1 / len(uniq)), size=n_boot)
    return mult[:, np.searchsorted(uniq, seeds)]


def _resample(runs: pd.DataFrame, n_boot: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Test-score replicas of every run, (runs, n_boot), and per replica the multiplicity of each run's fine-tuning
    seed, (n_boot, runs)."""
    return _instance_replicas(runs, "test", n_boot, seed), _seed_draws(runs["seed"].to_numpy(), n_boot, seed)


def _selected_replicas(runs: pd.DataFrame, n_boot: int, seed: int, rule: str, instances: bool = True):
    """The learning rate chosen again in every replica: per model, dataset and fine-tuning seed (``per_seed``; or per
    model and dataset on the seed-averaged validation score, ``seed_average``) the run with the best resampled
    validation score (ties: the smaller rate). Returns the chosen cells (one row per model, dataset and seed) and
    their test scores, (rows, n_boot). Without ``instances`` both splits keep their instances (the scores as run)."""
    runs = runs.dropna(subset=["validation"]).sort_values(["model", "task_group", "dataset", "seed", "lr"],
                                                          ignore_index=True)

    def replicas(split):
        return (_instance_replicas(runs, split, n_boot, seed) if instances else
                np.repeat(runs[split].to_numpy(dtype=float)[:, None], n_boot, axis=1))

    val, test = replicas("validation"), replicas("test")
    keys = ["model", "task_group", "dataset", "seed"]
    cells = runs.drop_duplicates(keys).reset_index(drop=True)
    chosen = np.empty((len(cells), n_boot))
    if rule == "per_seed":
        for row, idx in enumerate(runs.groupby(keys, sort=False).indices.values()):
            chosen[row] = test[idx[val[idx].argmax(axis=0)], np.arange(n_boot)]
        return cells, chosen
    if rule != "seed_average":
        raise ValueError(f"unknown learning-rate rule {rule!r}")
    row_of = {k: i for i, k in enumerate(zip(*(cells[k] for k in keys)))}
    for idx in runs.groupby(keys[:3], sort=False).indices.values():
        part = runs.iloc[idx]
        lrs = np.sort(part["lr"].unique())
        mean_val = np.stack([val[idx[part["lr"].to_numpy() == lr]].mean(axis=0) for lr in lrs])  # (lrs, n_boot)
        best = lrs[mean_val.argmax(axis=0)]
        for i, r in zip(idx, part.itertuples()):
            pick = best == r.lr
            chosen[row_of[(r.model, r.task_group, r.dataset, r.seed)], pick] = test[i, pick]
    return cells, chosen


def family_seed_spread(runs: pd.DataFrame, rule: str = "per_seed") -> pd.DataFrame:
    """Per source, scale, task group and family (`ids.family`: models that differ only in their pretraining
    seed), the spread of its seeds' group averages x_i (the point estimates `aggregation.pool_pretraining_seeds` pools):
    ``ss`` = sum_i (x_i - m)^2, ``dof`` = k - 1 and ``sd`` = sqrt(ss / dof) (missing for one seed), ``k`` seeds."""
    cols = ["source", "scale", "task_group", "family", "ss", "dof", "sd", "k"]
    avg = ids.group_averages(aggregation.aggregate(runs, rule))
    if avg.empty:
        return pd.DataFrame(columns=cols)
    fam = avg.groupby(["source", "scale", "task_group", avg["model"].map(ids.family).rename("family")],
                      observed=True)["score"]
    out = pd.DataFrame({"ss": fam.var().fillna(0) * (fam.size() - 1), "dof": fam.size() - 1, "sd": fam.std(),
                        "k": fam.size()}).reset_index()
    return out[cols]


def pretraining_seed_spread(runs: pd.DataFrame, rule: str = "per_seed") -> pd.DataFrame:
    """Per source, scale and task group, the pooled spread of pretraining seeds: ``sd`` = sqrt(sum_f sum_i (x_fi -
    m_f)^2 / dof) with ``dof`` = sum_f (k_f - 1), over the families f of `family_seed_spread`; ``sd`` missing where
    ``dof`` is 0 (no model with 2+ pretraining seeds). ``families``: how many there are, ``multi``: how many of them
    have 2+ seeds."""
    cols = ["source", "scale", "task_group", "sd", "dof", "families", "multi"]
    per = family_seed_spread(runs, rule)
    if per.empty:
        return pd.DataFrame(columns=cols)
    per = per.assign(families=1, multi=per["k"] > 1)
    g = per.groupby(["source", "scale", "task_group"], sort=False)[["ss", "dof", "families", "multi"]].sum()
    return g.assign(sd=np.sqrt(g["ss"] / g["dof"].where(g["dof"] > 0))).reset_index()[cols]


def _pool_replicas(avg: np.ndarray, models: list[str], terms: dict, seed: int,
                   where: tuple = ()) -> tuple[np.ndarray, list[int]]:
    """Replicas of models that differ only in their pretraining seed (`ids.family`) pooled, a parametric
    bootstrap of each family's mean: per replica the mean over its k seeds' replicas (the seeds themselves not
    resampled) plus sd / sqrt(k) x T, T drawn from Student's t with ``dof`` degrees of freedom for each family and
    replica, (``sd``, ``dof``) = ``terms[family]`` (``terms[None]`` for a family not named: the pooled spread of
    pretraining seeds of the models' source, scale and task group, `pretraining_seed_spread`; a family's own,
    `family_seed_spread`, where `replica_scores` is asked for those). So a family of k = 2-3 seeds gets the t interval
    its seed means call for (resampling them gave one k / (k - 1) too narrow in variance, with normal tails) and a
    one-seed family gets its pretraining-seed noise too. With ``dof`` 0 (no model with 2+ seeds) no term is drawn:
    the seeds stay fixed. The seed means behind ``sd`` carry their fine-tuning and test noise, which the replicas draw
    again: counted twice, the interval errs wide. Each family's term has its own stream (`_stream`, named by
    ``where`` and the family). Returns (n_boot, families) and, per family, the column of its seed-0 model."""
    codes, names = pd.factorize(pd.Series(models).map(ids.family))
    order, k = np.argsort(codes, kind="stable"), np.bincount(codes)
    pooled = np.add.reduceat(avg[:, order], np.cumsum(k) - k, axis=1) / k  # a family's NaN stays its own
    for c, name in enumerate(names):
        sd, dof = terms.get(name, terms[None])
        if dof > 0:
            t = _stream(seed, "pretraining seeds", *where, name).standard_t(dof, size=len(pooled))
            pooled[:, c] += sd / np.sqrt(k[c]) * t
    column = {m: i for i, m in enumerate(models)}
    return pooled, [column.get(name, int(np.argmax(codes == c))) for c, name in enumerate(names)]


def replica_scores(runs: pd.DataFrame, n_boot: int = 2000, seed: int = 0, rule: str = "per_seed",
                   instances: bool = True, spread: pd.DataFrame | None = None, own: bool = False) -> pd.DataFrame:
    """The group averages of ``n_boot`` hierarchical bootstrap replicas of one source's default-grid runs, as scores
    (the replica's index as ``source``, no half-widths), each replica built as the point estimate is: validation and
    test instances resampled (exactly, for token-weighted scores), the learning rate chosen again on the resampled
    validation scores (`_selected_replicas`), fine-tuning seeds resampled (the same draw for every model), the mean
    over them, the mean over the group's datasets (where a model has all of them, as `aggregation.summarize`), then the
    mean over each family's pretraining seeds plus a Student-t pretraining-seed term (`_pool_replicas`) from the
    pooled spread of the source, scale and task group's pretraining seeds (``spread``, default
    `pretraining_seed_spread` of ``runs``): models pooled under their seed-0 id, as `aggregation.pool_pretraining_seeds`
    pools the point estimates. ``own``: a family with 2+ pretraining seeds draws its term from its own spread
    (`family_seed_spread`) instead, the others from the pooled one. ``instances=False`` keeps the validation and test
    sets as they are: the interval then counts the seeds alone, as the paper's ± counts its fine-tuning seeds."""
    runs = aggregation.default_grid(runs)
    if runs.empty:
        return pd.DataFrame(columns=ids.SCORE_COLUMNS)
    sel, reps = _selected_replicas(runs, n_boot, seed, rule, instances)
    w = _seed_draws(sel["seed"].to_numpy(), n_boot, seed)
    keys = ["model", "task_group", "dataset"]
    cell = sel.groupby(keys, sort=False).ngroup().to_numpy()  # numbered in order of first appearance
    onehot = np.eye(cell.max() + 1)[cell]  # (rows, cells)
    with np.errstate(invalid="ignore", divide="ignore"):
        score = ((w * reps.T) @ onehot) / (w @ onehot)  # (n_boot, cells)
    cells = sel.drop_duplicates(keys).assign(col=np.arange(cell.max() + 1))
    required = {g: aggregation.required_datasets(d, g) for g, d in cells.groupby("task_group")["dataset"]}
    avgs = [(model, group, part["col"].to_numpy()) for (model, group), part in
            cells.groupby(["model", "task_group"], sort=False) if frozenset(part["dataset"]) == required[group]]
    if not avgs:
        return pd.DataFrame(columns=ids.SCORE_COLUMNS)
    avg = np.stack([score[:, cols].mean(axis=1) for _, _, cols in avgs], axis=1)  # (n_boot, averages)
    spread = pretraining_seed_spread(runs, rule) if spread is None else spread
    spread = spread.set_index(["scale", "task_group"])[["sd", "dof"]]
    fams = family_seed_spread(runs, rule) if own else pd.DataFrame(columns=["scale", "task_group", "family", "dof"])
    own_terms = {(r.scale, r.task_group, r.family): (r.sd, int(r.dof)) for r in fams[fams["dof"] > 0].itertuples()}
    attrs = sel.drop_duplicates("model").set_index("model")[["scale", *ids.ATTRIBUTES]]
    pooled, keep = [], []
    for key in dict.fromkeys((attrs.at[m, "scale"], g) for m, g, _ in avgs):  # one source's scales and groups
        idx = [i for i, (m, g, _) in enumerate(avgs) if (attrs.at[m, "scale"], g) == key]
        sd, dof = spread.loc[key] if key in spread.index else (np.nan, 0)
        terms = {None: (sd, int(dof)), **{f: t for (sc, g, f), t in own_terms.items() if (sc, g) == key}}
        cols, first = _pool_replicas(avg[:, idx], [avgs[i][0] for i in idx], terms, seed, key)
        pooled.append(cols)
        keep += [idx[f] for f in first]
    avg, avgs = np.concatenate(pooled, axis=1), [avgs[i] for i in keep]
    base = pd.DataFrame([a[:2] for a in avgs], columns=["model", "task_group"]).join(attrs, on="model")
    base = _categorical(base.assign(dataset=ids.AVG, flag=""))
    df = base.iloc[np.tile(np.arange(len(avgs)), n_boot)].reset_index(drop=True)
    df = df.assign(source=np.repeat(np.arange(n_boot), len(avgs)), score=avg.ravel(), ci=np.nan, n=pd.NA)
    return df[ids.SCORE_COLUMNS]


def hierarchical_intervals(runs: pd.DataFrame, models=None, n_boot: int = 2000, seed: int = 0,
                           rule: str = "per_seed", instances: bool = True) -> pd.DataFrame:
    """Group averages with the claims' 95% interval, per source, scale, model and task group of ``runs`` (default
    grid): ``score`` the mean over the model's pretraining seeds (one row under its seed-0 id, as
    `aggregation.pool_pretraining_seeds`), ``low`` and ``high`` the 2.5% and 97.5% quantiles of its `replica_scores`
    (test instances, fine-tuning seeds, the learning rate chosen again, a pretraining-seed term), ``ci`` half their
    distance (for symmetric bars), ``pretrain_seeds``, and ``pretrain_sd`` and ``pretrain_dof``, the pooled spread of
    pretraining seeds behind that term (`pretraining_seed_spread`, from every model of the source and scale: ``dof``
    0 means there was none to estimate, and the interval holds the seeds fixed). ``models``: the seed-0 ids
    (`ids.family`) to keep; default all. Test instances are shared by every model of a dataset (the bootstrap
    draws them once for all): their noise widens each model's interval but cancels in a difference;
    ``instances=False`` leaves it out."""
    runs = aggregation.default_grid(runs)
    spreads = pretraining_seed_spread(runs, rule)
    if models is not None:
        runs = runs[runs["model"].map(ids.family).isin(set(models))]
    parts = []
    for (source, scale), part in runs.groupby(["source", "scale"], sort=False):
        spread = spreads[(spreads["source"] == source) & (spreads["scale"] == scale)]
        point = ids.group_averages(aggregation.pool_pretraining_seeds(aggregation.aggregate(part)))
        reps = replica_scores(part, n_boot, seed, rule, instances, spread).astype({"model": str, "task_group": str})
        q = reps.groupby(["model", "task_group"])["score"].quantile([0.025, 0.975]).unstack()
        q = q.set_axis(["low", "high"], axis=1).reset_index()
        seeds = spread[["task_group", "sd", "dof"]].rename(columns={"sd": "pretrain_sd", "dof": "pretrain_dof"})
        point = point.drop(columns="ci").merge(q, on=["model", "task_group"])
        parts.append(point.merge(seeds, on="task_group", how="left"))
    cols = [*ids.SCORE_COLUMNS, "pretrain_seeds", "low", "high", "pretrain_sd", "pretrain_dof"]
    if not parts:
        return pd.DataFrame(columns=cols)
    out = pd.concat(parts, ignore_index=True)
    return out.assign(ci=(out["high"] - out["low"]) / 2)[cols]


def _categorical(df: pd.DataFrame) -> pd.DataFrame:
    """Text columns as categories (sizes in size order, the others sorted), so that grouping a replica frame, which
    repeats a few values a million times, stays fast."""
    text = [c for c in df.columns if pd.api.types.is_string_dtype(df[c]) or df[c].dtype == object]
    values = {c: [v for v in pd.unique(df[c]) if isinstance(v, str)] for c in text}
    order = {c: ids.ordered_sizes(v) if c == "size" else sorted(v) for c, v in values.items()}
    return df.astype({c: pd.CategoricalDtype(order[c]) for c in text})


def _replica_runs(runs: pd.DataFrame, n_boot: int, seed: int) -> pd.DataFrame:
    """Every run of every replica (replica index as ``source``), a resampled seed repeated as often as drawn (each
    copy its own seed number, so per-seed selection keeps them apart)."""
    runs = runs.reset_index(drop=True)
    reps, counts = _resample(runs, n_boot, seed)
    flat = np.repeat(np.arange(n_boot * len(runs)), counts.ravel())
    b, r = flat // len(runs), flat % len(runs)
    drawn = counts.ravel()
    copy = np.arange(len(flat)) - np.repeat(np.cumsum(drawn) - drawn, drawn)  # 0, 1, ... among a run's copies
    out = _categorical(runs.drop(columns=["test_i", "test_w", "validation_i", "validation_w", "path"]))
    out = out.iloc[r].reset_index(drop=True)
    out = out.assign(source=b, test=reps[r, b])
    return out.assign(seed=out["seed"].to_numpy() * 1000 + copy)


def _per_run_runs(claim: str, runs: pd.DataFrame) -> pd.DataFrame:
    """The runs a per-run claim reads (so that replicas stay small): claim 4, the stability grid's full-budget
    single-objective base models; claim 6, the default grid's models with a masking ratio and no CPT."""
    runs = aggregation.stability_grid(runs) if claim == "4" else aggregation.default_grid(runs)
    base = ~runs["intermediate"].astype("boolean").fillna(True) & (runs["cpt_steps"] == 0)
    keep = base & (runs["objective"].isin(["clm", "mlm"]) if claim == "4" else runs["mask_ratio"].notna())
    return runs[keep.fillna(False).astype(bool)]


def _bounds(claim: str, point: pd.DataFrame, runs: pd.DataFrame, split: str, n_boot: int, seed: int,
            replicas: pd.DataFrame | None = None) -> pd.DataFrame:
    """The statistic's 95% percentile interval per scope (``lo``, ``hi``, ``replicas``) over bootstrap replicas of one
    source's runs (``replicas``: its `replica_scores`, when already drawn)."""
    c = CLAIMS[claim]
    if c.per_run:
        rows = c.rows(None, _replica_runs(_per_run_runs(claim, runs), n_boot, seed), split)
    else:
        rows = c.rows(replica_scores(runs, n_boot, seed) if replicas is None else replicas)
    dist = c.measure(rows, point).dropna(subset=["value"]) if not rows.empty else pd.DataFrame(
        columns=["scope", "value"])
    g, tail = dist.groupby("scope")["value"], 0.025 / c.choices(point)
    return pd.DataFrame({"lo": g.quantile(tail), "hi": g.quantile(1 - tail), "replicas": g.size()}).reset_index()


def _flagged(scores: pd.DataFrame, runs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """Scores (pretraining seeds pooled: `aggregation.pool_pretraining_seeds`) and runs without the task groups of models
    that have a flagged cell (fewer seeds than their neighbours), and a note naming what was left out ("" when
    nothing was)."""
    flagged = scores[scores["flag"].fillna("") != ""] if "flag" in scores else scores.iloc[0:0]
    if flagged.empty:
        return aggregation.pool_pretraining_seeds(scores), runs, ""
    out = set(zip(flagged["model"], flagged["task_group"]))

    def keep(df):
        return df[[k not in out for k in zip(df["model"], df["task_group"])]]

    shown = "; ".join(f"{r.model} {r.task_group}/{r.dataset} ({r.flag})" for r in flagged.head(3).itertuples())
    return aggregation.pool_pretraining_seeds(keep(scores)), keep(runs), (
        f"left out: {len(flagged)} cell(s) with fewer fine-tuning seeds than their neighbours, with their model's "
        f"task group ({shown}{'; ...' if len(flagged) > 3 else ''})")


# ----------------------------------------------------------------------------------------------- verdicts


def _call(lo: float, hi: float, words: tuple[str, str]) -> tuple[str, str]:
    """The verdict an interval gives, and why."""
    if np.isnan(lo) or np.isnan(hi):
        return "inconclusive", "no interval"
    if lo > 0:
        return words[0], "the 95% interval lies above zero"
    return (words[1], "the 95% interval lies below zero") if hi < 0 else ("inconclusive", "the 95% interval holds 0")


@dataclass
class _Source:
    """One source's data for the verdicts: flagged cells left out, pretraining seeds pooled, and its bootstrap
    replicas once drawn (``replicas`` with the pooled pretraining-seed term, ``own`` with each family's own where it
    has 2+ seeds), and for a scale of ours the paper's scores at its models' places (``matched``:
    `matching.paper_at`)."""

    scores: pd.DataFrame
    runs: pd.DataFrame
    note: str
    per_run: bool
    controlled: bool  # runs at a scale of ours: judged against the random-init controls and the plateau
    seeds: pd.DataFrame  # the scores before pooling
    matched: pd.DataFrame
    replicas: pd.DataFrame | None = None
    own: pd.DataFrame | None = None
    spread: pd.DataFrame | None = None  # `pretraining_seed_spread` of its runs, once computed
    families: pd.DataFrame | None = None  # `family_seed_spread` of its runs, once computed


def _source(scores: pd.DataFrame, runs: pd.DataFrame, source: str, paper: pd.DataFrame) -> _Source:
    raw, r = scores[scores["source"] == source], runs[runs["source"] == source]
    s, r, note = _flagged(raw, r)
    controlled = not r.empty and (r["scale"] != "paper").all()
    matched = matching.paper_at(s if controlled else s.iloc[0:0], paper)  # the paper's own rows: no match
    return _Source(s, r, note, per_run=not r.empty, controlled=controlled, seeds=raw, matched=matched)


def _seeds(scores: pd.DataFrame, models: set, groups: list) -> tuple[str, str]:
    """The pretraining and fine-tuning seeds behind the compared models' group averages ("3", or "1-3" where they
    differ; "" where unknown)."""
    avg = ids.group_averages(scores)
    rows = avg[avg["model"].isin(models) & avg["task_group"].isin(groups)]

    def span(col):
        v = pd.to_numeric(rows[col], errors="coerce").dropna().astype(int) if col in rows else pd.Series([], dtype=int)
        return "" if v.empty else (f"{v.min()}" if v.min() == v.max() else f"{v.min()}-{v.max()}")
    paper = (rows["scale"] == "paper").all() and not rows.empty
    return span("pretrain_seeds"), span("n") or (str(ids.PAPER_SEEDS) if paper else "")


def _gates(src: _Source, models: set, groups: list, value: float) -> list[str]:
    """Why a comparison of ours carries no signal ([] when it does): its leading model not beating the random-init
    control (`evidence.signal`: a trailing model below the control is reported, `evidence.below_control`, not a
    gate), a difference within the compared models' last-epoch validation gain, or the fine-tuning of the compared
    models failing the calibration criteria."""
    every_seed = {m for m in src.seeds["model"].unique() if ids.family(m) in models}
    return [w for w in (evidence.signal(src.seeds, models, groups),
                        evidence.unsettled(src.runs, models, groups, value),
                        _uncalibrated(src.runs, every_seed, groups)) if w]


def _uncalibrated(runs: pd.DataFrame, models: set, groups: list) -> str:
    """The calibration criteria (`evidence.calibration_report`) that the fine-tuning runs of a comparison fail: those
    of the compared models (every pretraining seed) and of the random-init controls they face, in ``groups``; ""
    when they pass. A model of the scale that the comparison does not read cannot block it (an early checkpoint
    still rising does not bear on the final models)."""
    mine = runs[runs["task_group"].isin(groups) & (runs["model"].isin(models) | (runs["objective"] == "random"))]
    if mine.empty:
        return ""
    summary = evidence.calibration_report(mine).summary()
    failed = "; ".join(f"{c.criterion} ({c.detail})" for c in summary[~summary["passed"]].itertuples())
    return f"the fine-tuning calibration of the compared models fails: {failed}" if failed else ""


def _seed_term(spread: pd.DataFrame, groups: list) -> tuple[str, str]:
    """The pretraining-seed term of ``groups``' intervals (`pretraining_seed_spread`) in words, and the reason to add
    where a group has none ("" when every group has one)."""
    rows = spread[spread["task_group"].isin(groups)]
    fixed = sorted(rows.loc[rows["dof"] == 0, "task_group"])
    shown = ", ".join(f"{r.task_group} sd {r.sd:.2f} ({r.dof} df, {r.multi} model(s) with 2+ seeds)"
                      for r in rows[rows["dof"] > 0].itertuples())
    terms = [f"pretraining-seed term: {shown}"] if shown else []
    reason = (f"pretraining-seed noise not estimable: no model with 2+ pretraining seeds ({', '.join(fixed)})"
              if fixed else "")
    return "; ".join(filter(None, [*terms, reason])), reason


def _intervals(key: str, src: _Source, point: pd.DataFrame, split: str, n_boot: int, seed: int,
               rule: str) -> tuple[pd.DataFrame, str]:
    """The statistic per scope with its interval (``lo``, ``hi``; for a source with per-run results also ``lo_own``,
    ``hi_own``: with each family's own pretraining-seed spread, `replica_scores` ``own``) and how it was computed."""
    c = CLAIMS[key]
    table = c.measure(point)
    if not src.per_run:
        return table, "printed ± half-widths"
    if src.replicas is None and not c.per_run:
        src.spread, src.families = pretraining_seed_spread(src.runs, rule), family_seed_spread(src.runs, rule)
        src.replicas = replica_scores(src.runs, n_boot, seed, rule, spread=src.spread)
        src.own = replica_scores(src.runs, n_boot, seed, rule, spread=src.spread, own=True)
    table = table.drop(columns=["lo", "hi"]).merge(_bounds(key, point, src.runs, split, n_boot, seed, src.replicas),
                                                   on="scope", how="left")
    if not c.per_run:
        own = _bounds(key, point, src.runs, split, n_boot, seed, src.own)[["scope", "lo", "hi"]]
        table = table.merge(own.rename(columns={"lo": "lo_own", "hi": "hi_own"}), on="scope", how="left")
    how = (f"hierarchical bootstrap over fine-tuning seeds and test instances, the learning rate chosen again in "
           f"each of {n_boot} replicas" + ("" if c.per_run else ", and a Student-t term for pretraining seeds"))
    return table, how


def _own_term(src: _Source, models: set, groups: list) -> bool:
    """Whether a comparison's interval uses each family's own pretraining-seed spread: every compared family has 3 or
    more pretraining seeds in each of ``groups`` (else the pooled spread of the scale)."""
    f = src.families
    f = f[f["family"].isin(models) & f["task_group"].isin(groups)] if f is not None else None
    return f is not None and not f.empty and bool((f["k"] >= 3).all())


def _seed_reading(t, own: bool, words) -> tuple[float, float, str]:
    """The interval a row shows (own or pooled pretraining-seed term), and the ``seed_term`` words: which term, and
    where the verdict changes with the other one, that it rests on this one."""
    pair = {True: (t.lo_own, t.hi_own), False: (t.lo, t.hi)}
    lo, hi = pair[own]
    name = {True: "each family's own spread", False: "the pooled spread"}
    term = f"pretraining-seed term: {name[own]}" + (" (every compared family has 3+ seeds)" if own else "")
    other, this = _call(*pair[not own], words)[0], _call(lo, hi, words)[0]
    if other != this:
        term += (f"; the verdict rests on it: with {name[not own]} [{pair[not own][0]:+.2f}, {pair[not own][1]:+.2f}] "
                 f"({other})")
    return lo, hi, term


def _reading(lo: float, hi: float, paper: float) -> str:
    """Our interval against the paper's matched effect: whether it includes it, excludes it (0 inside), or excludes
    it and 0 both (with the sign: ours on the paper's side of 0, or the other)."""
    if any(pd.isna(x) for x in (lo, hi, paper)):
        return ""
    if lo <= paper <= hi:
        return "includes the paper's"
    if lo <= 0 <= hi:
        return "excludes the paper's (holds 0)"
    return "excludes the paper's and 0" + (" (same sign)" if (lo > 0) == (paper > 0) else " (opposite sign)")


def _paper_side(key: str, src: _Source) -> pd.DataFrame:
    """The paper's estimate of the comparison a claim makes on a scale of ours (its scores at our models' places,
    `matching.paper_at`, through the claim's own check and statistic; printed ±), per scope (empty where
    the paper has none: a claim beyond it, a per-run claim, a place it did not evaluate)."""
    c, none = CLAIMS[key], pd.DataFrame(columns=["scope", "value", "lo", "hi"])
    if c.per_run or src.matched.empty or c.paper.startswith(BEYOND_PAPER):
        return none
    point = c.rows(src.matched[ids.SCORE_COLUMNS])
    return none if point.empty or c.unavailable(point) else c.measure(point)


def _beside_paper(key: str, src: _Source, scope: str, groups: list, lo: float, hi: float,
                  table: pd.DataFrame) -> dict:
    """A row of ours beside the paper: its matched estimate and printed interval, which of the paper's models (or
    interpolations) that reads, and how our interval reads against it."""
    row = table[table["scope"] == scope]
    if row.empty:
        return {}
    value, p_lo, p_hi = (float(row[k].iloc[0]) for k in ("value", "lo", "hi"))
    models = CLAIMS[key].models(src.matched[ids.SCORE_COLUMNS], None, groups)
    m = src.matched[src.matched["model"].isin(models) & src.matched["task_group"].isin(groups)]
    return {"paper_estimate": round(value, 2), "paper_low": round(p_lo, 2), "paper_high": round(p_hi, 2),
            "paper_config": "; ".join(sorted(set(m["paper_config"]))), "vs_paper": _reading(lo, hi, value)}


def _controls(src: _Source, models: set, groups: list) -> dict:
    """A row of ours against its random-init controls: what pretraining adds (the leading compared model minus the
    control, `evidence.pretraining_effect`) and the compared models below the control (`evidence.below_control`)."""
    effect = evidence.pretraining_effect(src.seeds, models, groups)
    return {"pretraining_effect": round(effect, 2) if not np.isnan(effect) else np.nan,
            "below_control": evidence.below_control(src.seeds, models, groups)}


def _ours(key: str, src: _Source, t, groups: list, words, verdict: str, why: str) -> tuple[dict, str, str, list]:
    """The columns a row of ours adds (the paper's matched estimate, the controls, the seed term), its interval, and
    its verdict and reason after the gates; notes for the evidence text."""
    c, notes = CLAIMS[key], []
    models = c.models(src.scores, src.runs, groups)
    extra = _controls(src, models, groups)
    lo, hi = t.lo, t.hi
    if not c.per_run:
        lo, hi, extra["seed_term"] = _seed_reading(t, _own_term(src, models, groups), words)
        verdict, why = _call(lo, hi, words)
    gates = _gates(src, models, groups, t.value)
    if gates:
        verdict, why = "no signal", "; ".join(gates)
        notes.append(f"no signal: {why}")
    elif extra["below_control"]:
        what = ("the trailing checkpoint is no better than no pretraining: the strong form of the claim" if key == "3"
                else "reported, not a gate: the leading model beats it")
        why = f"{why}; below the random-init control: {extra['below_control']} ({what})"
    extra |= {"lo": lo, "hi": hi}
    return extra, verdict, why, notes


def _judge(key: str, src: _Source, source: str, split: str, n_boot: int, seed: int, rule: str) -> list[dict]:
    """One claim on one source: a row per scope with the statistic, its interval, the seeds behind it, the evidence,
    the verdict and the reason for it; for a scale of ours also the paper's estimate of the same comparison and our
    interval read against it, the pretraining effect and the models below the control, and the seed term used."""
    c = CLAIMS[key]
    words = ("supported", "not supported") if source == "paper" else ("reproduced", "not reproduced")
    if c.per_run and not src.per_run:
        return [{"scope": "all", "evidence": "no data: needs per-run results", "verdict": "not checkable",
                 "reason": "needs per-run results"}]
    point = c.rows(src.scores, src.runs, split)
    reason = c.unavailable(point)
    if reason:
        return [{"scope": "all", "evidence": "; ".join(filter(None, [reason, src.note])), "reason": reason,
                 "verdict": "not checkable at this scale" if src.controlled else "not checkable"}]
    table, how = _intervals(key, src, point, split, n_boot, seed, rule)
    if c.choices(point) > 1:
        how += f"; Bonferroni-widened for the best of {c.choices(point)} pairs"
    detail, models, paper = c.describe(point), c.models(src.scores, src.runs), _paper_side(key, src)
    out = []
    for t in table.itertuples():
        verdict, why = _call(t.lo, t.hi, words)
        notes, extra, lo, hi = [detail], {}, t.lo, t.hi
        groups = [t.scope] if t.scope in ids.GROUPS else sorted(set(point["task_group"]))
        pretrain, finetune = _seeds(src.scores, models, groups)
        pretrain = "1" if c.per_run and pretrain else pretrain  # per-run claims read pretraining seed 0's runs
        if src.controlled:
            extra, verdict, why, more = _ours(key, src, t, groups, words, verdict, why)
            lo, hi = extra.pop("lo"), extra.pop("hi")
            extra |= _beside_paper(key, src, t.scope, groups, lo, hi, paper)
            notes += more
        if src.per_run and not c.per_run:
            seeds, fixed = _seed_term(src.spread, groups)
            notes.append(seeds)
            if fixed and src.controlled and verdict != "no signal":  # ours: an interval that leaves out a source of
                verdict, why = "no signal", ""                       # noise is no evidence
            why = "; ".join(filter(None, [why, fixed]))
        notes.append(src.note)
        statement = f"{c.statistic}: {t.value:+.2f}, 95% CI [{lo:+.2f}, {hi:+.2f}] ({how})"
        out.append({"scope": t.scope, "evidence": "; ".join([statement, *filter(None, notes)]),
                    "statistic": c.statistic, "value": round(t.value, 2), "ci_low": round(lo, 2),
                    "ci_high": round(hi, 2), "pretrain_seeds": pretrain, "finetune_seeds": finetune,
                    "verdict": verdict, "reason": why, **extra})
    return out


# a row of ours also carries (blank for the paper's rows): the paper's estimate of the same comparison and which of its
# models that reads (`matching.paper_at`), our interval against it, what pretraining adds in the group, the compared
# models below the random-init control, and the pretraining-seed term of the interval
BESIDE_PAPER = ["paper_estimate", "paper_low", "paper_high", "paper_config", "vs_paper", "pretraining_effect",
                "below_control", "seed_term"]
TABLE_COLUMNS = ["claim", "scale", "source", "group", "statistic", "estimate", "low", "high", "pretraining_seeds",
                 "finetuning_seeds", "verdict", "reason", *BESIDE_PAPER]


def verdicts(scores: pd.DataFrame, runs: pd.DataFrame, claims, split: str = "test", n_boot: int = 2000,
             seed: int = 0, numbers: bool = False, rule: str = "per_seed", full: bool = False,
             paper: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per claim, source and scope (a task group, or "all"): the evidence computed from the data and a verdict.

    Every claim gets a statistic that is positive when the claim holds as the paper states it (`Claim.paper`), and its
    95% interval: for a source with per-run results (this repository's, EncodEval's) a hierarchical bootstrap
    (`replica_scores`: test instances, fine-tuning seeds, the learning rate chosen again in each of ``n_boot``
    replicas, and a Student-t pretraining-seed term, `_pool_replicas`), for the paper its printed half-widths. Models
    that differ only in their pretraining seed are one model, their mean (`aggregation.pool_pretraining_seeds`). The
    verdict is "reproduced" (for the paper: "supported")
    when the whole interval is above zero, "not reproduced" ("not supported") when it is below, else "inconclusive".
    A comparison of ours is "no signal" when its leading model does not beat the random-init control of its size
    beyond the combined half-width (`evidence.signal`; a trailing model below it is named in the row,
    ``below_control``), when the statistic is smaller than a compared model's last-epoch validation gain
    (`evidence.unsettled`), or when the fine-tuning of the compared models and their controls fails the calibration
    criteria (`evidence.calibration_report`), or when its interval cannot count pretraining-seed noise (no model of
    the scale with 2+ pretraining seeds); ``reason`` says which. Its interval's pretraining-seed term is each
    family's own spread where every compared family has 3+ seeds, else the pooled one (``seed_term``, which says when
    the verdict would change with the other). Beside it: the paper's estimate of the same comparison (``paper``: the
    paper's scores, default those in ``scores``; read at our models' places, `matching.paper_at`), our interval
    against it, and the group's pretraining effect (`BESIDE_PAPER`). A source whose results cannot carry the claim
    gets "not checkable at this scale" (the paper's own sources, e.g. for claims 4 and 6 that need per-run results:
    "not checkable"), with the reason. ``numbers`` adds the statistic and its interval as columns (``value``,
    ``ci_low``, ``ci_high``); ``full`` returns every column (`verdict_table` writes them).
    """
    data: dict[str, _Source] = {}
    rows = []
    paper = scores[scores["source"] == "paper"] if paper is None else paper
    for key in map(str, claims):
        claim = CLAIMS[key]
        sources = list(dict.fromkeys([*scores["source"], *(runs["source"] if claim.per_run else [])]))
        sources = sources or ["none loaded"]
        for source in sources:
            if source not in data:
                data[source] = _source(scores, runs, source, paper)
            for row in _judge(key, data[source], source, split, n_boot, seed, rule):
                rows.append({"claim": f"{key}. {claim.text}", "source": source, **row})
    numbered = ["value", "ci_low", "ci_high"] if numbers or full else []
    more = ["statistic", "pretrain_seeds", "finetune_seeds", "reason", *BESIDE_PAPER] if full else []
    return pd.DataFrame(rows, columns=["claim", "source", "scope", "evidence", *numbered, "verdict", *more])


def verdict_table(judged: pd.DataFrame) -> pd.DataFrame:
    """``verdicts(..., full=True)`` rows (with a ``scale`` column) as the verdicts table's columns (`TABLE_COLUMNS`)."""
    out = judged.rename(columns={"scope": "group", "value": "estimate", "ci_low": "low", "ci_high": "high",
                                 "pretrain_seeds": "pretraining_seeds", "finetune_seeds": "finetuning_seeds"})
    return out.reindex(columns=TABLE_COLUMNS)
