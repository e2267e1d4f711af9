"""A run's meta.json names its distributed setup; FSDP where it cannot run is refused in one line, not run as DDP
with exit 0 (issue 25, item 7)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mlmclm.config import PretrainConfig, load_config, to_yaml
from mlmclm.testing import _sentence
from mlmclm.training.pretrain import pretrain

ROOT = Path(__file__).resolve().parents[1]


def _config(tmp_path, run_id):
    corpus = tmp_path / "corpus.txt"
    if not corpus.exists():
        corpus.write_text("\n".join(_sentence(i, 12) + " " + _sentence(i * 5 + 1, 9) for i in range(4000)) + "\n")
    return load_config(PretrainConfig, {
        "run_id": run_id, "scale": "test", "phases": [["clm", 4]], "batch_size": 8, "micro_batch_size": 4,
        "log_every": 2, "results_dir": str(tmp_path / "runs"), "checkpoints_dir": str(tmp_path / "ckpt"),
        "model": {"size": "tiny"}, "data": {"corpus": str(corpus), "vocab_size": 512, "seq_len": 32,
                                            "root": str(tmp_path / "data")},
        "optim": {"lr": 3e-3, "warmup_steps": 1, "decay_steps": 1}, "checkpoint": {"every": 4}})


def test_meta_names_the_distributed_setup(tmp_path):
    run = pretrain(_config(tmp_path, "one"))
    meta = json.loads((run / "meta.json").read_text())
    assert meta["distributed"]["type"] == "NO" and meta["distributed"]["processes"] == meta["processes"] == 1


@pytest.mark.skipif(torch.cuda.is_available(), reason="on GPUs FSDP runs")
def test_fsdp_without_gpus_is_refused_in_one_line(tmp_path):
    path = tmp_path / "two.yaml"
    path.write_text(to_yaml(_config(tmp_path, "two")))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "ACCELERATE_USE_CPU": "true"}
    proc = subprocess.run([sys.executable, "-m", "accelerate.commands.launch", "--use_fsdp", "--fsdp_version", "2",
                           "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no",
                           "--dynamo_backend", "no", "-m", "mlmclm.cli", "pretrain", str(path)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode != 0
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("mlmclm: error:")]
    assert lines and "accelerate launch --use_fsdp: accelerate runs this as MULTI_CPU, not FSDP" in lines[0]
    assert not (tmp_path / "ckpt" / "test" / "two").exists() or not any((tmp_path / "ckpt" / "test" / "two").iterdir())
