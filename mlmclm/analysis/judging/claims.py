"""The paper's headline claims (``CLAIMS``: one line each, as the paper states them) checked on any source's results.

Each claim is one `judge.Claim`, defined in one place below (its section: the check, the comparison behind it, one
row per source x size x task group ..., shown in the notebooks; the statistic computed from it, positive when the
claim holds; the evidence beside it; why a source cannot carry it; the models it compares, which the controls gate;
and the paper's tables and words), and ``CLAIMS`` is built from them. How a claim is judged (its interval, the
controls and gates, the verdict) is `judge`; the claims beyond the paper (issue 27) are in `beyond`. No torch import
here.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pandas as pd

from ..loading import aggregation
from ..loading import ids
from ..loading import views
from . import beyond
from . import judge
from . import matching
from .comparisons import (CELL, base_runs, calls, chosen_models, compare, mean_diff, mean_over, min_over,
                          sd_difference, sort_rows, when_empty, widen)
from .judge import TABLE_COLUMNS, Claim, verdict_table

# The pretrained models each claim compares (in ``groups``, where the comparison picks models per group: only those
# in the difference): the leading one must beat its size's random-init control, and an interval that excludes 0
# must do so by more than the difference's own change over the last fine-tuning epoch (`evidence.signal`, `evidence.unsettled`). Claims 3 and 3b compare intermediate
# checkpoints: those checkpoints themselves (an early MLM checkpoint below the control while CLM's beats it is the
# strong form of claim 3, and its row says so). Each claim as the paper states it (``paper``: its tables and figures,
# the paper's words where the notes on the paper quote them, else a paraphrase; results/paper holds the numbers), and
# the statistic that judges it as stated.


# ------------------------------------------------------------------ claims 1 and 1b: MLM against CLM at the full budget


def check_mlm_vs_clm(scores: pd.DataFrame, runs=None, split="test") -> pd.DataFrame:
    """Claim 1: MLM-40% minus CLM at the full budget, per source, size and task group."""
    v = ids.group_averages(views.scaling_view(scores))
    out = compare(v[v["mask_ratio"] == 40], v[v["objective"] == "clm"], ["source", "scale", "size", "task_group"],
                  ("MLM", "CLM"))
    return sort_rows(out)


def _clm_mlm40_models(scores, runs=None, groups=None) -> set:
    v = views.scaling_view(scores)
    return set(v[views.is_clm_or_mlm40(v)]["model"])


def _stat_mlm_vs_clm(rows, point=None):
    return mean_over(rows, rows["diff"], "task_group")


def _stat_widening(rows, point=None):
    """1b: the smallest widening of the SC gap from one size to the next (positive when it widens at every step)."""
    sc = rows[rows["task_group"] == "SC"]
    rank = {size: i for i, size in enumerate(ids.ordered_sizes(sc["size"]))}
    sc = sc.assign(_rank=sc["size"].map(rank).astype(int)).sort_values(["source", "_rank"], kind="stable")
    prev = sc.groupby("source", sort=False)[["diff", "diff ±"]].shift()
    keep = prev["diff"].notna().to_numpy()
    return min_over(sc[keep], (sc["diff"] - prev["diff"])[keep], np.hypot(sc["diff ±"], prev["diff ±"])[keep])


def _detail_widening(rows):
    """The SC gap by size, in order."""
    sc = sort_rows(rows[rows["task_group"] == "SC"])
    return "SC gap MLM - CLM by size: " + " -> ".join(f"{s} {g:+.2f}" for s, g in zip(sc["size"], sc["diff"]))


def _one_size(rows) -> str:
    sc = rows[rows["task_group"] == "SC"]
    return "no SC task" if sc.empty else ("one model size" if sc["size"].nunique() < 2 else "")


MLM_AHEAD = Claim(
    "1", "MLM generally outperforms CLM", check_mlm_vs_clm,
    statistic="MLM-40% minus CLM at the full budget, mean over sizes (points)", measure=_stat_mlm_vs_clm,
    models=_clm_mlm40_models, unavailable=when_empty("no group averages of CLM and MLM-40% at the full budget"),
    paper="Tables 2-5, Fig. 2 (§3), paraphrased: at 42K steps MLM-40% is ahead of CLM on SC, QA and IR at "
          "every size; TC about even")
SC_GAP_WIDENS = Claim(
    "1b", "The SC gap between MLM and CLM widens with model size", check_mlm_vs_clm,
    statistic="smallest widening of the SC gap (MLM-40% - CLM) from one size to the next (points)",
    measure=_stat_widening, models=_clm_mlm40_models, unavailable=_one_size, describe=_detail_widening,
    paper="Table 2 (§3), paraphrased: the SC gap widens with size, 2.09 -> 3.42 -> 5.55 from 210M to 1B")


# ----------------------------------------------------------------------------------- claims 2 and 2b: the masking ratio


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
    return sort_rows(out, "mask_ratio")


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
    return sort_rows(out[cols].astype({"best ratio": int, "runner-up": int, "highest tested": int}))


def _mlm_models(scores, runs=None, groups=None) -> set:
    v = views.scaling_view(scores)
    return set(v[v["objective"] == "mlm"]["model"])


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
    factor = widen(_claim2_choices(rows if point is None else point))
    out = min_over(picked, picked["margin"], picked["margin ±"] * factor)
    return out if sign > 0 else out.assign(value=-out["value"], lo=-out["hi"], hi=-out["lo"])


def _detail_best_ratio(rows):
    best = _best_cells(rows)
    spread = ", ".join(f"{ratio}% in {n}" for ratio, n in best["mask_ratio"].value_counts().sort_index().items())
    cells, sign = _claim2_cells(rows)
    shown = "; ".join(f"{r['size']} {r['task_group']}: {r['mask_ratio']}% ({r['margin']:+.2f} ± {r['margin ±']:.2f} "
                      "over the runner-up)" for _, r in cells.iterrows())
    judged = f"judged on {shown}" if sign > 0 else f"one ratio best in every cell: {shown}"
    return f"best ratio over {len(best)} size x group cells: {spread}; {judged}"


def _one_cell(rows) -> str:
    return "no size x task group cell with two masking ratios" if rows.empty else (
        "one size x task group cell" if len(rows.drop_duplicates(CELL)) < 2 else "")


def _stat_ir_highest(rows, point=None):
    """2b: the smallest margin, over sizes, of the highest ratio tested over the best other ratio on IR."""
    ir = rows[rows["task_group"] == "IR"]
    ir = ir[ir["mask_ratio"] == ir.groupby(CELL)["mask_ratio"].transform("max")]
    return min_over(ir, ir["margin"], ir["margin ±"])


def _detail_ir(rows):
    ir = _best_cells(rows[rows["task_group"] == "IR"])
    return "best IR ratio by size: " + ", ".join(f"{s} {r}%" for s, r in zip(ir["size"], ir["mask_ratio"]))


def _no_ir(rows) -> str:
    if rows.empty:
        return "no size x task group cell with two masking ratios"
    return "no IR task" if (rows["task_group"] != "IR").all() else ""


NO_BEST_RATIO = Claim(
    "2", "No masking ratio is best for every size and task group", check_masking_ratio,
    statistic="the weaker margin of two cells' different best ratios over their runner-up, widened to "
              "Bonferroni's interval for the number of pairs chosen from (points)", measure=_stat_best_ratio,
    models=_mlm_models, unavailable=_one_cell, describe=_detail_best_ratio, table=ratio_margins,
    choices=_claim2_choices, one_size="No masking ratio is best for every task group (at one size)",
    paper="Tables 2-5, Fig. 3 (§3), paraphrased: no masking ratio is universally best; the best differs by "
          "size and task group, larger models preferring higher ratios")
IR_HIGHEST_RATIO = Claim(
    "2b", "IR prefers the highest masking ratio at every size", check_masking_ratio,
    statistic="smallest margin over sizes of the highest ratio over the best other on IR (points)",
    measure=_stat_ir_highest, models=_mlm_models, unavailable=_no_ir, describe=_detail_ir, table=ratio_margins,
    one_size="IR prefers the highest masking ratio (at one size)",
    paper="Table 5, Fig. 3 (§3), paraphrased: IR prefers higher masking ratios at every size (50% best)")


# ------------------------------------------------------------------------------------- claims 3 and 3b: data efficiency


def check_data_efficiency(scores: pd.DataFrame, runs=None, split="test") -> pd.DataFrame:
    """Claim 3: CLM minus MLM-40% at each intermediate checkpoint, per source, size and task group; ``total`` is the
    runs' full budget (the steps of the size's full-budget models)."""
    v = ids.group_averages(views.data_efficiency_view(scores))
    out = compare(v[v["objective"] == "clm"], v[v["objective"] == "mlm"],
                  ["source", "scale", "size", "task_group", "steps"], ("CLM", "MLM"))
    keys = ["source", "scale", "size"]
    total = views.scaling_view(scores).groupby(keys)["steps"].max().rename("total").reset_index()
    return sort_rows(out.merge(total, on=keys, how="left"), "steps")


def _judged(rows):
    """The checkpoints claims 3 and 3b compare: where a scale evaluates some at every pretraining seed
    (`matching.seeded_steps`), those only; the others (the twin's 1K, 2K and 40K, at seed 0) stay in the tables."""
    seeded = {scale: matching.seeded_steps(scale) for scale in rows["scale"].unique()}
    return rows[np.array([not seeded[sc] or st in seeded[sc] for sc, st in zip(rows["scale"], rows["steps"])],
                         dtype=bool)]


def _early(rows):
    rows = _judged(rows)
    return rows[(rows["steps"] > 0) & (rows["steps"] <= rows["total"] / 4)]


def _last(rows):
    rows = _judged(rows)
    return rows[rows["steps"] == rows.groupby(CELL)["steps"].transform("max")]


def _late(rows):
    """The last checkpoint's rows outside TC (the paper excepts TC: its CLM stays ahead at every checkpoint)."""
    last = _last(rows)
    return last[last["task_group"] != "TC"]


def _checkpoint_models(pick):
    """The intermediate checkpoints claim 3 (``_early``) or 3b (``_late``) compares."""
    def models(scores, runs=None, groups=None) -> set:
        rows = check_data_efficiency(scores)
        keys = ["source", "scale", "size", "task_group", "steps"]
        if not len(rows):
            return set()
        return set(views.data_efficiency_view(scores).merge(pick(rows)[keys], on=keys)["model"])
    return models


def _stat_early(rows, point=None):
    """3: CLM minus MLM-40% over the checkpoints of the first quarter of training, per task group."""
    e = _early(rows)
    return mean_over(e, e["diff"], "task_group")


def _detail_early(rows):
    e = _early(rows)
    steps = ", ".join(ids.step_label(s) for s in sorted(set(e["steps"])))
    return f"checkpoints {steps} of {ids.step_label(e['total'].max())}"


def _no_early(rows) -> str:
    return "no intermediate checkpoints" if rows.empty else (
        "no checkpoint in the first quarter of training" if _early(rows).empty else "")


def _stat_catch_up(rows, point=None):
    """3b: MLM-40% minus CLM at the last intermediate checkpoint, per task group but TC."""
    last = _late(rows)
    return mean_over(last, -last["diff"], "task_group")


def _detail_last(rows):
    last = _late(rows)
    return (f"the last checkpoint: {ids.step_label(last['steps'].max())} of "
            f"{ids.step_label(last['total'].max())}")


def _no_late(rows) -> str:
    if rows.empty:
        return "no intermediate checkpoints"
    if (_last(rows)["steps"] <= _last(rows)["total"] / 4).all():
        return "no checkpoint past the first quarter of training"
    return "no SC, QA or IR result (the claim excepts TC)" if _late(rows).empty else ""


CLM_EARLY = Claim(
    "3", "CLM is more data-efficient early in pretraining", check_data_efficiency,
    statistic="CLM minus MLM-40% over the checkpoints of the first quarter of training, mean (points)",
    measure=_stat_early, models=_checkpoint_models(_early), unavailable=_no_early, describe=_detail_early,
    paper="Tables 6-9, Figs. 4 and 10 (§4), paraphrased: CLM is ahead early, up to about 10K steps on SC "
          "and QA, 20K on IR, the whole run on TC (610M); Fig. 10: CLM \"is also more efficient in terms "
          "of training FLOPs\"",
    below_control="the trailing checkpoint is no better than no pretraining: the strong form of the claim")
MLM_CATCHES_UP = Claim(
    "3b", "MLM catches up and ends ahead of CLM (SC, QA, IR)", check_data_efficiency,
    statistic="MLM-40% minus CLM at the last intermediate checkpoint, SC, QA and IR (points)", measure=_stat_catch_up,
    models=_checkpoint_models(_late), unavailable=_no_late, describe=_detail_last,
    paper="Tables 6, 8, 9, Fig. 4 (§4), paraphrased: MLM catches up and passes CLM later, by 10K-20K "
          "steps on SC, QA and IR; on TC CLM stays ahead at every checkpoint, so TC is excepted")


# ------------------------------------------------------------------------- claim 4: learning-rate sensitivity (per-run)


def check_lr_sensitivity(scores, runs: pd.DataFrame, split: str = "test") -> pd.DataFrame:
    """Claim 4: sd of centered scores over fine-tuning seeds and learning rates in [1e-5, 1e-4] (a scale of ours:
    its stability grid), CLM vs MLM-40%, per dataset: each pretraining seed's sd (`views.model_spreads`), the mean
    over a family's seeds."""
    m = views.model_spreads(views.centered_scores(runs, split=split, every_seed=True))
    cols = ["source", "scale", "size", "task_group", "dataset", "CLM sd", "MLM sd", "CLM runs", "MLM runs", "call"]
    if m.empty:
        return pd.DataFrame(columns=cols)
    g = m.groupby(["source", "scale", "size", "task_group", "dataset", "family"])
    sd, n = g["sd"].mean().unstack(), g["runs"].sum().unstack()
    if not {"CLM", "MLM"} <= set(sd.columns):
        return pd.DataFrame(columns=cols)
    out = pd.DataFrame({"CLM sd": sd["CLM"].round(2), "MLM sd": sd["MLM"].round(2), "CLM runs": n["CLM"],
                        "MLM runs": n["MLM"]}).dropna().reset_index()
    out["call"] = np.where(out["CLM sd"] < out["MLM sd"], "CLM tighter", "MLM tighter")
    return out[cols]


def _stability_models(scores, runs, groups=None) -> set:
    return set(views.centered_scores(runs, every_seed=True)["model"])


def _stability_seeds(runs: pd.DataFrame, split: str = "test") -> pd.DataFrame:
    """Claim 4's statistic per pretraining seed: each model's sd of centered scores, mean over its datasets
    (``value``), with its ``family``, pretraining ``seed`` and ``coef`` (+1 MLM, -1 CLM: the statistic is the
    difference of the families' means)."""
    m = views.model_spreads(views.centered_scores(runs, split=split, every_seed=True))
    per = m.groupby(["family", "model"])["sd"].mean().rename("value").reset_index()
    seed = runs.drop_duplicates("model").set_index("model")["pretrain_seed"]
    return per.assign(seed=per["model"].map(seed).fillna(0).astype(int),
                      coef=np.where(per["family"] == "MLM", 1.0, -1.0))


def _stability_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs claim 4's bootstrap replicas read (where a family has one pretraining seed): the stability grid's
    full-budget single-objective base models."""
    return base_runs(aggregation.stability_grid(runs), lambda r: r["objective"].isin(["clm", "mlm"]))


CLM_STABLE = Claim(
    "4", "CLM-pretrained models are less sensitive to the fine-tuning learning rate", check_lr_sensitivity,
    statistic="MLM sd minus CLM sd of centered scores, mean over datasets (points)",
    measure=sd_difference("MLM sd", "CLM sd"), models=_stability_models,
    unavailable=when_empty("no CLM and MLM-40% runs over two or more shared learning rates"), per_run=True,
    spread=True, seed_values=_stability_seeds,
    paper="Fig. 5 (§4), paraphrased: CLM's centered scores over seeds and learning rates in [1e-5, 1e-4] "
          "spread less (no numbers printed)", replica_runs=_stability_runs)


# ----------------------------------------------------------------------------- claims 5, 5s and 5b: CLM-then-MLM splits


def check_split_vs_mlm(scores: pd.DataFrame, runs=None, split="test") -> pd.DataFrame:
    """Claim 5 as the paper states it: the 25/75 split (the first quarter of the steps CLM, then MLM-40%) minus
    MLM-only, per source, size, budget and task group."""
    v = ids.group_averages(views.biphasic_view(scores))
    out = compare(v[v["clm_share"] == 25], v[v["clm_share"] == 0], ["source", "scale", "size", "budget",
                                                                       "task_group"], ("25/75 split", "MLM-only"))
    return sort_rows(out, "budget")


def _split_models(scores, runs=None, groups=None) -> set:
    """Claim 5's: the 25/75 splits and the MLM-only models of their budgets."""
    v = views.biphasic_view(scores)
    return set(v[v["clm_share"].isin([0, 25])]["model"])


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
                         call=calls(diff, ci, ("split ahead", "extreme ahead")))
    return sort_rows(out[cols], "budget")


