"""The published numbers: the paper's Tables 1-17 (results/paper/, as printed) as scores and Table 1's architecture,
and the authors' per-run sample (EncodEval's format as a CSV, results/samples/) as runs. No torch import here.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ...errors import ResultFileError
from .ids import DATASETS, SCORE_COLUMNS, with_attributes
from .run_tree import runs_frame


def load_paper(paper_dir: str | Path) -> pd.DataFrame:
    """Tables 2-17 (results/paper/table02.csv ... table17.csv) as scores, with a ``table`` column."""
    files = sorted(Path(paper_dir).glob("table[0-9][0-9].csv"))
    frames = [pd.read_csv(f) for f in files if f.name != "table01.csv"]
    if not frames:
        raise ResultFileError(f"{paper_dir}: no table02.csv ... table17.csv")
    df = pd.concat(frames, ignore_index=True)
    df = with_attributes(df[["table", "model", "task_group", "dataset", "score", "ci"]])
    df["source"], df["scale"], df["n"], df["flag"] = "paper", "paper", pd.NA, ""
    return df[["table", *SCORE_COLUMNS]]


def load_architecture(paper_dir: str | Path) -> pd.DataFrame:
    """Table 1 as printed (tidy: setting, size, value; ``size == "all"`` for settings shared by the three sizes)."""
    return pd.read_csv(Path(paper_dir) / "table01.csv", dtype={"value": str})


def architecture(paper_dir: str | Path) -> dict:
    """Table 1's numbers per size, for the FLOPs count: {size: {layers, d_model, ffn, heads, kv_heads, vocab, ...}}."""
    t1 = load_architecture(paper_dir)
    shared = dict(zip(t1[t1["size"] == "all"]["setting"], t1[t1["size"] == "all"]["value"]))
    names = {"Layers": "layers", "Embedding dim": "d_model", "FFN dim": "ffn", "Attention heads": "heads",
             "Key/Value heads": "kv_heads"}
    out = {}
    for size, part in t1[t1["size"] != "all"].groupby("size", sort=False):
        arch = {names[s]: int(v) for s, v in zip(part["setting"], part["value"])}
        arch.update(vocab=int(shared["Vocabulary"]), seq_len=int(shared["Maximum context"]),
                    tokens_per_step=int(shared["Tokens/Step"]))
        out[size] = arch
    return out


def load_run_csv(path: str | Path, source: str, scale: str = "paper") -> pd.DataFrame:
    """Runs from a CSV with columns model, group, dataset, lr, seed, validation_score, test_score (fractions).

    The format of the authors' sample (results/samples/encodeval-610m-sst2.csv); a score that was not read is kept
    as missing.
    """
    df = pd.read_csv(path)
    missing = {"model", "group", "dataset", "lr", "seed", "validation_score", "test_score"} - set(df.columns)
    if missing:
        raise ResultFileError(f"{path}: missing column(s) {', '.join(sorted(missing))}")
    rows = [{"model": r.model, "task_group": r.group, "dataset": DATASETS.get(r.dataset, r.dataset),
             "lr": float(r.lr), "seed": int(r.seed),
             "validation": 100 * pd.to_numeric(r.validation_score, errors="coerce"),
             "test": 100 * pd.to_numeric(r.test_score, errors="coerce"), "path": Path(path).name}
            for r in df.itertuples()]
    return runs_frame(rows, source, scale)
