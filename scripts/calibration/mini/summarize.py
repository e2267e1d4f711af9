"""The calibration's numbers and figure from its results.json files: mean validation and test score over seeds per
model x dataset x protocol x learning rate (summary.csv), validation against fine-tuning steps at each model's best
learning rate for the one-epoch protocols, and validation after every epoch for the several-epoch ones (curves.png).
Run from the repository root:
    .venv/bin/python scripts/calibration/mini/summarize.py   (it reads and writes results/calibration/mini/)

Folders: `finetune-<steps>/` fine-tuned for <steps> steps of 16 from 18,432 training examples (one epoch at most);
`finetune-e<E>-n<N>/` for E epochs of N training examples (validation scored after each epoch).
"""
import json
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from mlmclm.analysis.loading.results import load_run_tree  # noqa: E402

HERE = Path(__file__).resolve().parents[3] / "results" / "calibration" / "mini"
BATCH = 16


def protocol(folder: str) -> dict:
    m = re.fullmatch(r"finetune-e(\d+)-n(\d+)", folder)
    if m:
        epochs, n = int(m[1]), int(m[2])
        return {"protocol": folder.removeprefix("finetune-"), "epochs": epochs, "max_train": n,
                "ft_steps": epochs * -(-n // BATCH)}
    steps = int(folder.removeprefix("finetune-"))
    return {"protocol": f"{steps} steps", "epochs": 1, "max_train": 18432, "ft_steps": steps}


frames = [load_run_tree(d / "mini", "calibration", "mini").assign(**protocol(d.name))
          for d in sorted(HERE.glob("finetune-*"))]
runs = pd.concat(frames, ignore_index=True)
summary = (runs.groupby(["model", "dataset", "protocol", "epochs", "max_train", "ft_steps", "lr"])
           .agg(seeds=("seed", "nunique"), validation=("validation", "mean"), test=("test", "mean"),
                validation_sd=("validation", "std"), last_epoch_gain=("last_gain", "mean"))
           .round(2).reset_index())
summary.to_csv(HERE / "summary.csv", index=False)
best = summary.loc[summary.groupby(["model", "dataset", "protocol"])["validation"].idxmax()]
print(best.drop(columns=["epochs", "max_train"]).to_string(index=False))

once = best[best["epochs"] == 1]
several = best[best["epochs"] > 1]
datasets = sorted(best["dataset"].unique())
colors = {m: f"C{i}" for i, m in enumerate(sorted(best["model"].unique()))}  # one colour a model in every panel
fig, axes = plt.subplots(2, len(datasets), figsize=(5 * len(datasets), 8), squeeze=False)
for col, dataset in enumerate(datasets):
    ax = axes[0, col]
    for model, curve in once[once["dataset"] == dataset].groupby("model"):
        ax.plot(curve["ft_steps"], curve["validation"], marker="o", label=model, color=colors[model])
    ax.set(xscale="log", xlabel="fine-tuning steps of 16 (18,432 examples, at most once)",
           ylabel="validation (best lr)", title=f"ours (calibration): {dataset}, one epoch")
    ax.legend(fontsize=7)
    ax = axes[1, col]
    for row in several[several["dataset"] == dataset].itertuples():
        # the best learning rate's curves, averaged over seeds
        part = runs[(runs["model"] == row.model) & (runs["dataset"] == dataset)
                    & (runs["protocol"] == row.protocol) & (runs["lr"] == row.lr)]
        curves = pd.DataFrame([step_score for p in part["path"] for step_score in
                               json.loads((HERE / row.protocol.join(["finetune-", ""]) / "mini" / p).read_text())
                               ["validation"]["curve"]], columns=["step", "score"])
        mean = curves.groupby("step")["score"].mean() * 100
        ax.plot(mean.index, mean.values, marker="o", label=f"{row.model} (lr {row.lr:g}, {row.protocol})",
                color=colors[row.model])
    ax.set(xlabel="fine-tuning step (validation after each epoch)", ylabel="validation (best lr)",
           title=f"ours (calibration): {dataset}, several epochs")
    ax.legend(fontsize=7)
fig.tight_layout()
fig.savefig(HERE / "curves.png", dpi=120)
