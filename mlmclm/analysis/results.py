"""Results as one tidy table: the paper's Tables 1-17, this repository's runs and EncodEval-format folders.

Two levels of data, both pandas DataFrames with a ``source`` column:

- **scores** (table level): one row per source x model x dataset, ``score`` and ``ci`` (the 95% half-width) in
  points, with one extra row per task group, ``dataset == "Avg"``, for the group average.
- **runs** (run level): one row per fine-tuning run (model x dataset x learning rate x seed), ``validation`` and
  ``test`` scores in points.

``aggregate`` turns runs into scores with the paper's rule (results/README.md, "Aggregation (runs -> scores)"): for
each seed, the learning rate with the best validation score; the mean test score over seeds; +- t x s / sqrt(n), s the
sample standard deviation and t Student's 97.5% quantile with n - 1 degrees of freedom (the paper's 1.96 for runs at
the paper's scale, EncodEval's, so that they reproduce its printed ±). Scores come from each scale's default grid only
(``grid == "default"``; a stability grid is its own comparison). No torch import here: this module must stay cheap to
import.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..config import FINETUNE_GROUPS as GROUPS  # the task groups, defined once in config
from ..config import REFERENCE
from ..config import step_text
from ..errors import ConfigError, ResultFileError
from .. import flops
from ..io import load_result, misplaced
from ..locks import busy
from ..runs import ModelId, grid_root
from ..schedule import parse_objective

METRICS = {"SC": "accuracy", "TC": "F1", "QA": "F1", "IR": "NDCG@10"}
# What a checkpoint's pretraining tokens are counted against (`figures.tokens_per_parameter`), as an axis label: the
# body (no embeddings, no output layer), the body and the input embedding, every parameter (the output layer too).
AXES = {"body": "tokens per body parameter", "body+embedding": "tokens per body+embedding parameter",
        "all": "tokens per parameter (all)"}
# EncodEval folder name -> the paper's column label, in the paper's column order.
DATASETS = {
    "sst2": "SST-2", "qqp": "QQP", "mnli_m": "MNLI",
    "ontonotes": "OntoNotes", "conll2003_en": "CoNLL", "uner_en": "UNER",
    "squad": "SQuAD", "squad_v2": "SQuAD-v2", "record": "ReCoRD",
    "nq": "NQ", "msmarco": "MS MARCO", "mldr_en": "MLDR",
}
PAPER_DATASETS = {g: frozenset(list(DATASETS.values())[3 * i:3 * i + 3]) for i, g in enumerate(GROUPS)}
AVG = "Avg"
Z95 = 1.96
# Student's t, 97.5% quantile, for 1 .. 30 degrees of freedom (beyond: the Cornish-Fisher series in `t95`)
T95 = (12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281, 2.2010, 2.1788, 2.1604,
       2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860, 2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518,
       2.0484, 2.0452, 2.0423)
PAPER_SEEDS = 5  # fine-tuning seeds behind each of the paper's cells (6 learning rates x 5 seeds)
STABILITY_LRS = (1e-5, 1e-4)  # Fig. 5: spread over seeds and learning rates in [1e-5, 1e-4]

ATTRIBUTES = ["size", "objective", "mask_ratio", "steps", "clm_steps", "mlm_steps", "cpt_steps", "intermediate",
              "pretrain_seed"]
SCORE_COLUMNS = ["source", "scale", "model", *ATTRIBUTES, "task_group", "dataset", "score", "ci", "n", "flag"]
RUN_COLUMNS = ["source", "scale", "model", *ATTRIBUTES, "task_group", "dataset", "grid", "lr", "seed", "validation",
               "test", "majority", "last_gain", "zero_shot", "test_i", "test_w", "validation_i", "validation_w", "path"]
# test_i / validation_i: a run's per-instance scores (arrays); test_w / validation_w: what each instance weighs in the
# split's score (words for a tag accuracy, ``weights_i``), None where the score is the plain mean of the instances'.
GRIDS = ("default", "stability")
SOURCES = ("paper", "ours", REFERENCE, "encodeval", "encodeval-sample")


# ----------------------------------------------------------------------------------------------- model ids

def _size_label(size: str) -> str:
    return size.upper() if re.fullmatch(r"\d+[mb]", size) else size


def parse_model_id(model: str) -> dict:
    """Size, objective, masking ratio and step counts from a model id (`runs.ModelId`; results/README.md, "Model
    ids"). ``steps`` is what the evaluated checkpoint was trained for; ``clm_steps + mlm_steps == steps``;
    ``cpt_steps`` counts the continued-pretraining part; ``pretrain_seed`` is the id's ``-p{N}`` (0 when absent);
    ``objective`` is ``clm``, ``mlm`` or ``clm+mlm`` (both phases present); beyond the paper ``mixed``, ``alternating``
    (`mlmclm.schedule`) or ``detour`` (the CLM detour in CPT: `BEYOND_OBJECTIVES`); or ``random`` for a run's step-0
    checkpoint (its initial weights: the random-init control of its size, which stands for every objective since
    fine-tuning is always bidirectional). A `ResultFileError` (a `ValueError`) for an id that does not follow the
    naming.
    """
    m = ModelId.parse(model)
    if m.step == 0 and not m.cpt:
        return {"size": _size_label(m.size), "objective": "random", "mask_ratio": pd.NA, "steps": 0,
                "clm_steps": 0, "mlm_steps": 0, "cpt_steps": 0, "intermediate": False, "pretrain_seed": m.seed}
    steps = m.step if m.step is not None else m.length
    clm = _clm_steps(m, steps)
    mlm = steps - clm
    return {
        "size": _size_label(m.size),
        "objective": BEYOND_OBJECTIVES.get(m.kind if m.detour is None else "detour") or (
            "clm+mlm" if clm and mlm else ("clm" if clm else "mlm")),
        "mask_ratio": m.mask_ratio if m.mask_ratio is not None and mlm else pd.NA,
        "steps": steps,
        "clm_steps": clm,
        "mlm_steps": mlm,
        "cpt_steps": steps - m.steps if m.cpt else 0,
        "intermediate": m.step is not None,
        "pretrain_seed": m.seed,
    }


# the objectives beyond the paper's schedules (issue 27), as ``objective`` names them; the paper's study views leave
# them out (`sequential`)
BEYOND_OBJECTIVES = {"mix": "mixed", "alt": "alternating", "detour": "detour"}


def _clm_steps(m: ModelId, steps: int) -> int:
    """How many of the first `steps` steps of model `m`'s lineage trained CLM (a mixed run's CLM rows counted as
    whole-batch steps: `schedule`'s ``clm_steps``; a detour's CLM phase after the decayed MLM run)."""
    if m.detour is not None:
        return min(max(steps - m.steps, 0), m.detour - m.steps)
    if m.kind in BEYOND_OBJECTIVES:
        return parse_objective(m.objective).clm_steps(min(m.steps, steps))
    return min(m.steps, steps) if m.objective == "clm" else 0


def sequential(df: pd.DataFrame) -> pd.Series:
    """Whether each row is a model of the paper's schedules: one objective, or CLM then MLM (not a mixed, alternating
    or detour model: `BEYOND_OBJECTIVES`)."""
    return df["objective"].isin(["clm", "mlm", "clm+mlm"])


def family(model: str) -> str:
    """The model id without its pretraining seed (``mini-xs-clm-4620-p2`` -> ``mini-xs-clm-4620``, the id of seed 0):
    the runs that differ only in their pretraining seed share it. Ids that do not follow the naming are their own."""
    try:
        return str(ModelId.parse(model).family)
    except ValueError:
        return model


def _with_attributes(df: pd.DataFrame) -> pd.DataFrame:
    """Add the parsed model-id columns; ids that do not follow the naming get missing values."""
    models = df["model"].unique()
    rows = []
    for model in models:
        try:
            rows.append({"model": model, **parse_model_id(model)})
        except ValueError:
            rows.append({"model": model})
    attrs = pd.DataFrame(rows, columns=["model", *ATTRIBUTES])
    for col in ("mask_ratio", "steps", "clm_steps", "mlm_steps", "cpt_steps", "pretrain_seed"):
        attrs[col] = attrs[col].astype("Int64")
    attrs["intermediate"] = attrs["intermediate"].astype("boolean")
    return df.drop(columns=[c for c in ATTRIBUTES if c in df], errors="ignore").merge(attrs, on="model", how="left")


def output_subdir(source: str, scale: str) -> str:
    """Where a source's figures and tables go, under figures/ and results/tables/: the paper's at the top."""
    return "" if source == "paper" else (f"ours-{scale}" if source == "ours" else source)


def step_label(steps: int) -> str:
    """Steps as the paper prints them: 42000 -> "42K", 0 -> "0K" (a scale's own counts that are not thousands stay as
    they are). Run ids spell steps with a small k (`runs.steps_token`); both are `config.step_text`."""
    return step_text(int(steps), "K")


def size_key(size: str) -> tuple:
    """Sort key for sizes: the paper's by parameter count, a scale's own (``mini-s``, ``mini-m`` ...) by suffix."""
    m = re.fullmatch(r"(\d+)([MB])", str(size))
    if m:
        return (0, int(m[1]) * (1000 if m[2] == "B" else 1), "")
    suffixes = ("xxs", "xs", "s", "m", "l", "xl", "xxl")
    head, _, tail = str(size).rpartition("-")
    return (1, suffixes.index(tail) if tail in suffixes else len(suffixes), head + tail)


def ordered_sizes(sizes) -> list:
    return sorted(set(sizes), key=size_key)


def group_averages(df: pd.DataFrame) -> pd.DataFrame:
    """The task-group average rows (``dataset == "Avg"``) of scores or of a study view."""
    return df[df["dataset"] == AVG]


def dataset_order(datasets) -> list:
    """The paper's column order, then any other dataset (this repository's offline stand-ins) by name."""
    known = list(DATASETS.values())
    return sorted(set(datasets) - {AVG}, key=lambda d: (known.index(d) if d in known else len(known), d))


# ----------------------------------------------------------------------------------------------- the paper


def load_paper(paper_dir: str | Path) -> pd.DataFrame:
    """Tables 2-17 (results/paper/table02.csv ... table17.csv) as scores, with a ``table`` column."""
    files = sorted(Path(paper_dir).glob("table[0-9][0-9].csv"))
    frames = [pd.read_csv(f) for f in files if f.name != "table01.csv"]
    if not frames:
        raise ResultFileError(f"{paper_dir}: no table02.csv ... table17.csv")
    df = pd.concat(frames, ignore_index=True)
    df = _with_attributes(df[["table", "model", "task_group", "dataset", "score", "ci"]])
    df["source"], df["scale"], df["n"], df["flag"] = "paper", "paper", pd.NA, ""
    return df[["table", *SCORE_COLUMNS]]


def load_architecture(paper_dir: str | Path) -> pd.DataFrame:
    """Table 1 as printed (tidy: setting, size, value; ``size == "all"`` for settings shared by the three sizes)."""
    return pd.read_csv(Path(paper_dir) / "table01.csv", dtype={"value": str})


def architecture(paper_dir: str | Path) -> dict:
    """Table 1's numbers per size, for the FLOPs count: {size: {layers, d_model, ffn, heads, kv_heads, vocab, ...}}."""
    t1 = load_architecture(paper_dir)
    shared = dict(zip(t1[t1["size"] == "all"]["setting"], t1[t1["size"] == "all"]["value"]))
    names = {"Layers": "layers", "Embedding dim": "d_model", "FFN dim": "ffn", "Attention heads": "heads",
             "Key/Value heads": "kv_heads"}
    out = {}
    for size, part in t1[t1["size"] != "all"].groupby("size", sort=False):
        arch = {names[s]: int(v) for s, v in zip(part["setting"], part["value"])}
        arch.update(vocab=int(shared["Vocabulary"]), seq_len=int(shared["Maximum context"]),
                    tokens_per_step=int(shared["Tokens/Step"]))
        out[size] = arch
    return out


