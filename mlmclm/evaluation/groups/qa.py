"""Extractive question answering (QA): start and end logits over windows (with a stride) of long contexts, run_qa's
n-best span post-processing; SQuAD F1 and exact match."""

from __future__ import annotations

import math

import torch

from ...config import FinetuneConfig
from ...models.modeling import MlmClmForQuestionAnswering
from .. import metrics
from ..tasks import Task
from .shared import Group, collate_tokens, head_loss, predict, token_ids


def encode(rows, tok, length, stride):
    """Windows of `length` tokens over question + context, overlapping by `stride`; a window's label is the answer's
    first and last token when the whole answer is inside it, else position 0 (no answer in this window)."""
    questions = [r["question"].lstrip() for r in rows]
    q_ids = tok(questions, add_special_tokens=False)["input_ids"]
    questions = [q if len(ids) <= length // 4 else tok.decode(ids[: length // 4]) for q, ids in zip(questions, q_ids)]
    enc = tok(questions, [r["context"] for r in rows], truncation="only_second", max_length=length, stride=stride,
              return_overflowing_tokens=True, return_offsets_mapping=True)
    features = []
    for i, (ids, offsets) in enumerate(zip(enc["input_ids"], enc["offset_mapping"])):
        r = rows[enc["overflow_to_sample_mapping"][i]]
        ctx = [t for t, s in enumerate(enc.sequence_ids(i)) if s == 1]
        start = end = 0
        if r["answers"] and ctx:
            a = r["answers"][0]
            cs, ce = a["start"], a["start"] + len(a["text"])
            if offsets[ctx[0]][0] <= cs and offsets[ctx[-1]][1] >= ce:
                start = max(t for t in ctx if offsets[t][0] <= cs)
                end = min(t for t in ctx if offsets[t][1] >= ce)
        features.append({"input_ids": ids, "start_positions": start, "end_positions": end,
                         "example": enc["overflow_to_sample_mapping"][i], "context": ctx,
                         "offsets": [tuple(offsets[t]) for t in ctx]})
    return {"features": features, "contexts": [r["context"] for r in rows],
            "gold": [[a["text"] for a in r["answers"]] for r in rows]}


def collate(features, pad_id):
    return {**collate_tokens(features, pad_id),
            **{key: torch.tensor([f[key] for f in features]) for key in ("start_positions", "end_positions")}}


def evaluate(model, task: Task, enc: dict, cfg: FinetuneConfig, pad_id: int, device: torch.device) -> dict:
    logits = predict(lambda x, m: _logits(model, x, m, cfg.is_causal), token_ids(enc), cfg.eval_batch_size, pad_id,
                     device, True)
    answers = best_answers(enc, logits, cfg.qa_n_best, cfg.qa_max_answer_tokens, task.unanswerable)
    score, scores_i, em, em_i = metrics.squad_scores(answers, enc["gold"])
    return {"score": score, "scores_i": scores_i, "exact_match": em, "exact_match_i": em_i}


def _logits(model, ids, mask, is_causal: bool = False):
    out = model(ids, mask, is_causal=is_causal)
    return torch.stack([out.start_logits, out.end_logits], dim=-1)


def best_answers(enc: dict, logits: list[torch.Tensor], n_best: int, max_answer: int, unanswerable: bool) -> list[str]:
    """run_qa's post-processing: per window, the n_best start and end context tokens; the best valid span (end >=
    start, at most `max_answer` tokens) over the windows of a question. With `unanswerable`, the empty answer wins
    when the no-answer score (position 0, the lowest over the windows) beats the best span."""
    best = [(-math.inf, "")] * len(enc["contexts"])
    null = [math.inf] * len(enc["contexts"])
    for f, y in zip(enc["features"], logits):
        ex, ctx = f["example"], f["context"]
        null[ex] = min(null[ex], float(y[0, 0] + y[0, 1]))
        if not ctx:
            continue
        start, end = y[ctx, 0], y[ctx, 1]
        k = min(n_best, len(ctx))
        s_val, s_idx = start.topk(k)
        e_val, e_idx = end.topk(k)
        span = e_idx[None, :] - s_idx[:, None]
        pair = (s_val[:, None] + e_val[None, :]).masked_fill((span < 0) | (span >= max_answer), -math.inf)
        flat = int(pair.argmax())
        score = float(pair.flatten()[flat])
        if score > best[ex][0]:
            si, ei = int(s_idx[flat // k]), int(e_idx[flat % k])
            best[ex] = (score, enc["contexts"][ex][f["offsets"][si][0]: f["offsets"][ei][1]])
    return ["" if unanswerable and n > s else text for (s, text), n in zip(best, null)]


GROUP = Group(MlmClmForQuestionAnswering, encode, collate, head_loss, evaluate)
