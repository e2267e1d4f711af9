"""What the tests build: a tokenizer as a pretraining run trains one, transformers models from outside mlmclm,
package folders with the schema of the offline suite's real sources (BIG-bench task files, the Brown corpus, BBC
News folders), and per-run result trees. A random checkpoint as a run makes one is `mlmclm.bench.random_checkpoint`
(the benchmarks build it too).

Test files import it as `helpers` (pytest puts tests/ on the import path). Nothing here reads outside the repository.
"""

from __future__ import annotations

import json
import socket
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from mlmclm.analysis.loading import results
from mlmclm.evaluation.offline_suite import build_offline
from mlmclm.evaluation.tasks import SUITES, load_task
from mlmclm.io import lr_text
from mlmclm.training.tokenizer import load_tokenizer, train_tokenizer

REPO = Path(__file__).resolve().parents[1]  # the checkout: the working root of the tests run in it
ENCODEVAL_SAMPLE = REPO / "results" / "samples" / "encodeval-610m-sst2.csv"  # the authors' 610M SST-2 runs


def free_port() -> int:
    """A TCP port free on this machine now: a launch's rendezvous (two launches on one machine never share one), a
    daemon's port (the `free_port` fixture gives one a test)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tokenizer(texts, vocab_size: int = 512, out: Path | None = None):
    """The byte-level BPE a pretraining run trains (`training.tokenizer.train_tokenizer`), on `texts`, loaded as a
    transformers tokenizer. Saved in `out` (default: a temporary folder)."""
    out = Path(out) if out is not None else Path(tempfile.mkdtemp(prefix="mlmclm-tokenizer-"))
    return load_tokenizer(str(train_tokenizer(iter(texts), vocab_size, out)))


def random_transformers_model(path: Path, family: str, texts, vocab_size: int = 512, seed: int = 0) -> Path:
    """A randomly initialised transformers model of `family` ("bert", "modernbert", "llama" or "eurobert"; 2
    layers, hidden size 32) with the tokenizer of `bench.random_checkpoint`, saved in `path`: a model from outside
    mlmclm as fine-tuning reads it, built from its config (no hub)."""
    import torch
    from transformers import (
        BertConfig, BertModel, EuroBertConfig, EuroBertForMaskedLM, LlamaConfig, LlamaForCausalLM, ModernBertConfig,
        ModernBertModel,
    )

    path = Path(path)
    tok = tokenizer(texts, vocab_size)
    sizes = dict(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                 num_attention_heads=2, max_position_embeddings=128, pad_token_id=tok.pad_token_id,
                 bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    config, model = {"bert": (BertConfig, BertModel), "modernbert": (ModernBertConfig, ModernBertModel),
                     "llama": (LlamaConfig, LlamaForCausalLM), "eurobert": (EuroBertConfig, EuroBertForMaskedLM)}[family]
    extra = {"modernbert": dict(cls_token_id=tok.bos_token_id, sep_token_id=tok.eos_token_id),
             "eurobert": dict(mask_token_id=tok.mask_token_id)}.get(family, {})
    torch.manual_seed(seed)
    model(config(**sizes, **extra)).save_pretrained(path)
    tok.save_pretrained(path)
    return path


# ----------------------------------------------------------------------------------------------- offline sources

WORDS = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda river mountain city market music film "
         "team player election minister").split()


def sentence(i: int, n: int = 8) -> str:
    return " ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(n)).capitalize() + "."


def write_offline_sources(root: Path, n: int = 60) -> dict[str, Path]:
    """Package folders with the real files' layout and schema, `n` examples each; returns `roots` for
    `build_offline`."""
    bb = root / "bigbench"
    labels = ["negative", "neutral", "positive", "ambivalent"]
    _json(bb / "multiemo/all_sentence_en/task.json", {"examples": [
        {"input": f"{sentence(i)} {labels[i % 4]} review {i}.",
         "target_scores": {k: int(k == labels[i % 4]) for k in labels}} for i in range(n)]})
    verdicts = ["True", "False", "Neither"]
    _json(bb / "vitaminc_fact_verification/task.json", {"examples": [
        {"input": f"Page {i % 12}: {sentence(i)} number {i}.\nClaim: {sentence(i + 1)} {verdicts[i % 3].lower()}",
         "target_scores": {v: int(v == verdicts[i % 3]) for v in verdicts}} for i in range(n)]})
    _json(bb / "contextual_parametric_knowledge_conflicts/task.json", {"examples": [
        {"input": f"\nQuestion: who is person {i}?\nContext: {sentence(i)} Person {i} is Name{i} Surname.",
         "target": f"Name{i} Surname", "target_scores": {f"Name{i} Surname": 1, "Other": 0}} for i in range(n)]})
    for file, articles in (("squaddev_v1.1.json", 12), ("nyt_v1.0.json", 12), ("reddit_v1.0.json", 1)):
        data = []
        for a in range(articles):
            paragraphs = []
            for p in range(max(1, n // 5 // articles)):
                k = a * 100 + p
                ctx = f"{sentence(k, 12)} The answer {k} is Value{k} today. {sentence(k + 1, 40)}"
                start = ctx.index(f"Value{k}")
                paragraphs.append({"context": ctx, "qas": [
                    {"id": f"{file}-{k}-{q}", "question": f"What is answer {k} number {q}?",
                     "answers": [{"text": f"Value{k}", "answer_start": start}] * 2} for q in range(5)]})
            data.append({"title": f"Article_{a}", "paragraphs": paragraphs})
        _json(bb / "squad_shifts" / file, {"version": "1.1", "data": data})
    brown = root / "brown"
    brown.mkdir(parents=True)
    for f in range(10):
        lines = [f"\tThe/at Fulton/np-tl County/nn-tl jury/nn said/vbd {f}/cd ,/, ``/`` it's/pps+bez fine/jj ''/'' ./."]
        lines += ["\tMr./np Smith/np of/in Atlanta's/np$ court/nn did/dod n't/* go/vb ./." for _ in range(n // 10)]
        (brown / f"c{'abcdefghjk'[f]}0{f}").write_text("\n\n".join(lines) + "\n", encoding="latin-1")
    bbc = root / "bbc"
    for c, topic in enumerate(("business", "entertainment", "politics", "sports", "tech")):
        (bbc / topic).mkdir(parents=True)
        for i in range(n // 5):
            (bbc / topic / f"{i:03d}.txt").write_text(f"{topic.title()} headline {i}\n\n{sentence(i + c)} {topic}.")
    return {"bigbench": bb, "brown": brown, "bbc": bbc}


def offline_suite(root: Path) -> list[str]:
    """The offline suite built from `write_offline_sources` into `root/tasks`; returns texts to train a tokenizer on
    (multiemo's training sentences and squad11's contexts)."""
    build_offline(None, data_dir=root / "tasks", roots=write_offline_sources(root / "src"), progress=False)
    texts = [r["text"] for r in load_task(SUITES["offline"]["multiemo_sentiment"], root / "tasks")["train"]]
    return texts + [r["context"] for r in load_task(SUITES["offline"]["squad11"], root / "tasks")["train"]]


def read_only_folder(tmp_path: Path) -> Path:
    """A folder no file can be written in: `tmp_path/ro` made read-only, or, where that does not stop this process
    (root ignores a folder's mode), /sys (a read-only file system)."""
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        with tempfile.TemporaryFile(dir=folder):
            return Path("/sys")
    except OSError:
        return folder


def _json(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))


