"""The building blocks of the claims' checks and statistics (`claims`): a difference of two scored models with its
half-width and call (`compare`), rows in size order (`sort_rows`), a statistic's mean or minimum over rows with bounds
from the rows' printed half-widths (`mean_over`, `min_over`; what the paper's verdicts use), a Bonferroni widening
(`widen`), and the models a check chose (`chosen_models`). No torch import here.
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
import pandas as pd

from ..loading import ids

CELL = ["source", "scale", "size", "task_group"]


def sort_rows(df: pd.DataFrame, *keys: str) -> pd.DataFrame:
    """Rows by source, then size (`ids.size_key`), then ``keys``."""
    order = df.assign(_size=df["size"].map(ids.size_key))
    return df.loc[order.sort_values(["source", "_size", *keys], kind="stable").index].reset_index(drop=True)


def calls(diff, ci, words: tuple[str, str]) -> list[str]:
    """Per difference: ``words[0]`` when it is above its half-width, ``words[1]`` when below, else "within CI"."""
    return ["within CI" if not (abs(d) > c) else words[0] if d > 0 else words[1] for d, c in zip(diff, ci)]


def compare(a: pd.DataFrame, b: pd.DataFrame, on: list[str], names: tuple[str, str]) -> pd.DataFrame:
    """a - b on the ``on`` keys, with the difference's half-width and a call (ahead, or within the CI)."""
    m = a[[*on, "score", "ci"]].merge(b[[*on, "score", "ci"]], on=on, suffixes=("_a", "_b"))
    diff = (m["score_a"] - m["score_b"]).round(2)
    ci = np.hypot(m["ci_a"].astype(float), m["ci_b"].astype(float)).round(2)
    return pd.DataFrame({**{k: m[k] for k in on}, names[0]: m["score_a"], names[1]: m["score_b"],
                         "diff": diff, "diff ±": ci, "call": calls(diff, ci, tuple(f"{n} ahead" for n in names))})


# A statistic reads a check's rows (one source's, or the bootstrap replicas', each replica a ``source``) and returns
# one row per source and scope: ``value``, and ``lo`` / ``hi`` from the rows' half-widths (used for the paper).


def mean_over(rows: pd.DataFrame, values, scope: str | None = None, hw=None) -> pd.DataFrame:
    """Mean of ``values`` per source (and ``scope`` column); bounds +- sqrt(sum of squared half-widths) / count."""
    hw = rows["diff ±"] if hw is None and "diff ±" in rows else hw
    d = pd.DataFrame({"source": rows["source"], "scope": rows[scope] if scope else "all",
                      "v": np.asarray(values, dtype=float),
                      "h2": np.asarray(hw, dtype=float) ** 2 if hw is not None else np.nan})
    g = d.groupby(["source", "scope"], sort=False)
    out = g["v"].agg(["mean", "size"]).join(g["h2"].agg(["sum", "count"]))
    half = np.where(out["count"] == out["size"], np.sqrt(out["sum"]) / out["size"], np.nan)
    return pd.DataFrame({"value": out["mean"], "lo": out["mean"] - half, "hi": out["mean"] + half}).reset_index()


def min_over(rows: pd.DataFrame, values, hw) -> pd.DataFrame:
    """Minimum of ``values`` per source; bounds the minimum of the values' lower and of their upper bounds."""
    v, h = np.asarray(values, dtype=float), np.asarray(hw, dtype=float)
    d = pd.DataFrame({"source": rows["source"].to_numpy(), "v": v, "lo": v - h, "hi": v + h})
    out = d.groupby("source", sort=False).agg(value=("v", "min"), lo=("lo", "min"), hi=("hi", "min")).reset_index()
    return out.assign(scope="all")


def widen(choices: int) -> float:
    """The factor turning a 95% half-width into a Bonferroni one for the best of ``choices`` comparisons."""
    return NormalDist().inv_cdf(1 - 0.025 / choices) / NormalDist().inv_cdf(0.975)


def chosen_models(view: pd.DataFrame, rows: pd.DataFrame, keys: list[str], picks: dict, groups) -> set:
    """The models of ``view`` that a check's ``rows`` chose (``picks``: view column -> the rows' column holding the
    chosen value, one pick per entry), in ``groups`` (default all)."""
    rows = rows if groups is None else rows[rows["task_group"].isin(set(groups))]
    out = set()
    for col, chosen in picks.items():
        pick = rows[[*keys, chosen]].rename(columns={chosen: col})
        out |= set(view.merge(pick, on=[*keys, col])["model"])
    return out


def mean_diff(rows, point=None):
    """5, B1, B2: the rows' ``diff`` (5: the best inner split's lead over the better extreme), mean over budgets or
    CPT lengths (and sizes), per task group."""
    return mean_over(rows, rows["diff"], "task_group")


def sd_difference(first: str, second: str):
    """The statistic of claims 4 and 6: the column ``first`` minus the column ``second`` (two spreads), mean over the
    rows."""
    return lambda rows, point=None: mean_over(rows, rows[first] - rows[second])


def when_empty(reason: str):
    """An ``unavailable`` that gives ``reason`` when the check's rows are empty."""
    return lambda rows: reason if rows.empty else ""


def base_runs(runs: pd.DataFrame, keep) -> pd.DataFrame:
    """The runs of models at their base (not an intermediate checkpoint, no CPT) that ``keep(runs)`` (a mask)
    selects: what a per-run claim's bootstrap replicas read (so that they stay small)."""
    base = ~runs["intermediate"].astype("boolean").fillna(True) & (runs["cpt_steps"] == 0)
    return runs[(base & keep(runs)).fillna(False).astype(bool)]
