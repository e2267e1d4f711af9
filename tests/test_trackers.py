"""--report-to: pretraining curves in TensorBoard through accelerate's tracker API, read back from the event file
(issue 25, item 3); the tracker's dependencies are pinned alike in pyproject.toml and environment.yml."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mlmclm.io import working_root
from mlmclm.config import PretrainConfig, load_config
from mlmclm.errors import ConfigError
from helpers import sentence
from mlmclm.training import trackers

ROOT = Path(__file__).resolve().parents[1]


def test_tensorboard_logs_a_tiny_run(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from mlmclm.training.pretrain import pretrain

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(sentence(i, 12) + " " + sentence(i * 5 + 1, 9) for i in range(4000)) + "\n")
    cfg = load_config(PretrainConfig, {
        "run_id": "tb", "scale": "test", "phases": [["clm", 4], ["mlm40", 4]], "batch_size": 4,
        "micro_batch_size": 4, "log_every": 2, "results_dir": str(tmp_path / "runs"),
        "checkpoints_dir": str(tmp_path / "ckpt"), "model": {"size": "tiny"},
        "data": {"corpus": str(corpus), "vocab_size": 512, "seq_len": 32, "root": str(tmp_path / "data")},
        "optim": {"lr": 3e-3, "warmup_steps": 1, "decay_steps": 2}, "checkpoint": {"every": 8}})
    run = pretrain(cfg, report_to="tensorboard", root=working_root())
    events = list((run / "logs").glob("*/events.out.tfevents.*"))  # hparams: a sub-folder
    assert events, sorted(p.relative_to(run) for p in run.rglob("*"))
    acc = EventAccumulator(str(events[0].parent)).Reload()
    assert {"loss", "lr", "tokens_per_s", "causal"} <= set(acc.Tags()["scalars"])
    assert [e.step for e in acc.Scalars("loss")] == [2, 4, 6, 8]
    assert [e.value for e in acc.Scalars("causal")] == [1, 1, 0, 0]
    rows = (run / "pretrain.csv").read_text().splitlines()[1:]
    assert [round(e.value, 4) for e in acc.Scalars("loss")] == [round(float(r.split(",")[4]), 4) for r in rows]


def test_a_missing_tracker_package_or_an_unknown_tracker_is_one_line(tmp_path, monkeypatch):
    assert trackers.accelerator_kwargs("none", tmp_path) == {}
    with pytest.raises(ConfigError, match="choose one of none, tensorboard"):
        trackers.accelerator_kwargs("mlflow", tmp_path)
    monkeypatch.setattr(trackers.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ConfigError, match="needs the wandb package: pip install wandb"):
        trackers.accelerator_kwargs("wandb", tmp_path)
    assert trackers.flat({"a": {"b": 1, "c": [1, 2]}, "d": None}) == {"a.b": 1, "a.c": "[1, 2]", "d": "None"}


def test_pretrain_help_offers_report_to():
    out = subprocess.run([sys.executable, "-m", "mlmclm.cli", "pretrain", "--help"], capture_output=True, text=True,
                         cwd=ROOT).stdout
    assert "--report-to {none,tensorboard,trackio,wandb}" in out


def test_tensorboard_logs_each_finetuning_run(tmp_path, capsys):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from mlmclm.cli import main
    from helpers import offline_suite
    from mlmclm.bench import random_checkpoint

    texts = offline_suite(tmp_path)
    ckpt = random_checkpoint(tmp_path / "ckpts" / "tiny-mlm40-100", texts)
    assert main(["finetune", str(ckpt), "--scale", "tiny", "--data-dir", str(tmp_path / "tasks"), "--runs-dir",
                 str(tmp_path / "results"), "--datasets", "brown_upos", "--lrs", "1e-3", "--seeds", "0", "--set",
                 "epochs=2", "--set", "max_steps=-1", "--report-to", "tensorboard"]) == 0
    run = next((tmp_path / "results").rglob("results.json")).parent
    doc = json.loads((run / "results.json").read_text())
    events = list((run / "logs").glob("*/events.out.tfevents.*"))  # hparams: a sub-folder
    assert len(events) == 1
    acc = EventAccumulator(str(events[0].parent)).Reload()
    scalars = {tag: [(e.step, round(e.value, 5)) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}
    steps = doc["meta"]["train_steps"]
    assert scalars["test/score"] == [(steps, round(doc["test"]["score"], 5))]
    assert scalars["validation/score"] == [(s, round(v, 5)) for s, v in doc["validation"]["curve"]]
