"""The prepared GPU check (`mlmclm bench gpu`) where no GPU is: the largest micro-batch's search, and that the check
needs nothing but what the GPU machine's image has (python 3.12, torch, transformers, accelerate, pyyaml), so that no
wheel has to travel there for it. Its rows on CPU: tests/test_bench.py."""

from __future__ import annotations

import csv
import importlib.metadata as metadata
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from packaging.requirements import Requirement

from mlmclm import gpu_check
from mlmclm.models.modeling import MlmClmForMaskedLM

REPO = Path(__file__).resolve().parents[1]
GPU_IMAGE = ("torch", "transformers", "accelerate", "pyyaml")  # what the GPU machine has, with their dependencies


def test_the_largest_micro_batch_is_doubled_until_memory_runs_out(monkeypatch):
    forward = MlmClmForMaskedLM.forward
    tried = []

    def small_gpu(self, input_ids=None, **kwargs):
        tried.append(len(input_ids))
        if len(input_ids) > 4:
            raise torch.OutOfMemoryError("CUDA out of memory (played)")
        return forward(self, input_ids=input_ids, **kwargs)

    monkeypatch.setattr(MlmClmForMaskedLM, "forward", small_gpu)
    [row] = gpu_check.largest_micro_batch("tiny", 16, "cpu", first=1, limit=64)
    assert tried == [1, 2, 4, 8]
    assert row["batch"] == 4 and row["note"] == "the largest of 1, 2, ... that trains; 8 ran out of memory"


def _closure(names) -> list[metadata.Distribution]:
    """The installed distributions `names` need, themselves included (no extras)."""
    seen, todo = {}, list(names)
    while todo:
        key = re.sub(r"[-_.]+", "-", todo.pop()).lower()
        if key in seen:
            continue
        seen[key] = metadata.distribution(key)
        for text in seen[key].requires or []:
            req = Requirement(text)
            if not req.marker or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return list(seen.values())


def test_the_gpu_check_needs_only_what_the_gpu_image_has(tmp_path):
    """The check's code (parity, a step, the largest micro-batch) in a python that sees only the GPU image's packages
    and their dependencies (`python -S`, a folder of links to them) and the repository, as `make bench-gpu` runs."""
    site = tmp_path / "site"
    site.mkdir()
    for dist in _closure(GPU_IMAGE):
        for top in {f.parts[0] for f in dist.files or [] if f.parts[0] not in ("..", "__pycache__")}:
            source = Path(dist.locate_file(top))
            if source.exists() and not (site / top).exists():
                (site / top).symlink_to(source)
    code = ("from pathlib import Path; from mlmclm import gpu_check; "
            f"gpu_check.run(Path({str(tmp_path / 'out')!r}), device='cpu', size='tiny', seq_len=16, batches=[2], "
            "chunks=[], fsdp_sizes=[], small=False, steps=1, peak=0.15, compiled=(False,), max_micro=2)")
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{site}"}
    done = subprocess.run([sys.executable, "-S", "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = list(csv.DictReader((tmp_path / "out" / "gpu.csv").open()))
    assert [r["check"] for r in rows] == ["parity", "parity", "step", "step", "max micro-batch"]
    assert all(not r["note"].startswith("failed") for r in rows)


def test_each_option_of_the_check_is_refused_in_one_line_naming_it_before_any_work(tmp_path, capsys, monkeypatch):
    """A negative peak (negative MFU), `--steps 0` (rows of StatisticsError), `--batches 2,x`, an OUT that is a file
    or read-only: `mlmclm: error: ...` naming the option and what it must be, before anything is measured."""
    from helpers import read_only_folder

    from mlmclm.cli import main

    monkeypatch.setattr(gpu_check, "parity", lambda *a: pytest.fail("the check started"))
    (tmp_path / "file").write_text("")
    out, ro = str(tmp_path / "out"), read_only_folder(tmp_path)
    for argv, says in (([out, "--peak-tflops", "-989"], "--peak-tflops -989.0: must be a positive number"),
                       ([out, "--peak-tflops", "nan"], "--peak-tflops nan: must be a positive number"),
                       ([out, "--steps", "0"], "--steps 0: must be a positive integer"),
                       ([out, "--seq-len", "-1"], "--seq-len -1: must be a positive integer"),
                       ([out, "--budget", "0"], "--budget 0.0: must be a positive number"),
                       ([out, "--batches", "2,x"], "--batches '2,x': must be positive integers separated by commas"),
                       ([out, "--batches", ""], "--batches '': must be positive integers separated by commas"),
                       ([out, "--size", "3b"], "--size: unknown model size '3b'"),
                       ([out, "--fsdp-sizes", "610m,2b"], "--fsdp-sizes: unknown model size '2b'"),
                       ([str(tmp_path / "file")], f"cannot write in {tmp_path / 'file'}: "),
                       ([str(ro / "out")], f"cannot write in {ro / 'out'}: ")):
        assert main(["bench", "gpu", "--device", "cpu", *argv]) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"mlmclm: error: {says}"), (argv, err)
    assert not (tmp_path / "out").exists()
