"""The paper's headline claims (``CLAIMS``: one line each, as the paper states them) checked on any source's results.

Each claim has a check, which returns the comparison behind it (one row per source x size x task group ...), and a
way to judge one source's rows: a statistic with a 95% interval (claims 1, 3, 4, 5, 6 and 7) or a rule on the point
estimates (the others). Differences between two independent means get the 95% half-width sqrt(ci_a^2 + ci_b^2); a
difference larger than it is "beyond the CI". Task-group averages (``dataset == "Avg"``) are compared, as in the
paper's figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from . import results as R


def _sorted(df: pd.DataFrame, *keys: str) -> pd.DataFrame:
    order = df.assign(_size=df["size"].map(R.size_key))
    return df.loc[order.sort_values(["source", "_size", *keys], kind="stable").index].reset_index(drop=True)


def _compare(a: pd.DataFrame, b: pd.DataFrame, on: list[str], names: tuple[str, str]) -> pd.DataFrame:
    """a - b on the ``on`` keys, with the difference's half-width and a call (ahead, or within the CI)."""
    m = a[[*on, "score", "ci"]].merge(b[[*on, "score", "ci"]], on=on, suffixes=("_a", "_b"))
    diff = (m["score_a"] - m["score_b"]).round(2)
    ci = np.sqrt(m["ci_a"].astype(float) ** 2 + m["ci_b"].astype(float) ** 2).round(2)
    calls = ["within CI" if pd.notna(c) and abs(d) <= c else f"{names[0] if d > 0 else names[1]} ahead"
             for d, c in zip(diff, ci)]
    return pd.DataFrame({**{k: m[k] for k in on}, names[0]: m["score_a"], names[1]: m["score_b"],
                         "diff": diff, "diff ±": ci, "call": calls})


# ----------------------------------------------------------------------------------------------- checks


def check_mlm_vs_clm(scores: pd.DataFrame, runs=None) -> pd.DataFrame:
    """Claim 1: MLM-40% minus CLM at the full budget, per source, size and task group."""
    v = R.group_averages(R.scaling_view(scores))
    out = _compare(v[v["mask_ratio"] == 40], v[v["objective"] == "clm"], ["source", "size", "task_group"],
                   ("MLM", "CLM"))
    return _sorted(out)


def check_masking_ratio(scores: pd.DataFrame, runs=None) -> pd.DataFrame:
    """Claim 2: the best masking ratio per source, size and task group, with the runner-up and the gap to it."""
    v = R.group_averages(R.scaling_view(scores))
    v = v[v["objective"] == "mlm"].sort_values(["score", "mask_ratio"], ascending=[False, True])
    rows = []
    for (source, size, group), part in v.groupby(["source", "size", "task_group"], sort=False):
        if len(part) < 2:
            continue
        best, second = part.iloc[0], part.iloc[1]
        gap, ci = round(best["score"] - second["score"], 2), round(float(np.hypot(best["ci"], second["ci"])), 2)
        rows.append({"source": source, "size": size, "task_group": group, "best ratio": int(best["mask_ratio"]),
                     "score": best["score"], "runner-up": int(second["mask_ratio"]), "gap": gap, "gap ±": ci,
                     "call": "within CI" if pd.notna(ci) and gap <= ci else "beyond CI",
                     "highest tested": int(part["mask_ratio"].max())})
    cols = ["source", "size", "task_group", "best ratio", "score", "runner-up", "gap", "gap ±", "call",
            "highest tested"]
    return _sorted(pd.DataFrame(rows, columns=cols))


def check_data_efficiency(scores: pd.DataFrame, runs=None) -> pd.DataFrame:
    """Claim 3: CLM minus MLM-40% at each intermediate checkpoint, per source, size and task group."""
    v = R.group_averages(R.data_efficiency_view(scores))
    out = _compare(v[v["objective"] == "clm"], v[v["objective"] == "mlm"],
                   ["source", "size", "task_group", "steps"], ("CLM", "MLM"))
    return _sorted(out, "steps")


