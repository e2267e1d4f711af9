"""Downstream tasks: the paper's 12 datasets (suite `paper`, loaded with `datasets` by their hub names) and real,
human-labelled stand-ins that the package registries ship (suite `offline`, built once by `mlmclm tasks build`;
the builders and the `tasks` verbs are in `mlmclm.evaluation.offline_suite`).

Every dataset is loaded as {"train": [...], "validation": [...], "test": [...]} in one schema per task group:

    SC  {"text": str, "label": int}                      a pair is rendered into one text, as EncodEval's templates
    TC  {"tokens": [str], "tags": [int]}                 one tag per word, an index into `task.labels`
    QA  {"id": str, "question": str, "context": str, "answers": [{"text": str, "start": int}]}   [] = unanswerable
    IR  {"id": str, "query": str, "docs": [{"id": str, "text": str, "relevance": int}]}          every judged doc

IR datasets that are evaluated zero-shot (the paper trains on MS MARCO only) have no train split; their `train_on`
names the dataset whose train split trains the model. An IR corpus is the union of the judged documents of the
split's queries ("we restrict the corpus to labeled documents only"); the paper suite lists the documents judged in
validation and test together under each split (one corpus per dataset, `paper_suite.share_corpus`).

The tasks themselves (`Task`, the `PAPER` and `OFFLINE` registries, `SUITES`) are in `mlmclm.evaluation.catalog`
(importable from here); the paper suite's sources (pinned hub revisions, their parquet layout, the authors' splits)
are in `mlmclm.evaluation.paper_suite`.
"""

from __future__ import annotations

import difflib
import json
import os
import random
from pathlib import Path
from typing import Iterable

from ..config import FINETUNE_GROUPS as GROUPS  # the task groups, defined once in config
from ..errors import TaskError
from .catalog import OFFLINE, PAPER, SPLITS, SUITES, UPOS12, Task, holdout  # noqa: F401  (imported from here)
from .paper_suite import load_paper, share_corpus



def tasks_dir(root: Path) -> Path:
    """Where the offline suite is built: `$MLMCLM_TASKS`, else data/tasks in the working root `root`."""
    return Path(os.environ.get("MLMCLM_TASKS") or root / "data" / "tasks")


# ----------------------------------------------------------------------------------------------- selecting

def select_tasks(suite: str, groups: Iterable[str], datasets: Iterable[str] = ()) -> list[Task]:
    """The tasks of `suite` in `groups` (all of them, or only `datasets`); unknown names fail in one line."""
    if suite not in SUITES:
        raise TaskError(f"unknown suite {suite!r}; choose paper or offline")
    known = SUITES[suite]
    groups = list(groups)
    for g in groups:
        if g not in GROUPS:
            raise TaskError(f"unknown task group {g!r}; choose from {', '.join(GROUPS)}")
    datasets = list(datasets)
    for name in datasets:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"did you mean {close[0]}?" if close else f"choose from {', '.join(known)}"
            raise TaskError(f"unknown dataset {name!r} in the {suite} suite; {hint}")
        if known[name].group not in groups:
            raise TaskError(f"dataset {name!r} is in group {known[name].group}, which --groups leaves out")
    return [t for t in known.values() if t.group in groups and (not datasets or t.name in datasets)]


def group_datasets(suite: str, datasets: Iterable[str], groups: Iterable[str]) -> list[str]:
    """The datasets of a grid's list (`datasets`: a scale's) in `groups`, for `--groups` on its own: a `TaskError`
    for an unknown group or one the list has no dataset of."""
    known, groups = SUITES[suite], list(groups)
    bad = [g for g in groups if g not in GROUPS]
    if bad or not groups:
        raise TaskError(f"--groups {','.join(groups)!r}: choose from {', '.join(GROUPS)}")
    kept = [d for d in datasets if known[d].group in groups]
    if not kept:
        have = sorted({known[d].group for d in datasets})
        raise TaskError(f"--groups {','.join(groups)}: this grid fine-tunes no dataset of it (its datasets are in "
                        f"{', '.join(have)}); add --datasets")
    return kept


# ----------------------------------------------------------------------------------------------- loading

def load_task(task: Task, data_dir: str | Path | None = None, max_train: int | None = None,
              max_eval: int | None = None, seed: int = 0) -> dict[str, list[dict]]:
    """The splits of `task`, capped to a fixed random subset of `max_train` / `max_eval` examples.

    offline: the built suite under `data_dir` (`tasks_dir` of the working root, as the caller resolves it). paper:
    the hub through `datasets` at the pinned revisions of `paper_suite.SOURCES`, or, when `data_dir` is given, a
    local mirror of their parquet conversions, `<data_dir>/<repo>/<config>/<split>/*.parquet`. `seed`: the run seed,
    for a task with `seeded_split` (NQ).
    """
    if task.suite == "offline":
        if data_dir is None:
            raise TaskError(f"offline dataset {task.name} needs the folder of the built suite: pass data_dir "
                            "(`tasks_dir` of the working root)")
        folder = Path(data_dir) / "offline" / task.name
        if not (folder / "test.jsonl").is_file():
            raise TaskError(f"offline dataset {task.name} is not built in {folder.parent}; "
                            f"run `mlmclm tasks build --datasets {task.name}`")
        splits = {s: read_jsonl(folder / f"{s}.jsonl") for s in SPLITS if (folder / f"{s}.jsonl").is_file()}
    else:
        splits = load_paper(task, data_dir, seed)
    caps = {"train": max_train, "validation": max_eval, "test": max_eval}
    splits = {s: _cap(rows, caps[s]) for s, rows in splits.items()}
    if task.suite == "paper" and task.group == "IR":
        splits = share_corpus(splits)
    _check_labels(task, splits)
    return splits


def _cap(rows: list, n: int | None, seed: int = 0) -> list:
    if n is None or len(rows) <= n:
        return rows
    keep = sorted(random.Random(seed).sample(range(len(rows)), n))
    return [rows[i] for i in keep]


# the labels of a row of a labelled group (indices into `task.labels`): one a text (SC), one a word (TC)
ROW_LABELS = {"SC": lambda row: [row["label"]], "TC": lambda row: row["tags"]}


def _check_labels(task: Task, splits: dict[str, list[dict]]) -> None:
    labels_of = ROW_LABELS.get(task.group)
    if labels_of is None:
        return
    n = len(task.labels)
    for split, rows in splits.items():
        for row in rows:
            values = labels_of(row)
            bad = next((v for v in values if not (isinstance(v, int) and 0 <= v < n)), None)
            if bad is not None:
                raise TaskError(f"{task.name}: {split} has label {bad!r}, outside its {n} labels "
                                f"({', '.join(task.labels)})")


def read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
