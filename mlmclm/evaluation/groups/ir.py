"""Information retrieval (IR): mean-pooled embeddings of queries and documents (with EncodEval's prefixes), InfoNCE
with in-batch negatives (cosine x `ir_logit_scale`); NDCG@10 over the corpus of a split's judged documents."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from ...config import FinetuneConfig
from ...models.modeling import MlmClmModel, mean_pool
from .. import metrics
from ..tasks import Task
from .shared import Group, lengths_mask, pad, predict

IR_TEMPLATES = ("Query: {}", "Document: {}")  # EncodEval's prefixes


def encode(rows, tok, length, stride):
    """Queries, the corpus of their judged documents (ids deduplicated), qrels, and (query, first positive) pairs."""
    corpus = {}
    for r in rows:
        for d in r["docs"]:
            corpus.setdefault(d["id"], d["text"])
    doc_index = {d: i for i, d in enumerate(corpus)}
    q_ids = tok([IR_TEMPLATES[0].format(r["query"]) for r in rows], truncation=True, max_length=length)["input_ids"]
    d_ids = tok([IR_TEMPLATES[1].format(t) for t in corpus.values()], truncation=True, max_length=length)["input_ids"]
    qrels = [{doc_index[d["id"]]: d["relevance"] for d in r["docs"]} for r in rows]
    features = []
    for q, rel in zip(q_ids, qrels):
        positive = next((k for k, v in rel.items() if v > 0), None)
        if positive is not None:
            features.append({"query": q, "doc": d_ids[positive], "doc_key": positive})
    return {"features": features, "queries": q_ids, "docs": d_ids, "qrels": qrels}


def collate(features, pad_id):
    q, d = pad([f["query"] for f in features], pad_id), pad([f["doc"] for f in features], pad_id)
    return {"q_ids": q, "q_mask": lengths_mask([f["query"] for f in features]),
            "d_ids": d, "d_mask": lengths_mask([f["doc"] for f in features]),
            "doc_keys": torch.tensor([f["doc_key"] for f in features])}


def info_nce(model, batch: dict, scale: float, is_causal: bool = False) -> torch.Tensor:
    """InfoNCE with in-batch negatives on normalised mean-pooled embeddings; a batch-mate's document that is the
    query's own positive (two questions on one paragraph) is not counted as a negative."""
    q = embed(model, batch["q_ids"], batch["q_mask"], is_causal)
    d = embed(model, batch["d_ids"], batch["d_mask"], is_causal)
    logits = q @ d.T * scale
    keys = batch["doc_keys"]
    same = (keys[:, None] == keys[None, :]) & ~torch.eye(len(keys), dtype=torch.bool, device=keys.device)
    logits = logits.masked_fill(same, float("-inf"))
    return F.cross_entropy(logits, torch.arange(len(keys), device=logits.device))


def embed(model, ids: torch.Tensor, mask: torch.Tensor, is_causal: bool = False) -> torch.Tensor:
    hidden = model(input_ids=ids, attention_mask=mask, is_causal=is_causal).last_hidden_state
    return F.normalize(mean_pool(hidden, mask).float(), dim=-1)


def loss(model, batch: dict, cfg: FinetuneConfig) -> torch.Tensor:
    return info_nce(model, batch, cfg.ir_logit_scale, cfg.is_causal)


def evaluate(model, task: Task, enc: dict, cfg: FinetuneConfig, pad_id: int, device: torch.device) -> dict:
    """NDCG@10 of every query over the split's corpus, by cosine similarity of the embeddings."""
    fn = lambda x, m: embed(model, x, m, cfg.is_causal)  # noqa: E731
    q = torch.stack(predict(fn, enc["queries"], cfg.eval_batch_size, pad_id, device))
    d = torch.stack(predict(fn, enc["docs"], cfg.eval_batch_size, pad_id, device))
    scores_i = []
    for start in range(0, len(q), 256):  # chunks of queries keep the score matrix small
        sims = (q[start:start + 256] @ d.T).numpy()
        for row, rel in zip(sims, enc["qrels"][start:start + 256]):
            gains = np.zeros(len(d))
            gains[list(rel)] = list(rel.values())
            scores_i.append(metrics.ndcg_at_k(row, gains, k=10, ideal_gains=list(rel.values())))
    score = sum(scores_i) / len(scores_i) if scores_i else 0.0
    return {"score": score, "scores_i": scores_i}


GROUP = Group(MlmClmModel, encode, collate, loss, evaluate)