def check_lr_sensitivity(scores, runs: pd.DataFrame, split: str = "test") -> pd.DataFrame:
    """Claim 4: sd of centered scores over seeds and learning rates in [1e-5, 1e-4], CLM vs MLM-40%, per dataset."""
    c = R.centered_scores(runs, split=split)
    cols = ["source", "size", "task_group", "dataset", "CLM sd", "MLM sd", "CLM runs", "MLM runs", "call"]
    if c.empty:
        return pd.DataFrame(columns=cols)
    c = c.assign(obj=np.where(c["objective"] == "clm", "CLM", "MLM"))
    g = c.groupby(["source", "size", "task_group", "dataset", "obj"])["centered"]
    sd, n = g.std().unstack(), g.size().unstack()
    if not {"CLM", "MLM"} <= set(sd.columns):
        return pd.DataFrame(columns=cols)
    out = pd.DataFrame({"CLM sd": sd["CLM"].round(2), "MLM sd": sd["MLM"].round(2), "CLM runs": n["CLM"],
                        "MLM runs": n["MLM"]}).dropna().reset_index()
    out["call"] = np.where(out["CLM sd"] < out["MLM sd"], "CLM tighter", "MLM tighter")
    return out[cols]


def check_biphasic(scores: pd.DataFrame, runs=None) -> pd.DataFrame:
    """Claim 5: each CLM share's gain over MLM-only at the same budget, per source, size and task group."""
    v = R.group_averages(R.biphasic_view(scores))
    keys = ["source", "size", "budget", "task_group"]
    mlm_only = v[v["clm_share"] == 0]
    parts = [_compare(v[v["clm_share"] == share], mlm_only, keys, ("split", "MLM-only")).assign(clm_share=share)
             for share in sorted(set(v["clm_share"]) - {0})]
    if not parts:
        return pd.DataFrame(columns=[*keys, "clm_share", "split", "MLM-only", "diff", "diff ±", "call"])
    out = pd.concat(parts, ignore_index=True)
    out = out[[*keys, "clm_share", "split", "MLM-only", "diff", "diff ±", "call"]]
    return _sorted(out, "budget", "clm_share")


def check_clm_only_worst(scores: pd.DataFrame, runs=None) -> pd.DataFrame:
    """Claim 5b: the lowest split on SC and QA at each budget (and whether it is CLM-only)."""
    v = R.group_averages(R.biphasic_view(scores))
    v = v[v["task_group"].isin(["SC", "QA"])]
    rows = [{"source": s, "size": z, "budget": b, "task_group": g,
             "lowest share": int(p.loc[p["score"].idxmin(), "clm_share"])}
            for (s, z, b, g), p in v.groupby(["source", "size", "budget", "task_group"], sort=False)]
    out = pd.DataFrame(rows, columns=["source", "size", "budget", "task_group", "lowest share"])
    return _sorted(out.assign(call=np.where(out["lowest share"] == 100, "CLM-only lowest", "other split lowest")),
                   "budget")


def check_masking_robustness(scores, runs: pd.DataFrame, split: str = "test") -> pd.DataFrame:
    """Claim 6: sd over masking ratios and seeds of centered scores, CLM+MLM vs MLM-only, per dataset."""
    c = R.masking_ratio_spread(runs, split=split)
    cols = ["source", "size", "task_group", "dataset", "CLM+MLM sd", "MLM sd", "call"]
    if c.empty:
        return pd.DataFrame(columns=cols)
    sd = c.groupby(["source", "size", "task_group", "dataset", "family"])["centered"].std().unstack()
    if not {"CLM+MLM", "MLM"} <= set(sd.columns):  # one family only (results still coming in)
        return pd.DataFrame(columns=cols)
    sd = sd.dropna()
    out = pd.DataFrame({"CLM+MLM sd": sd["CLM+MLM"].round(2), "MLM sd": sd["MLM"].round(2)}).reset_index()
    out["call"] = np.where(out["CLM+MLM sd"] < out["MLM sd"], "CLM+MLM tighter", "MLM tighter")
    return out[cols]


