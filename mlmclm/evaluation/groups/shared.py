"""What the task groups' handlers share: the `Group` record each group's module fills, padding and attention masks,
bf16 autocast on a GPU, and predictions over a split in length-sorted batches."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Callable

import torch

from ...config import FinetuneConfig


@dataclass(frozen=True)
class Group:
    """What fine-tuning does differently for one task group: its module here (`sc`, `tc`, `qa`, `ir`) and its entry
    in `HANDLERS` are all that a new group needs (besides its head in `models.any_encoder` for transformers
    encoders)."""
    head: type                       # the mlmclm model fine-tuned (its `base_model` is the body a conversion fills)
    encode: Callable                 # (rows, tokenizer, length, stride) -> a split's {"features": [...], ...}
    collate: Callable                # (features, pad_id) -> a batch's tensors
    loss: Callable                   # (model, batch, cfg) -> the training loss
    evaluate: Callable               # (model, task, split, cfg, pad_id, device) -> {"score", "scores_i", ...}
    majority: Callable | None = None  # (task, encoded) -> a constant predictor's scores (`majority`)
    labelled: bool = False           # the head has one output per task label (built with them, checked: `check_head`)


def head_loss(model, batch: dict, cfg: FinetuneConfig) -> torch.Tensor:
    """The loss the head model computes from the batch's labels (SC, TC, QA)."""
    return model(**batch, is_causal=cfg.is_causal).loss


def pad(seqs: list[list[int]], value: int) -> torch.Tensor:
    out = torch.full((len(seqs), max(map(len, seqs))), value, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.as_tensor(s, dtype=torch.long)
    return out


def lengths_mask(seqs: list[list[int]]) -> torch.Tensor:
    lengths = torch.tensor([len(s) for s in seqs])
    return (torch.arange(int(lengths.max()))[None, :] < lengths[:, None]).long()


def collate_tokens(features: list[dict], pad_id: int) -> dict[str, torch.Tensor]:
    ids = [f["input_ids"] for f in features]
    return {"input_ids": pad(ids, pad_id), "attention_mask": lengths_mask(ids)}


def autocast(device: torch.device):
    """bf16 autocast on a GPU (as the paper's bf16 runs); fp32 on CPU, where bf16 is many times slower."""
    return torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else contextlib.nullcontext()


@torch.inference_mode()
def predict(fn, seqs: list[list[int]], batch_size: int, pad_id: int, device: torch.device,
            per_token: bool = False) -> list[torch.Tensor]:
    """`fn(input_ids, attention_mask)` over `seqs` in length-sorted batches; one output row per sequence, in the
    input order (per-token rows trimmed to the sequence's length), on the CPU."""
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
    out: list = [None] * len(seqs)
    for b in range(0, len(order), batch_size):
        idx = order[b:b + batch_size]
        ids = [seqs[i] for i in idx]
        with autocast(device):
            y = fn(pad(ids, pad_id).to(device), lengths_mask(ids).to(device)).float().cpu()
        for row, i in enumerate(idx):
            out[i] = y[row, : len(seqs[i])] if per_token else y[row]
    return out


def token_ids(enc: dict) -> list[list[int]]:
    return [f["input_ids"] for f in enc["features"]]
