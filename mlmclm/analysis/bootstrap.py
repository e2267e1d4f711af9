"""The claims' hierarchical bootstrap over one source's per-run results: replicas of every run's scores with the
validation and test instances resampled (`instance_replicas`), the learning rate chosen again in each replica
(`selected_replicas`), fine-tuning seeds resampled, the group averages of each replica (`replica_scores`) with a
Student-t term for pretraining seeds from their spread (`pretraining_seed_spread`, pooled over a scale's models with
2+ seeds, or each family's own, `family_seed_spread`), every run of every replica for the per-run claims
(`replica_runs`), and a model's interval from them (`hierarchical_intervals`). Each named part draws from its own
random stream, so that a model landing does not move the interval of a comparison it is not in. No torch import here.
"""

from __future__ import annotations

import zlib

import numpy as np
import pandas as pd

from . import aggregation
from . import ids


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
    validation scores (`selected_replicas`), fine-tuning seeds resampled (the same draw for every model), the mean
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