# ----------------------------------------------------------------------------------------------- per-run files

_RUN_DIR = re.compile(r"^(?:.+_)?lr(?P<lr>[0-9.]+(?:e[-+]?\d+)?)_sd(?P<seed>\d+)$")


def read_result(path: str | Path, instances: bool = False):
    """(validation, test) scores of one ``results.json``, in points (and, with ``instances``, the test split's
    per-instance scores ``scores_i`` as an array, None when absent); ResultFileError names the file and the fault."""
    doc = _read(path)
    return (doc["validation"], doc["test"], doc["test_i"]) if instances else (doc["validation"], doc["test"])


def _instances(doc: dict, split: str, key: str) -> np.ndarray | None:
    values = doc[split].get(key)
    return np.asarray(values, dtype=float) if isinstance(values, list) and values else None


def _read(path: str | Path, doc: dict | None = None) -> dict:
    """Of one ``results.json`` (``doc``: its content, when read already): ``validation`` and ``test`` scores (points),
    each split's per-instance scores and weights (``test_i``, ``test_w``, ``validation_i``, ``validation_w``: arrays,
    None when absent), the majority-class baseline's test score (``majority``: ``baselines.majority.test``, points;
    NaN when absent), the validation gain over the last epoch (``last_gain``, points: the final score minus the one
    after the epoch before, from ``validation.curve``; NaN without a curve) and whether the model was scored zero-shot
    (``zero_shot``: its ``meta.train_dataset`` is another dataset, as IR's sets trained on another set's pairs)."""
    path = Path(path)
    doc = load_result(path) if doc is None else doc
    scores = [100 * float(doc[split]["score"]) for split in ("validation", "test")]
    baselines = doc.get("baselines")
    majority = baselines.get("majority") if isinstance(baselines, dict) else None
    majority = majority.get("test") if isinstance(majority, dict) else None
    if majority is not None and (isinstance(majority, bool) or not isinstance(majority, (int, float))
                                 or not 0 <= majority <= 1):
        raise ResultFileError(f"{path}: baselines.majority.test is {majority!r}, expected a number in [0, 1]")
    curve = doc["validation"].get("curve")
    try:
        last_gain = 100 * (float(curve[-1][1]) - float(curve[-2][1])) if curve else math.nan
    except (TypeError, ValueError, IndexError, KeyError):
        raise ResultFileError(f"{path}: validation.curve must be a list of [step, score] pairs, "
                              f"got {curve!r:.80}") from None
    meta = doc.get("meta") if isinstance(doc.get("meta"), dict) else {}
    zero_shot = meta.get("train_dataset", meta.get("dataset")) != meta.get("dataset")
    out = {"validation": scores[0], "test": scores[1], "majority": math.nan if majority is None else 100 * majority,
           "last_gain": last_gain, "zero_shot": zero_shot,
           **{f"{split}_{k}": _instances(doc, split, key) for split in ("test", "validation")
              for k, key in (("i", "scores_i"), ("w", "weights_i"))}}
    for split, score in (("validation", scores[0]), ("test", scores[1])):
        per, weights = out[f"{split}_i"], out[f"{split}_w"]
        if weights is not None and (per is None or len(per) != len(weights) or weights.sum() <= 0
                                    or abs(100 * (per * weights).sum() / weights.sum() - score) > 1e-6):
            raise ResultFileError(f"{path}: {split}.weights_i do not reproduce its score from scores_i (a weighted "
                                  "mean): the file is damaged or its weights belong to other instances")
    return out