def _best_split_models(scores, runs=None, groups=None) -> set:
    """Claim 5s's: per cell, the best inner split and the better of MLM-only and CLM-only (the models in the
    difference)."""
    rows = check_biphasic(scores)
    rows = rows.assign(end=np.where(rows["MLM-only"] >= rows["CLM-only"], 0, 100))
    keys = ["source", "scale", "size", "budget", "task_group"]
    v = ids.group_averages(views.biphasic_view(scores))
    return (chosen_models(v, rows, keys, {"clm_share": "best split"}, groups)
            | chosen_models(v, rows, keys, {"clm_share": "end"}, groups))


def _detail_biphasic(rows):
    shares = ", ".join(f"{s}% in {n}" for s, n in rows["best split"].value_counts().sort_index().items())
    ahead = int((rows["call"] == "split ahead").sum())
    return f"best inner split: {shares}; ahead of both extremes beyond the CI in {ahead}/{len(rows)} cells"


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
                         call=calls(diff, ci.round(2), ("CLM-only lowest", "other split lowest")))
    return sort_rows(out, "budget")


def _clm_only_worst_models(scores, runs=None, groups=None) -> set:
    """Claim 5b's: per cell, CLM-only and the lowest other split (the models in the difference; the other splits are
    not in it, so their fine-tuning cannot gate it)."""
    rows = check_clm_only_worst(scores).assign(clm=100)
    keys = ["source", "scale", "size", "budget", "task_group"]
    v = ids.group_averages(views.biphasic_view(scores))
    return chosen_models(v, rows, keys, {"clm_share": "lowest other"}, groups) | chosen_models(
        v, rows, keys, {"clm_share": "clm"}, groups)


