"""Nothing silently wrong (reliability round 3): every name, number and path a command takes is checked before work
starts, `--dry-run` runs exactly that check, and a refused command writes nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from mlmclm import cli
from mlmclm.config import scale_config
from mlmclm.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*")) if folder.exists() else []


def _pretrain(tmp_path, *overrides, dry=False):
    argv = ["pretrain", "tiny", f"results_dir={tmp_path / 'runs'}", f"checkpoints_dir={tmp_path / 'ckpt'}",
            f"data.root={tmp_path / 'data'}", *overrides]
    return cli.main(argv + (["--dry-run"] if dry else []))


@pytest.mark.parametrize("backend, says", [("sdpz", "model.attention_backend='sdpz' is unknown"),
                                           ("flex", "'flex' is GPU only")])
def test_a_backend_that_cannot_run_is_refused_by_the_dry_run_and_the_run_alike(backend, says, tmp_path, capsys):
    if backend == "flex":
        pytest.importorskip("torch")
        import torch

        if torch.cuda.is_available():
            pytest.skip("flex runs on this machine's GPU")
    for dry in (True, False):
        assert _pretrain(tmp_path, f"model.attention_backend={backend}", dry=dry) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and says in err, err
    assert _files(tmp_path) == []  # no run folder, no checkpoint folder, no data: the run_id is not taken


def test_the_dry_run_writes_nothing_and_refuses_a_run_id_another_config_holds(tmp_path, capsys):
    assert _pretrain(tmp_path, dry=True) == 0
    assert "run_id: tiny-m-clm-21-mlm40-42" in capsys.readouterr().out and _files(tmp_path) == []
    record = tmp_path / "runs" / "tiny" / "tiny-m-clm-21-mlm40-42"
    record.mkdir(parents=True)
    (record / "config.yaml").write_text("run_id: tiny-m-clm-21-mlm40-42\noptim:\n  lr: 1.0\n")
    assert _pretrain(tmp_path, dry=True) == 2
    assert "with another config (its config.yaml differs)" in capsys.readouterr().err


@pytest.mark.parametrize("k", ["[50]", "[42]", "[0]"])
def test_a_checkpoint_outside_the_budget_is_refused_by_the_plan(k):
    with pytest.raises(ConfigError, match="intermediate_k must hold checkpoints inside the 42k budget"):
        scale_config("tiny", [f"intermediate_k={k}"])
    assert scale_config("tiny", ["intermediate_k=[21]"]).intermediate_k == [21]
