"""The prepared GPU check (`mlmclm bench gpu`) where no GPU is: the order of its measurements, each measurement's rows
on CPU (a checkpoint hashed as a run records it among them), a row that cannot be measured saying why, a measurement
stopped when its time is up, the whole check in its CPU mode ending within its budget with every
row written as it goes, and that it needs nothing but what the GPU machine's image has (python 3.12, torch,
transformers, accelerate, pyyaml), so that no wheel has to travel there for it."""

from __future__ import annotations

import csv
import importlib.metadata as metadata
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from packaging.requirements import Requirement

from mlmclm import gpu_check
from mlmclm.fetch import sha256
from mlmclm.models.modeling import MlmClmForMaskedLM
from mlmclm.paths import STATE
from mlmclm.training import checkpoints

REPO = Path(__file__).resolve().parents[1]
GPU_IMAGE = ("torch", "transformers", "accelerate", "pyyaml", "pandas")  # of what the GPU machine has (and their needs)


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


def test_the_check_measures_what_no_run_has_measured_first_then_the_cheap_things_and_the_compiled_steps_last():
    """In the order that answers the most questions within one command: what no run has measured yet (the hash of a
    1B checkpoint, the compiled CLM step at micro-batch 16, FSDP 610M and 1B compiled); then parity, the eager 210M
    step at micro-batch 8, the largest micro-batch, FSDP 610M and 1B eager, the small step, the kernels backend,
    micro-batch 16, the loss chunks; then compiled: micro-batch 8, the loss chunks, MLM-40% at micro-batch 16."""
    names = [" ".join(str(d[k]) for k in ("check", "size", "variant", "batch") if d.get(k, "") != "")
             for d in (gpu_check.describe(kind, args) for kind, args in gpu_check.plan("cuda", 989.4))]
    eager = ["MLM40 [sdpa] 8", "CLM [sdpa] 8"]
    fsdp = "MLM40 FSDP2 one process"
    assert names == [
        "checkpoint hash 1b sha256 of its files (checkpoints.write_state)", "step 210m CLM [sdpa] compiled 16",
        f"fsdp 610m {fsdp} compiled 4", f"fsdp 1b {fsdp} compiled 4",
        "parity 210m", *[f"step 210m {v}" for v in eager], "max micro-batch 210m", f"fsdp 610m {fsdp} 4",
        f"fsdp 1b {fsdp} 4", "small step", "step 210m MLM40 [kernels] 8", "step 210m CLM [kernels] 8",
        "step 210m MLM40 [sdpa] 16", "step 210m CLM [sdpa] 16", "step 210m CLM [sdpa], loss chunk 33,554,432 8",
        "step 210m CLM [sdpa], loss chunk 536,870,912 8",
        "step 210m MLM40 [sdpa] compiled 8", "step 210m CLM [sdpa] compiled 8",
        "step 210m CLM [sdpa] compiled, loss chunk 33,554,432 8",
        "step 210m CLM [sdpa] compiled, loss chunk 536,870,912 8",
        "step 210m MLM40 [sdpa] compiled 16"]
    uncompiled = gpu_check.plan("cuda", 989.4, compiled=False)
    assert not any(args.get("compile_model") or args.get("variant", [None] * 3)[2] for _, args in uncompiled)
    assert [kind for kind, _ in uncompiled][:2] == ["checkpoint hash", "parity"]
    assert "kernels" not in str(gpu_check.plan("cpu", 1.0))  # a GPU-only backend
    assert "checkpoint hash" not in str(gpu_check.plan("cuda", 989.4, fsdp_sizes=[]))  # no size to hash


def test_each_measurement_gives_its_rows_on_cpu():
    """What each measurement of the check writes, on CPU (fp32, tiny): parity at float precision, a step with its MFU
    (through the chunked loss where a chunk size is given), FSDP said to be measured on a GPU only."""
    parity = gpu_check.parity("tiny", 16, "cpu")
    assert [r["variant"] for r in parity] == ["EuroBertForMaskedLM vs mlmclm (fp32)",
                                              "LlamaForCausalLM vs mlmclm (fp32)"]
    assert all(float(r["value"]) < 1e-5 for r in parity)
    for variant, name in ((["MLM40", "sdpa", False, 2, None], "MLM40 [sdpa]"),
                          (["CLM", "sdpa", False, 2, 1 << 10], "CLM [sdpa], loss chunk 1,024")):
        [row] = gpu_check.measure_step(variant, "tiny", 16, "cpu", peak=0.15, steps=1)
        assert row["check"] == "step" and row["variant"] == name and float(row["mfu"]) > 0
        assert gpu_check.describe("step", {"variant": variant})["variant"] == name  # a row not measured says the same
    for compiled in (False, True):
        assert gpu_check.fsdp_step("610m", 16, 1, "cpu", peak=0.15, compile_model=compiled) == [
            {"check": "fsdp", "size": "610m", "variant": "MLM40 FSDP2 one process" + " compiled" * compiled,
             "seq_len": 16, "batch": 1,
             "note": "not measured: on a GPU only (FSDP on CPU processes: tests/test_distributed.py)"}]


