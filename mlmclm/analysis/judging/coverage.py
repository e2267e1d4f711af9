"""Whether the intervals of ours cover: a simulation with known effects drawn from a scale's own variance components
(issue 45, item 3). No torch import here.

`components` estimates, from a scale's default-grid runs, per dataset the fine-tuning-seed noise of the test and
validation scores and their correlation (one run's luck shows in both), the learning-rate profile (how much each rate
of the grid scores below the others, on average over the models) and each family's level; per task group the
pretraining-seed spread of group averages (beyond what the fine-tuning seeds explain). `synthetic_runs` draws the
scale's own grid (every model, dataset, rate and seed it ran) again from them, with the families' levels as the true
effects, and `simulate` runs the point estimates (`aggregation.select_lr`: the learning rate chosen on validation
per seed) and the intervals (`bootstrap.seed_mean_replicas`, `bootstrap.percentile_bounds`) on each replica and
counts how often the 95% interval of each difference of two families covers the true difference.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd

from ...errors import ConfigError
from ..loading import aggregation
from ..loading import results
from . import bootstrap

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


def synthetic_runs(c: Components, replicas: int, rng: np.random.Generator, first: int = 0) -> pd.DataFrame:
    """``replicas`` draws of the scale's grid (``source`` "sim<i>", from ``first``), scores from the components:
    level + the rate's effect + the model's pretraining-seed effect in its group (shared by validation and test) + a
    run's fine-tuning noise (validation and test correlated as in the runs)."""
    r, n = c.runs, len(c.runs)
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
    return out.assign(source=np.repeat([f"sim{first + i}" for i in range(replicas)], n), scale="sim",
                      test=(level[:, 0] + effect[:, 0] + shared + e_test).ravel(),
                      validation=(level[:, 1] + effect[:, 1] + shared + e_val).ravel())


def synthetic_averages(sim: pd.DataFrame, rule: str = "per_seed") -> pd.DataFrame:
    """Each model's group averages in each replica: the learning rate chosen per seed (`aggregation.select_lr`),
    the mean over seeds per dataset and the mean over the group's datasets, as `aggregation.summarize` computes a
    group average (every model here has every dataset and seed of its group)."""
    sel = aggregation.select_lr(sim, rule)
    per = sel.groupby(["source", "scale", "model", "family", "task_group", "dataset"], sort=False)["test"].mean()
    return per.groupby(level=[0, 1, 2, 3, 4], sort=False).mean().rename("score").reset_index()


def simulate(runs: pd.DataFrame, replicas: int = 1000, n_boot: int = 2000, seed: int = 0, batch: int = 50,
             spread=None) -> pd.DataFrame:
    """Coverage of the 95% intervals of every difference of two families in each task group of one scale's runs,
    over ``replicas`` draws of the scale (`synthetic_runs`), each judged with ``n_boot`` replicas of
    `bootstrap.seed_mean_replicas`: one row per task group and pair (``covered``: the share of draws whose interval
    holds the true difference; ``width``: the mean width). ``spread``: a function of a batch's averages giving the
    spread the intervals use (default: theirs, `bootstrap.pretraining_seed_spread`; a test passes a wrong one)."""
    c = components(runs)
    truth, rng, hits, widths = c.truth(), np.random.default_rng(seed), {}, {}
    for first in range(0, replicas, batch):
        avg = synthetic_averages(synthetic_runs(c, min(batch, replicas - first), rng, first))
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


def summary(pairs: pd.DataFrame) -> pd.DataFrame:
    """Per task group: the coverage over every pair of families (``covered``: the mean; ``lowest``, ``highest``: the
    pairs' extremes), the pairs and the draws."""
    g = pairs.groupby("task_group")
    return pd.DataFrame({"covered": g["covered"].mean(), "lowest": g["covered"].min(), "highest": g["covered"].max(),
                         "pairs": g.size(), "replicas": g["replicas"].max()}).reset_index()


def _coverage_cli(args) -> int:
    folder = Path(args.results_dir).resolve() if args.results_dir else args.root / "results"
    runs = results.load(folder, sources=["ours"], scale=args.scale).runs
    if runs.empty:
        raise ConfigError(f"no runs of scale {args.scale!r} under {folder / 'runs'}")
    c = components(runs)
    print(f"variance components of {args.scale} (points): pretraining-seed sd of a group average "
          + ", ".join(f"{g} {v:.2f}" for g, v in c.pretraining.items()) + "; fine-tuning-seed sd (test) "
          + ", ".join(f"{d} {v:.2f}" for d, v in c.noise["sd_test"].items()))
    table = summary(simulate(runs, args.replicas, args.n_boot, args.seed))
    print(f"coverage of the 95% intervals of every difference of two families, {args.replicas} simulated replicas "
          f"of the scale ({args.n_boot} interval replicas each):")
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