# ----------------------------------------------------------------------------------------------- result trees

def write_run(root: Path, model: str, group: str, dataset: str, lr: float, seed: int, validation: float,
              test: float, prefix: str = "", meta: dict | None = None, last_gain: float | None = None) -> Path:
    """One results.json (scores as fractions, EncodEval layout); with ``last_gain`` (a fraction) a two-epoch
    validation curve whose last epoch gained that much. Return its path."""
    path = root / model / group / dataset / f"{prefix}lr{lr_text(lr)}_sd{seed}" / "results.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"validation": {"score": validation, "scores_i": [validation]}, "test": {"score": test, "scores_i": [test]}}
    if last_gain is not None:
        doc["validation"]["curve"] = [[1, validation - last_gain], [2, validation]]
    if meta is not None:
        doc["meta"] = meta
    path.write_text(json.dumps(doc))
    return path


def write_sample_tree(root: Path) -> pd.DataFrame:
    """The authors' sample (610M CLM and MLM-40% on SST-2) as EncodEval files; runs whose test was not read are left
    out (the paper's rule never selects them). Returns the rows written."""
    sample = pd.read_csv(ENCODEVAL_SAMPLE)
    sample["test_score"] = pd.to_numeric(sample["test_score"], errors="coerce")
    written = sample.dropna(subset=["test_score"])
    for r in written.itertuples():
        write_run(root, r.model, r.group, r.dataset, r.lr, r.seed, r.validation_score, r.test_score)
    return written