def check_cpt(scores: pd.DataFrame, runs=None) -> pd.DataFrame:
    """Claim 7: CLM-based minus MLM-based model after each CPT length, per source, size and task group."""
    v = R.group_averages(R.cpt_view(scores))
    out = _compare(v[v["base"] == "CLM"], v[v["base"] == "MLM"], ["source", "size", "cpt_steps", "task_group"],
                   ("CLM-based", "MLM-based"))
    return _sorted(out, "cpt_steps")


# ----------------------------------------------------------------------------------------------- the claims


def _at(df: pd.DataFrame, how: str) -> pd.DataFrame:
    return df[df["steps"] == df.groupby(["size", "task_group"])["steps"].transform(how)]


# Rules of the claims read from point estimates: one source's check rows -> (evidence, whether the claim holds).


def _rule_1b(df):
    sc = df[df["task_group"] == "SC"]
    gaps = sc["diff"].tolist()
    path = " -> ".join(f"{s} {g:+.2f}" for s, g in zip(sc["size"], gaps))
    return f"SC gap MLM - CLM by size: {path}", len(gaps) > 1 and all(b > a for a, b in zip(gaps, gaps[1:]))


def _rule_2(df):
    counts = df["best ratio"].value_counts().sort_index()
    spread = ", ".join(f"{r}% in {n}" for r, n in counts.items())
    close = int((df["call"] == "within CI").sum())
    return (f"best ratio over {len(df)} size x group cells: {spread} ({close} within the CI of the runner-up)",
            len(counts) > 1)


def _rule_2b(df):
    ir = df[df["task_group"] == "IR"]
    best = ", ".join(f"{s} {r}%" for s, r in zip(ir["size"], ir["best ratio"]))
    return f"best IR ratio by size: {best}", len(ir) > 0 and bool((ir["best ratio"] == ir["highest tested"]).all())


def _rule_3b(df):
    last = _at(df, "max")
    groups = ", ".join(f"{g} {d:+.2f}" for g, d in zip(last["task_group"], last["diff"]))
    behind = int((last["diff"] < 0).sum())
    return (f"CLM - MLM at the last checkpoint ({R.step_label(last['steps'].max())}): {groups}",
            behind > len(last) / 2)


def _rule_5b(df):
    k = int((df["lowest share"] == 100).sum())
    return f"CLM-only is the lowest split in {k}/{len(df)} budget x group cells (SC, QA)", k == len(df)


# Scopes and cell values of the claims judged with an interval.


def _all(d):
    return [("all", d)]


def _diff(rows):
    return rows["diff"]


@dataclass(frozen=True)
class Claim:
    """One headline claim: its text, the check that computes the comparison behind it, and how it is judged.

    A claim with a ``statistic`` (what it measures; positive when the claim holds) is judged with a 95% interval: the
    statistic is the mean of ``value`` (one value per row of the check) over the rows of each scope that ``scopes``
    picks (task groups for claim 1, whose paper claim is per group; one scope, "all", for the others). Any other
    claim is read from the point estimates by its ``rule``.
    """

    text: str
    check: Callable[..., pd.DataFrame]
    rule: Callable[[pd.DataFrame], tuple[str, bool]] | None = None
    statistic: str | None = None
    scopes: Callable[[pd.DataFrame], list] = _all
    value: Callable[[pd.DataFrame], pd.Series] = _diff
    per_run: bool = False  # needs run-level results (the paper prints no numbers for it)