def _stat_clm_lowest(rows, point=None):
    return min_over(rows, rows["diff"], rows["diff ±"])


SPLIT_BEATS_MLM = Claim(
    "5", "The 25/75 CLM-then-MLM split beats MLM-only at a fixed budget", check_split_vs_mlm,
    statistic="the 25/75 split (25% of the steps CLM, then MLM-40%) minus MLM-only, mean over budgets "
              "(points)", measure=mean_diff, models=_split_models,
    unavailable=when_empty("no 25/75 split beside MLM-only at its budget"),
    paper="Tables 10-13, Fig. 6 (§5): \"the 25%-75% split reliably surpasses the MLM baseline, while even "
          "a 75% CLM allocation maintains comparable results\"")
SPLIT_BEATS_BOTH = Claim(
    "5s", "(ours, stricter) The best CLM-then-MLM split beats both MLM-only and CLM-only", check_biphasic,
    statistic="best split strictly between CLM-only and MLM-only minus the better of the two, mean over "
              "budgets (points)", measure=mean_diff, models=_best_split_models,
    unavailable=when_empty("no biphasic runs"), describe=_detail_biphasic,
    paper="not the paper's sentence (claim 5 is): a stricter reading of Tables 10-13 that this "
          "repository adds, the split against the better single objective")
