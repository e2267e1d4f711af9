"""One writer at a time: the lock of a folder (waits, names its holder, never stale), and two real `study run`
processes on one checkout that end with what one run writes."""

import csv
import json
import os
import select
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from mlmclm import locks

ROOT = Path(__file__).resolve().parents[1]
HOLD = "import sys, time; from mlmclm import locks\nwith locks.hold(sys.argv[1]):\n    print('got it', flush=True)\n" \
       "    time.sleep(float(sys.argv[2]))\n"


def _holder(folder, seconds):
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(folder), str(seconds)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc


def test_a_second_process_waits_and_names_the_holder(tmp_path):
    folder = tmp_path / "run"
    with locks.hold(folder):
        assert (folder / locks.LOCK).read_text().startswith(f"{os.getpid()} ")
        with locks.hold(folder):  # this process again: no wait for itself
            pass
        proc = _holder(folder, 0)
        assert select.select([proc.stderr], [], [], 60)[0], "the second process said nothing"
        line = proc.stderr.readline()  # said before it waits
        assert line.startswith(f"mlmclm: waiting for process {os.getpid()} (") and line.endswith(
            f"which is writing {folder}\n"), line
        assert proc.poll() is None  # still waiting
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0 and out == "got it\n"
    assert not (folder / locks.LOCK).exists()  # removed on release


def test_a_killed_holder_leaves_no_stale_lock(tmp_path, capsys):
    folder = tmp_path / "run"
    proc = _holder(folder, 300)
    assert proc.stdout.readline() == "got it\n"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert (folder / locks.LOCK).read_text().startswith(f"{proc.pid} ")  # its file is left, its lock is not
    assert locks.busy(folder) is None
    with locks.hold(folder):
        assert (folder / locks.LOCK).read_text().startswith(f"{os.getpid()} ")
    assert "waiting" not in capsys.readouterr().err  # taken at once


def test_readers_leave_out_a_model_being_written(tmp_path, capsys):
    """A notebook reading a tree that a study writes: a model folder whose lock another process holds is left out
    (named, with its writer), never read half-done; once released it is read again. Its own writes are read."""
    from mlmclm.analysis.loading.results import load_run_tree
    from helpers import write_run

    for model in ("mini-m-clm-400", "mini-m-mlm40-400"):
        write_run(tmp_path, model, "TC", "toy_pos", 1e-5, 0, 0.5, 0.5)
    proc = _holder(tmp_path / "mini-m-clm-400", 300)
    try:
        assert proc.stdout.readline() == "got it\n"
        assert locks.busy(tmp_path / "mini-m-clm-400").startswith(f"process {proc.pid} (")
        assert locks.busy(tmp_path / "mini-m-mlm40-400") is None
        assert set(load_run_tree(tmp_path, "ours", "mini")["model"]) == {"mini-m-mlm40-400"}
        assert f"left out mini-m-clm-400: process {proc.pid} (" in capsys.readouterr().out
    finally:
        proc.kill()
        proc.wait()
    assert locks.busy(tmp_path / "mini-m-clm-400") is None  # its file is left, its lock is not
    assert len(load_run_tree(tmp_path, "ours", "mini")) == 2
    with locks.hold(tmp_path / "mini-m-clm-400"):
        assert len(load_run_tree(tmp_path, "ours", "mini")) == 2


def _study(results, ckpt):
    return [sys.executable, "-m", "mlmclm.cli", "study", "run", "stability", "--scale", "tiny", "--runs-dir",
            str(results), "--checkpoints-dir", str(ckpt), "--set", "finetune.datasets=[multiemo_sentiment]"]


def _outcome(results):
    """What a study run leaves that must not depend on who wrote it: the logs' steps and losses, and every score."""
    logs = {p.parent.name: [(r["step"], r["objective"], r["loss"]) for r in csv.DictReader(p.open())]
            for p in results.rglob("pretrain.csv")}
    scores = {str(p.relative_to(results)): (json.loads(p.read_text())["validation"]["score"],
                                            json.loads(p.read_text())["test"]["score"])
              for p in results.rglob("results.json")}
    return logs, scores


@pytest.mark.slow  # end to end (several processes, or a whole command): `make test`, not test-quick
def test_two_study_runs_on_one_checkout_end_as_one_run(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TQDM_DISABLE": "1"}
    one = subprocess.run(_study(tmp_path / "one" / "runs", tmp_path / "one" / "ckpt"), cwd=ROOT, env=env,
                         capture_output=True, text=True)
    assert one.returncode == 0, one.stderr[-2000:]
    procs = [subprocess.Popen(_study(tmp_path / "two" / "runs", tmp_path / "two" / "ckpt"), cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in outs]
    assert any("mlmclm: waiting for process" in err for _, err in outs)  # they met, and one waited
    logs, scores = _outcome(tmp_path / "two" / "runs")
    assert (logs, scores) == _outcome(tmp_path / "one" / "runs")
    assert len(logs) == 2 and all(int(rows[-1][0]) == 42 for rows in logs.values()) and len(scores) == 8
    leftovers = [p for p in (tmp_path / "two").rglob("*") if p.name.endswith((".tmp", ".lock", ".old"))
                 or p.name.startswith(".tmp-")]
    assert not leftovers
    again = subprocess.run(_study(tmp_path / "two" / "runs", tmp_path / "two" / "ckpt"), cwd=ROOT, env=env,
                           capture_output=True, text=True)
    assert again.returncode == 0 and "(0 to train)" in again.stdout and "0 with 0 fine-tuning" in again.stdout
