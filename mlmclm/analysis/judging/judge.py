"""How a claim (`Claim`) is judged on each source's results: the statistic with its 95% interval, the evidence, the
verdict and the reason for it (`verdicts`; the claims themselves are `claims.CLAIMS`).

The interval: for a source with per-run results (this repository's, EncodEval's), where every family in the
statistic has 2+ pretraining seeds, the verdicts' test on them (`_seed_interval`, `bootstrap.seed_test`): paired by
seed where the families have the same seeds (one-sample t over each seed's contribution), else Welch's with a
variance a family, each seed mean carrying its fine-tuning, learning-rate and test noise once (`coverage` shows it
covers under the scale's own seed structure). Where a family has one seed, a Student-t interval over the models'
seed means with their spread pooled over the scale's families with 2+ seeds (`bootstrap.seed_mean_replicas`,
`bootstrap.percentile_interval`), and where no family has 2+ seeds a hierarchical bootstrap with the pretraining seeds
held fixed (a verdict of ours is then "no signal", the reason says why). Beside it, the Welch test on each compared
family's own seed means (`_welch`), and where the two disagree. A per-run claim with values per pretraining seed
(claim 4's spreads, claim 6's: ``seed_values``) gets the same test over them (`_seed_values_test`), each value
carrying its fine-tuning noise once; where a family has one seed, the hierarchical bootstrap over fine-tuning seeds
and test instances (a verdict of ours is then "no signal"). For the paper, its printed half-widths
(a difference of two independent means gets sqrt(ci_a^2 + ci_b^2); a mean of k such values sqrt(sum of squares) / k;
a minimum over values the minimum of their bounds). Task-group averages (``dataset == "Avg"``) are compared, as in
the paper's figures, and models that differ only in their pretraining seed are compared by their mean. Where a
source's results cannot carry a claim (one model size, no IR task, no biphasic runs ...) the verdict is "not
checkable at this scale", with the reason.

Runs of this repository's scales also need evidence that the comparison measures pretraining: the leading compared
model must beat the random-init control of its size beyond the combined half-width (`evidence.signal`; a trailing one
below it is named in the row, not a gate), an interval that excludes 0 must do so by more than the difference's own
change over the last fine-tuning epoch (`evidence.unsettled`) and the fine-tuning calibration must pass; otherwise
the verdict is "no signal", with the reason. A row of ours also sits beside the paper's estimate of the same
comparison (`matching.paper_at`: the paper's scores at the configuration our models stand for, through the same check
and statistic), with what pretraining adds in its group and the pretraining-seed spread its interval used
(`BESIDE_PAPER`). Cells with fewer
fine-tuning seeds than their neighbours (``flag``) are left out, with their model's task group, and the evidence says
so. No torch import here.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Callable

import numpy as np
import pandas as pd

from ..loading import aggregation
from ..loading import ids
from . import bootstrap
from . import evidence
from . import matching


@dataclass(frozen=True)
class Claim:
    """One headline claim, defined in one place: its key and text, the check behind it, its statistic, the models it
    compares and why a source cannot carry it.

    ``measure`` maps the rows of ``table`` (default: the check; one source's rows or the bootstrap replicas', each a
    ``source``) to ``value`` (the statistic: positive when the claim holds), ``lo`` and ``hi`` (bounds from the rows'
    printed half-widths) per source and scope (a task group, or "all"); claims whose cells are chosen on the point
    estimates get those as ``point``, and ``choices`` says among how many comparisons they were chosen (the interval is
    widened to Bonferroni's for that many). ``unavailable`` says why a source's rows cannot carry the claim ("" when
    they can); ``describe`` gives the evidence beyond the statistic; ``models`` names the pretrained models compared;
    ``paper`` names the paper's tables and figures behind it and quotes the paper's sentence where
    the project's notes on the paper quote it (in quotation marks), else says "paraphrased". A ``per_run`` claim
    (the paper prints no numbers for it) is judged on run-level results only, its bootstrap replicas drawn from the
    runs ``replica_runs`` keeps; ``below_control`` says what a compared model below the random-init control means
    for it; ``spread``: its statistic is a difference of spreads over learning rates (claim 4), whose own change over
    the last fine-tuning epoch the plateau gate reads (`evidence.unsettled`). ``one_size``: the claim's text where a
    source's compared models are all of one size, for a claim the paper states across sizes (its row then judges one
    size, and says so). ``seed_values`` (a per-run claim's):
    the statistic's part per pretraining seed (``family``, ``model``, ``value``, ``coef``: the statistic is the sum
    over families of coef x the mean of its seeds' values, ``seed`` its pretraining seed); where every family has two
    seeds or more, the interval is the verdicts' test over them (`_seed_values_test`: paired by seed where the
    families have the same seeds), counting fine-tuning noise once, inside each seed's value.
    """

    key: str
    text: str
    check: Callable[..., pd.DataFrame]
    statistic: str
    measure: Callable[..., pd.DataFrame]
    models: Callable[..., set]
    unavailable: Callable[[pd.DataFrame], str]
    describe: Callable[[pd.DataFrame], str] = lambda rows: ""
    table: Callable[..., pd.DataFrame] | None = None
    per_run: bool = False
    replica_runs: Callable[[pd.DataFrame], pd.DataFrame] | None = None
    choices: Callable[[pd.DataFrame], int] = lambda point: 1
    below_control: str = "reported, not a gate: the leading model beats it"
    paper: str = ""
    spread: bool = False
    seed_values: Callable[..., pd.DataFrame] | None = None
    one_size: str = ""

    def rows(self, scores, runs=None, split: str = "test") -> pd.DataFrame:
        """The check's rows (or ``table``'s) of ``scores`` (and ``runs``, for a per-run claim)."""
        return (self.table or self.check)(scores, runs, split=split)


BEYOND_PAPER = "not a claim of the paper"  # how ``paper`` of the claims beyond it starts (keys B1, B2, B3)


def _flagged(scores: pd.DataFrame, runs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, str]:
    """Scores (pretraining seeds pooled: `aggregation.pool_pretraining_seeds`) and runs without the task groups of
    models that have a flagged cell (fewer seeds than their neighbours), and a note naming what was left out ("" when
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


def _call(lo: float, hi: float, words: tuple[str, str]) -> tuple[str, str]:
    """The verdict an interval gives, and why."""
    if np.isnan(lo) or np.isnan(hi):
        return "inconclusive", "no interval"
    if lo > 0:
        return words[0], "the 95% interval lies above zero"
    return (words[1], "the 95% interval lies below zero") if hi < 0 else ("inconclusive", "the 95% interval holds 0")


@dataclass
class _Source:
    """One source's data for the verdicts: flagged cells left out, pretraining seeds pooled, for a scale of ours the
    paper's scores at its models' places (``matched``: `matching.paper_at`), and, computed once when first asked for,
    its models' group averages (each pretraining seed apart), the pooled spread of its pretraining seeds and its
    replicas (`bootstrap.replica_scores`)."""

    scores: pd.DataFrame
    runs: pd.DataFrame
    note: str
    per_run: bool
    controlled: bool  # runs at a scale of ours: judged against the random-init controls and the plateau
    seeds: pd.DataFrame  # the scores before pooling
    matched: pd.DataFrame
    n_boot: int
    seed: int
    rule: str

    @cached_property
    def averages(self) -> pd.DataFrame:
        """`bootstrap.seed_averages` of its runs."""
        return bootstrap.seed_averages(self.runs, self.rule)

    @cached_property
    def spread(self) -> pd.DataFrame:
        """`bootstrap.pretraining_seed_spread` of its runs."""
        return bootstrap.pretraining_seed_spread(self.runs, self.rule, self.averages)

    @cached_property
    def replicas(self) -> pd.DataFrame:
        """Its `bootstrap.replica_scores`."""
        return bootstrap.replica_scores(self.runs, self.n_boot, self.seed, self.rule, spread=self.spread)


def _source(scores: pd.DataFrame, runs: pd.DataFrame, source: str, paper: pd.DataFrame, n_boot: int, seed: int,
            rule: str) -> _Source:
    raw, r = scores[scores["source"] == source], runs[runs["source"] == source]
    s, r, note = _flagged(raw, r)
    controlled = not r.empty and (r["scale"] != "paper").all()
    matched = matching.paper_at(s if controlled else s.iloc[0:0], paper)  # the paper's own rows: no match
    return _Source(s, r, note, per_run=not r.empty, controlled=controlled, seeds=raw, matched=matched,
                   n_boot=n_boot, seed=seed, rule=rule)


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


def _gates(c: Claim, src: _Source, models: set, groups: list, value: float, interval: tuple) -> list[str]:
    """Why a comparison of ours carries no signal ([] when it does): its leading model not beating the random-init
    control (`evidence.signal`: a trailing model below the control is reported, `evidence.below_control`, not a
    gate), a 95% ``interval`` that excludes 0 by less than the difference's own change over the last
    fine-tuning epoch (`evidence.unsettled`), or the fine-tuning of the compared models failing the calibration criteria."""
    every_seed = set(src.seeds.loc[src.seeds["family"].isin(ids.families(src.seeds, models)), "model"])
    return [w for w in (evidence.signal(src.seeds, models, groups),
                        evidence.unsettled(src.runs, models, groups, value, spread=c.spread, interval=interval),
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


def _intervals(c: Claim, src: _Source, point: pd.DataFrame, split: str, seeded: dict | None = None
               ) -> tuple[pd.DataFrame, str]:
    """The statistic per scope with its interval (``lo``, ``hi``) and how it was computed: a per-run claim's
    interval over its pretraining seeds where it has one (``seeded``: `_seed_values_test`)."""
    table = c.measure(point)
    if not src.per_run:
        return table, "printed ± half-widths"
    if seeded is not None and not np.isnan(seeded["lo"]):
        return table.drop(columns=["lo", "hi"]).assign(lo=seeded["lo"], hi=seeded["hi"]), seeded["how"]
    table = table.drop(columns=["lo", "hi"]).merge(_bounds(c, point, src, split), on="scope", how="left")
    if c.per_run:
        how = (f"hierarchical bootstrap over fine-tuning seeds and test instances, the learning rate chosen again in "
               f"each of {src.n_boot} replicas")
    elif (src.spread["dof"] > 0).all():
        how = (f"Student-t over the pretraining-seed means, their spread pooled over the scale's families with 2+ "
               f"seeds ({src.n_boot} replicas)")
    else:
        how = (f"hierarchical bootstrap over fine-tuning seeds and test instances, the learning rate chosen again in "
               f"each of {src.n_boot} replicas, pretraining seeds held fixed where no family has 2+ of them")
    return table, how


def _bounds(c: Claim, point: pd.DataFrame, src: _Source, split: str) -> pd.DataFrame:
    """The statistic's 95% percentile interval per scope (``lo``, ``hi``, ``replicas``; `bootstrap.percentile_interval`,
    Bonferroni's where the claim chose among comparisons) over replicas of one source's runs: for a per-run claim,
    every run of each replica (`bootstrap.replica_runs`); else the source's replica scores."""
    if c.per_run:
        rows = c.rows(None, bootstrap.replica_runs(c.replica_runs(src.runs), src.n_boot, src.seed), split)
    else:
        rows = c.rows(src.replicas)
    dist = c.measure(rows, point) if not rows.empty else pd.DataFrame(columns=["scope", "value"])
    return bootstrap.percentile_interval(dist, c.choices(point))


def _seed_values_test(c: Claim, src: _Source, split: str = "test") -> dict | None:
    """A per-run claim's statistic over its pretraining seeds (``seed_values``), judged by the verdicts' test
    (`bootstrap.seed_test`: paired by seed where the families have the same seeds, else Welch's): its 95% interval,
    two-sided p, the seeds per family (``seeds``: "3", or "2-3") and how; ``lo`` NaN (with ``why``) where a family has
    one seed; None for a claim without seed values or a source without runs."""
    if c.seed_values is None or src.runs.empty:
        return None
    values = c.seed_values(src.runs, split).dropna(subset=["value"])
    if values.empty:
        return None
    k = values.groupby("family")["value"].size()
    seeds = f"{k.min()}" if k.min() == k.max() else f"{k.min()}-{k.max()}"
    nan = {"lo": float("nan"), "hi": float("nan"), "p": float("nan"), "seeds": seeds, "how": ""}
    if k.min() < 2:
        return nan | {"why": f"pretraining-seed noise not estimable: {', '.join(k.index[k < 2])} has one seed"}
    t = bootstrap.seed_test(values.assign(value=values["value"] * values["coef"]))
    if np.isnan(t["lo"]):
        return nan | {"why": "the pretraining seeds' values do not vary"}
    how = (f"paired by pretraining seed over the seeds' values ({seeds} seeds, the same for both families; "
           f"{t['dof']:.0f} df" if t["paired"] else
           f"Welch over the pretraining seeds' values ({seeds} a family; {t['dof']:.1f} df")
    return {"lo": t["lo"], "hi": t["hi"], "p": t["p"], "seeds": seeds, "why": "",
            "how": f"{how}; fine-tuning noise inside each), t {t['t']:+.2f}, p {t['p']:.3f}"}


# a family's average raised by this many points to read the statistic's weight on it (`_contrasts`): the checks' last
# decimal, below the gaps between the models a claim chooses between (a full point made CLM-only claim 5s's "better
# extreme", weighing it -0.13 to -0.92 where its statistic does not read it)
NUDGE = 0.01


def _contrasts(c: Claim, src: _Source, point: pd.DataFrame) -> pd.DataFrame:
    """How the statistic moves with each family's group average (``scope``, ``model``: the seed-0 id, ``task_group``,
    ``coef``): its derivative at the point estimates, the statistic with one family's average raised by `NUDGE`
    points minus the statistic, over `NUDGE` (exact for a difference or a mean of differences; for a minimum or a
    choice, the one the point estimates make: a nudge too small to change which model is chosen). The averages are
    taken to the checks' two decimals first, so that the nudge moves a rounded difference by exactly itself."""
    fams, _ = bootstrap.seed_mean_replicas(src.averages, 2, src.seed, src.spread)
    base = fams["score"].to_numpy().round(2)
    frame = bootstrap.as_scores(fams, np.vstack([base, base + NUDGE * np.eye(len(base))]), src.averages)
    rows = c.rows(frame)
    dist = c.measure(rows, point) if not rows.empty else pd.DataFrame(columns=["source", "scope", "value"])
    at = dist.pivot_table(index="source", columns="scope", values="value")
    coef = ((at.drop(index=0, errors="ignore") - at.loc[0]) / NUDGE).round(3) if 0 in at.index else at.iloc[0:0]
    coef = coef.set_axis(coef.index.astype(int) - 1).stack().rename("coef").reset_index()
    coef = coef[coef["coef"].abs() > 1e-6]
    return fams.iloc[coef["source"]][["model", "task_group"]].reset_index(drop=True).assign(
        scope=coef["scope"].to_numpy(), coef=coef["coef"].to_numpy())


def _seed_interval(src: _Source, coefs: pd.DataFrame, value: float, choices: int) -> dict | None:
    """The verdict's interval where every family in the statistic has 2+ pretraining seeds (`bootstrap.seed_test`:
    paired by seed where the families share their seeds, else Welch with a variance a family), centred on ``value``,
    Bonferroni's for ``choices``: ``lo``, ``hi``, ``p`` and how; None where a family has one seed (the pooled interval
    then stands) or the contributions do not vary. ``detectable``: the smallest true difference the test finds at 80%
    power, (t_{1 - alpha/2} + t_{0.8}) x its standard error (what the seeds can show at their spread)."""
    if coefs.empty:
        return None
    values, _ = bootstrap.seed_contributions(src.averages, coefs)
    if values is None:
        return None
    t = bootstrap.seed_test(values, at=value, alpha=0.05 / choices)
    if np.isnan(t["lo"]):
        return None
    q = bootstrap.student_quantile(t["dof"], 0.05 / choices)
    t["detectable"] = (q + bootstrap.student_quantile(t["dof"], 0.4)) * (t["hi"] - t["lo"]) / 2 / q
    how = (f"paired by pretraining seed ({t['seeds']} seeds, the same for every compared family; {t['dof']:.0f} df)"
           if t["paired"] else f"Welch over each family's own pretraining seeds ({t['seeds']} a family; "
                               f"{t['dof']:.1f} df)")
    return t | {"how": f"{how}, fine-tuning noise inside each seed's mean; t {t['t']:+.2f}, p {t['p']:.3f}"}


def _welch(src: _Source, coefs: pd.DataFrame, value: float) -> tuple[float, str]:
    """The unpaired test on the pretraining-seed means (Welch, with Satterthwaite's degrees of freedom): per family,
    its seeds' contributions y_i (`bootstrap.seed_contributions`); se^2 = sum_f var(y_f) / k_f; the two-sided p of ``value`` /
    se. Beside a paired interval it shows what the pairing adds. (NaN, why) where a family in the statistic has one
    seed."""
    if coefs.empty:
        return float("nan"), ""
    values, why = bootstrap.seed_contributions(src.averages, coefs)
    if values is None:
        return float("nan"), f"no test on the pretraining-seed means alone: {why}"
    w = bootstrap.welch_interval(values.assign(coef=1.0), at=value)
    if np.isnan(w["p"]):
        return float("nan"), "no test on the pretraining-seed means alone: they do not vary"
    return w["p"], f"Welch on the pretraining-seed means, unpaired: t {w['t']:+.2f}, {w['dof']:.1f} df, p {w['p']:.3f}"


def _disagreement(lo: float, hi: float, p: float, value: float, choices: int) -> str:
    """Where the Welch test on the seed means (at 5%, Bonferroni's 5% / ``choices`` where the interval is widened)
    and the interval read the statistic differently ("" where they agree or the test is missing)."""
    if any(pd.isna(x) for x in (lo, hi, p)):
        return ""
    alpha = 0.05 / choices
    interval = "above 0" if lo > 0 else "below 0" if hi < 0 else "holds 0"
    test = ("above 0" if value > 0 else "below 0") if p < alpha else "holds 0"
    if interval == test:
        return ""
    said = f"rejects 0 (p {p:.3f} < {alpha:.3g})" if p < alpha else f"does not reject 0 (p {p:.3f})"
    return f"the Welch test on the seed means {said} where the interval {'holds 0' if interval == 'holds 0' else 'lies ' + interval}"


def reading(lo: float, hi: float, paper: float) -> str:
    """Our interval against the paper's matched effect: whether it includes it, excludes it (0 inside), or excludes
    it and 0 both (with the sign: ours on the paper's side of 0, or the other)."""
    if any(pd.isna(x) for x in (lo, hi, paper)):
        return ""
    if lo <= paper <= hi:
        return "includes the paper's"
    if lo <= 0 <= hi:
        return "excludes the paper's (holds 0)"
    return "excludes the paper's and 0" + (" (same sign)" if (lo > 0) == (paper > 0) else " (opposite sign)")


def _paper_side(c: Claim, src: _Source) -> pd.DataFrame:
    """The paper's estimate of the comparison a claim makes on a scale of ours (its scores at our models' places,
    `matching.paper_at`, through the claim's own check and statistic; printed ±), per scope (empty where
    the paper has none: a claim beyond it, a per-run claim, a place it did not evaluate)."""
    none = pd.DataFrame(columns=["scope", "value", "lo", "hi"])
    if c.per_run or src.matched.empty or c.paper.startswith(BEYOND_PAPER):
        return none
    point = c.rows(src.matched[ids.SCORE_COLUMNS])
    return none if point.empty or c.unavailable(point) else c.measure(point)


def _beside_paper(c: Claim, src: _Source, scope: str, groups: list, lo: float, hi: float,
                  table: pd.DataFrame) -> dict:
    """A row of ours beside the paper: its matched estimate and printed interval, which of the paper's models (or
    interpolations) that reads, and how our interval reads against it."""
    row = table[table["scope"] == scope]
    if row.empty:
        return {}
    value, p_lo, p_hi = (float(row[k].iloc[0]) for k in ("value", "lo", "hi"))
    models = c.models(src.matched[ids.SCORE_COLUMNS], None, groups)
    m = src.matched[src.matched["model"].isin(models) & src.matched["task_group"].isin(groups)]
    return {"paper_estimate": round(value, 2), "paper_low": round(p_lo, 2), "paper_high": round(p_hi, 2),
            "paper_config": "; ".join(sorted(set(m["paper_config"]))), "vs_paper": reading(lo, hi, value)}


def _controls(src: _Source, models: set, groups: list) -> dict:
    """A row of ours against its random-init controls: what pretraining adds (the leading compared model minus the
    control, `evidence.pretraining_effect`) and the compared models below the control (`evidence.below_control`)."""
    effect = evidence.pretraining_effect(src.seeds, models, groups)
    return {"pretraining_effect": round(effect, 2) if not np.isnan(effect) else np.nan,
            "below_control": evidence.below_control(src.seeds, models, groups)}


def _not_beating(src: _Source, models: set, groups: list) -> str:
    """The compared models that do not beat the random-init control beyond the combined half-width
    (`evidence.below_control`), in words that say which side of it they are: "below the random-init control" where
    the score is, "not clear of the random-init control" where it is above but within the half-width."""
    m = evidence.against_control(src.seeds, models, groups).dropna(subset=["random"])
    m = m[~m["beats"]]
    above = set(m.loc[m["score"] >= m["random"], "model"])
    below = evidence.below_control(src.seeds[~src.seeds["model"].isin(above)], models, groups)
    clear = evidence.below_control(src.seeds[~src.seeds["model"].isin(set(m["model"]) - above)], models, groups)
    return "; ".join(filter(None, [below and f"below the random-init control: {below}",
                                   clear and f"not clear of the random-init control (above it, within the combined "
                                             f"half-width): {clear}"]))


def _ours(c: Claim, src: _Source, t, groups: list, words, verdict: str, why: str) -> tuple[dict, str, str, list]:
    """The columns a row of ours adds (the paper's matched estimate, the controls, the seed term), its interval, and
    its verdict and reason after the gates; notes for the evidence text."""
    notes = []
    models = c.models(src.scores, src.runs, groups)
    extra = _controls(src, models, groups)
    lo, hi = t.lo, t.hi
    if not c.per_run:
        extra["seed_term"] = _seed_term(src.spread, groups)[0]
    gates = _gates(c, src, models, groups, t.value, (lo, hi))
    if gates:
        verdict, why = "no signal", "; ".join(gates)
        notes.append(f"no signal: {why}")
    elif extra["below_control"]:
        why = f"{why}; {_not_beating(src, models, groups)} ({c.below_control})"
    extra |= {"lo": lo, "hi": hi}
    return extra, verdict, why, notes


def _sizes(extra: dict, value: float, paired: dict | None) -> dict:
    """A row of ours in proportion: the statistic as a share of what pretraining adds (``effect_share``), the
    smallest difference its seed test detects (``detectable``), and no pooled seed term where that test made it."""
    effect = extra.get("pretraining_effect", np.nan)
    return {"effect_share": round(value / effect, 2) if effect and not pd.isna(effect) else np.nan,
            "detectable": round(paired["detectable"], 2) if paired else np.nan,
            "seed_term": "none pooled: the compared families' own pretraining seeds" if paired else extra.get(
                "seed_term")}


def _text(c: Claim, src: _Source, models: set) -> str:
    """The claim's text on a source: `Claim.one_size` where its compared models are all of one size."""
    sizes = set(src.scores.loc[src.scores["model"].isin(models), "size"])
    return c.one_size if c.one_size and len(sizes) == 1 else c.text


def _judge(c: Claim, src: _Source, source: str, split: str) -> list[dict]:
    """One claim on one source: a row per scope with the statistic, its interval, the seeds behind it, the evidence,
    the verdict and the reason for it; for a scale of ours also the paper's estimate of the same comparison and our
    interval read against it, the pretraining effect and the models below the control, and the seed term used."""
    words = ("supported", "not supported") if source == "paper" else ("reproduced", "not reproduced")
    if c.per_run and not src.per_run:
        return [{"scope": "all", "evidence": "no data: needs per-run results", "verdict": "not checkable",
                 "reason": "needs per-run results"}]
    point = c.rows(src.scores, src.runs, split)
    reason = c.unavailable(point)
    if reason:
        return [{"scope": "all", "evidence": "; ".join(filter(None, [reason, src.note])), "reason": reason,
                 "verdict": "not checkable at this scale" if src.controlled else "not checkable"}]
    seeded = _seed_values_test(c, src, split) if c.per_run and src.per_run else None
    table, how = _intervals(c, src, point, split, seeded)
    if c.choices(point) > 1:
        how += f"; Bonferroni-widened for the best of {c.choices(point)} pairs"
    detail, models, paper = c.describe(point), c.models(src.scores, src.runs), _paper_side(c, src)
    tested = src.per_run and not c.per_run and not src.averages.empty
    coefs = _contrasts(c, src, point) if tested else pd.DataFrame(columns=["scope"])
    out, text = [], _text(c, src, models)
    for t in table.itertuples():
        paired = _seed_interval(src, coefs[coefs["scope"] == t.scope], t.value, c.choices(point)) if tested else None
        t = t._replace(lo=paired["lo"], hi=paired["hi"]) if paired else t  # the test on the seeds, not pooled
        verdict, why = _call(t.lo, t.hi, words)
        notes, extra, lo, hi = [detail], {}, t.lo, t.hi
        groups = [t.scope] if t.scope in ids.GROUPS else sorted(set(point["task_group"]))
        pretrain, finetune = _seeds(src.scores, models, groups)
        if c.per_run and pretrain:  # per-run claims read pretraining seed 0's runs, or every seed of seed_values
            pretrain = seeded["seeds"] if seeded is not None else "1"
        if src.controlled:
            extra, verdict, why, more = _ours(c, src, t, groups, words, verdict, why)
            lo, hi = extra.pop("lo"), extra.pop("hi")
            extra |= _beside_paper(c, src, t.scope, groups, lo, hi, paper) | _sizes(extra, t.value, paired)
            notes += more
        if tested:
            p, test = _welch(src, coefs[coefs["scope"] == t.scope], t.value)
            extra |= {"seed_means_p": round(p, 4), "seed_means_test": test,
                      "tests_disagree": _disagreement(lo, hi, p, t.value, c.choices(point))}
        if seeded is not None:  # the interval is the test on the seeds (where a family has 2+)
            extra |= {"seed_means_p": round(seeded["p"], 4), "seed_means_test": seeded["how"] or seeded["why"]}
            if seeded["why"] and src.controlled and verdict != "no signal":  # an interval that leaves out a source
                verdict, why = "no signal", seeded["why"]                    # of noise is no evidence
        if src.per_run and not c.per_run and paired is None:
            seeds, fixed = _seed_term(src.spread, groups)
            notes.append(seeds)
            if fixed and src.controlled and verdict != "no signal":  # ours: an interval that leaves out a source of
                verdict, why = "no signal", ""                       # noise is no evidence
            why = "; ".join(filter(None, [why, fixed]))
        notes.append(src.note)
        statement = f"{c.statistic}: {t.value:+.2f}, 95% CI [{lo:+.2f}, {hi:+.2f}] ({paired['how'] if paired else how})"
        out.append({"scope": t.scope, "text": text,
                    "evidence": "; ".join([statement, *filter(None, notes)]), "statistic": c.statistic,
                    "value": round(t.value, 2), "ci_low": round(lo, 2), "ci_high": round(hi, 2),
                    "pretrain_seeds": pretrain, "finetune_seeds": finetune,
                    "verdict": verdict, "reason": why, **extra})
    return out


# a row of ours also carries (blank for the paper's rows): the paper's estimate of the same comparison and which of its
# models that reads (`matching.paper_at`), our interval against it, what pretraining adds in the group (and the
# statistic as a share of it, ``effect_share``: probes whose pretraining gains differ compare so), the smallest
# difference its test finds at 80% power (``detectable``: what the seeds can show), the compared models below the
# random-init control, and the pretraining-seed term of the interval
BESIDE_PAPER = ["paper_estimate", "paper_low", "paper_high", "paper_config", "vs_paper", "pretraining_effect",
                "effect_share", "detectable", "below_control", "seed_term"]
# a row with per-run results also carries the test on the pretraining-seed means alone (`_welch`: its p-value and
# words) and where that test and the interval read the statistic differently (`_disagreement`)
SEED_MEANS = ["seed_means_p", "seed_means_test", "tests_disagree"]
TABLE_COLUMNS = ["claim", "scale", "source", "group", "statistic", "estimate", "low", "high", "pretraining_seeds",
                 "finetuning_seeds", "verdict", "reason", *BESIDE_PAPER, *SEED_MEANS]


def verdicts(scores: pd.DataFrame, runs: pd.DataFrame, claims: list[Claim], split: str = "test", n_boot: int = 2000,
             seed: int = 0, numbers: bool = False, rule: str = "per_seed", full: bool = False,
             paper: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per claim of ``claims``, source and scope (a task group, or "all"): the evidence computed from the data
    and a verdict.

    Every claim gets a statistic that is positive when the claim holds as the paper states it (`Claim.paper`), and its
    95% interval: for a source with per-run results (this repository's, EncodEval's), where every compared family has
    2+ pretraining seeds, the test on those seeds (`_seed_interval`, `bootstrap.seed_test`: paired by seed where the
    families share their seeds, else Welch; issue 60), else the percentile interval of ``n_boot`` replicas of
    `bootstrap.replica_scores` (Student-t over the pretraining-seed means, the spread pooled over the scale's
    families); Bonferroni's where a claim chose among comparisons; for the paper its printed half-widths. Models
    that differ only in their pretraining seed are one model, their mean (`aggregation.pool_pretraining_seeds`). The
    verdict is "reproduced" (for the paper: "supported")
    when the whole interval is above zero, "not reproduced" ("not supported") when it is below, else "inconclusive".
    A comparison of ours is "no signal" when its leading model does not beat the random-init control of its size
    beyond the combined half-width (`evidence.signal`; a trailing model below it is named in the row,
    ``below_control``), when its interval excludes 0 by less than the statistic's own change over the
    last fine-tuning epoch (`evidence.unsettled`), or when the fine-tuning of the compared models and their controls fails the calibration
    criteria (`evidence.calibration_report`), or when its interval cannot count pretraining-seed noise (no model of
    the scale with 2+ pretraining seeds); ``reason`` says which; a compared model that does not beat the control is
    named "below" it or "not clear of" it, as its score is. ``seed_term``: the pooled spread used (where it is);
    ``SEED_MEANS``: the unpaired Welch test on the compared families' own seed means (p-value and words, or why there
    is none) and where it and the interval disagree. Beside it: the paper's estimate of the same comparison (``paper``: the
    paper's scores, default those in ``scores``; read at our models' places, `matching.paper_at`), our interval
    against it, and the group's pretraining effect (`BESIDE_PAPER`). A source whose results cannot carry the claim
    gets "not checkable at this scale" (the paper's own sources, e.g. for claims 4 and 6 that need per-run results:
    "not checkable"), with the reason. ``numbers`` adds the statistic and its interval as columns (``value``,
    ``ci_low``, ``ci_high``); ``full`` returns every column (`verdict_table` writes them).
    """
    data: dict[str, _Source] = {}
    rows = []
    paper = scores[scores["source"] == "paper"] if paper is None else paper
    for claim in claims:
        sources = list(dict.fromkeys([*scores["source"], *(runs["source"] if claim.per_run else [])]))
        sources = sources or ["none loaded"]
        for source in sources:
            if source not in data:
                data[source] = _source(scores, runs, source, paper, n_boot, seed, rule)
            for row in _judge(claim, data[source], source, split):
                rows.append({"claim": f"{claim.key}. {row.pop('text', claim.text)}", "source": source, **row})
    numbered = ["value", "ci_low", "ci_high"] if numbers or full else []
    more = ["statistic", "pretrain_seeds", "finetune_seeds", "reason", *BESIDE_PAPER, *SEED_MEANS] if full else []
    return pd.DataFrame(rows, columns=["claim", "source", "scope", "evidence", *numbered, "verdict", *more])


def designs(scores: pd.DataFrame, runs: pd.DataFrame, claims: list[Claim], split: str = "test",
            rule: str = "per_seed") -> pd.DataFrame:
    """Each claim's design on one scale's runs, as its verdict reads it: per claim (``claim``: its key) and scope, the
    families in the statistic (``model``: the seed-0 id, ``task_group``) and their weights (``coef``, `_contrasts`);
    what `coverage.simulate_designs` draws. Per-run claims and claims the runs cannot carry are left out."""
    out, sources = [], {s: _source(scores, runs, s, scores.iloc[0:0], 2, 0, rule) for s in runs["source"].unique()}
    for c in (c for c in claims if not c.per_run):
        for src in sources.values():
            point = c.rows(src.scores, src.runs, split)
            if src.averages.empty or point.empty or c.unavailable(point):
                continue
            out.append(_contrasts(c, src, point).assign(claim=c.key, choices=c.choices(point)))
    cols = ["claim", "scope", "model", "task_group", "coef", "choices"]
    return pd.concat(out, ignore_index=True)[cols] if out else pd.DataFrame(columns=cols)


def verdict_table(judged: pd.DataFrame) -> pd.DataFrame:
    """``verdicts(..., full=True)`` rows (with a ``scale`` column) as the verdicts table's columns (`TABLE_COLUMNS`)."""
    out = judged.rename(columns={"scope": "group", "value": "estimate", "ci_low": "low", "ci_high": "high",
                                 "pretrain_seeds": "pretraining_seeds", "finetune_seeds": "finetuning_seeds"})
    return out.reindex(columns=TABLE_COLUMNS)