CLM_ONLY_WORST = Claim(
    "5b", "CLM-only is the worst split on SC and QA at every budget", check_clm_only_worst,
    statistic="smallest lead of the lowest other split over CLM-only, SC and QA budgets (points)",
    measure=_stat_clm_lowest, models=_clm_only_worst_models, unavailable=when_empty("no biphasic runs with SC or QA"),
    paper="Tables 10 and 12, Fig. 6 (§5), paraphrased: pure CLM is the worst split on SC and QA at every "
          "budget")


# -------------------------------------------------------------------------- claim 6: masking-ratio robustness (per-run)


def check_masking_robustness(scores, runs: pd.DataFrame, split: str = "test") -> pd.DataFrame:
    """Claim 6: CLM+MLM vs MLM-only, per dataset, the sd over masking ratios (and fine-tuning seeds) of each
    pretraining seed's centered scores, a family's the mean over its seeds."""
    c = views.masking_ratio_spread(runs, split=split, every_seed=True)
    cols = ["source", "scale", "size", "task_group", "dataset", "CLM+MLM sd", "MLM sd", "call"]
    if c.empty:
        return pd.DataFrame(columns=cols)
    keys = ["source", "scale", "size", "task_group", "dataset", "family"]
    sd = c.groupby([*keys, "seed"])["centered"].std().groupby(keys).mean().unstack()
    if not {"CLM+MLM", "MLM"} <= set(sd.columns):  # one family only (results still coming in)
        return pd.DataFrame(columns=cols)
    sd = sd.dropna()
    out = pd.DataFrame({"CLM+MLM sd": sd["CLM+MLM"].round(2), "MLM sd": sd["MLM"].round(2)}).reset_index()
    out["call"] = np.where(out["CLM+MLM sd"] < out["MLM sd"], "CLM+MLM tighter", "MLM tighter")
    return out[cols]


