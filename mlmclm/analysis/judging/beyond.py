"""Beyond the paper (issues 27, 61): not claims of the paper, judged with the same statistics, intervals and gates
(`judge`): mixed or alternating CLM+MLM against the best sequential schedule (B1), the CLM detour against plain MLM
continued pretraining (B2), and a decreasing masking ratio against the constant ratio it starts from (B3). Each is
one `judge.Claim`, defined in one place. No torch import here.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..loading import ids
from ..loading import views
from .comparisons import calls, chosen_models, compare, mean_diff, sort_rows, when_empty
from .judge import BEYOND_PAPER, Claim


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
                         call=calls(diff, ci.round(2), ("mixed ahead", "sequential ahead")))
    return sort_rows(out[cols], "budget")


def _detail_mixed(rows):
    def counts(col):
        return ", ".join(f"{name} in {n}" for name, n in rows[col].value_counts().sort_index().items())
    ahead = int((rows["call"] == "mixed ahead").sum())
    return (f"best mixed: {counts('best mixed')}; best sequential: {counts('best sequential')}; mixed ahead beyond "
            f"the CI in {ahead}/{len(rows)} cells")


def _mixed_models(scores, runs=None, groups=None) -> set:
    """Claim B1's: per cell, the best mixed or alternating model and the best sequential one (the models in the
    difference)."""
    rows = check_mixed(scores)
    keys = ["source", "scale", "size", "budget", "task_group"]
    v = ids.group_averages(views.mixed_view(scores))
    return (chosen_models(v, rows, keys, {"schedule": "best mixed"}, groups)
            | chosen_models(v, rows, keys, {"schedule": "best sequential"}, groups))


MIXED_AHEAD = Claim(
    "B1", "Mixed or alternating CLM+MLM beats the best sequential schedule at a fixed budget", check_mixed,
    statistic="best mixed or alternating model minus the best of MLM-only, CLM-only and the 25/75 split "
              "of its budget, both chosen again in each replica, mean over budgets (points)", measure=mean_diff,
    models=_mixed_models, describe=_detail_mixed,
    unavailable=when_empty("no mixed or alternating run beside MLM-only, CLM-only and the 25/75 split of "
                           "its budget"),
    paper=BEYOND_PAPER + "; issue 27; GPT-BERT (Charpentier & Samuel, BabyLM 2024) mixed batches, AntLM "
                         "alternating objectives")


def check_detour(scores: pd.DataFrame, runs=None, split="test") -> pd.DataFrame:
    """Claim B2: the CLM detour minus the plain MLM-CPT of the same decayed MLM-40% model and CPT length, per source,
    size, CPT length and task group."""
    v = ids.group_averages(views.detour_view(scores))
    out = compare(v[v["schedule"] == "detour"], v[v["schedule"] == "MLM-CPT"],
                  ["source", "scale", "size", "cpt_steps", "task_group"], ("detour", "MLM-CPT"))
    return sort_rows(out, "cpt_steps")


def _detour_models(scores, runs=None, groups=None) -> set:
    return set(views.detour_view(scores)["model"])


DETOUR_AHEAD = Claim(
    "B2", "The CLM detour beats plain MLM continued pretraining of an MLM model", check_detour,
    statistic="CLM detour (CLM then MLM-40% CPT) minus plain MLM-40% CPT of the same decayed MLM-40% "
              "model, mean over CPT lengths (points)", measure=mean_diff, models=_detour_models,
    unavailable=when_empty("no CLM-detour run beside the plain MLM-CPT of its model and length"),
    paper=BEYOND_PAPER + "; issue 27; Touchent & de la Clergerie, arXiv 2605.12438")


def check_ramp(scores: pd.DataFrame, runs=None, split="test") -> pd.DataFrame:
    """Claim B3: per source, size, budget, ramp and task group, the masking-ratio ramp (``mlm40to20``) minus constant
    MLM at the ratio it starts from, of the same size and budget (`views.ramp_view`)."""
    v = ids.group_averages(views.ramp_view(scores))
    keys = ["source", "scale", "size", "steps", "start", "task_group"]
    ramps = v[v["schedule"] != "constant"]
    out = compare(ramps, v[v["schedule"] == "constant"], keys, ("ramp", "constant"))
    schedules = ramps.drop_duplicates(keys)[[*keys, "schedule"]]
    return sort_rows(out.merge(schedules, on=keys), "steps", "schedule")


def _ramp_models(scores, runs=None, groups=None) -> set:
    return set(views.ramp_view(scores)["model"])


RAMP_AHEAD = Claim(
    "B3", "A decreasing masking ratio beats a constant 40% at a fixed budget", check_ramp,
    statistic="masking-ratio ramp (e.g. 40% to 20% linearly over the run) minus constant MLM at its starting ratio, "
              "same budget and seeds, mean over ramps (points)", measure=mean_diff, models=_ramp_models,
    unavailable=when_empty("no masking-ratio ramp beside constant MLM at its starting ratio"),
    paper=BEYOND_PAPER + "; issue 61; ratio schedules: Ankner et al. 2023 (dynamic masking rates, 30% to 15% on "
                         "BERT-base), mmBERT (30% -> 15% -> 5%)")


CLAIMS = (MIXED_AHEAD, DETOUR_AHEAD, RAMP_AHEAD)