def load_run_tree(root: str | Path, source: str, scale: str, paper_datasets_only: bool = False,
                  relative_to: str | Path | None = None, grid: str = "default") -> pd.DataFrame:
    """Runs from ``<root>/<model>/<group>/<dataset>/[<train set>_]lr{LR}_sd{seed}/results.json``.

    The layout of this repository's ``results/runs/<scale>/`` and of EncodEval's ``results/``. Dataset folders named
    as in EncodEval get the paper's labels (``mnli_m`` -> ``MNLI``); ``paper_datasets_only`` drops the others (EncodEval
    also holds QED runs, which the paper does not use). Paths are kept relative to ``relative_to`` (default: root).
    ``grid`` names the fine-tuning grid the tree holds (``default``, or ``stability`` for a scale's stability grid).
    """
    root = Path(root)
    rows, aside = [], []
    writing = {d.name: who for d in root.glob("*") if d.is_dir() and (who := busy(d))}
    for model, who in writing.items():  # a consistent snapshot: no model whose grid is being written
        print(f"left out {model}: {who} is writing its results; re-run this when it is done")
    for path in sorted(root.glob("*/*/*/*/results.json")):
        run_dir, dataset, group, model = path.parts[-2], path.parts[-3], path.parts[-4], path.parts[-5]
        if (paper_datasets_only and dataset not in DATASETS) or model in writing:
            continue
        m = _RUN_DIR.match(run_dir)
        if m is None:
            raise ResultFileError(f"{path}: run folder {run_dir!r} is not named lr{{LR}}_sd{{SEED}}")
        if group not in GROUPS:
            raise ResultFileError(f"{path}: task group {group!r} is not one of {', '.join(GROUPS)}")
        doc = load_result(path)
        if fault := misplaced(path, doc):  # a result counts only in the folder its meta names
            aside.append(fault)
            continue
        rows.append({"model": model, "task_group": group, "dataset": DATASETS.get(dataset, dataset),
                     "lr": float(m["lr"]), "seed": int(m["seed"]), **_read(path, doc),
                     "path": path.relative_to(relative_to or root).as_posix()})
    if aside:
        print(f"{len(aside)} results.json not counted, not in the folder their meta names: "
              f"{aside[0]}{' (and more)' if len(aside) > 1 else ''}")
    return _runs_frame(rows, source, scale, grid)