def _masking_models(scores, runs, groups=None) -> set:
    return set(views.masking_ratio_spread(runs, every_seed=True)["model"])


def _masking_seeds(runs: pd.DataFrame, split: str = "test") -> pd.DataFrame:
    """Claim 6's statistic per pretraining seed: a family's sd over masking ratios of that seed's centered scores,
    mean over sizes and datasets (``value``), with ``coef`` +1 for MLM-only, -1 for CLM+MLM (the statistic is the
    difference of the families' means over seeds)."""
    c = views.masking_ratio_spread(runs, split=split, every_seed=True)
    sd = c.groupby(["family", "seed", "size", "dataset"])["centered"].std()
    per = sd.groupby(["family", "seed"]).mean().rename("value").reset_index()
    return per.assign(coef=np.where(per["family"] == "MLM", 1.0, -1.0))


def _masking_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs claim 6's bootstrap replicas read: the default grid's models with a masking ratio and no CPT."""
    return base_runs(aggregation.default_grid(runs), lambda r: r["mask_ratio"].notna())


CLM_MLM_ROBUST = Claim(
    "6", "CLM+MLM is less sensitive to the masking ratio than MLM-only", check_masking_robustness,
    statistic="MLM-only sd minus CLM+MLM sd of centered scores over masking ratios, each pretraining seed's, mean "
              "over seeds and datasets (points)",
    measure=sd_difference("MLM sd", "CLM+MLM sd"), models=_masking_models,
    unavailable=when_empty("no masking-ratio runs of both families (MLM-only, CLM+MLM)"), per_run=True,
    seed_values=_masking_seeds,
    paper="Fig. 7 (§5), paraphrased: CLM+MLM is less sensitive to the masking ratio than MLM-only (no "
          "numbers printed)", replica_runs=_masking_runs)


# --------------------------------------------------------------------------------------- claim 7: continued pretraining


def check_cpt(scores: pd.DataFrame, runs=None, split="test") -> pd.DataFrame:
    """Claim 7: CLM-based minus MLM-based model before CPT (``cpt_steps == 0``, the base models) and after each CPT
    length, per source, size and task group."""
    v = ids.group_averages(views.cpt_view(scores))
    out = compare(v[v["base"] == "CLM"], v[v["base"] == "MLM"], ["source", "scale", "size", "cpt_steps", "task_group"],
                  ("CLM-based", "MLM-based"))
    return sort_rows(out, "cpt_steps")


def _cpt_ends(rows) -> pd.DataFrame:
    """Claim 7's rows before CPT and after the longest CPT, side by side (``_0``: before)."""
    longest = rows["cpt_steps"] == rows.groupby(["source", "scale", "size"])["cpt_steps"].transform("max")
    after = rows[longest & (rows["cpt_steps"] > 0)]
    return after.merge(rows[rows["cpt_steps"] == 0], on=CELL, suffixes=("", "_0"))