CLAIMS = {
    "1": Claim("MLM generally outperforms CLM", check_mlm_vs_clm,
               statistic="MLM-40% minus CLM, mean over sizes (points)",
               scopes=lambda d: list(d.groupby("task_group"))),
    "1b": Claim("The SC gap between MLM and CLM widens with model size", check_mlm_vs_clm, _rule_1b),
    "2": Claim("No masking ratio is best for every size and task group", check_masking_ratio, _rule_2),
    "2b": Claim("IR prefers the highest masking ratio at every size", check_masking_ratio, _rule_2b),
    "3": Claim("CLM is more data-efficient early in pretraining", check_data_efficiency,
               statistic="CLM minus MLM-40% at the first checkpoint, mean over task groups (points)",
               scopes=lambda d: [("all", _at(d, "min"))]),
    "3b": Claim("MLM catches up and ends ahead of CLM", check_data_efficiency, _rule_3b),
    "4": Claim("CLM-pretrained models are less sensitive to the fine-tuning learning rate", check_lr_sensitivity,
               statistic="MLM sd minus CLM sd of centered scores, mean over datasets (points)",
               value=lambda rows: rows["MLM sd"] - rows["CLM sd"], per_run=True),
    "5": Claim("A 25%-75% CLM-then-MLM split beats MLM-only at a fixed budget", check_biphasic,
               statistic="25%-75% split minus MLM-only, mean over budgets and task groups (points)",
               scopes=lambda d: [("all", d[d["clm_share"] == 25])]),
    "5b": Claim("CLM-only is the worst split on SC and QA at every budget", check_clm_only_worst, _rule_5b),
    "6": Claim("CLM+MLM is less sensitive to the masking ratio than MLM-only", check_masking_robustness,
               statistic="MLM-only sd minus CLM+MLM sd over masking ratios, mean over datasets (points)",
               value=lambda rows: rows["MLM sd"] - rows["CLM+MLM sd"], per_run=True),
    "7": Claim("MLM continued pretraining of a CLM model beats continued MLM of an MLM model", check_cpt,
               statistic="CLM-based minus MLM-based after the longest CPT, mean over task groups (points)",
               scopes=lambda d: [("all", d[d["cpt_steps"] == d["cpt_steps"].max()])]),
}


# ----------------------------------------------------------------------------------------------- bootstrap


def _statistic(claim: str, d: pd.DataFrame) -> dict:
    """{scope: the claim's statistic} on one source's check output."""
    c = CLAIMS[claim]
    if c.statistic is None:
        raise KeyError(f"claim {claim} has no statistic: it is read from point estimates")
    return {scope: float(c.value(rows).mean()) for scope, rows in c.scopes(d)}


def _resample(runs: pd.DataFrame, n_boot: int, seed: int):
    """Per run, ``n_boot`` replicas of its test score (test instances resampled, the same draw for every model of a
    dataset), and per replica a multiplicity for each seed (seeds resampled, the same draw for every model)."""
    rng = np.random.default_rng(seed)
    reps = np.repeat(runs["test"].to_numpy(dtype=float)[:, None], n_boot, axis=1)
    for dataset, idx in runs.groupby("dataset", sort=True).indices.items():
        arrays = [a for a in runs["test_i"].iloc[idx] if isinstance(a, np.ndarray)]
        sizes = {len(a) for a in arrays}
        if len(sizes) != 1:  # no per-instance scores (or test sets that differ): seeds only
            continue
        n = sizes.pop()
        weights = rng.multinomial(n, np.full(n, 1 / n), size=n_boot) / n  # (n_boot, n)
        for i in idx:
            a = runs["test_i"].iloc[i]
            if isinstance(a, np.ndarray) and len(a) == n:  # shift the run's score by its resampled mean's change
                reps[i] += 100 * (weights @ a - a.mean())
    seeds = np.sort(runs["seed"].unique())
    mult = rng.multinomial(len(seeds), np.full(len(seeds), 1 / len(seeds)), size=n_boot)  # (n_boot, n_seeds)
    return reps, {int(sd): mult[:, i] for i, sd in enumerate(seeds)}