def load_run_csv(path: str | Path, source: str, scale: str = "paper") -> pd.DataFrame:
    """Runs from a CSV with columns model, group, dataset, lr, seed, validation_score, test_score (fractions).

    The format of the authors' sample (results/samples/encodeval-610m-sst2.csv); a score that was not read is kept
    as missing.
    """
    df = pd.read_csv(path)
    missing = {"model", "group", "dataset", "lr", "seed", "validation_score", "test_score"} - set(df.columns)
    if missing:
        raise ResultFileError(f"{path}: missing column(s) {', '.join(sorted(missing))}")
    rows = [{"model": r.model, "task_group": r.group, "dataset": DATASETS.get(r.dataset, r.dataset),
             "lr": float(r.lr), "seed": int(r.seed),
             "validation": 100 * pd.to_numeric(r.validation_score, errors="coerce"),
             "test": 100 * pd.to_numeric(r.test_score, errors="coerce"), "path": Path(path).name}
            for r in df.itertuples()]
    return _runs_frame(rows, source, scale)


def _runs_frame(rows: list[dict], source: str, scale: str, grid: str = "default") -> pd.DataFrame:
    if grid not in GRIDS:
        raise ConfigError(f"unknown grid {grid!r}: use {' or '.join(GRIDS)}")
    df = pd.DataFrame(rows, columns=["model", "task_group", "dataset", "lr", "seed", "validation", "test", "majority",
                                     "last_gain", "zero_shot", "test_i", "test_w", "validation_i", "validation_w",
                                     "path"])
    df = _with_attributes(df)
    df["source"], df["scale"], df["grid"] = source, scale, grid
    df["seed"] = df["seed"].astype("int64")
    cols = ["lr", "validation", "test", "majority", "last_gain"]
    df[cols] = df[cols].astype("float64")
    df["zero_shot"] = df["zero_shot"].fillna(False).astype(bool)
    return df[RUN_COLUMNS].sort_values(["model", "task_group", "dataset", "lr", "seed"], ignore_index=True)


