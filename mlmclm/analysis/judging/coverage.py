"""Whether the intervals of ours cover: simulations with known effects drawn from a scale's own variance components
(issues 45 and 60). No torch import here.

The verdicts' test (`bootstrap.seed_test`, paired by pretraining seed) is checked by `simulate_designs`:
`seed_structure` estimates, from a scale's seed group averages, a seed variance per stage (checkpoints, finals,
splits, CPTs) and the correlation of two families' seed effects at one seed (sharing a base run, or only the seed);
each claim's design (`judge.designs`) is drawn from it and judged. It draws seed effects of group averages, not
runs: how a grid chose its rates (every seed at every rate, or a screened grid's later seeds at the screen's choice)
enters only through the spread of the scale's own seed averages. The pooled interval of the group averages is
checked as follows.

`components` estimates, from a scale's default-grid runs, per dataset the fine-tuning-seed noise of the test and
validation scores and their correlation (one run's luck shows in both), the learning-rate profile (how much each
rate of the grid scores below the others, on average over the models) and each family's level; per task group the
pretraining-seed spread of group averages (beyond what the fine-tuning seeds explain). `synthetic_runs` draws the
scale's own grid (every model, dataset, rate and seed it ran; a screened grid's later seeds at the rate each draw's
own screen chooses, as the runner chooses it: a real screen's choice, fixed, would put one family's later seeds at
a rate the shared profile scores lower, a bias no interval is meant to cover) again from them, with the families'
levels as the true effects, and
`simulate` runs the point estimates (`aggregation.select_lr`: the learning rate chosen on validation per seed) and
the intervals (`bootstrap.seed_mean_replicas`, `bootstrap.percentile_bounds`) on each replica and counts how often
the 95% interval of each difference of two families covers the true difference.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd

from ...config import scale_names
from ...errors import ConfigError
from ..loading import aggregation
from ..loading import results
from . import bootstrap
from . import claims
from . import judge

CELL = ["model", "task_group", "dataset", "lr"]


@dataclass
class Components:
    """A scale's variance components: ``runs`` (its grid: one row a run, with ``family``), ``noise`` (per dataset:
    ``sd_test``, ``sd_validation``, ``rho``), ``profile`` (per dataset and rate: ``test``, ``validation``, the rate's
    mean effect), ``levels`` (per family and dataset: ``test``, ``validation``) and ``pretraining`` (per task group:
    ``sd``, the spread of a seed's group average that its fine-tuning seeds do not explain)."""

    runs: pd.DataFrame
    noise: pd.DataFrame
    profile: pd.DataFrame
    levels: pd.DataFrame
    pretraining: pd.Series

    def truth(self) -> pd.Series:
        """The true group average of each family (``task_group``, ``family``): the mean of its datasets' levels."""
        return self.levels.groupby(["task_group", "family"])["test"].mean()


def components(runs: pd.DataFrame) -> Components:
    """`Components` of one scale's pretrained models (default grid; the random-init controls left out)."""
    runs = aggregation.default_grid(runs)
    runs = runs[runs["objective"] != "random"].dropna(subset=["validation", "test"])
    runs = runs[["model", "family", "task_group", "dataset", "lr", "seed", "validation", "test"]].reset_index(drop=True)
    cells = runs.groupby(CELL, sort=False)
    dev = runs[["test", "validation"]] - cells[["test", "validation"]].transform("mean")
    dof = (cells["seed"].transform("size") - 1) / cells["seed"].transform("size")  # each run's share of its cell's dof
    sums = pd.DataFrame({"tt": dev["test"] ** 2, "vv": dev["validation"] ** 2, "tv": dev["test"] * dev["validation"],
                         "dof": dof, "dataset": runs["dataset"]}).groupby("dataset").sum()
    noise = pd.DataFrame({"sd_test": np.sqrt(sums["tt"] / sums["dof"]),
                          "sd_validation": np.sqrt(sums["vv"] / sums["dof"])})
    noise["rho"] = (sums["tv"] / sums["dof"] / (noise["sd_test"] * noise["sd_validation"])).fillna(0)
    means = cells[["test", "validation"]].mean().reset_index()
    centred = means[["test", "validation"]] - means.groupby(["model", "dataset"])[["test", "validation"]].transform(
        "mean")
    profile = centred.assign(dataset=means["dataset"], lr=means["lr"]).groupby(["dataset", "lr"]).mean()
    effect = profile.loc[list(zip(runs["dataset"], runs["lr"]))].to_numpy()
    levels = (runs[["test", "validation"]] - effect).assign(family=runs["family"], task_group=runs["task_group"],
                                                            dataset=runs["dataset"])
    levels = levels.groupby(["family", "task_group", "dataset"])[["test", "validation"]].mean()
    return Components(runs, noise, profile, levels, _pretraining_sd(means, noise, runs))


def _pretraining_sd(means: pd.DataFrame, noise: pd.DataFrame, runs: pd.DataFrame) -> pd.Series:
    """Per task group, the pretraining-seed sd of a group average: over the families with 2+ seeds, the pooled
    variance of their seeds' group averages at each model and dataset's best rate (on mean validation), less what
    the fine-tuning seeds put into it (sd_test^2 / seeds per dataset, averaged over the group's D datasets: / D^2),
    floored at 0."""
    best = means.loc[means.groupby(["model", "dataset"])["validation"].idxmax()]
    per = best.groupby(["task_group", "model"])["test"].mean().reset_index()
    g = per.assign(family=per["model"].map(dict(zip(runs["model"], runs["family"])))).groupby(["task_group", "family"])[
        "test"]
    pooled = pd.DataFrame({"ss": g.var().fillna(0) * (g.size() - 1), "dof": g.size() - 1}).groupby("task_group").sum()
    n = runs.groupby(["task_group", "dataset"])["seed"].nunique()
    finetune = (noise["sd_test"].reindex(n.index.get_level_values(1)).to_numpy() ** 2 / n).groupby("task_group")
    finetune = finetune.sum() / n.groupby("task_group").size() ** 2
    return np.sqrt((pooled["ss"] / pooled["dof"].where(pooled["dof"] > 0) - finetune).clip(lower=0)).rename("sd")


def _every_rate(runs: pd.DataFrame) -> pd.DataFrame:
    """The grid of ``runs`` with each screened dataset's later seeds (a seed at one rate of its model's several) at
    every rate of the model's, flagged ``later``."""
    rates = runs.groupby(["model", "dataset"])["lr"].transform("nunique")
    later = (runs.groupby(["model", "dataset", "seed"])["lr"].transform("nunique") == 1) & (rates > 1)
    if not later.any():
        return runs.assign(later=False)
    grid = runs.loc[~later, ["model", "dataset", "lr"]].drop_duplicates()
    extra = runs.loc[later].drop(columns="lr").merge(grid, on=["model", "dataset"])
    return pd.concat([runs[~later].assign(later=False), extra.assign(later=True)], ignore_index=True)


def _screen(sim: pd.DataFrame) -> pd.DataFrame:
    """Each draw's later seeds at the rate its screen chose (the best mean validation of the other seeds, ties to the
    smaller rate, as `mlmclm.evaluation.grid.best_lr`), the later seeds' other rates dropped."""
    if not sim["later"].any():
        return sim.drop(columns="later")
    keys = ["source", "model", "dataset"]
    mean = sim[~sim["later"]].groupby([*keys, "lr"], as_index=False)["validation"].mean()
    mean = mean.sort_values([*keys, "validation", "lr"], ascending=[True, True, True, False, True])
    chosen = mean.drop_duplicates(keys)[[*keys, "lr"]].assign(chosen=True)
    sim = sim.merge(chosen, on=[*keys, "lr"], how="left")
    return sim[~sim["later"] | sim["chosen"].eq(True)].drop(columns=["later", "chosen"]).reset_index(drop=True)


def synthetic_runs(c: Components, replicas: int, rng: np.random.Generator, first: int = 0,
                   screen: bool = True) -> pd.DataFrame:
    """``replicas`` draws of the scale's grid (``source`` "sim<i>", from ``first``), scores from the components:
    level + the rate's effect + the model's pretraining-seed effect in its group (shared by validation and test) + a
    run's fine-tuning noise (validation and test correlated as in the runs); a screened dataset's later seeds at the
    rate each draw's screen chose (`_screen`; ``screen`` False: at the real screen's choice in every draw)."""
    r = _every_rate(c.runs) if screen else c.runs.assign(later=False)
    n = len(r)
    effect = c.profile.loc[list(zip(r["dataset"], r["lr"]))].to_numpy()
    level = c.levels.loc[list(zip(r["family"], r["task_group"], r["dataset"]))].to_numpy()
    noise = c.noise.loc[r["dataset"]]
    models, code = np.unique(list(zip(r["model"], r["task_group"])), axis=0, return_inverse=True)
    seed_sd = c.pretraining.reindex(models[:, 1]).fillna(0).to_numpy()
    a = rng.standard_normal((replicas, len(models))) * seed_sd  # (replicas, model x group)
    z1, z2 = rng.standard_normal((2, replicas, n))
    rho = noise["rho"].to_numpy()
    e_test = z1 * noise["sd_test"].to_numpy()
    e_val = (rho * z1 + np.sqrt(1 - rho ** 2) * z2) * noise["sd_validation"].to_numpy()
    shared = a[:, code.ravel()]
    out = pd.concat([r] * replicas, ignore_index=True)
    return _screen(out.assign(source=np.repeat([f"sim{first + i}" for i in range(replicas)], n), scale="sim",
                              test=(level[:, 0] + effect[:, 0] + shared + e_test).ravel(),
                              validation=(level[:, 1] + effect[:, 1] + shared + e_val).ravel()))


def synthetic_averages(sim: pd.DataFrame, rule: str = "per_seed") -> pd.DataFrame:
    """Each model's group averages in each replica: the learning rate chosen per seed (`aggregation.select_lr`),
    the mean over seeds per dataset and the mean over the group's datasets, as `aggregation.summarize` computes a
    group average (every model here has every dataset and seed of its group)."""
    sel = aggregation.select_lr(sim, rule)
    per = sel.groupby(["source", "scale", "model", "family", "task_group", "dataset"], sort=False)["test"].mean()
    return per.groupby(level=[0, 1, 2, 3, 4], sort=False).mean().rename("score").reset_index()


def simulate(runs: pd.DataFrame, replicas: int = 1000, n_boot: int = 2000, seed: int = 0, batch: int = 50,
             spread=None, screen: bool = True) -> pd.DataFrame:
    """Coverage of the 95% intervals of every difference of two families in each task group of one scale's runs,
    over ``replicas`` draws of the scale (`synthetic_runs`), each judged with ``n_boot`` replicas of
    `bootstrap.seed_mean_replicas`: one row per task group and pair (``covered``: the share of draws whose interval
    holds the true difference; ``width``: the mean width). ``spread``: a function of a batch's averages giving the
    spread the intervals use (default: theirs, `bootstrap.pretraining_seed_spread`; a test passes a wrong one);
    ``screen``: `synthetic_runs`'s."""
    c = components(runs)
    truth, rng, hits, widths = c.truth(), np.random.default_rng(seed), {}, {}
    for first in range(0, replicas, batch):
        avg = synthetic_averages(synthetic_runs(c, min(batch, replicas - first), rng, first, screen))
        fams, draws = bootstrap.seed_mean_replicas(avg, n_boot, seed, spread(avg) if spread else None)
        col = {k: i for i, k in enumerate(zip(fams["source"], fams["task_group"], fams["model"]))}
        for group, part in truth.groupby(level=0):
            sources = fams.loc[fams["task_group"] == group, "source"].unique()
            for x, y in combinations(part.index.get_level_values(1), 2):
                d = np.stack([draws[:, col[s, group, x]] - draws[:, col[s, group, y]] for s in sources], axis=1)
                lo, hi = bootstrap.percentile_bounds(d)
                true = part[(group, x)] - part[(group, y)]
                hits.setdefault((group, x, y), []).extend((lo <= true) & (true <= hi))
                widths.setdefault((group, x, y), []).extend(hi - lo)
    rows = [{"task_group": g, "a": x, "b": y, "covered": np.mean(h), "width": np.mean(widths[g, x, y]),
             "replicas": len(h)} for (g, x, y), h in hits.items()]
    return pd.DataFrame(rows)


def stage(averages: pd.DataFrame) -> pd.Series:
    """Each row's stage: "checkpoint" (an intermediate checkpoint), "CPT" (continued pretraining), "split" (CLM then
    MLM from scratch), else "final"."""
    cpt = pd.to_numeric(averages["cpt_steps"], errors="coerce").fillna(0) > 0
    inter = averages["intermediate"].astype("boolean").fillna(False).astype(bool)
    split = averages["objective"].astype(str).str.contains(r"\+")
    return pd.Series(np.select([inter, cpt, split], ["checkpoint", "CPT", "split"], "final"), index=averages.index)


def _root(averages: pd.DataFrame) -> pd.Series:
    """The objective a row's lineage starts from ("clm" or "mlm"): a CPT, split or checkpoint shares the base run of
    its first objective with every model of that seed that starts the same way."""
    first = averages["objective"].astype(str).str.split("+").str[0]
    return first.where(first == "clm", "mlm")


@dataclass
class SeedStructure:
    """The spread of a pretraining seed's group average around its family's mean, per task group: ``variance`` per
    stage (pooled over the stage's families with 2+ seeds, its ``dof``), and the correlation of two families' seed
    effects at the same seed (``rho``: "lineage" where both start from one base run, "seed" where they only share the
    seed and its data order), from the families' common seeds. ``families``: per family its group, stage, root and
    seeds."""

    variance: pd.DataFrame
    rho: pd.DataFrame
    families: pd.DataFrame

    def covariance(self, group: str, fams: list[str]) -> np.ndarray:
        """The covariance of the seed effects of ``fams`` in ``group`` (made positive semi-definite)."""
        f = self.families.set_index(["task_group", "family"]).loc[[(group, x) for x in fams]]
        var = self.variance.set_index(["task_group", "stage"])["variance"]
        sd = np.sqrt(var.reindex(list(zip(f.index.get_level_values(0), f["stage"]))).fillna(0).to_numpy())
        rho = self.rho.set_index(["task_group", "kind"])["rho"]
        same = f["root"].to_numpy()[:, None] == f["root"].to_numpy()[None, :]
        r = np.where(same, rho.get((group, "lineage"), 0.0), rho.get((group, "seed"), 0.0))
        np.fill_diagonal(r, 1.0)
        w, v = np.linalg.eigh(np.outer(sd, sd) * r)
        return (v * w.clip(min=0)) @ v.T


def seed_structure(averages: pd.DataFrame) -> SeedStructure:
    """`SeedStructure` of one scale's pretrained models' group averages (each pretraining seed its own row,
    `bootstrap.seed_averages`; the random-init controls left out)."""
    a = averages[averages["objective"] != "random"].copy()
    a = a.assign(stage=stage(a), root=_root(a), seed=a["pretrain_seed"].fillna(0).astype(int))
    a["r"] = a["score"] - a.groupby(["task_group", "family"])["score"].transform("mean")
    a["k"] = a.groupby(["task_group", "family"])["score"].transform("size")
    multi = a[a["k"] > 1]
    per = multi.groupby(["task_group", "stage", "family"])["r"].agg(ss=lambda r: float((r ** 2).sum()), k="size")
    v = per.assign(dof=per["k"] - 1).groupby(["task_group", "stage"])[["ss", "dof"]].sum()
    variance = v.assign(variance=v["ss"] / v["dof"]).reset_index()[["task_group", "stage", "variance", "dof"]]
    var = variance.set_index(["task_group", "stage"])["variance"]
    sums = {}
    for group, part in multi.groupby("task_group"):
        wide = part.pivot_table(index="seed", columns="family", values="r")
        info = part.drop_duplicates("family").set_index("family")
        for x, y in combinations(wide.columns, 2):
            both = wide[[x, y]].dropna()
            if len(both) < 2:
                continue
            kind = "lineage" if info.at[x, "root"] == info.at[y, "root"] else "seed"
            scale = np.sqrt(var.get((group, info.at[x, "stage"]), np.nan)
                            * var.get((group, info.at[y, "stage"]), np.nan))
            if not scale > 0:
                continue
            s = sums.setdefault((group, kind), [0.0, 0.0])  # residuals about each family's mean: E[sum] = (n - 1) cov
            s[0] += float((both[x] * both[y]).sum()) / scale
            s[1] += len(both) - 1
    rho = pd.DataFrame([{"task_group": g, "kind": k, "rho": float(np.clip(v[0] / v[1], -1, 1)), "dof": v[1]}
                        for (g, k), v in sums.items()], columns=["task_group", "kind", "rho", "dof"])
    fams = a.groupby(["task_group", "family"], sort=False).agg(stage=("stage", "first"), root=("root", "first"),
                                                               seeds=("seed", lambda x: tuple(sorted(x))))
    return SeedStructure(variance, rho, fams.reset_index())


def _seed_bounds(effects: np.ndarray, coef: np.ndarray, have: np.ndarray, keys: list, seeds: list, alpha: float
                 ) -> tuple[float, float, float]:
    """One draw of a design judged by the verdicts' test: (value, lo, hi). ``effects``: (seeds, families), ``have``:
    which family has which seed."""
    if have.all():  # every family on the same seeds: the paired test, y_s = sum_j coef_j x_sj
        y = effects @ coef
        value = float(y.mean())
        half = bootstrap.student_quantile(len(y) - 1, alpha) * y.std(ddof=1) / np.sqrt(len(y))
        return value, value - half, value + half
    vals = pd.DataFrame([{"family": keys[j], "seed": s, "value": coef[j] * effects[i, j]}
                         for i, s in enumerate(seeds) for j in range(len(keys)) if have[i, j]])
    value = float(vals.groupby("family", sort=False)["value"].mean().sum())
    t = bootstrap.seed_test(vals, at=value, alpha=alpha)
    return value, t["lo"], t["hi"]


def _pooled_covers(value: float, keys: list, coef: np.ndarray, k: list[int], spread: pd.DataFrame, alpha: float,
                   rng: np.random.Generator) -> bool:
    """Whether the pooled interval (each group's seed sd over all its families, ``spread``; families independent)
    holds the true 0: its sd drawn as the estimate it is (the spread's chi-square on the pooled dof)."""
    se2 = 0.0
    for j, (group, _) in enumerate(keys):
        sd, dof = spread.at[group, "sd"], int(spread.at[group, "dof"])
        se2 += coef[j] ** 2 * (sd * np.sqrt(rng.chisquare(dof) / dof)) ** 2 / k[j]
    dof = int(spread.loc[list(dict.fromkeys(g for g, _ in keys)), "dof"].min())
    return bool(abs(value) <= bootstrap.student_quantile(dof, alpha) * np.sqrt(se2))


def simulate_designs(averages: pd.DataFrame, designs: pd.DataFrame, replicas: int = 1000, seed: int = 0
                     ) -> pd.DataFrame:
    """Coverage of the verdicts' test (`bootstrap.seed_test`: paired by seed where the compared families share their
    seeds) on every claim's design (``designs``: `judge.designs`), under the scale's own seed structure
    (`seed_structure`: a variance per stage, correlated seed effects within a seed): per replica each family of a
    design gets, at each of its own seeds, a seed effect drawn jointly with the other families' at that seed; the
    statistic's true value is 0. Beside it, the pooled interval the verdicts used before (one seed variance for every
    family of the group, families independent: Student-t on the pooled dof). One row per claim and scope:
    ``covered``, ``covered_pooled``, ``width`` (mean of the test's), ``seeds``, ``replicas``."""
    st = seed_structure(averages)
    pooled = bootstrap.pretraining_seed_spread(None, averages=averages[averages["objective"] != "random"])
    rng, rows = np.random.default_rng(seed), []
    for (claim, scope), d in designs.groupby(["claim", "scope"], sort=False):
        d = d[d["coef"].abs() > 0]
        fams = st.families.set_index(["task_group", "family"])
        keys = list(zip(d["task_group"], d["model"]))
        if any(k not in fams.index for k in keys):
            continue
        seeds = [fams.loc[k, "seeds"] for k in keys]
        if min(len(s) for s in seeds) < 2:
            continue
        everyone = sorted(set().union(*seeds))
        alpha = 0.05 / int(d["choices"].max())
        # the joint seed effects of every (group, family) of the design at each seed: groups independent
        effects = np.zeros((replicas, len(everyone), len(keys)))
        for group in dict.fromkeys(d["task_group"]):
            idx = [i for i, k in enumerate(keys) if k[0] == group]
            cov = st.covariance(group, [keys[i][1] for i in idx])
            draw = rng.multivariate_normal(np.zeros(len(idx)), cov, size=(replicas, len(everyone)),
                                           method="eigh")
            effects[:, :, idx] = draw
        coef = d["coef"].to_numpy()
        have = np.array([[s in seeds[j] for j in range(len(keys))] for s in everyone])  # (seeds, families)
        hits, hits_pooled, widths = [], [], []
        spread = pooled.set_index("task_group")
        for b in range(replicas):
            value, lo, hi = _seed_bounds(effects[b], coef, have, keys, everyone, alpha)
            hits.append(lo <= 0 <= hi)
            widths.append(hi - lo)
            hits_pooled.append(_pooled_covers(value, keys, coef, [len(x) for x in seeds], spread, alpha, rng))
        rows.append({"claim": claim, "scope": scope, "covered": np.mean(hits), "covered_pooled": np.mean(hits_pooled),
                     "width": np.mean(widths), "seeds": len(everyone), "replicas": replicas})
    return pd.DataFrame(rows, columns=["claim", "scope", "covered", "covered_pooled", "width", "seeds", "replicas"])


def summary(pairs: pd.DataFrame) -> pd.DataFrame:
    """Per task group: the coverage over every pair of families (``covered``: the mean; ``lowest``, ``highest``: the
    pairs' extremes), the pairs and the draws."""
    g = pairs.groupby("task_group")
    return pd.DataFrame({"covered": g["covered"].mean(), "lowest": g["covered"].min(), "highest": g["covered"].max(),
                         "pairs": g.size(), "replicas": g["replicas"].max()}).reset_index()


def _check_estimable(averages: pd.DataFrame, scale: str, folder: Path) -> None:
    """Refuse (one line) a scale whose results cannot give the simulation its parts: a seed variance needs a family
    with 2+ pretraining seeds, a difference two families in one task group."""
    seeds = averages.groupby(["task_group", "family"])["pretrain_seed"].nunique()
    families = seeds.groupby(level="task_group").size()
    if seeds.empty or seeds.max() < 2 or families.max() < 2:
        raise ConfigError(f"the results of scale {scale!r} under {folder / 'runs'} cannot show coverage: it needs two "
                          f"families (models that differ in more than their pretraining seed) in one task group and "
                          f"a family with 2+ pretraining seeds; they have {families.max() if len(families) else 0} "
                          f"famil{'y' if families.max() == 1 else 'ies'} at most and {seeds.max() if len(seeds) else 0}"
                          f" seed(s) at most (train them: mlmclm study run all --scale {scale} --set pretrain_seeds=2)")


def _coverage_cli(args) -> int:
    if args.replicas < 1 or args.n_boot < 1 or args.seed < 0:
        raise ConfigError(f"--replicas and --n-boot must be 1 or more and --seed 0 or more, got {args.replicas}, "
                          f"{args.n_boot} and {args.seed}")
    if args.scale not in scale_names():
        raise ConfigError(f"unknown scale {args.scale!r}; choose one of {', '.join(scale_names())}")
    folder = Path(args.results_dir).resolve() if args.results_dir else args.root / "results"
    data = results.load(folder, sources=["ours"], scale=args.scale)
    runs, scores = data.runs, data.scores
    if runs.empty:
        raise ConfigError(f"no fine-tuning results of scale {args.scale!r} under {folder / 'runs'} (train and fine-tune"
                          f" them: mlmclm study run all --scale {args.scale})")
    averages = bootstrap.seed_averages(aggregation.default_grid(runs))
    _check_estimable(averages, args.scale, folder)
    st = seed_structure(averages)
    stages = "; ".join(f"{r.task_group} {r.stage} {r.variance:.3f} ({r.dof} df)" for r in st.variance.itertuples())
    print(f"seed structure of {args.scale} (a pretraining seed's group average about its family's mean): variance by "
          f"stage {stages}; correlation of two families' seed effects at one seed " + "; ".join(
              f"{r.task_group} {r.kind} {r.rho:+.2f}" for r in st.rho.itertuples()))
    designs = judge.designs(scores, runs, [c for c in claims.CLAIMS.values() if not c.per_run])
    table = simulate_designs(averages, designs, args.replicas, args.seed)
    print(f"coverage of the verdicts' 95% intervals on every claim's design, {args.replicas} replicas drawn from that "
          f"structure (covered: the test on the compared families' own seeds; covered_pooled: the pooled interval, "
          f"one seed variance for every family, families independent):")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}") if not table.empty else
          "  no claim compares families with 2+ pretraining seeds each")
    c = components(runs)
    print(f"variance components of {args.scale} (points): pretraining-seed sd of a group average "
          + ", ".join(f"{g} {v:.2f}" for g, v in c.pretraining.items()) + "; fine-tuning-seed sd (test) "
          + ", ".join(f"{d} {v:.2f}" for d, v in c.noise["sd_test"].items()))
    table = summary(simulate(runs, args.replicas, args.n_boot, args.seed))
    print(f"coverage of the pooled 95% intervals of every difference of two families (the group averages' "
          f"intervals of the figures), {args.replicas} simulated replicas of the scale under the pooled interval's own "
          f"assumptions ({args.n_boot} interval replicas each):")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    return 0


def add_options(p) -> None:
    """`mlmclm coverage`."""
    p.add_argument("--scale", required=True, help="the scale whose runs (results/runs/SCALE) give the components")
    p.add_argument("--replicas", type=int, default=1000, help="simulated replicas of the scale (default 1000)")
    p.add_argument("--n-boot", type=int, default=2000, help="interval replicas per simulated replica (default 2000)")
    p.add_argument("--seed", type=int, default=0, help="the random seed of the simulation and its intervals")
    p.add_argument("--results-dir", default=None, help="the results folder (default: the working root's results/)")
    p.set_defaults(run=_coverage_cli)