def test_a_checkpoint_is_written_and_timed_as_a_run_records_its_files(tmp_path, monkeypatch):
    """The hash row: a checkpoint written as a run writes it (accelerate's state after an AdamW step, hf/ weights),
    `checkpoints.write_state` timed as it records the sha256 of every file; its files, their size and the seconds in
    the row, the checkpoint removed after."""
    recorded, write_state = [], checkpoints.write_state

    def spy(path, state):
        write_state(path, state)
        saved = json.loads((path / STATE).read_text())
        files = {str(f.relative_to(path)): (sha256(f), f.stat().st_size) for f in path.rglob("*")
                 if f.is_file() and f.name != STATE}
        recorded.append(({**saved["weights"], **saved["files"]}, files))

    monkeypatch.setattr(checkpoints, "write_state", spy)
    [row] = gpu_check.checkpoint_hash("tiny", str(tmp_path), "cpu")
    [(hashed, files)] = recorded
    assert {"model.safetensors", "optimizer.bin", "hf/model.safetensors", "hf/config.json"} <= set(hashed)
    assert hashed == {name: digest for name, (digest, _) in files.items()} and list(tmp_path.iterdir()) == []
    size = sum(n for _, n in files.values()) / 2**30
    assert row["check"] == "checkpoint hash" and row["size"] == "tiny" and float(row["value"]) > 0
    assert row["note"].startswith(f"s to hash {len(hashed)} files, {size:.3g} GiB ("), row


