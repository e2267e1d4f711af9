"""The intervals of ours. A verdict's interval, where every family it compares has 2+ pretraining seeds, is the test
on those seeds (`seed_test`: paired by seed where the families share their seeds, else Welch). Every other interval
of a group average, or of a statistic of them (a difference, a mean of differences ...), comes from one set of
replicas (`replica_scores`) and one percentile rule (`percentile_interval`):
where a scale's task group has models with 2+ pretraining seeds, the replicas are drawn from the pretraining-seed
means alone (`seed_mean_replicas`: a Student-t interval on the spread of seeds pooled over the scale's families, each
seed mean carrying its fine-tuning, learning-rate-choice and test-instance noise once); where none has, a
hierarchical bootstrap with the pretraining seeds held fixed (`finetuning_replicas`: validation and test instances
resampled, `instance_replicas`; the learning rate chosen again, `selected_replicas`; fine-tuning seeds resampled),
and for the per-run claims every run of every replica (`replica_runs`). `coverage` checks the first by simulation.
Each named part draws from its own random stream, so that a model landing does not move the interval of a comparison
it is not in. No torch import here.
"""

from __future__ import annotations

import math
import zlib

import numpy as np
import pandas as pd

from ..loading import aggregation
from ..loading import ids


def _stream(seed: int, *names) -> np.random.Generator:
    """The bootstrap's random stream for one named part of it (a split of a dataset, the fine-tuning seeds, a family's
    pretraining-seed term): a part draws the same numbers whatever other models are on record, so that a model landing
    does not move the interval of a comparison it is not in."""
    return np.random.default_rng([seed, *(zlib.crc32(str(n).encode()) for n in names)])


def instance_replicas(runs: pd.DataFrame, split: str, n_boot: int, seed: int) -> np.ndarray:
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
    return instance_replicas(runs, "test", n_boot, seed), _seed_draws(runs["seed"].to_numpy(), n_boot, seed)