# ----------------------------------------------------------------------------------------------- aggregation

_KEYS = ["source", "scale", "model", "task_group", "dataset"]


def t95(dof: int) -> float:
    """Student's t 97.5% quantile with ``dof`` degrees of freedom: a table up to 30, then the Cornish-Fisher series
    (within 2e-4 of the exact value beyond 30, and 1.96 in the limit)."""
    if dof < 1:
        return math.nan
    if dof <= len(T95):
        return T95[dof - 1]
    z = Z95
    return z + (z ** 3 + z) / (4 * dof) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * dof ** 2)


def mean_ci(values, student: bool = True) -> tuple[float, float, int]:
    """(mean, 95% half-width, n) of the non-missing values: t95(n - 1) x s / sqrt(n), s with ddof 1 (``student=False``:
    the paper's 1.96 x s / sqrt(n)); the half-width missing when n < 2."""
    x = np.asarray(pd.to_numeric(pd.Series(values), errors="coerce").dropna(), dtype=float)
    n = len(x)
    if n == 0:
        return math.nan, math.nan, 0
    if n == 1:
        return float(x.mean()), math.nan, 1
    return float(x.mean()), (t95(n - 1) if student else Z95) * float(x.std(ddof=1)) / math.sqrt(n), n


def select_lr(runs: pd.DataFrame, rule: str = "per_seed") -> pd.DataFrame:
    """One run per source x model x dataset x seed: the run at the chosen learning rate.

    ``per_seed`` (the paper's rule): for each seed, the learning rate with the best validation score of that seed.
    ``seed_average``: one learning rate per model and dataset, the best on the seed-averaged validation score.
    Ties go to the smaller learning rate. Grids (``grid``) are kept apart: a run is chosen within its own grid.
    """
    keys = [*_KEYS, "grid"] if "grid" in runs else _KEYS
    runs = runs.dropna(subset=["validation"]).sort_values([*keys, "lr", "seed"], ignore_index=True)
    if rule == "per_seed":
        return runs.loc[runs.groupby([*keys, "seed"], sort=False)["validation"].idxmax()].reset_index(drop=True)
    if rule == "seed_average":
        mean_val = runs.groupby([*keys, "lr"], sort=False, as_index=False)["validation"].mean()
        best = mean_val.loc[mean_val.groupby(keys, sort=False)["validation"].idxmax(), [*keys, "lr"]]
        return runs.merge(best, on=[*keys, "lr"])
    raise ConfigError(f"unknown learning-rate rule {rule!r}: use 'per_seed' or 'seed_average'")


def summarize(selected: pd.DataFrame) -> pd.DataFrame:
    """Scores from selected runs (of one grid): mean test score over seeds +- the 95% half-width, group averages and
    the ``flag`` of cells with fewer seeds than their neighbours.

    The half-width is Student's (``mean_ci``), the paper's 1.96 x s / sqrt(n) for runs at the paper's scale. A group
    average (``dataset == "Avg"``) is the mean of the group's dataset scores (as the paper's printed averages are);
    its half-width comes from the per-seed group means, over the seeds that have every dataset. A model missing one of
    the group's datasets gets no average: the paper's three when the source uses the paper's datasets, else every
    dataset its source has in that group. ``flag`` is "" or, for a cell with fewer seeds than the most any cell of its
    source, scale, group and dataset has, "n=2 of 4 seeds": the claims leave such cells out (never averaged over
    fewer seeds silently).
    """
    if selected.empty:
        return pd.DataFrame(columns=SCORE_COLUMNS)
    attrs = selected.drop_duplicates("model").set_index("model")[ATTRIBUTES]
    rows = []
    for key, part in selected.groupby(_KEYS, sort=False):
        score, ci, n = mean_ci(part["test"], student=key[1] != "paper")
        rows.append({**dict(zip(_KEYS, key)), "score": score, "ci": ci, "n": n})
    scores = pd.DataFrame(rows)
    group_sets = scores.groupby(["source", "task_group"])["dataset"].agg(frozenset)
    for (source, scale, model, group), part in scores.groupby(_KEYS[:4], sort=False):
        if frozenset(part["dataset"]) != required_datasets(group_sets[(source, group)], group):
            continue
        runs = selected[(selected["model"] == model) & (selected["task_group"] == group)
                        & (selected["source"] == source)]
        per_seed = runs.pivot_table(index="seed", columns="dataset", values="test").dropna()
        _, ci, n = mean_ci(per_seed.mean(axis=1), student=scale != "paper")
        rows.append({"source": source, "scale": scale, "model": model, "task_group": group, "dataset": AVG,
                     "score": float(part["score"].mean()), "ci": ci, "n": n})
    out = pd.DataFrame(rows).merge(attrs, left_on="model", right_index=True, how="left")
    out["n"] = out["n"].astype("Int64")
    most = out.groupby(["source", "scale", "task_group", "dataset"])["n"].transform("max")
    out["flag"] = [f"n={n} of {m} seeds" if n < m else "" for n, m in zip(out["n"], most)]
    return out[SCORE_COLUMNS]


