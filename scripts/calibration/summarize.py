"""A scale's calibration numbers and figure from its results.json files (scripts/calibration/<scale>/run.sh). Run from
the repository root:  .venv/bin/python scripts/calibration/summarize.py long   (or longer); it writes into
results/calibration/<scale>/:

Every model of a protocol x dataset is read on the learning rates they all have, each with its seeds complete on them.

- summary.csv: per protocol x model x dataset x learning rate, the mean validation and test score over seeds, the
  validation spread, and the validation gain over the last epoch;
- calibration.csv: per protocol x dataset x model, the paper's score (per fine-tuning seed, the test score at the
  learning rate with the best validation score; mean over seeds ± Student-t 95% half-width, `results.aggregate`), the
  rates the seeds chose and how many at a grid edge, the validation gain over the last epoch at the chosen rates, and
  whether the model beats the random-init control beyond the combined half-width (`evidence.beyond`);
- criteria.csv: the package's calibration report (`evidence.calibration_report`) per protocol x dataset;
- curves.png: validation after every epoch at each model's most chosen learning rate (mean over seeds).
"""
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from mlmclm.analysis.judging import evidence as E  # noqa: E402
from mlmclm.analysis.loading import results as R  # noqa: E402

SCALE = sys.argv[1] if len(sys.argv) > 1 else "long"
HERE = Path(__file__).resolve().parents[2] / "results" / "calibration" / SCALE
frames = [R.load_run_tree(d / SCALE, "calibration", SCALE).assign(protocol=d.name)
          for d in sorted(HERE.iterdir()) if (d / SCALE).is_dir()]
runs = pd.concat(frames, ignore_index=True)
KEY = ["protocol", "dataset"]
# every model of a protocol x dataset on the same rates (those all its models have), each with its seeds that have
# every one of them (a model may have more seeds than another)
runs = runs[runs.groupby([*KEY, "lr"])["model"].transform("nunique") == runs.groupby(KEY)["model"].transform("nunique")]
rates = runs.groupby([*KEY, "model", "seed"])["lr"].transform("nunique")
runs = runs[rates == runs.groupby(KEY)["lr"].transform("nunique")].reset_index(drop=True)

summary = (runs.groupby([*KEY, "model", "lr"])
           .agg(seeds=("seed", "nunique"), validation=("validation", "mean"), test=("test", "mean"),
                validation_sd=("validation", "std"), last_epoch_gain=("last_gain", "mean"))
           .round(2).reset_index())
summary.to_csv(HERE / "summary.csv", index=False)

rows, criteria = [], []
for (protocol, dataset), part in runs.groupby(KEY, sort=True):
    grid = sorted(part["lr"].unique())
    sel = R.select_lr(part)
    score = R.aggregate(part)
    score = score[score["dataset"] == dataset].set_index("model")  # not the group's average row
    chosen = sel.groupby("model")["lr"].agg(list)
    gain = sel.groupby("model")["last_gain"].mean()
    random = score[score["objective"] == "random"]
    for model, s in score.iterrows():
        rows.append({"protocol": protocol, "dataset": dataset, "model": model, "score": round(s["score"], 2),
                     "ci": round(s["ci"], 2), "seeds": s["n"], "grid": " ".join(f"{lr:g}" for lr in grid),
                     "chosen": " ".join(f"{lr:g}" for lr in chosen[model]),
                     "at_edge": sum(lr in (grid[0], grid[-1]) for lr in chosen[model]),
                     "last_epoch_gain": round(gain[model], 2),
                     "beats_random": None if s["objective"] == "random" or random.empty else bool(
                         E.beyond(s["score"], s["ci"], random["score"].iloc[0], random["ci"].iloc[0]))})
    report = E.calibration_report(part)
    criteria += [{"protocol": protocol, "dataset": dataset, **r} for r in report.summary().to_dict("records")]
calibration = pd.DataFrame(rows)
calibration.to_csv(HERE / "calibration.csv", index=False)
pd.DataFrame(criteria).to_csv(HERE / "criteria.csv", index=False)
with pd.option_context("display.width", 250, "display.max_columns", 20):
    print(calibration.to_string(index=False))

cells = calibration[["protocol", "dataset"]].drop_duplicates().values.tolist()
fig, axes = plt.subplots(1, len(cells), figsize=(4.5 * len(cells), 4), squeeze=False)
for ax, (protocol, dataset) in zip(axes[0], cells):
    for row in calibration[(calibration["protocol"] == protocol) & (calibration["dataset"] == dataset)].itertuples():
        lr = pd.Series(row.chosen.split()).astype(float).mode().iloc[0]
        part = runs[(runs["protocol"] == protocol) & (runs["dataset"] == dataset) & (runs["model"] == row.model)
                    & (runs["lr"].round(12) == round(lr, 12))]
        curve = pd.DataFrame([c for p in part["path"] for c in json.loads(
            (HERE / protocol / SCALE / p).read_text())["validation"].get("curve", [])], columns=["step", "score"])
        mean = curve.groupby("step")["score"].mean() * 100
        ax.plot(mean.index, mean.values, marker="o", label=f"{row.model} (lr {lr:g})")
    ax.set(xlabel="fine-tuning step (validation after each epoch)", ylabel="validation", title=f"{protocol}\n{dataset}")
    ax.legend(fontsize=7)
fig.tight_layout()
fig.savefig(HERE / "curves.png", dpi=110)
