"""Sequence classification (SC): mean pooling and a linear head over the text, cross-entropy; accuracy, and the
training set's most frequent label as the majority-class floor."""

from __future__ import annotations

import collections

import torch

from ...config import FinetuneConfig
from ...models.modeling import MlmClmForSequenceClassification
from .. import metrics
from ..tasks import Task
from .shared import Group, collate_tokens, head_loss, predict, token_ids


def encode(rows, tok, length, stride):
    ids = tok([r["text"] for r in rows], truncation=True, max_length=length)["input_ids"]
    return {"features": [{"input_ids": x, "labels": r["label"]} for x, r in zip(ids, rows)],
            "gold": [r["label"] for r in rows]}


def collate(features, pad_id):
    return {**collate_tokens(features, pad_id), "labels": torch.tensor([f["labels"] for f in features])}


def evaluate(model, task: Task, enc: dict, cfg: FinetuneConfig, pad_id: int, device: torch.device) -> dict:
    logits = predict(lambda x, m: model(x, m, is_causal=cfg.is_causal).logits, token_ids(enc), cfg.eval_batch_size,
                     pad_id, device)
    score, scores_i = metrics.accuracy([int(y.argmax()) for y in logits], enc["gold"])
    return {"score": score, "scores_i": scores_i}


def majority(task: Task, enc: dict) -> dict:
    label = collections.Counter(enc["train"]["gold"]).most_common(1)[0][0]
    return {s: metrics.accuracy([label] * len(enc[s]["gold"]), enc[s]["gold"])[0] for s in ("validation", "test")}


GROUP = Group(MlmClmForSequenceClassification, encode, collate, head_loss, evaluate, majority, labelled=True)