def _stat_level(rows, point=None):
    """7: CLM-based minus MLM-based model after the longest CPT (the same length for both), mean over sizes, per
    task group."""
    m = _cpt_ends(rows)
    return mean_over(m, m["diff"], "task_group")


def _detail_cpt(rows):
    """The level before CPT and the difference in gains beside the verdict's level (a detail, not the verdict)."""
    m = _cpt_ends(rows)
    before, after = m["diff_0"].mean(), m["diff"].mean()
    return (f"after {ids.step_label(m['cpt_steps'].max())} of CPT; before CPT {before:+.2f}, so the CLM-based "
            f"model gained {after - before:+.2f} more than the MLM-based one")


def _no_cpt(rows) -> str:
    return "no CPT runs" if rows.empty else ("no CPT run beside its base model" if _cpt_ends(rows).empty else "")


def _cpt_models(scores, runs=None, groups=None) -> set:
    """The models claim 7's level compares: the CLM- and MLM-based models after the longest CPT (not the bases)."""
    ends = _cpt_ends(check_cpt(scores))[["source", "scale", "size", "cpt_steps"]].drop_duplicates()
    return set(views.cpt_view(scores).merge(ends, on=["source", "scale", "size", "cpt_steps"])["model"])


CPT_OF_CLM = Claim(
    "7", "MLM continued pretraining of a CLM model beats continued MLM of an MLM model", check_cpt,
    statistic="CLM-based minus MLM-based model after the same (longest) MLM-CPT, mean over sizes (points)",
    measure=_stat_level, models=_cpt_models, unavailable=_no_cpt, describe=_detail_cpt,
    paper="Tables 14-17, Figs. 8-9 (§5), paraphrased: after the same MLM-CPT the CLM-based model matches "
          "or beats the MLM-based one; at 22K the 610M CLM-based model leads on SC, TC and IR (+0.93, "
          "+0.59, +0.25) and trails on QA (-1.04)")


