"""Helpers shared by the results, figures and notebooks tests: write per-run result trees in tmp folders."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
SHARED_SAMPLE = REPO.parent / "shared" / "reference" / "encodeval-sample.csv"
SAMPLE = SHARED_SAMPLE if SHARED_SAMPLE.is_file() else REPO / "results" / "samples" / "encodeval-610m-sst2.csv"


def write_run(root: Path, model: str, group: str, dataset: str, lr: float, seed: int, validation: float,
              test: float, prefix: str = "", meta: dict | None = None) -> Path:
    """One results.json (scores as fractions, EncodEval layout); return its path."""
    path = root / model / group / dataset / f"{prefix}lr{lr:.0e}_sd{seed}" / "results.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"validation": {"score": validation, "scores_i": [validation]}, "test": {"score": test, "scores_i": [test]}}
    if meta is not None:
        doc["meta"] = meta
    path.write_text(json.dumps(doc))
    return path


def write_sample_tree(root: Path) -> pd.DataFrame:
    """The authors' sample (610M CLM and MLM-40% on SST-2) as EncodEval files; runs whose test was not read are left
    out (the paper's rule never selects them). Returns the rows written."""
    sample = pd.read_csv(SAMPLE)
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