def required_datasets(datasets, group: str) -> frozenset:
    """The datasets a group average needs, given those a source has in the group: the paper's three when they are
    among the paper's, else all of them."""
    datasets = frozenset(datasets)
    return PAPER_DATASETS[group] if datasets <= PAPER_DATASETS.get(group, frozenset()) else datasets


def aggregate(runs: pd.DataFrame, rule: str = "per_seed") -> pd.DataFrame:
    """Runs -> scores with the paper's aggregation (``rule="seed_average"`` for the alternative), from the default
    grid's runs only."""
    return summarize(select_lr(default_grid(runs), rule))


def pool_pretraining_seeds(scores: pd.DataFrame) -> pd.DataFrame:
    """Scores with the models that differ only in their pretraining seed pooled into one row under the seed-0 id:
    ``score`` the mean over the pretraining seeds (each seed's mean over fine-tuning seeds), ``ci`` the 95%
    half-width of that mean, t95(k - 1) x sd / sqrt(k) over the k seeds (a seed's own mean carries its fine-tuning
    noise, so this counts both; one seed keeps its own half-width), ``pretrain_seeds`` = k; ``n`` stays seed 0's
    number of fine-tuning seeds. Rows are pooled per source, scale,
    dataset and family (`family`), only where every seed has the cell."""
    if scores.empty:
        return scores.assign(pretrain_seeds=pd.Series(dtype="int64"))
    df = scores.assign(_family=scores["model"].map(family))
    keys = ["source", "scale", "_family", "task_group", "dataset"]
    g = df.groupby(keys, sort=False, dropna=False)["score"]
    k = g.transform("size")
    sd = g.transform("std")
    t = pd.Series([t95(int(n) - 1) if n > 1 else math.nan for n in k], index=df.index)
    pooled = df.assign(score=g.transform("mean"), ci=np.where(k > 1, t * sd / np.sqrt(k), df["ci"]),
                       pretrain_seeds=k.astype("int64"))
    seed0 = pooled["model"] == pooled["_family"]
    return pooled[seed0].drop(columns="_family").reset_index(drop=True)


