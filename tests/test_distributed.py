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
from helpers import sentence
from mlmclm.training.pretrain import pretrain

ROOT = Path(__file__).resolve().parents[1]


def _config(tmp_path, run_id):
    corpus = tmp_path / "corpus.txt"
    if not corpus.exists():
        corpus.write_text("\n".join(sentence(i, 12) + " " + sentence(i * 5 + 1, 9) for i in range(4000)) + "\n")
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
@pytest.mark.parametrize("how", ["option", "config file"])
def test_fsdp_without_gpus_is_refused_in_one_line_however_it_is_asked_for(tmp_path, free_port, how):
    """`--use_fsdp` or an FSDP config file: the main process says it once, before any work; nothing is written."""
    path = tmp_path / "two.yaml"
    path.write_text(to_yaml(_config(tmp_path, "two")))
    (tmp_path / "fsdp.yaml").write_text("distributed_type: FSDP\nnum_processes: 2\nnum_machines: 1\n"
                                        "mixed_precision: 'no'\nfsdp_config:\n  fsdp_version: 2\n")
    asked = (["--use_fsdp", "--fsdp_version", "2", "--num_processes", "2", "--num_machines", "1", "--mixed_precision",
              "no"] if how == "option" else ["--config_file", str(tmp_path / "fsdp.yaml")])
    proc = subprocess.run([sys.executable, "-m", "accelerate.commands.launch", *asked, "--dynamo_backend", "no",
                           "--main_process_port", str(free_port), "-m", "mlmclm.cli", "pretrain", str(path)],
                          cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode != 0
    lines = [ln for ln in proc.stderr.splitlines() if "mlmclm: error:" in ln]
    assert len(lines) == 1 and lines[0].startswith("mlmclm: error: accelerate launch --use_fsdp: FSDP shards"), \
        proc.stderr[-2000:]
    assert "mlmclm/" not in proc.stderr  # no traceback of ours: accelerate reports its failed processes its way
    assert not (tmp_path / "runs").exists() and not (tmp_path / "ckpt").exists() and not (tmp_path / "data").exists()