CLAIMS = {c.key: c for c in (MLM_AHEAD, SC_GAP_WIDENS, NO_BEST_RATIO, IR_HIGHEST_RATIO, CLM_EARLY, MLM_CATCHES_UP,
                              CLM_STABLE, SPLIT_BEATS_MLM, SPLIT_BEATS_BOTH, CLM_ONLY_WORST, CLM_MLM_ROBUST, CPT_OF_CLM,
                              *beyond.CLAIMS)}
# what notebooks and the command line use: the claims, their checks, the verdicts and the verdicts table's columns
__all__ = ["CLAIMS", "Claim", "verdicts", "verdict_table", "TABLE_COLUMNS", "check_mlm_vs_clm", "ratio_margins",
           "check_masking_ratio", "check_data_efficiency", "check_lr_sensitivity", "check_split_vs_mlm",
           "check_biphasic", "check_clm_only_worst", "check_masking_robustness", "check_cpt"]


def verdicts(scores: pd.DataFrame, runs: pd.DataFrame, claims, **options) -> pd.DataFrame:
    """`judge.verdicts` of the claims keyed ``claims`` (keys of ``CLAIMS``, in that order): one row per claim, source
    and scope with the evidence and the verdict; ``options``: those of `judge.verdicts` (``split``, ``n_boot``,
    ``seed``, ``numbers``, ``rule``, ``full``, ``paper``)."""
    return judge.verdicts(scores, runs, [CLAIMS[str(key)] for key in claims], **options)
