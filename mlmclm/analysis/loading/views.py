"""The study views: the rows of scores (or runs, or pretraining logs) that each of the paper's studies compares, with
the columns it compares them on (``budget``, ``clm_share``, ``base``, ``centered`` ...): one function per study, as the
paper's tables and figures group them, and the two beyond it (issue 27). No torch import here.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ...runs import ModelId
from .aggregation import default_grid, select_lr, stability_grid
from .ids import sequential

STABILITY_LRS = (1e-5, 1e-4)  # Fig. 5: spread over seeds and learning rates in [1e-5, 1e-4]


def _parsed(df: pd.DataFrame) -> pd.DataFrame:
    """Rows whose model id follows the naming (the others have no attributes to select on)."""
    df = df[df["objective"].notna()]
    return df.assign(intermediate=df["intermediate"].astype(bool))


def _studied(df: pd.DataFrame, every_seed: bool = False) -> pd.DataFrame:
    """What the study views compare: parsed rows without the random-init controls, of pretraining seed 0 only unless
    ``every_seed``."""
    df = _parsed(df)
    keep = df["objective"] != "random"
    return df[keep if every_seed else keep & (df["pretrain_seed"] == 0).fillna(False)]


def _final(df: pd.DataFrame, every_seed: bool = False) -> pd.DataFrame:
    """Single-objective base models at their source's full budget (no intermediate checkpoint, no CPT); pretraining
    seed 0 only, unless ``every_seed``."""
    df = _studied(df, every_seed)
    base = df[~df["intermediate"] & (df["cpt_steps"] == 0) & df["objective"].isin(["clm", "mlm"])]
    full = base.groupby(["source", "scale", "size"])["steps"].transform("max")
    return base[base["steps"] == full]


def is_clm_or_mlm40(df: pd.DataFrame) -> pd.Series:
    """Whether each row is a CLM or an MLM-40% model (two-phase models included: CLM then MLM-40%)."""
    return ((df["objective"] == "clm") | (df["mask_ratio"] == 40)).fillna(False).astype(bool)


def scaling_view(scores: pd.DataFrame, every_seed: bool = False) -> pd.DataFrame:
    """Tables 2-5, Fig. 2-3: CLM and MLM (every masking ratio) at the full budget, for every size (pretraining seed 0;
    ``every_seed``: the other pretraining seeds' runs too)."""
    return _final(scores, every_seed).reset_index(drop=True)


def data_efficiency_view(scores: pd.DataFrame) -> pd.DataFrame:
    """Tables 6-9, Fig. 4 and 10: intermediate checkpoints of the CLM and MLM-40% runs."""
    scores = _studied(scores)
    df = scores[scores["intermediate"] & scores["objective"].isin(["clm", "mlm"])]
    return df[is_clm_or_mlm40(df)].reset_index(drop=True)


def biphasic_view(scores: pd.DataFrame) -> pd.DataFrame:
    """Tables 10-13, Fig. 6 and 11: CLM-then-MLM splits under fixed budgets, for sizes with two-phase runs.

    Adds ``budget`` (total steps) and ``clm_share`` (the nominal % of steps given to CLM: 0, 25, 50, 75, 100; the
    paper's 22K and 42K splits round, e.g. 5K+17K is "25%"). Runs whose share is not near a quarter (the
    masking-ratio runs, 40K CLM + 2K MLM) are left out.
    """
    scores = _studied(scores)
    df = scores[~scores["intermediate"] & (scores["cpt_steps"] == 0) & sequential(scores)]
    df = df[is_clm_or_mlm40(df)]
    two_phase = df[df["objective"] == "clm+mlm"][["source", "scale", "size"]].drop_duplicates()
    df = df.merge(two_phase, on=["source", "scale", "size"])
    share = df["clm_steps"].astype(float) / df["steps"].astype(float)
    nominal = (share * 4).round() / 4
    df = df.assign(budget=df["steps"], clm_share=(100 * nominal).round().astype("int64"))
    df = df[(share - nominal).abs() <= 0.04]
    full = df["budget"].isin(df[df["objective"] == "clm+mlm"]["budget"])
    return df[full].reset_index(drop=True)


def cpt_view(scores: pd.DataFrame) -> pd.DataFrame:
    """Tables 14-17, Fig. 8-9: MLM continued pretraining of the CLM and MLM-40% base models.

    Adds ``base`` (``CLM`` or ``MLM``, the objective of the decayed starting point).
    """
    scores = _studied(scores)
    cpt = scores[(scores["cpt_steps"] > 0) & sequential(scores)]
    starts = (cpt["steps"] - cpt["cpt_steps"]).rename("steps")
    keys = pd.concat([cpt[["source", "scale", "size"]], starts], axis=1).drop_duplicates()
    bases = scores[~scores["intermediate"] & (scores["cpt_steps"] == 0)
                   & scores["objective"].isin(["clm", "mlm"])]
    bases = bases[is_clm_or_mlm40(bases)].merge(keys, on=["source", "scale", "size", "steps"])
    df = pd.concat([bases, cpt], ignore_index=True)
    return df.assign(base=np.where(df["clm_steps"] > 0, "CLM", "MLM"))


# the sequential schedules a mixed model faces at its budget (`mixed_view`): biphasic_view's CLM share -> its name
SEQUENTIAL = {0: "MLM-only", 25: "25/75 split", 100: "CLM-only"}


def _spelled(model: str) -> str:
    """A mixed or alternating model's objective as its id spells it (``mix1clm15mlm40``); a run under a free name
    (its attributes read from its config) goes by that name."""
    try:
        return ModelId.parse(model).objective
    except ValueError:
        return model


def mixed_view(scores: pd.DataFrame) -> pd.DataFrame:
    """Beyond the paper (issue 27): mixed and alternating models from scratch beside the sequential schedules of the
    same size and budget (MLM-only, CLM-only and the 25/75 CLM-then-MLM split: `biphasic_view`'s shares 0, 100 and
    25). Adds ``budget``, ``schedule`` (a mixed model's objective as its id spells it, ``mix1clm15mlm40``; else the
    `SEQUENTIAL` name) and ``mixed`` (True for the mixed and alternating models)."""
    studied = _studied(scores)
    mixed = studied[~studied["intermediate"] & studied["objective"].isin(["mixed", "alternating"])]
    mixed = mixed.assign(budget=mixed["steps"], mixed=True,
                         schedule=[_spelled(m) for m in mixed["model"]])
    seq = biphasic_view(scores)
    seq = seq[seq["clm_share"].isin(list(SEQUENTIAL))]
    seq = seq.assign(schedule=seq["clm_share"].map(SEQUENTIAL), mixed=False).drop(columns="clm_share")
    seq = seq.merge(mixed[["source", "scale", "size", "budget"]].drop_duplicates())
    return pd.concat([mixed, seq], ignore_index=True)


def detour_view(scores: pd.DataFrame) -> pd.DataFrame:
    """Beyond the paper (issue 27): the CLM detour (CPT of the decayed MLM-40% model, CLM then MLM-40%) beside the
    plain MLM-CPT of the same model and length (`cpt_view`'s MLM-based rows). Adds ``schedule``: "detour" or
    "MLM-CPT"."""
    studied = _studied(scores)
    detour = studied[~studied["intermediate"] & (studied["objective"] == "detour")]
    plain = cpt_view(scores)
    keys = ["source", "scale", "size", "steps", "cpt_steps"]
    plain = plain[(plain["base"] == "MLM") & (plain["cpt_steps"] > 0)].merge(detour[keys].drop_duplicates())
    return pd.concat([detour.assign(schedule="detour"), plain.drop(columns="base").assign(schedule="MLM-CPT")],
                     ignore_index=True)


def ramp_view(scores: pd.DataFrame) -> pd.DataFrame:
    """Beyond the paper (issue 61): masking-ratio ramps from scratch (``mlm40to20``) beside constant MLM at the ratio
    each starts from, of the same size and budget (`_final`'s MLM rows). Adds ``start`` (the starting ratio, in
    percent) and ``schedule``: a ramp's objective as its id spells it, or "constant"."""
    studied = _studied(scores)
    ramps = studied[~studied["intermediate"] & (studied["objective"] == "ramp") & (studied["cpt_steps"] == 0)]
    spelled = [_spelled(m) for m in ramps["model"]]
    start = [int(m[1]) if (m := re.match(r"mlm(\d+)to\d+$", o)) else -1 for o in spelled]
    ramps = ramps.assign(schedule=spelled, start=start)
    constant = _final(scores)
    constant = constant[constant["objective"] == "mlm"].assign(start=lambda d: d["mask_ratio"].astype(int))
    keys = ["source", "scale", "size", "steps", "start"]
    constant = constant.merge(ramps[keys].drop_duplicates())
    return pd.concat([ramps, constant.assign(schedule="constant")], ignore_index=True)


def centered_scores(runs: pd.DataFrame, lr_range=STABILITY_LRS, split: str = "test",
                    every_seed: bool = False) -> pd.DataFrame:
    """Fig. 5: each run's score minus its model's mean over seeds and learning rates in ``lr_range``.

    Only CLM and MLM-40% base models at the full budget, of pretraining seed 0 unless ``every_seed`` (each seed is
    a model of its own, centered on its own mean). ``lr_range`` applies to the paper's grid (sources at the
    ``paper`` scale); a scale of this repository spreads over its own stability grid (``stability_grid``: its default
    grid where it has none). Learning rates are those every model of the same source, size and dataset has (so that a
    model is not judged on learning rates another lacks), and only where there are at least two of them; at a scale
    of ours, only the seeds fine-tuned at every one of them (a screened grid's screen, `FinetuneConfig.screen_seeds`).
    """
    models = _final(stability_grid(runs), every_seed)
    in_range = models["lr"].between(lr_range[0] * 0.999, lr_range[1] * 1.001) | (models["scale"] != "paper")
    df = models[is_clm_or_mlm40(models) & in_range]
    df = df.dropna(subset=[split])
    keys = ["source", "scale", "size", "task_group", "dataset"]
    if df.empty:
        return df.assign(centered=pd.Series(dtype=float))
    shared = df.groupby([*keys, "lr"])["model"].transform("nunique") == df.groupby(keys)["model"].transform("nunique")
    df = df[shared]
    df = df[df.groupby(keys)["lr"].transform("nunique") > 1]  # a spread over learning rates needs two of them
    # a seed of ours at fewer of them (a screened grid's later seed, at its screen's choice) is no part of a spread
    # over rates: the seeds at every rate (the screen) are
    rates = df.groupby(keys)["lr"].transform("nunique")
    df = df[(df.groupby([*keys, "model", "seed"])["lr"].transform("nunique") == rates) | (df["scale"] == "paper")]
    mean = df.groupby([*keys, "model"])[split].transform("mean")
    return df.assign(centered=df[split] - mean).reset_index(drop=True)


def model_spreads(centered: pd.DataFrame, split: str = "test") -> pd.DataFrame:
    """Claim 4's spreads (Fig. 5) of `centered_scores`: per source, scale, size, task group, dataset and model (a
    pretraining seed), its ``family`` ("CLM" or "MLM"), the standard deviation of its runs' centered scores (``sd``)
    and their number (``runs``)."""
    keys = ["source", "scale", "size", "task_group", "dataset", "family", "model"]
    if centered.empty:
        return pd.DataFrame(columns=[*keys, "sd", "runs"])
    c = centered.assign(family=np.where(centered["objective"] == "clm", "CLM", "MLM"))
    g = c.groupby(keys, observed=True)["centered"]
    return g.std().rename("sd").to_frame().join(g.size().rename("runs")).reset_index()


def masking_ratio_spread(runs: pd.DataFrame, rule: str = "per_seed", split: str = "test",
                         every_seed: bool = False) -> pd.DataFrame:
    """Fig. 7: scores (at the selected learning rates) of MLM-only and CLM+MLM runs across masking ratios, centered.

    MLM-only: full-budget MLM runs at every ratio. CLM+MLM: for each ratio, the two-phase run with the longest CLM
    phase (the paper's 40K CLM + 2K MLM). ``centered`` is the score minus the family's mean over ratios (and
    fine-tuning seeds) of its pretraining seed (``seed``: seed 0 only unless ``every_seed``; each CLM+MLM run
    continues its seed's CLM run, each MLM-only run reads its seed's data order).
    """
    sel = _studied(select_lr(default_grid(runs), rule), every_seed)
    sel = sel[~sel["intermediate"] & (sel["cpt_steps"] == 0) & sel["mask_ratio"].notna()]
    mlm = _final(sel, every_seed)
    mlm = mlm[mlm["objective"] == "mlm"].assign(family="MLM")
    two = sel[sel["objective"] == "clm+mlm"]
    two = two[two["clm_steps"] == two.groupby(["source", "scale", "size", "mask_ratio"])["clm_steps"].transform("max")]
    at = ["source", "scale", "size", "steps"]
    two = two.merge(mlm[at].drop_duplicates(), on=at)
    df = pd.concat([mlm, two.assign(family="CLM+MLM")], ignore_index=True)
    keys = ["source", "scale", "size", "family", "seed", "task_group", "dataset"]
    if df.empty:
        return df.assign(seed=pd.Series(dtype=int), centered=pd.Series(dtype=float))
    df = df.assign(seed=df["pretrain_seed"].fillna(0).astype(int))
    df = df[df.groupby(keys)["mask_ratio"].transform("nunique") > 1]
    return df.assign(centered=df[split] - df.groupby(keys)[split].transform("mean")).reset_index(drop=True)


def cpt_loss_curves(logs: pd.DataFrame) -> pd.DataFrame:
    """Fig. 12: for each CPT run, its loss on its lineage's step axis, with ``base``, the CPT length and the step it
    starts at (``start``).

    The lineage: the run it started from (``parent``, see load_pretrain_logs), that run's parent, and so on back to
    a run from scratch; the curve is each ancestor's log up to where the next one branched off, then the run's own.
    A shorter CPT run that continues the longest one's checkpoint so draws the longest run's steps up to there. A run
    that resumed its parent counts the parent's steps; one with a fresh optimizer counts from 0 at the branch point.
    Logs without a config: a CPT run's parent is the decayed run its id continues (`ModelId.continues`) at the CPT's
    start, resumed if its log starts there.
    """
    logs = _parsed(logs)
    first = logs.drop_duplicates("model").set_index("model")

    def parent(model):
        r = first.loc[model]
        if pd.notna(r.get("parent")):
            at = r["parent_step"]
            if pd.isna(at) and r["parent"] in first.index:  # no step named: the parent's last checkpoint
                at = logs.loc[logs["model"] == r["parent"], "step"].max()
            return r["parent"], int(at), bool(r["resumed"])
        if r["cpt_steps"] > 0:
            start = int(r["steps"] - r["cpt_steps"])
            resumed = bool(logs.loc[logs["model"] == model, "step"].min() >= start)
            return str(ModelId.parse(model).continues), start, resumed
        return None, 0, False

    def lineage(model):
        """(curve, offset): the loss against the lineage's step, and where the run's own step 0 lies on that axis."""
        own = logs.loc[logs["model"] == model, ["step", "loss"]]
        up, at, resumed = parent(model)
        if up is None:
            return own, 0
        head, offset = lineage(up) if up in first.index else (own.iloc[0:0], 0)
        branch = offset + at
        start = offset if resumed else branch
        return pd.concat([head[head["step"] <= branch], own.assign(step=own["step"] + start)]), start

    rows = []
    for model, a in first[(first["cpt_steps"] > 0) & sequential(first)].iterrows():
        curve = lineage(model)[0].sort_values("step", kind="stable").drop_duplicates("step", keep="last")
        rows.append(curve.assign(model=model, size=a["size"], cpt_steps=int(a["cpt_steps"]),
                                 start=int(a["steps"] - a["cpt_steps"]), base="CLM" if a["clm_steps"] > 0 else "MLM"))
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(
        columns=["step", "loss", "model", "size", "cpt_steps", "start", "base"])
