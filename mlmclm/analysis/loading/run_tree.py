"""The run-tree reader: what a run folder holds, as tables. Fine-tuning results from
``<root>/<model>/<group>/<dataset>/[<train set>_]lr{LR}_sd{seed}/results.json`` (the layout of this repository's
``results/runs/<scale>/`` and of EncodEval's ``results/``) as one row per run (`load_run_tree`), pretraining logs
(``pretrain.csv``, with where each run started from its ``config.yaml``: `load_pretrain_logs`), and the parameter
counts and tokens a step of each size's runs (``meta.json``, ``config.yaml``: `run_parameters`). A file that does not
read as it should is a `ResultFileError` naming it. No torch import here.
"""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import numpy as np
import pandas as pd

from ...config import GRID_FIELDS, DatasetProtocol, finetune_protocol
from ...errors import ConfigError, ResultFileError
from ...io import load_result
from ...paths import misplaced
from ...locks import busy
from ...runs import ModelId, id_of
from .ids import ATTRIBUTES, DATASETS, GRIDS, GROUPS, RUN_COLUMNS, size_label, with_attributes
from .lineage import Records, evaluated, recorded, with_family

_RUN_DIR = re.compile(r"^(?:.+_)?lr(?P<lr>[0-9.]+(?:e[-+]?\d+)?)_sd(?P<seed>\d+)$")


def _instances(doc: dict, split: str, key: str) -> np.ndarray | None:
    values = doc[split].get(key)
    return np.asarray(values, dtype=float) if isinstance(values, list) and values else None


def _read(path: str | Path, doc: dict | None = None) -> dict:
    """Of one ``results.json`` (``doc``: its content, when read already): ``validation`` and ``test`` scores (points),
    each split's per-instance scores and weights (``test_i``, ``test_w``, ``validation_i``, ``validation_w``: arrays,
    None when absent), the majority-class baseline's test score (``majority``: ``baselines.majority.test``, points;
    NaN when absent), the validation gain over the last epoch (``last_gain``, points: the final score minus the one
    after the epoch before, from ``validation.curve``; NaN without a curve) and whether the model was scored zero-shot
    (``zero_shot``: its ``meta.train_dataset`` is another dataset, as IR's sets trained on another set's pairs) and
    the protocol it was trained with (``protocol``: `protocol_text` of ``meta.config``)."""
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
           "last_gain": last_gain, "zero_shot": zero_shot, "protocol": protocol_text(meta.get("config")),
           **{f"{split}_{k}": _instances(doc, split, key) for split in ("test", "validation")
              for k, key in (("i", "scores_i"), ("w", "weights_i"))}}
    for split, score in (("validation", scores[0]), ("test", scores[1])):
        per, weights = out[f"{split}_i"], out[f"{split}_w"]
        if weights is not None and (per is None or len(per) != len(weights) or weights.sum() <= 0
                                    or abs(100 * (per * weights).sum() / weights.sum() - score) > 1e-6):
            raise ResultFileError(f"{path}: {split}.weights_i do not reproduce its score from scores_i (a weighted "
                                  "mean): the file is damaged or its weights belong to other instances")
    return out


# what a fine-tuning run's protocol sets beside its grid: `config.DatasetProtocol`'s fields that change a run's result
# (not `config.GRID_FIELDS`: its rates, seeds and screen, which `evidence._grid_runs` reads from the runs themselves)
PROTOCOL = tuple(f.name for f in dataclasses.fields(DatasetProtocol) if f.name not in GRID_FIELDS)
_DEFAULTS = finetune_protocol({})


def protocol_text(config) -> str:
    """The `PROTOCOL` settings of a results.json's ``meta.config`` that differ from `FinetuneConfig`'s defaults
    ("epochs 6, max_train 16384"), read as the runner reads them (`config.finetune_protocol`: a field a config lacks,
    one it predates, counts at its default); "" without a config (EncodEval's runs): runs compared with each other must
    share it (`evidence.calibration_report`)."""
    if not isinstance(config, dict):
        return ""
    settings = finetune_protocol(config)
    return ", ".join(f"{k} {settings[k]}" for k in PROTOCOL if settings[k] != _DEFAULTS[k])


def load_run_tree(root: str | Path, source: str, scale: str, paper_datasets_only: bool = False,
                  relative_to: str | Path | None = None, grid: str = "default",
                  records: str | Path | None = None) -> pd.DataFrame:
    """Runs from ``<root>/<model>/<group>/<dataset>/[<train set>_]lr{LR}_sd{seed}/results.json``.

    The layout of this repository's ``results/runs/<scale>/`` and of EncodEval's ``results/``. Dataset folders named
    as in EncodEval get the paper's labels (``mnli_m`` -> ``MNLI``); ``paper_datasets_only`` drops the others (EncodEval
    also holds QED runs, which the paper does not use). Paths are kept relative to ``relative_to`` (default: root).
    ``grid`` names the fine-tuning grid the tree holds (``default``, or ``stability`` for a scale's stability grid).
    A model's attributes (objective, steps, ...) come from the records of the run it is a checkpoint of (its
    config.yaml and its parents', under ``records``, default root: `lineage`); a model without them keeps its id's.
    A model folder whose results evaluate more than one checkpoint, or a damaged record, is a `ResultFileError`.
    """
    root = Path(root)
    records = Records(root if records is None else records)
    rows, aside, checkpoints = [], [], {}
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
        _one_checkpoint(checkpoints, model, evaluated(path, doc.get("meta") or {}), path)
        rows.append({"model": model, "task_group": group, "dataset": DATASETS.get(dataset, dataset),
                     "lr": float(m["lr"]), "seed": int(m["seed"]), **_read(path, doc),
                     "path": path.relative_to(relative_to or root).as_posix()})
    if aside:
        print(f"{len(aside)} results.json not counted, not in the folder their meta names: "
              f"{aside[0]}{' (and more)' if len(aside) > 1 else ''}")
    check_configs(records, {r["model"] for r in rows})
    return runs_frame(rows, source, scale, grid, recorded(records, checkpoints))


