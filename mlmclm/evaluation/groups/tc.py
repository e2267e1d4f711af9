"""Token classification (TC): a linear layer on every token, the word's tag on its first sub-word; span F1 or tag
accuracy, and the training set's most frequent tag as the majority-class floor."""

from __future__ import annotations

import collections

import torch

from ...config import FinetuneConfig
from ...models.modeling import MlmClmForTokenClassification
from ...models.modeling import IGNORE
from .. import metrics
from ..tasks import Task
from .shared import Group, collate_tokens, head_loss, pad, predict, token_ids


def encode(rows, tok, length, stride):
    """Words are joined by spaces; a token belongs to the word holding its last character, and the first token of
    each word carries the word's tag (the others -100). Words cut off by truncation get no prediction."""
    texts = [" ".join(r["tokens"]) for r in rows]
    word_of_char = []  # the word of every character of the joined text (-1: the space after a word)
    for r in rows:
        owner = []
        for w, word in enumerate(r["tokens"]):
            owner += [w] * len(word) + [-1]
        word_of_char.append(owner)
    enc = tok(texts, truncation=True, max_length=length, return_offsets_mapping=True)
    features, firsts = [], []
    for r, ids, offsets, owner in zip(rows, enc["input_ids"], enc["offset_mapping"], word_of_char):
        labels, first = [IGNORE] * len(ids), {}
        for t, (s, e) in enumerate(offsets):
            w = owner[e - 1] if e > s else -1
            if w >= 0 and w not in first:
                first[w] = t
                labels[t] = r["tags"][w]
        features.append({"input_ids": ids, "labels": labels})
        firsts.append(first)
    return {"features": features, "first": firsts, "gold": [r["tags"] for r in rows]}


def collate(features, pad_id):
    return {**collate_tokens(features, pad_id), "labels": pad([f["labels"] for f in features], IGNORE)}


def evaluate(model, task: Task, enc: dict, cfg: FinetuneConfig, pad_id: int, device: torch.device) -> dict:
    """Each word's tag is the prediction on its first token; a word cut off by truncation is tagged "O"."""
    logits = predict(lambda x, m: model(x, m, is_causal=cfg.is_causal).logits, token_ids(enc), cfg.eval_batch_size,
                     pad_id, device, True)
    pred, gold = [], []
    for y, first, tags in zip(logits, enc["first"], enc["gold"]):
        best = y.argmax(-1).tolist()
        pred.append([task.labels[best[first[w]]] if w in first else "O" for w in range(len(tags))])
        gold.append([task.labels[t] for t in tags])
    if task.metric == "span_f1":  # a micro F1: each sentence weighs its spans (weights_i; none without a span at all)
        score, scores_i = metrics.span_f1(pred, gold)
        weights = metrics.span_weights(pred, gold)
        return {"score": score, "scores_i": scores_i, **({"weights_i": weights} if sum(weights) else {})}
    # a word-level accuracy: each sentence weighs its words (weights_i), so resampling can recompute it
    score, scores_i = metrics.tag_accuracy(pred, gold)
    return {"score": score, "scores_i": scores_i, "weights_i": [len(tags) for tags in gold]}


def majority(task: Task, enc: dict) -> dict:
    tag = task.labels[collections.Counter(t for tags in enc["train"]["gold"] for t in tags).most_common(1)[0][0]]
    fn = metrics.span_f1 if task.metric == "span_f1" else metrics.tag_accuracy
    return {s: fn([[tag] * len(tags) for tags in enc[s]["gold"]], [[task.labels[t] for t in tags]
                                                                   for tags in enc[s]["gold"]])[0]
            for s in ("validation", "test")}


GROUP = Group(MlmClmForTokenClassification, encode, collate, head_loss, evaluate, majority, labelled=True)