def selected_replicas(runs: pd.DataFrame, n_boot: int, seed: int, rule: str, instances: bool = True):
    """The learning rate chosen again in every replica: per model, dataset and fine-tuning seed (``per_seed``; or per
    model and dataset on the seed-averaged validation score, ``seed_average``) the run with the best resampled
    validation score (ties: the smaller rate). Returns the chosen cells (one row per model, dataset and seed) and
    their test scores, (rows, n_boot). Without ``instances`` both splits keep their instances (the scores as run)."""
    runs = runs.dropna(subset=["validation"]).sort_values(["model", "task_group", "dataset", "seed", "lr"],
                                                          ignore_index=True)

    def replicas(split):
        return (instance_replicas(runs, split, n_boot, seed) if instances else
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


def seed_averages(runs: pd.DataFrame, rule: str = "per_seed") -> pd.DataFrame:
    """The group average of each model (each pretraining seed its own row) from ``runs``' default grid: the point
    estimates that `aggregation.pool_pretraining_seeds` pools and `seed_mean_replicas` draws from."""
    return ids.group_averages(aggregation.aggregate(runs, rule))


def family_seed_spread(runs: pd.DataFrame, rule: str = "per_seed", averages: pd.DataFrame | None = None
                       ) -> pd.DataFrame:
    """Per source, scale, task group and family (``family``: models that differ only in their pretraining
    seed), the spread of its seeds' group averages x_i (`seed_averages` of ``runs``, or ``averages`` where given):
    ``ss`` = sum_i (x_i - m)^2, ``dof`` = k - 1 and ``sd`` = sqrt(ss / dof) (missing for one seed), ``k`` seeds."""
    cols = ["source", "scale", "task_group", "family", "ss", "dof", "sd", "k"]
    avg = seed_averages(runs, rule) if averages is None else averages
    if avg.empty:
        return pd.DataFrame(columns=cols)
    fam = avg.groupby(["source", "scale", "task_group", "family"], observed=True)["score"]
    out = pd.DataFrame({"ss": fam.var().fillna(0) * (fam.size() - 1), "dof": fam.size() - 1, "sd": fam.std(),
                        "k": fam.size()}).reset_index()
    return out[cols]


def pretraining_seed_spread(runs: pd.DataFrame, rule: str = "per_seed", averages: pd.DataFrame | None = None
                            ) -> pd.DataFrame:
    """Per source, scale and task group, the pooled spread of pretraining seeds: ``sd`` = sqrt(sum_f sum_i (x_fi -
    m_f)^2 / dof) with ``dof`` = sum_f (k_f - 1), over the families f of `family_seed_spread`; ``sd`` missing where
    ``dof`` is 0 (no model with 2+ seeds). ``families``: how many there are, ``multi``: how many of them
    have 2+ seeds."""
    cols = ["source", "scale", "task_group", "sd", "dof", "families", "multi"]
    per = family_seed_spread(runs, rule, averages)
    if per.empty:
        return pd.DataFrame(columns=cols)
    per = per.assign(families=1, multi=per["k"] > 1)
    g = per.groupby(["source", "scale", "task_group"], sort=False)[["ss", "dof", "families", "multi"]].sum()
    return g.assign(sd=np.sqrt(g["ss"] / g["dof"].where(g["dof"] > 0))).reset_index()[cols]


# Replicas of the seed-mean interval: their 2.5% and 97.5% percentiles lie within about 1-3% (one sd) of the exact
# Student-t bounds; 2,000 gave 4-6% (a 3-against-3 difference on 2-8 degrees of freedom, 50 draws of each count).
SEED_MEAN_DRAWS = 20_000


def seed_mean_replicas(averages: pd.DataFrame, n_boot: int = SEED_MEAN_DRAWS, seed: int = 0,
                       spread: pd.DataFrame | None = None) -> tuple[pd.DataFrame, np.ndarray]:
    """The claims' interval: replicas of each family's mean from its pretraining seeds' group averages alone.

    ``averages``: one row per model and task group (`seed_averages`); each seed's average already carries its
    fine-tuning seeds, its learning-rate choice and its test instances' noise, once. Per source, scale and task group,
    sigma^2 is the pooled variance of pretraining seeds (``spread``, default `pretraining_seed_spread` of
    ``averages``: s^2 over ``dof`` degrees of freedom, from the families with 2+ seeds); each replica draws sigma
    from its posterior, s^2 x dof / chi2(dof) (one draw for the block, shared by its families), and each family's
    mean as m_f + sigma / sqrt(k_f) x Z_f. So a difference (or any contrast) of family means gets exactly the
    Student-t interval on ``dof`` degrees of freedom, centred on its point estimate (the Z are antithetic: replica b
    and b + n_boot / 2 mirror each other), one-seed families included. Draws come from named streams (`_stream`:
    the block's sigma, each family's Z), so a model landing moves no interval it is not in, beyond the pooled s.
    Returns the families (``source``, ``scale``, ``task_group``, ``model``: the seed-0 id, ``score``: m_f,
    ``k``, ``dof``) and their replicas, (n_boot, families): NaN where ``dof`` is 0 (no spread to draw from)."""
    keys = ["source", "scale", "task_group", "family"]
    fams = averages.groupby(keys, sort=False, observed=True)["score"].agg(["mean", "size"]).reset_index()
    fams = fams.rename(columns={"family": "model", "mean": "score", "size": "k"})
    spread = pretraining_seed_spread(None, averages=averages) if spread is None else spread
    fams = fams.merge(spread[["source", "scale", "task_group", "sd", "dof"]], how="left")
    fams["dof"] = fams["dof"].fillna(0).astype(int)
    half = (n_boot + 1) // 2
    draws = np.full((n_boot, len(fams)), np.nan)
    for where, idx in fams.groupby(["source", "scale", "task_group"], sort=False).indices.items():
        sd, dof = fams.at[idx[0], "sd"], fams.at[idx[0], "dof"]
        if dof == 0:
            continue
        sigma = sd * np.sqrt(dof / _stream(seed, "pretraining-seed spread", *where).chisquare(dof, size=half))
        for i in idx:
            z = _stream(seed, "pretraining seeds", *where, fams.at[i, "model"]).standard_normal(half)
            step = sigma / np.sqrt(fams.at[i, "k"]) * z
            draws[:, i] = fams.at[i, "score"] + np.concatenate([step, -step])[:n_boot]
    return fams[["source", "scale", "task_group", "model", "score", "k", "dof"]], draws


def percentile_interval(values: pd.DataFrame, choices: int = 1) -> pd.DataFrame:
    """The 95% percentile interval of a statistic over replicas (``values``: ``scope`` and ``value``, one row per
    replica and scope), Bonferroni's for the best of ``choices`` comparisons: ``lo``, ``hi`` and ``replicas`` per
    scope. Every interval of ours on a group average or a difference of them is this over `replica_scores`."""
    g, tail = values.dropna(subset=["value"]).groupby("scope")["value"], 0.025 / choices
    return pd.DataFrame({"lo": g.quantile(tail), "hi": g.quantile(1 - tail), "replicas": g.size()}).reset_index()


def percentile_bounds(values: np.ndarray, choices: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """`percentile_interval` on an array: (lo, hi) per column of ``values`` (replicas, statistics)."""
    tail = 0.025 / choices
    return np.quantile(values, tail, axis=0), np.quantile(values, 1 - tail, axis=0)


def _pool_replicas(avg: np.ndarray, models: list[str], families: list[str]) -> tuple[np.ndarray, list[int]]:
    """Replicas of models that differ only in their pretraining seed (``families``: each model's) pooled: per replica
    the mean over the family's seeds' replicas, the seeds themselves held fixed. Returns (n_boot, families) and, per
    family, the column of its seed-0 model."""
    codes, names = pd.factorize(pd.Series(families))
    order, k = np.argsort(codes, kind="stable"), np.bincount(codes)
    pooled = np.add.reduceat(avg[:, order], np.cumsum(k) - k, axis=1) / k  # a family's NaN stays its own
    column = {m: i for i, m in enumerate(models)}
    return pooled, [column.get(name, int(np.argmax(codes == c))) for c, name in enumerate(names)]


def finetuning_replicas(runs: pd.DataFrame, n_boot: int = 2000, seed: int = 0, rule: str = "per_seed",
                        instances: bool = True) -> tuple[pd.DataFrame, np.ndarray]:
    """The hierarchical bootstrap of one source's default-grid runs with their pretraining seeds held fixed, for
    where no pretraining-seed spread can be estimated (no family of the scale and group with 2+ seeds): validation and
    test instances resampled (exactly, for token-weighted scores), the learning rate chosen again on the resampled
    validation scores (`selected_replicas`), fine-tuning seeds resampled (the same draw for every model), the mean
    over them, over the group's datasets (where a model has all of them, as `aggregation.summarize`) and over a
    family's pretraining seeds (`_pool_replicas`). ``instances=False`` keeps the validation and test sets as they
    are: the interval then counts the seeds alone, as the paper's ± counts its fine-tuning seeds. Returns the
    families (``model``: the seed-0 id, ``task_group``, ``scale``) and their group averages, (n_boot, families)."""
    none = pd.DataFrame(columns=["model", "task_group", "scale"]), np.empty((n_boot, 0))
    if runs.empty:
        return none
    sel, reps = selected_replicas(runs, n_boot, seed, rule, instances)
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
        return none
    avg = np.stack([score[:, cols].mean(axis=1) for _, _, cols in avgs], axis=1)  # (n_boot, averages)
    scale, family = dict(zip(sel["model"], sel["scale"])), dict(zip(sel["model"], sel["family"]))
    pooled, keep = [], []
    for key in dict.fromkeys((scale[m], g) for m, g, _ in avgs):  # one source's scales and groups
        idx = [i for i, (m, g, _) in enumerate(avgs) if (scale[m], g) == key]
        cols, first = _pool_replicas(avg[:, idx], [avgs[i][0] for i in idx], [family[avgs[i][0]] for i in idx])
        pooled.append(cols)
        keep += [idx[f] for f in first]
    fams = pd.DataFrame([avgs[i][:2] for i in keep], columns=["model", "task_group"])
    return fams.assign(scale=fams["model"].map(scale)), np.concatenate(pooled, axis=1)


def replica_scores(runs: pd.DataFrame, n_boot: int = 2000, seed: int = 0, rule: str = "per_seed",
                   instances: bool = True, spread: pd.DataFrame | None = None) -> pd.DataFrame:
    """The group averages of replicas of one source's default-grid runs (``n_boot``; at least `SEED_MEAN_DRAWS` where
    a seed mean is drawn, the fine-tuning replicas then repeated to as many), as scores (the replica's index as
    ``source``, no half-widths), one row per family under its seed-0 id, as `aggregation.pool_pretraining_seeds`
    pools the point estimates: `seed_mean_replicas` of the models' `seed_averages` wherever the source, scale and
    task group have a pretraining-seed spread (``spread``, default `pretraining_seed_spread` of ``runs``); where none
    of its families has 2+ seeds, `finetuning_replicas` (pretraining seeds held fixed: an interval that leaves their
    noise out, which a verdict of ours says)."""
    runs = aggregation.default_grid(runs)
    if runs.empty:
        return pd.DataFrame(columns=ids.SCORE_COLUMNS)
    avg = seed_averages(runs, rule)
    fams, draws = seed_mean_replicas(avg, max(n_boot, SEED_MEAN_DRAWS), seed, spread)
    drawn = (fams["dof"] > 0).to_numpy()
    draws = draws if drawn.any() else draws[:n_boot]  # no seed draw: the fine-tuning replicas alone
    fixed = set(zip(fams.loc[~drawn, "scale"], fams.loc[~drawn, "task_group"]))
    rest, more = finetuning_replicas(runs[[k in fixed for k in zip(runs["scale"], runs["task_group"])]], n_boot,
                                     seed, rule, instances)
    more = np.tile(more, (-(-len(draws) // max(len(more), 1)), 1))[:len(draws)]  # as many rows as the seed draws
    base = pd.concat([fams.loc[drawn, ["model", "task_group"]], rest[["model", "task_group"]]], ignore_index=True)
    return as_scores(base, np.concatenate([draws[:, drawn], more], axis=1), avg)


def as_scores(families: pd.DataFrame, values: np.ndarray, averages: pd.DataFrame) -> pd.DataFrame:
    """Replicas of family group averages as scores: ``values`` (replicas, families) of ``families`` (``model``: the
    seed-0 id, ``task_group``), one row per replica (its index as ``source``) and family, with the attributes of the
    seed-0 model's row in ``averages`` (a family without one is left out, as `aggregation.pool_pretraining_seeds`
    leaves it)."""
    attrs = averages.drop_duplicates("model").set_index("model")[["scale", *ids.ATTRIBUTES]]
    keep = families["model"].isin(attrs.index).to_numpy()
    base = families.loc[keep, ["model", "task_group"]].reset_index(drop=True)
    base = _categorical(base.join(attrs, on="model").assign(dataset=ids.AVG, flag=""))
    n = len(values)
    df = base.iloc[np.tile(np.arange(len(base)), n)].reset_index(drop=True)
    df = df.assign(source=np.repeat(np.arange(n), len(base)), score=values[:, keep].ravel(), ci=np.nan, n=pd.NA)
    return df[ids.SCORE_COLUMNS]


def student_p(t: float, dof: float) -> float:
    """The two-sided p-value of Student's t with ``dof`` (any positive real) degrees of freedom: the regularized
    incomplete beta I_x(dof / 2, 1 / 2) at x = dof / (dof + t^2), by its continued fraction (Lentz)."""
    if np.isnan(t) or np.isnan(dof) or dof <= 0:
        return float("nan")
    return _betainc(dof / 2, 0.5, dof / (dof + t * t))


def welch_interval(values: pd.DataFrame, at: float | None = None, alpha: float = 0.05) -> dict:
    """Welch's 95% interval of sum over families of coef x the mean of its values (``values``: ``family``, ``value``,
    ``coef``; two or more values a family), with Satterthwaite's degrees of freedom: ``value``, ``lo``, ``hi``, the
    two-sided ``p`` of 0, ``t`` and ``dof`` (NaN bounds where the values do not vary). ``at``: the statistic the
    interval and test are centred on, where it is not that sum (a claim's value at its point estimates)."""
    g = values.groupby("family", sort=False)
    k, coef, mean, var = g["value"].size(), g["coef"].first(), g["value"].mean(), g["value"].var(ddof=1)
    value = float((coef * mean).sum()) if at is None else float(at)
    terms = coef ** 2 * var / k
    se2 = float(terms.sum())
    if se2 == 0:
        return {"value": value, "lo": float("nan"), "hi": float("nan"), "p": float("nan"), "t": float("nan"),
                "dof": float("nan")}
    dof = se2 ** 2 / float((terms ** 2 / (k - 1)).sum())
    half, t = student_quantile(dof, alpha) * np.sqrt(se2), value / np.sqrt(se2)
    return {"value": value, "lo": value - half, "hi": value + half, "p": student_p(t, dof), "t": t, "dof": dof}


def seed_contributions(averages: pd.DataFrame, coefs: pd.DataFrame) -> tuple[pd.DataFrame | None, str]:
    """Per family in a statistic (``coefs``: ``model``, the family's seed-0 id, ``task_group`` and ``coef``) and
    pretraining seed, the seed's contribution to it, sum over groups of coef x the seed's group average in
    ``averages`` (``family``, ``seed``, ``value``: what `seed_test` reads); (None, why) where a family has one seed."""
    wide = averages.assign(pretrain_seed=averages["pretrain_seed"].fillna(0).astype(int)).pivot_table(
        index=["family", "pretrain_seed"], columns="task_group", values="score")
    parts = []
    for family, part in coefs.groupby("model", sort=False):
        x = wide.loc[family, list(part["task_group"])] if family in wide.index.get_level_values(0) else wide.iloc[0:0]
        y = (x * part["coef"].to_numpy()).sum(axis=1, min_count=len(part)).dropna()
        if len(y) < 2:
            return None, f"{family} has one seed"
        parts.append(pd.DataFrame({"family": family, "seed": y.index.to_numpy(), "value": y.to_numpy()}))
    return pd.concat(parts, ignore_index=True), ""


def seed_test(values: pd.DataFrame, at: float | None = None, alpha: float = 0.05) -> dict:
    """The verdicts' test on the pretraining seeds, for a statistic sum over families of coef x the family's mean
    (``values``: ``family``, ``seed`` (its pretraining seed), ``value``: that seed's coef x group average; two or more
    seeds a family). Where every family has the same seeds, the models of one seed share its lineage (one data order,
    one initialisation, checkpoints of one run, a split or CPT continuing that seed's base run) and may correlate:
    the test is paired, a one-sample t over the seeds' contributions y_s = sum_f value_fs (k - 1 degrees of freedom),
    whatever the families' own variances and correlations. Otherwise, Welch's (`welch_interval`): a variance per
    family, families independent. ``value``, ``lo``, ``hi``, ``p``, ``t``, ``dof``, ``paired`` and ``seeds``
    (the k, or "2-3" where families differ); NaN bounds where the contributions do not vary. ``alpha``: 1 - the
    interval's level (Bonferroni's 0.05 / choices where a claim chose among comparisons)."""
    fams = values.groupby("family", sort=False)["seed"].agg(lambda x: tuple(sorted(x)))
    k = fams.map(len)
    seeds = f"{k.min()}" if k.min() == k.max() else f"{k.min()}-{k.max()}"
    if fams.nunique() > 1:
        return welch_interval(values.assign(coef=1.0), at, alpha) | {"paired": False, "seeds": seeds}
    y = values.groupby("seed")["value"].sum()
    n, mean = len(y), float(y.mean())
    value = mean if at is None else float(at)
    se = float(y.std(ddof=1)) / np.sqrt(n) if n > 1 else float("nan")
    if not se > 0:
        return {"value": value, "lo": float("nan"), "hi": float("nan"), "p": float("nan"), "t": float("nan"),
                "dof": float("nan"), "paired": True, "seeds": seeds}
    half, t = student_quantile(n - 1, alpha) * se, value / se
    return {"value": value, "lo": value - half, "hi": value + half, "p": student_p(t, n - 1), "t": t,
            "dof": float(n - 1), "paired": True, "seeds": seeds}


def student_quantile(dof: float, alpha: float = 0.05) -> float:
    """The t above which Student's t with ``dof`` (any positive real) degrees of freedom lies with two-sided
    probability ``alpha`` (`student_p` inverted by bisection; 1.96 in the limit for 5%)."""
    if np.isnan(dof) or dof <= 0:
        return float("nan")
    lo, hi = 0.0, 1e4
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if student_p(mid, dof) > alpha else (lo, mid)
    return (lo + hi) / 2


def _betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0 or x >= 1:
        return float(x >= 1)
    if x > (a + 1) / (a + b + 2):  # the fraction converges fast on this side
        return 1 - _betainc(b, a, 1 - x)
    front = np.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * np.log(x) + b * np.log1p(-x)) / a
    f, c, d = 1.0, 1.0, 0.0
    for i in range(1000):
        m = i // 2
        num = (1.0 if i == 0 else m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)) if i % 2 == 0
               else -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)))
        d = 1 / (1 + num * d or 1e-300)
        c = 1 + num / c or 1e-300
        f *= c * d
        if abs(1 - c * d) < 1e-14:
            break
    return float(front * (f - 1))