def _one_checkpoint(checkpoints: dict, model: str, found: tuple[str, int] | None, path: Path) -> None:
    """Record in ``checkpoints`` (model -> (`lineage.evaluated`, the first results.json that says so)) the checkpoint
    the results.json at ``path`` evaluates; one other than the model's other results name is a `ResultFileError`
    naming both files: a model folder holds one checkpoint's results, else they would be read under one label."""
    first = checkpoints.setdefault(model, (found, path))
    if first[0] != found:
        said = ["no run's checkpoint" if f is None else f"run {f[0]} at step {f[1]}" for f in (found, first[0])]
        raise ResultFileError(f"{path}: evaluates {said[0]}, but {first[1]} of the same model {model} evaluates "
                              f"{said[1]}: a model folder holds one checkpoint's results; move these to their "
                              "model's folder")


def check_configs(records: Records, models) -> None:
    """A folder named as a model id must hold that model: where its run's record is in ``records`` (its config.yaml),
    that config must train the model its id names (`runs.id_of`), else a `ResultFileError`: the folder's name would
    say one model and its results another. Folders under free names, and models without a record here (or one that
    names no phases), are not checked."""
    for model in sorted(models):
        try:
            run = ModelId.parse(model).run
        except ResultFileError:
            continue
        if (cfg := records.config(str(run))) is not None and (trains := id_of(cfg)) not in (None, run):
            raise ResultFileError(f"{records.folder / str(run) / 'config.yaml'} trains {trains}, not the {run} its "
                                  f"folder names: its results would be read as another model's; rename the folder "
                                  f"to {trains}")


def runs_frame(rows: list[dict], source: str, scale: str, grid: str = "default",
               recorded_attributes: dict | None = None) -> pd.DataFrame:
    if grid not in GRIDS:
        raise ConfigError(f"unknown grid {grid!r}: use {' or '.join(GRIDS)}")
    df = pd.DataFrame(rows, columns=["model", "task_group", "dataset", "lr", "seed", "validation", "test", "majority",
                                     "last_gain", "zero_shot", "protocol", "test_i", "test_w", "validation_i",
                                     "validation_w", "path"])
    df = with_attributes(df, recorded_attributes)
    df["source"], df["scale"], df["grid"] = source, scale, grid
    df["seed"] = df["seed"].astype("int64")
    cols = ["lr", "validation", "test", "majority", "last_gain"]
    df[cols] = df[cols].astype("float64")
    df["zero_shot"] = df["zero_shot"].fillna(False).astype(bool)
    df["protocol"] = df["protocol"].fillna("").astype(str)
    return df[RUN_COLUMNS].sort_values(["model", "task_group", "dataset", "lr", "seed"], ignore_index=True)


def load_pretrain_logs(runs_dir: str | Path) -> pd.DataFrame:
    """Loss curves: ``<runs_dir>/<run_id>/pretrain.csv`` (columns ``step`` and ``loss`` at least), one frame.

    With where each run started, from its ``config.yaml`` (``init``): ``parent`` (the run whose checkpoint it starts
    from; missing for a run from scratch or without a config), ``parent_step`` (that checkpoint's step) and
    ``resumed`` (it took over the parent's optimizer and step count, so its log's steps continue the parent's).
    """
    frames, records = [], Records(runs_dir)
    for path in sorted(Path(runs_dir).glob("*/pretrain.csv")):
        log = _read_log(path)
        record = records.record(path.parent.name)  # its init, also in a record written before phases
        init = record.config.get("init") if record is not None else None
        start = {"parent": None, "parent_step": None, "resumed": False}
        if isinstance(init, dict) and init.get("kind") == "run":
            start = {"parent": Path(init["path"]).name, "parent_step": init.get("step"),
                     "resumed": bool(init.get("optimizer"))}
        frames.append(log[["step", "loss"]].assign(model=path.parent.name, **start))
    if not frames:
        return pd.DataFrame(columns=["model", "step", "loss", "parent", "parent_step", "resumed", *ATTRIBUTES])
    lines = {m: line for m in {f["model"].iat[0] for f in frames} if (line := records.lineage(m)) is not None}
    return with_attributes(pd.concat(frames, ignore_index=True),
                           {m: with_family(records, m, line) for m, line in lines.items()})


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


def run_parameters(runs_dir: str | Path) -> dict:
    """Per model size of a scale's runs (``results/runs/<scale>/``), what Fig. 10 counts our FLOPs from (the "6N"
    rule of ``FLOPS_RULES``) and `tokens_per_parameter` our tokens per parameter: the parameter counts of a run's
    meta.json (``embeddings``, ``body``, and ``output_layer`` where it has one: 0 when tied) and the tokens a step
    of its config.yaml (``batch_size`` x ``data.seq_len``). Sizes without both files are left out."""
    out, records = {}, Records(runs_dir)
    for meta in sorted(Path(runs_dir).glob("*/meta.json")):
        record = records.record(meta.parent.name)
        cfg = record.config if record is not None else {}
        size = size_label(str((cfg.get("model") or {}).get("size", "")))
        if not size or size in out:
            continue
        counts = record.meta.get("parameters") or {}
        if {"embeddings", "body"} <= set(counts):
            out[size] = {**{k: counts[k] for k in ("embeddings", "body", "output_layer") if k in counts},
                         "tokens_per_step": cfg["batch_size"] * cfg["data"]["seq_len"]}
    return out