def _replica_scores(runs: pd.DataFrame, n_boot: int, seed: int, rule: str) -> pd.DataFrame:
    """Scores (as ``results.summarize`` makes them, without half-widths) of every bootstrap replica, the replica's
    index as ``source``: per seed the learning rate chosen on validation, the mean over the resampled seeds."""
    sel = R.select_lr(runs, rule).reset_index(drop=True)
    reps, mult = _resample(sel, n_boot, seed)
    rows = []
    keys = ["model", "task_group", "dataset"]
    for key, idx in sel.groupby(keys, sort=False).indices.items():
        w = np.stack([mult[int(sd)] for sd in sel["seed"].iloc[idx]], axis=1).astype(float)  # (n_boot, seeds)
        total = w.sum(axis=1)
        score = np.where(total > 0, (w * reps[idx].T).sum(axis=1) / np.maximum(total, 1), np.nan)
        rows.append(pd.DataFrame({"source": np.arange(n_boot), "model": key[0], "task_group": key[1],
                                  "dataset": key[2], "score": score}))
    df = pd.concat(rows, ignore_index=True)
    needed = df.groupby("task_group")["dataset"].nunique()  # a model's average needs every dataset of its group
    avg = df.groupby(["source", "model", "task_group"], sort=False).agg(score=("score", "mean"),
                                                                         count=("dataset", "size")).reset_index()
    avg = avg[avg["count"].to_numpy() == needed.reindex(avg["task_group"]).to_numpy()]
    avg = avg.drop(columns="count").assign(dataset=R.AVG)
    df = pd.concat([df, avg], ignore_index=True).assign(ci=np.nan, n=pd.NA, scale=sel["scale"].iloc[0])
    attrs = sel.drop_duplicates("model").set_index("model")[R.ATTRIBUTES]
    return df.merge(attrs, left_on="model", right_index=True, how="left")[R.SCORE_COLUMNS]


def _replica_runs(runs: pd.DataFrame, n_boot: int, seed: int) -> pd.DataFrame:
    """Every run of every replica (replica index as ``source``), a resampled seed repeated as often as drawn (each
    copy its own seed number, so per-seed selection keeps them apart)."""
    runs = runs.reset_index(drop=True)
    reps, mult = _resample(runs, n_boot, seed)
    counts = np.stack([mult[int(sd)] for sd in runs["seed"]], axis=1)  # (n_boot, runs)
    flat = np.repeat(np.arange(n_boot * len(runs)), counts.ravel())
    b, r = flat // len(runs), flat % len(runs)
    copy = pd.Series(flat).groupby(flat).cumcount().to_numpy()
    out = runs.iloc[r].reset_index(drop=True).assign(source=b, test=reps[r, b])
    return out.assign(seed=out["seed"].to_numpy() * 1000 + copy)


def bootstrap(claim: str, scores: pd.DataFrame, runs: pd.DataFrame, source: str, n_boot: int = 400, seed: int = 0,
              split: str = "test", rule: str = "per_seed") -> pd.DataFrame | None:
    """Claim ``claim``'s statistic for one run-level ``source`` (this repository's runs, EncodEval's): the point
    value and its 95% percentile interval over ``n_boot`` replicas that resample seeds and test instances. One row
    per scope (task group for claim 1, else ``all``); None when the source lacks the models."""
    c = CLAIMS[claim]
    own = runs[runs["source"] == source]
    if own.empty:
        return None
    if c.per_run:
        point = c.check(scores, own, split=split)
        if point.empty:
            return None
        reps = c.check(None, _replica_runs(own[_per_run_models(claim, own)], n_boot, seed), split=split)
    else:
        point = c.check(scores[scores["source"] == source])
        if point.empty:
            return None
        reps = c.check(_replica_scores(own, n_boot, seed, rule))
    value = _statistic(claim, point)
    dist = pd.DataFrame([_statistic(claim, part) for _, part in reps.groupby("source")])
    rows = []
    for scope, v in value.items():
        d = dist[scope].dropna() if scope in dist else pd.Series(dtype=float)
        lo, hi = (np.percentile(d, [2.5, 97.5]) if len(d) else (np.nan, np.nan))
        rows.append({"scope": scope, "statistic": c.statistic, "value": round(v, 2),
                     "ci_low": round(float(lo), 2), "ci_high": round(float(hi), 2), "replicas": len(d)})
    return pd.DataFrame(rows)


def _per_run_models(claim: str, runs: pd.DataFrame) -> pd.Series:
    """The runs a per-run claim looks at (so replicas stay small): full-budget single-objective models for claim 4,
    models with a masking ratio and no CPT for claim 6."""
    p = runs.assign(intermediate=runs["intermediate"].astype("boolean").fillna(True))
    if claim == "4":
        return (~p["intermediate"] & (p["cpt_steps"] == 0) & p["objective"].isin(["clm", "mlm"])).fillna(False)
    return (~p["intermediate"] & (p["cpt_steps"] == 0) & p["mask_ratio"].notna()).fillna(False)