def default_grid(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs of the default fine-tuning grid (every comparison but the stability study's)."""
    return runs[runs["grid"] == "default"] if "grid" in runs else runs


def stability_grid(runs: pd.DataFrame) -> pd.DataFrame:
    """The runs the stability study compares: each source and scale's stability grid where it has one, else its
    default grid (the ``mini`` scale's stability study reads its default grid)."""
    if "grid" not in runs:
        return runs
    stability = runs["grid"] == "stability"
    if not stability.any():
        return runs[runs["grid"] == "default"]
    has = pd.MultiIndex.from_arrays([runs["source"], runs["scale"]]).isin(
        set(zip(runs.loc[stability, "source"], runs.loc[stability, "scale"])))
    return runs[np.where(has, stability, runs["grid"] == "default")]


def dedupe(scores: pd.DataFrame) -> pd.DataFrame:
    """One row per source x model x dataset: the paper prints some models in several tables (same numbers)."""
    return scores.drop_duplicates(["source", "scale", "model", "task_group", "dataset"]).reset_index(drop=True)


# ----------------------------------------------------------------------------------------------- loading all


@dataclass
class Results:
    """What the notebooks read: scores (table level, all sources) and runs (run level, sources with runs)."""

    scores: pd.DataFrame
    runs: pd.DataFrame

    def summary(self) -> pd.DataFrame:
        """What was loaded: per source and scale, the number of models, datasets and fine-tuning runs."""
        s = self.scores[self.scores["dataset"] != AVG].groupby(["source", "scale"], sort=False).agg(
            models=("model", "nunique"), datasets=("dataset", "nunique"))
        r = self.runs.groupby(["source", "scale"], sort=False).size().rename("runs")
        return s.join(r, how="left").fillna({"runs": 0}).astype("int64").reset_index()


def load(results_dir: str | Path = "results", sources=("paper", "ours", "encodeval"), scale: str = "mini",
         encodeval_dir: str | Path | None = None, sample_csv: str | Path | None = None,
         rule: str = "per_seed") -> Results:
    """The paper's tables, this repository's runs (``results/runs/<scale>/``) and an EncodEval folder, as Results.

    Sources: ``paper`` (results/paper), ``ours`` (results/runs/<scale>, if present, and the scale's stability grid
    results/runs/stability/<scale>, if present, as ``grid == "stability"``), ``reference`` (models pretrained
    elsewhere, fine-tuned under the scale's protocol on a grid of their own: results/runs/reference/<scale>, if
    present; they carry no claim and enter no control), ``encodeval`` (``encodeval_dir``, if given) and
    ``encodeval-sample`` (``sample_csv``: the authors' per-run sample, if given). Scores are aggregated from the
    default grids.
    """
    results_dir = Path(results_dir)
    unknown = set(sources) - set(SOURCES)
    if unknown:
        raise ConfigError(f"unknown source(s) {', '.join(sorted(unknown))}: use {', '.join(SOURCES)}")
    runs = []
    trees = [("ours", "default", grid_root(results_dir / "runs", "default") / scale),
             ("ours", "stability", grid_root(results_dir / "runs", "stability") / scale),
             (REFERENCE, "default", grid_root(results_dir / "runs", REFERENCE) / scale)]
    for source, grid, tree in trees:
        if source in sources and tree.is_dir():
            runs.append(load_run_tree(tree, source, scale, relative_to=results_dir.parent, grid=grid))
    if "encodeval" in sources and encodeval_dir is not None:
        runs.append(load_run_tree(encodeval_dir, "encodeval", "paper", paper_datasets_only=True))
    if "encodeval-sample" in sources and sample_csv is not None:
        runs.append(load_run_csv(sample_csv, "encodeval-sample"))
    runs = pd.concat(runs, ignore_index=True) if runs else pd.DataFrame(columns=RUN_COLUMNS)
    scores = [dedupe(load_paper(results_dir / "paper")).drop(columns="table")] if "paper" in sources else []
    if not runs.empty:
        scores.append(aggregate(runs, rule))
    scores = pd.concat(scores, ignore_index=True) if scores else pd.DataFrame(columns=SCORE_COLUMNS)
    return Results(scores=scores, runs=runs)


# ----------------------------------------------------------------------------------------------- study views


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


def mixed_view(scores: pd.DataFrame) -> pd.DataFrame:
    """Beyond the paper (issue 27): mixed and alternating models from scratch beside the sequential schedules of the
    same size and budget (MLM-only, CLM-only and the 25/75 CLM-then-MLM split: `biphasic_view`'s shares 0, 100 and
    25). Adds ``budget``, ``schedule`` (a mixed model's objective as its id spells it, ``mix1clm15mlm40``; else the
    `SEQUENTIAL` name) and ``mixed`` (True for the mixed and alternating models)."""
    studied = _studied(scores)
    mixed = studied[~studied["intermediate"] & studied["objective"].isin(["mixed", "alternating"])]
    mixed = mixed.assign(budget=mixed["steps"], mixed=True,
                         schedule=[ModelId.parse(m).objective for m in mixed["model"]])
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


def centered_scores(runs: pd.DataFrame, lr_range=STABILITY_LRS, split: str = "test") -> pd.DataFrame:
    """Fig. 5: each run's score minus its model's mean over seeds and learning rates in ``lr_range``.

    Only CLM and MLM-40% base models at the full budget. ``lr_range`` applies to the paper's grid (sources at the
    ``paper`` scale); a scale of this repository spreads over its own stability grid (``stability_grid``: its default
    grid where it has none). Learning rates are those every model of the same source, size and dataset has (so that a
    model is not judged on learning rates another lacks), and only where there are at least two of them.
    """
    models = _final(stability_grid(runs))
    in_range = models["lr"].between(lr_range[0] * 0.999, lr_range[1] * 1.001) | (models["scale"] != "paper")
    df = models[is_clm_or_mlm40(models) & in_range]
    df = df.dropna(subset=[split])
    keys = ["source", "scale", "size", "task_group", "dataset"]
    if df.empty:
        return df.assign(centered=pd.Series(dtype=float))
    shared = df.groupby([*keys, "lr"])["model"].transform("nunique") == df.groupby(keys)["model"].transform("nunique")
    df = df[shared]
    df = df[df.groupby(keys)["lr"].transform("nunique") > 1]  # a spread over learning rates needs two of them
    mean = df.groupby([*keys, "model"])[split].transform("mean")
    return df.assign(centered=df[split] - mean).reset_index(drop=True)


def masking_ratio_spread(runs: pd.DataFrame, rule: str = "per_seed", split: str = "test") -> pd.DataFrame:
    """Fig. 7: scores (at the selected learning rates) of MLM-only and CLM+MLM runs across masking ratios, centered.

    MLM-only: full-budget MLM runs at every ratio. CLM+MLM: for each ratio, the two-phase run with the longest CLM
    phase (the paper's 40K CLM + 2K MLM). ``centered`` is the score minus the family's mean over ratios and seeds.
    """
    sel = _studied(select_lr(default_grid(runs), rule))
    sel = sel[~sel["intermediate"] & (sel["cpt_steps"] == 0) & sel["mask_ratio"].notna()]
    mlm = _final(sel)
    mlm = mlm[mlm["objective"] == "mlm"].assign(family="MLM")
    two = sel[sel["objective"] == "clm+mlm"]
    two = two[two["clm_steps"] == two.groupby(["source", "scale", "size", "mask_ratio"])["clm_steps"].transform("max")]
    at = ["source", "scale", "size", "steps"]
    two = two.merge(mlm[at].drop_duplicates(), on=at)
    df = pd.concat([mlm, two.assign(family="CLM+MLM")], ignore_index=True)
    keys = ["source", "scale", "size", "family", "task_group", "dataset"]
    if df.empty:
        return df.assign(centered=pd.Series(dtype=float))
    df = df[df.groupby(keys)["mask_ratio"].transform("nunique") > 1]
    return df.assign(centered=df[split] - df.groupby(keys)[split].transform("mean")).reset_index(drop=True)


# ----------------------------------------------------------------------------------------------- FLOPs


def flops_per_step(arch: dict, mlm_fraction: float) -> float:
    """Training FLOPs of one step: Hoffmann et al. (2022, App. F) counting, adapted to GQA and SwiGLU.

    Forward per sequence of ``seq_len``: embeddings, per layer Q/K/V projections (K and V on ``kv_heads``), attention
    logits, softmax, reduction and output projection, a SwiGLU block (three matrices), and the output logits, which an
    MLM step computes only at its masked positions (``mlm_fraction`` of the tokens); backward = 2 x forward.
    The rule is ``mlmclm.flops.flops_per_step`` (with App. F's embeddings and softmax, without norm weights).
    """

    return flops.flops_per_step(tokens_per_step=arch["tokens_per_step"], layers=arch["layers"],
                                d_model=arch["d_model"], ffn=arch["ffn"], heads=arch["heads"],
                                kv_heads=arch["kv_heads"], vocab=arch["vocab"], seq_len=arch["seq_len"],
                                output_fraction=mlm_fraction, embeddings=True, softmax=True, norm_weights=False)


def with_flops(view: pd.DataFrame, arch: dict) -> pd.DataFrame:
    """Add ``flops`` (total training FLOPs of each checkpoint) for sizes whose architecture is known."""
    df = view[view["size"].isin(list(arch))].copy()

    def total(r) -> float:
        ratio = float(r.mask_ratio) / 100 if pd.notna(r.mask_ratio) else 1.0
        a = arch[r.size]
        return r.clm_steps * flops_per_step(a, 1.0) + r.mlm_steps * flops_per_step(a, ratio)

    df["flops"] = [total(r) for r in df.itertuples()]
    return df


# ----------------------------------------------------------------------------------------------- pretraining logs


def load_pretrain_logs(runs_dir: str | Path) -> pd.DataFrame:
    """Loss curves: ``<runs_dir>/<run_id>/pretrain.csv`` (columns ``step`` and ``loss`` at least), one frame.

    With where each run started, from its ``config.yaml`` (``init``): ``parent`` (the run whose checkpoint it starts
    from; missing for a run from scratch or without a config), ``parent_step`` (that checkpoint's step) and
    ``resumed`` (it took over the parent's optimizer and step count, so its log's steps continue the parent's).
    """
    import yaml

    frames = []
    for path in sorted(Path(runs_dir).glob("*/pretrain.csv")):
        log = _read_log(path)
        config = path.parent / "config.yaml"
        init = (yaml.safe_load(config.read_text()) or {}).get("init") or {} if config.is_file() else {}
        start = {"parent": None, "parent_step": None, "resumed": False}
        if init.get("kind") == "run":
            start = {"parent": Path(init["path"]).name, "parent_step": init.get("step"),
                     "resumed": bool(init.get("optimizer"))}
        frames.append(log[["step", "loss"]].assign(model=path.parent.name, **start))
    if not frames:
        return pd.DataFrame(columns=["model", "step", "loss", "parent", "parent_step", "resumed", *ATTRIBUTES])
    return _with_attributes(pd.concat(frames, ignore_index=True))


def _read_log(path: Path) -> pd.DataFrame:
    """One pretrain.csv; a line that does not parse, or whose step or loss is not a number, is a ResultFileError
    naming the file and the line."""
    try:
        log = pd.read_csv(path, skip_blank_lines=False)
    except pd.errors.EmptyDataError:
        raise ResultFileError(f"{path}: empty, not a pretraining log") from None
    except pd.errors.ParserError as e:
        m = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", str(e))
        where = f"line {m[2]} has {m[3]} fields, the header {m[1]}" if m else str(e).strip().splitlines()[-1]
        raise ResultFileError(f"{path}: {where}") from None
    missing = {"step", "loss"} - set(log.columns)
    if missing:
        raise ResultFileError(f"{path}: missing column(s) {', '.join(sorted(missing))}")
    for column in ("step", "loss"):
        numbers = pd.to_numeric(log[column], errors="coerce")
        bad = numbers.isna() & (log[column].notna() | (column == "step"))
        if bad.any():
            row = int(bad.to_numpy().argmax())
            value = log[column].iloc[row]
            what = f"{column} {value!r} is not a number" if pd.notna(value) else f"no {column}"
            raise ResultFileError(f"{path}: line {row + 2}: {what}")
        log[column] = numbers
    return log


def cpt_loss_curves(logs: pd.DataFrame) -> pd.DataFrame:
    """Fig. 12: for each CPT run, its loss on its lineage's step axis, with ``base`` and the CPT length.

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
                                 base="CLM" if a["clm_steps"] > 0 else "MLM"))
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(
        columns=["step", "loss", "model", "size", "cpt_steps", "base"])
