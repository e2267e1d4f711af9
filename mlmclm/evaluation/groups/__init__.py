"""The four task groups of fine-tuning, one module each (`sc`, `tc`, `qa`, `ir`): how a group encodes a split,
batches it, computes its training loss, scores a split and (SC, TC) the majority-class floor. `HANDLERS` maps a group
to its `Group`; `encode`, `collate`, `evaluate` and `majority` dispatch on a task's group."""

from __future__ import annotations

import torch

from ...config import FinetuneConfig
from ..tasks import Task
from . import ir, qa, sc, tc
from .shared import Group

HANDLERS: dict[str, Group] = {"SC": sc.GROUP, "TC": tc.GROUP, "QA": qa.GROUP, "IR": ir.GROUP}


def encode(task: Task, splits: dict[str, list[dict]], tok, length: int, stride: int) -> dict[str, dict]:
    """Token ids (and what evaluation needs) for each split: {split: {"features": [...], ...}}."""
    fn = HANDLERS[task.group].encode
    return {s: fn(rows, tok, length, stride) for s, rows in splits.items()}


def collate(features: list[dict], group: str, pad_id: int) -> dict[str, torch.Tensor]:
    """Pad to the batch's longest sequence; the model's keyword arguments (IR: `ir.info_nce`'s)."""
    return HANDLERS[group].collate(features, pad_id)


def evaluate(model, task: Task, enc: dict, cfg: FinetuneConfig, pad_id: int, device: torch.device) -> dict:
    """{"score", "scores_i"} of one split (QA adds "exact_match" and "exact_match_i"; TC "weights_i": the words of each
    sentence for a tag accuracy, its spans for a span F1)."""
    return HANDLERS[task.group].evaluate(model, task, enc, cfg, pad_id, device)


def majority(task: Task, enc: dict) -> dict | None:
    """{"validation", "test"} scores of a constant predictor, the training set's most frequent label (SC) or tag
    (TC), with the task's own metric: the floor a fine-tuned model must beat. None for QA and IR."""
    fn = HANDLERS[task.group].majority
    if fn is None or not enc["train"]["gold"]:
        return None
    return fn(task, enc)
