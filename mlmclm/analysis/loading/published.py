"""The published numbers: the paper's Tables 1-17 (results/paper/, as printed) as scores and Table 1's architecture,
and the authors' per-run sample (EncodEval's format as a CSV, results/samples/) as runs. No torch import here.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ...errors import ResultFileError
from .ids import DATASETS, SCORE_COLUMNS, with_attributes
from .run_tree import runs_frame


RESTORE = "the paper's tables ship with this repository: restore it (git checkout -- results/paper)"
PAPER_COLUMNS = ["table", "model", "task_group", "dataset", "score", "ci"]


def read_table(path: str | Path, columns, fix: str, rows: bool = True, numbers=(), **kwargs) -> pd.DataFrame:
    """A CSV table (the paper's, ours) holding at least ``columns`` (and a row, with ``rows``; a number in every cell
    of ``numbers``); a missing, empty, unreadable or incomplete one is a `ResultFileError` naming the file, what is
    wrong and ``fix``."""
    try:
        df = pd.read_csv(path, **kwargs)
    except FileNotFoundError:
        raise ResultFileError(f"{path}: missing; {fix}") from None
    except pd.errors.EmptyDataError:
        raise ResultFileError(f"{path}: empty (no header); {fix}") from None
    except (pd.errors.ParserError, UnicodeDecodeError, IsADirectoryError, PermissionError) as e:
        why = str(e).splitlines()[0] if not isinstance(e, OSError) else e.strerror
        raise ResultFileError(f"{path}: not a readable CSV ({why}); {fix}") from None
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ResultFileError(f"{path}: missing column(s) {', '.join(missing)}; {fix}")
    if rows and df.empty:
        raise ResultFileError(f"{path}: a header and no rows; {fix}")
    for column in numbers:
        bad = pd.to_numeric(df[column], errors="coerce").isna()
        if bad.any():
            row = int(bad.idxmax())
            raise ResultFileError(f"{path}: {column} {df[column].iloc[row]!r} in row {row + 2} is not a number; {fix}")
        df[column] = pd.to_numeric(df[column])
    return df


def load_paper(paper_dir: str | Path) -> pd.DataFrame:
    """Tables 2-17 (results/paper/table02.csv ... table17.csv) as scores, with a ``table`` column."""
    files = [Path(paper_dir) / f"table{i:02d}.csv" for i in range(2, 18)]  # every one: a table left out is missing
    if not any(f.exists() for f in files):
        raise ResultFileError(f"{paper_dir}: no table02.csv ... table17.csv")
    frames = [read_table(f, PAPER_COLUMNS, RESTORE, numbers=("score", "ci")) for f in files]
    df = pd.concat(frames, ignore_index=True)
    df = with_attributes(df[PAPER_COLUMNS])
    df["source"], df["scale"], df["n"], df["flag"] = "paper", "paper", pd.NA, ""
    return df[["table", *SCORE_COLUMNS]]


def load_architecture(paper_dir: str | Path) -> pd.DataFrame:
    """Table 1 as printed (tidy: setting, size, value; ``size == "all"`` for settings shared by the three sizes)."""
    return read_table(Path(paper_dir) / "table01.csv", ["setting", "size", "value"], RESTORE, dtype={"value": str})


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
    df = read_table(path, ["model", "group", "dataset", "lr", "seed", "validation_score", "test_score"],
                    "a per-run CSV has one row a fine-tuning run (results/samples/encodeval-610m-sst2.csv shows it)")
    rows = [{"model": r.model, "task_group": r.group, "dataset": DATASETS.get(r.dataset, r.dataset),
             "lr": float(r.lr), "seed": int(r.seed),
             "validation": 100 * pd.to_numeric(r.validation_score, errors="coerce"),
             "test": 100 * pd.to_numeric(r.test_score, errors="coerce"), "path": Path(path).name}
            for r in df.itertuples()]
    return runs_frame(rows, source, scale)