def write_synthetic_study(root: Path, size: str = "mini-m", ratios=(20, 30, 40, 50), seed: int = 0) -> None:
    """A small, fully specified grid of synthetic runs covering every study (scores drawn from a seeded RNG)."""
    rng = np.random.default_rng(seed)
    models = [f"{size}-clm-400", *[f"{size}-mlm{r}-400" for r in ratios], f"{size}-clm-100-mlm40-400",
              f"{size}-clm-200-mlm40-400", f"{size}-clm-300-mlm40-400",
              *[f"{size}-clm-380-mlm{r}-400" for r in ratios],
              f"{size}-clm-400-100", f"{size}-mlm40-400-100", f"{size}-clm-400-200", f"{size}-mlm40-400-200",
              f"{size}-clm-dec400-mlm40-500", f"{size}-mlm40-dec400-mlm40-500"]
    for model in models:
        for group, datasets in {"SC": ["sst2", "toy_sc"], "TC": ["toy_ner"], "QA": ["toy_qa"],
                                "IR": ["toy_ir"]}.items():
            for dataset in datasets:
                for lr in (1e-5, 1e-4, 1e-3):
                    for sd in range(3):
                        val, test = rng.uniform(0.5, 0.9, size=2)
                        write_run(root, model, group, dataset, lr, sd, float(val), float(test),
                                  meta={"attention": "sdpa"})


def write_planted(root: Path, rates: dict, groups=(("SC", "toy_sc"), ("TC", "toy_tc")), lrs=(1e-3,), seeds=range(4),
                  n: int = 200, seed: int = 0, majority: float | None = None, edge_drop: float = 0.15,
                  last_gain: float | dict = 0.0) -> None:
    """Runs whose per-instance test scores (0/1, ``n`` test instances) are drawn with a planted success rate per model
    (``rates``: model id -> rate, or -> {task group: rate}); validation scores are the same rate's draws. With several
    ``lrs`` the planted rate is that of the inner ones, the smallest and largest score ``edge_drop`` less (a
    converged grid: the best rate inside). ``majority`` records a majority-class baseline (fraction) in every
    results.json; every run has a two-epoch validation curve whose last epoch gained ``last_gain`` (a fraction; or
    model id -> fraction, 0 for a model not named)."""
    rng = np.random.default_rng(seed)
    edges = {min(lrs), max(lrs)} if len(lrs) > 2 else set()
    for model, rate in rates.items():
        gain = last_gain.get(model, 0.0) if isinstance(last_gain, dict) else last_gain
        for group, dataset in groups:
            for lr in lrs:
                p = (rate[group] if isinstance(rate, dict) else rate) - (edge_drop if lr in edges else 0.0)
                for sd in seeds:
                    test, val = (rng.random(n) < p).astype(float), (rng.random(n) < p).astype(float)
                    doc = {"validation": {"score": val.mean(), "scores_i": val.tolist(),
                                          "curve": [[1, val.mean() - gain], [2, val.mean()]]},
                           "test": {"score": test.mean(), "scores_i": test.tolist()}}
                    if majority is not None:
                        doc["baselines"] = {"majority": {"validation": majority, "test": majority}}
                    _json(root / model / group / dataset / f"lr{lr_text(lr)}_sd{sd}" / "results.json", doc)


def scores_frame(cells, source: str = "x", scale: str = "x") -> pd.DataFrame:
    """A scores table of group averages from (model id, task group, score, ci) tuples, with the attributes parsed from
    the ids (``results.SCORE_COLUMNS``): small synthetic inputs for the claims."""
    df = pd.DataFrame([{"source": source, "scale": scale, "model": m, "task_group": g, "dataset": results.AVG,
                        "score": float(s), "ci": float(c), "n": 4, "flag": ""} for m, g, s, c in cells])
    df = results.with_attributes(df)
    df["n"] = df["n"].astype("Int64")
    return df[results.SCORE_COLUMNS]


def verbs(parser, prefix=()):
    """(path of names, parser) of every verb and sub-verb of an argparse command line."""
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield (*prefix, name), child
                yield from verbs(child, (*prefix, name))