def hierarchical_intervals(runs: pd.DataFrame, models=None, n_boot: int = 2000, seed: int = 0,
                           rule: str = "per_seed", instances: bool = True) -> pd.DataFrame:
    """Group averages with the claims' 95% interval, per source, scale, model and task group of ``runs`` (default
    grid): ``score`` the mean over the model's pretraining seeds (one row under its seed-0 id, as
    `aggregation.pool_pretraining_seeds`), ``low`` and ``high`` the 2.5% and 97.5% quantiles of its `replica_scores`,
    ``ci`` half their distance (for symmetric bars), ``pretrain_seeds``, and ``pretrain_sd`` and ``pretrain_dof``,
    the pooled spread of pretraining seeds behind them (`pretraining_seed_spread`, from every model of the source and
    scale: ``dof`` 0 means there was none to estimate, and the interval is `finetuning_replicas`', the seeds held
    fixed; ``instances=False`` then keeps the test sets fixed too). ``models``: the seed-0 ids (``family``) to
    keep; default all."""
    runs = aggregation.default_grid(runs)
    spreads = pretraining_seed_spread(runs, rule)
    if models is not None:
        runs = runs[runs["family"].isin(ids.families(runs, models))]
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


def replica_runs(runs: pd.DataFrame, n_boot: int, seed: int) -> pd.DataFrame:
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