def _from_table(claim: str, scores: pd.DataFrame, source: str) -> pd.DataFrame | None:
    """The statistic from a source with tables only (the paper): the interval from the printed half-widths, as for
    a mean of independent differences, sqrt(sum of squared half-widths) / count."""
    c = CLAIMS[claim]
    if c.per_run:
        return None
    d = c.check(scores[scores["source"] == source])
    if d.empty:
        return None
    rows = []
    for scope, part in c.scopes(d):
        v = float(c.value(part).mean())
        hw = float(np.sqrt((part["diff ±"].astype(float) ** 2).sum()) / len(part)) if len(part) else np.nan
        rows.append({"scope": scope, "statistic": c.statistic, "value": round(v, 2), "ci_low": round(v - hw, 2),
                     "ci_high": round(v + hw, 2), "replicas": 0})
    return pd.DataFrame(rows)


def _call(lo: float, hi: float, words: tuple[str, str]) -> str:
    if np.isnan(lo) or np.isnan(hi):
        return "inconclusive"
    return words[0] if lo > 0 else (words[1] if hi < 0 else "inconclusive")


def verdicts(scores: pd.DataFrame, runs: pd.DataFrame, claims, split: str = "test", n_boot: int = 400,
             seed: int = 0, numbers: bool = False) -> pd.DataFrame:
    """One row per claim, source (and task group, for claim 1): the evidence computed from the data and a verdict.

    Claims 1, 3, 4, 5, 6 and 7 get a statistic that is positive when the claim holds and its 95% interval: for a
    source with per-run results (this repository's, EncodEval's) a bootstrap over seeds and test instances; for the
    paper, the printed half-widths. The verdict is "reproduced" (for the paper: "supported") when the whole
    interval is above zero, "not reproduced" ("not supported") when it is below, else "inconclusive". The other
    claims (1b, 2, 2b, 3b, 5b) are read from the point estimates, without an interval. A source without the models
    (or, for claims 4 and 6, the per-run results) a claim needs is "not checkable". ``numbers`` adds the statistic
    and its interval as columns (``value``, ``ci_low``, ``ci_high``).
    """
    rows = []
    run_sources = list(dict.fromkeys(runs["source"]))
    for key in map(str, claims):
        claim = CLAIMS[key]
        sources = list(dict.fromkeys(run_sources if claim.per_run else scores["source"])) or ["none loaded"]
        for source in sources:
            words = ("supported", "not supported") if source == "paper" else ("reproduced", "not reproduced")
            base = {"claim": f"{key}. {claim.text}", "source": source}
            if claim.statistic is not None:
                table = _from_table(key, scores, source) if source not in run_sources else bootstrap(
                    key, scores, runs, source, n_boot, seed, split)
                if table is None:
                    need = "per-run results" if claim.per_run else "the models of this study"
                    rows.append({**base, "scope": "all", "evidence": f"no data: needs {need}",
                                 "verdict": "not checkable"})
                    continue
                how = "bootstrap over seeds and test instances" if source in run_sources else "printed ± half-widths"
                for r in table.itertuples():
                    rows.append({**base, "scope": r.scope, "evidence": f"{r.statistic}: {r.value:+.2f}, 95% CI "
                                 f"[{r.ci_low:+.2f}, {r.ci_high:+.2f}] ({how})", "value": r.value,
                                 "ci_low": r.ci_low, "ci_high": r.ci_high,
                                 "verdict": _call(r.ci_low, r.ci_high, words)})
                continue
            detail = claim.check(scores, runs, split=split) if claim.per_run else claim.check(scores, runs)
            part = detail[detail["source"] == source]
            if part.empty:
                need = "per-run results" if claim.per_run else "the models of this study"
                rows.append({**base, "scope": "all", "evidence": f"no data: needs {need}", "verdict": "not checkable"})
                continue
            evidence, ok = claim.rule(part)
            rows.append({**base, "scope": "all", "evidence": f"{evidence} (point estimates, no interval)",
                         "verdict": words[0] if ok else words[1]})
    cols = ["claim", "source", "scope", "evidence", *(["value", "ci_low", "ci_high"] if numbers else []), "verdict"]
    return pd.DataFrame(rows, columns=cols)
