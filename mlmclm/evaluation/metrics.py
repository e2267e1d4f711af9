"""The downstream metrics, each returning `(score, scores_i)`: the dataset score as a fraction in [0, 1] and one score
per instance (the EncodEval `results.json` layout).

- `accuracy`: sequence classification (SC).
- `tag_accuracy`: token tagging (TC, e.g. part of speech): score over all words, scores_i per sentence.
- `span_f1`: entity spans from BIO tags, seqeval-style micro F1 over the dataset; scores_i are per-sentence F1.
- `squad_scores`: extractive QA, SQuAD's answer normalisation, F1 (and exact match), best over the gold answers.
- `ndcg_at_k`: retrieval (IR), NDCG@10 with linear gains (trec_eval's), tie-aware, ideal ranking over every judged
  document of the query (a relevant document missing from the corpus still counts in the ideal).
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from typing import Sequence

import numpy as np


def accuracy(pred: Sequence, gold: Sequence) -> tuple[float, list[float]]:
    scores_i = [float(p == g) for p, g in zip(pred, gold, strict=True)]
    return _mean(scores_i), scores_i


def tag_accuracy(pred: Sequence[Sequence[str]], gold: Sequence[Sequence[str]]) -> tuple[float, list[float]]:
    """Word-level accuracy over the dataset; scores_i are the per-sentence accuracies."""
    right = [sum(p == g for p, g in zip(ps, gs, strict=True)) for ps, gs in zip(pred, gold, strict=True)]
    total = sum(len(gs) for gs in gold)
    scores_i = [r / len(gs) if gs else 1.0 for r, gs in zip(right, gold)]
    return (sum(right) / total if total else 0.0), scores_i


def bio_spans(tags: Sequence[str]) -> set[tuple[str, int, int]]:
    """(type, start, end) spans, end exclusive, from BIO tags, as seqeval's default mode reads them: a span starts at
    `B-X`, or at `I-X` that does not continue a span of type X; it ends at `O`, `B-`, or a different type."""
    spans, kind, start = set(), None, 0
    for i, tag in enumerate([*tags, "O"]):
        prefix, _, t = tag.partition("-")
        if kind is not None and not (prefix == "I" and t == kind):
            spans.add((kind, start, i))
            kind = None
        if kind is None and prefix in ("B", "I"):
            kind, start = t, i
    return spans


def span_f1(pred: Sequence[Sequence[str]], gold: Sequence[Sequence[str]]) -> tuple[float, list[float]]:
    """Micro F1 over the spans of the whole dataset (seqeval's `f1_score`); scores_i are per-sentence F1 (1.0 for a
    sentence with no span in either)."""
    tp = n_pred = n_gold = 0
    scores_i = []
    for ps, gs in zip(pred, gold, strict=True):
        p, g = bio_spans(ps), bio_spans(gs)
        hit = len(p & g)
        tp, n_pred, n_gold = tp + hit, n_pred + len(p), n_gold + len(g)
        scores_i.append(_f1(hit, len(p), len(g)))
    return _f1(tp, n_pred, n_gold), scores_i


def span_weights(pred: Sequence[Sequence[str]], gold: Sequence[Sequence[str]]) -> list[int]:
    """What each sentence weighs in `span_f1`: its predicted plus gold spans, so that the micro F1 is exactly the
    weighted mean of the per-sentence F1 (2 tp / (pred + gold) summed over sentences), and a resampling of sentences
    can recompute it."""
    return [len(bio_spans(p)) + len(bio_spans(g)) for p, g in zip(pred, gold, strict=True)]


def _f1(tp: int, n_pred: int, n_gold: int) -> float:
    if n_pred == 0 and n_gold == 0:
        return 1.0
    return 2 * tp / (n_pred + n_gold)


_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(s: str) -> str:
    """SQuAD's normalisation: lower case, no punctuation, no articles (a, an, the), single spaces."""
    s = "".join(ch for ch in s.lower() if ch not in _PUNCTUATION)
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def squad_f1(pred: str, gold: str) -> float:
    p, g = normalize_answer(pred).split(), normalize_answer(gold).split()
    if not p or not g:
        return float(p == g)
    common = sum((Counter(p) & Counter(g)).values())
    return 0.0 if common == 0 else 2 * common / (len(p) + len(g))


def squad_scores(preds: Sequence[str], golds: Sequence[Sequence[str]]) -> tuple[float, list[float], float, list[float]]:
    """(F1, F1_i, exact match, EM_i): per question, the best over its gold answers; a question without any gold
    answer (SQuAD v2's unanswerable) expects the empty prediction."""
    f1_i, em_i = [], []
    for pred, answers in zip(preds, golds, strict=True):
        answers = list(answers) or [""]
        f1_i.append(max(squad_f1(pred, a) for a in answers))
        em_i.append(max(float(normalize_answer(pred) == normalize_answer(a)) for a in answers))
    return _mean(f1_i), f1_i, _mean(em_i), em_i


def ndcg_at_k(scores: Sequence[float], gains: Sequence[float], k: int = 10,
              ideal_gains: Sequence[float] | None = None) -> float:
    """NDCG@k of one query. `scores` and `gains` are aligned over the corpus (gain 0: not relevant). Tied scores get
    the expected DCG over every order of the tie (McSherry & Najork, 2008), so the result never depends on how ties
    are broken. `ideal_gains`: the gains of every judged document (default `gains`), including relevant ones that are
    not in the corpus."""
    scores, gains = np.asarray(scores, dtype=np.float64), np.asarray(gains, dtype=np.float64)
    order = np.argsort(-scores, kind="stable")
    s, g = scores[order], gains[order]
    dcg, i, n = 0.0, 0, len(s)
    while i < min(k, n):
        j = i + 1
        while j < n and s[j] == s[i]:
            j += 1
        dcg += g[i:j].mean() * sum(1 / math.log2(r + 2) for r in range(i, min(j, k)))
        i = j
    ideal = sorted((x for x in (gains if ideal_gains is None else ideal_gains) if x > 0), reverse=True)[:k]
    idcg = sum(x / math.log2(r + 2) for r, x in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0