def test_a_row_that_cannot_be_measured_says_why(monkeypatch):
    """Out of memory, in a step (whose error `bench_mfu` keeps) or at the first micro-batch tried: no number, a note
    "not measured: out of memory"."""
    def no_memory(self, *args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory (played)")

    monkeypatch.setattr(MlmClmForMaskedLM, "forward", no_memory)
    [row] = gpu_check.measure_step(["CLM", "sdpa", True, 2, None], "tiny", 16, "cpu", peak=0.15, steps=1)
    assert row["variant"] == "CLM [sdpa] compiled" and not row.get("mfu") and not row.get("tokens_per_s")
    assert row["note"] == "not measured: out of memory (OutOfMemoryError: CUDA out of memory (played))"
    [row] = gpu_check.largest_micro_batch("tiny", 16, "cpu", first=2, limit=8)
    assert row["batch"] == "" and row["note"] == "not measured: 2 ran out of memory"


def test_a_measurement_still_running_when_its_time_is_up_is_stopped():
    """A measurement runs in a fresh process stopped when the time left is spent (a compile can no longer run past
    the budget): its row says so, and the check goes on at once."""
    rows, elapsed = gpu_check.in_child("parity", {"size": "tiny", "seq_len": 16, "device": "cpu"}, limit=1.0)
    assert rows == [{"check": "parity", "size": "tiny", "seq_len": 16, "batch": "",
                     "note": "not measured: stopped at the budget after 1 s"}]  # torch alone takes longer to import


def test_a_measurement_that_fails_says_how_in_its_row():
    """A measurement's error (here: a step asked for without its arguments) is its row's note, not measured with the
    last line of its traceback; the check goes on."""
    rows, _ = gpu_check.in_child("step", {"variant": ["CLM", "sdpa", False, 2, None], "size": "nope"}, limit=300)
    assert rows == [{"check": "step", "size": "nope", "seq_len": "", "batch": 2, "variant": "CLM [sdpa]",
                     "note": "not measured: failed: TypeError: measure_step() missing 4 required positional "
                             "arguments: 'seq_len', 'device', 'peak', and 'steps'"}]


def _image_python(tmp_path: Path) -> tuple[list[str], dict]:
    """A python that sees only the GPU image's packages and their dependencies (`python -S`, a folder of links to
    them) and the repository, as `make bench-gpu` runs: its command and environment."""
    site = tmp_path / "site"
    site.mkdir()
    for dist in _closure(GPU_IMAGE):
        for top in {f.parts[0] for f in dist.files or [] if f.parts[0] not in ("..", "__pycache__")}:
            source = Path(dist.locate_file(top))
            if source.exists() and not (site / top).exists():
                (site / top).symlink_to(source)
    return [sys.executable, "-S"], {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{site}"}


@pytest.mark.slow  # end to end (several processes, or a whole command): `make test`, not test-quick
def test_the_check_on_cpu_ends_within_its_budget_with_every_row_written_as_it_goes(tmp_path):
    """`mlmclm bench gpu` in its CPU mode (tiny, fp32), compiled variants included, in the GPU image's python, with a
    budget shorter than the whole: the rows in the planned order, what no run measured first, each printed when it is
    written with its own time; the measurement running at the budget stopped, the later ones said not measured, FSDP
    said to need a GPU; no row past the budget, every planned row in OUT/gpu.csv, nothing left in TMPDIR (the
    checkpoint it hashed, the compiles' caches and the compiler's files of the one stopped: CI once found them)."""
    budget, out, scratch = 40, tmp_path / "out", tmp_path / "tmp"
    python, env = _image_python(tmp_path)
    scratch.mkdir()
    options = dict(size="tiny", seq_len=16, batches=[2], fsdp_sizes=["tiny"], small=False, steps=1)
    command = [*python, "-m", "mlmclm.cli", "bench", "gpu", str(out), "--device", "cpu", "--size", "tiny", "--seq-len",
               "16", "--batches", "2", "--fsdp-sizes", "tiny", "--no-small", "--steps", "1", "--peak-tflops", "0.15",
               "--budget", str(budget)]
    child = subprocess.Popen(command, env={**env, "TMPDIR": str(scratch)}, cwd=tmp_path, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    printed = []  # (when it came, the line) of each row's line
    for text in child.stdout:
        if re.match(r"\s*[\d.]+ s ", text):
            printed.append((time.perf_counter(), text))
    assert child.wait(timeout=300) == 0, child.stderr.read()[-3000:]
    rows = list(csv.DictReader((out / "gpu.csv").open()))
    planned = [gpu_check.describe(kind, args) for kind, args in gpu_check.plan("cpu", 0.15, **options)]
    named = ("step", "fsdp", "checkpoint hash")  # the measurements whose rows are told apart by their variants
    key = lambda r: (r["check"], r["variant"] if r["check"] in named else "")  # noqa: E731
    assert [key(r) for r in rows if not r["variant"].startswith("Llama")] == [key(d) for d in planned]
    assert rows[0]["check"] == "checkpoint hash" and list(scratch.iterdir()) == []
    at = [float(r["at_s"]) for r in rows]
    assert at == sorted(at) and at[-1] <= budget + 3, at
    assert all(float(r["elapsed_s"]) <= a for r, a in zip(rows, at))
    budgeted = ("not measured: stopped at the budget after ", f"not measured: the {budget} s budget was spent")
    for r in rows:
        measured = r["mfu"] or r["value"] or r["batch"] and r["check"] == "max micro-batch"
        gpu_only = r["check"] == "fsdp" and r["note"].startswith("not measured: on a GPU only")
        assert measured or gpu_only or r["note"].startswith(budgeted), r
    assert rows[-1]["note"].startswith(budgeted)  # the budget was shorter
    assert len(printed) == len(rows) and all(r["at_s"] in text for r, (_, text) in zip(rows, printed))
    # printed as written, not at the end: the lines came as far apart as the rows were measured
    assert printed[-1][0] - printed[0][0] >= at[-1] - at[0] - 2
    assert rows[0]["device"] and rows[0]["commit"] and rows[0]["torch"]


def test_each_option_of_the_check_is_refused_in_one_line_naming_it_before_any_work(tmp_path, capsys, monkeypatch):
    """A negative peak (negative MFU), `--steps 0` (rows of StatisticsError), `--batches 2,x`, an OUT that is a file
    or read-only: `mlmclm: error: ...` naming the option and what it must be, before anything is measured."""
    from helpers import read_only_folder

    from mlmclm.cli import main

    monkeypatch.setattr(gpu_check, "in_child", lambda *a: pytest.fail("the check started"))
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
