"""The calibration's numbers and figure from its results.json files (and, for the mini scale's own 840-step models at
384 fine-tuning steps, the committed mini run): mean validation and test score over seeds per model x dataset x
fine-tuning steps x learning rate (summary.csv), and validation against fine-tuning steps at each model's best
learning rate (curves.png). Run from the repository root:
    .venv/bin/python results/calibration/mini/summarize.py
"""
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from mlmclm.analysis.results import load_run_tree  # noqa: E402

HERE = Path(__file__).parent
frames = [load_run_tree(d / "mini", "calibration", "mini").assign(ft_steps=int(d.name.split("-")[1]))
          for d in sorted(HERE.glob("finetune-*"))]
# the mini scale's own models (840 steps) at its 384 fine-tuning steps: the committed mini run
mini = load_run_tree(HERE.parents[1] / "runs" / "mini", "mini", "mini").assign(ft_steps=384)
frames.append(mini[mini["model"].isin(["mini-m-clm-840", "mini-m-mlm40-840", "mini-m-mlm40-840-0"])])
runs = pd.concat(frames, ignore_index=True)
summary = (runs.groupby(["model", "dataset", "ft_steps", "lr"])
           .agg(seeds=("seed", "nunique"), validation=("validation", "mean"), test=("test", "mean"),
                validation_sd=("validation", "std"))
           .round(2).reset_index())
summary.to_csv(HERE / "summary.csv", index=False)
best = summary.loc[summary.groupby(["model", "dataset", "ft_steps"])["validation"].idxmax()]
print(best.to_string(index=False))
fig, axes = plt.subplots(1, 2, figsize=(10, 4))
for ax, (dataset, part) in zip(axes, best.groupby("dataset")):
    for model, curve in part.groupby("model"):
        ax.plot(curve["ft_steps"], curve["validation"], marker="o", label=model)
    ax.set(xscale="log", xlabel="fine-tuning steps (16 examples each)", ylabel="validation accuracy (best lr)",
           title=f"ours (calibration, mini-m): {dataset}")
    ax.legend(fontsize=7)
fig.tight_layout()
fig.savefig(HERE / "curves.png", dpi=120)
