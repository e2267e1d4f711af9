"""Launch the tiny recipe under FSDP2 in two CPU processes (gloo) many times in a row, to see whether a launch ever
fails (issue 48: one launch of about eight once ended with SIGABRT on rank 1). Launches go in pairs: the first trains
the tiny recipe's run to its end, the second resumes it from its last sharded checkpoint before the final one (the
final one removed) and must end with the same weights. Each launch's exit status, the exit codes torchrun reports for
its ranks and its wall time go to OUT/launches.csv; the output of a failed launch to OUT/launch_NN.log.

    OMP_NUM_THREADS=1 .venv/bin/python scripts/fsdp_launches.py [--launches 20] [--out results/local/fsdp-launches]

Run from the repository root; the tiny recipe's data is prepared first (`mlmclm data tiny`), and each launch writes
its run into its own temporary folder.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from safetensors.torch import load_file

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's package, as the launches run it
from mlmclm.config import RECIPES_DIR, PretrainConfig, load_config  # noqa: E402

CONFIG = ROOT / "mlmclm" / "shipped" / "accelerate" / "fsdp.yaml"
TINY = load_config(PretrainConfig, RECIPES_DIR / "tiny.yaml")
RUN = Path(TINY.scale) / TINY.run_id
FINAL = f"step_{sum(n for _, n in TINY.phases):06d}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(work: Path) -> tuple[int, str, float]:
    """One two-process launch of the tiny recipe into `work`: (exit status, output, seconds)."""
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(CONFIG), "--num_processes", "2",
           "--mixed_precision", "no", "--main_process_port", str(free_port()), "-m", "mlmclm.cli", "pretrain", "tiny",
           "micro_batch_size=4", f"results_dir={work / 'runs'}", f"checkpoints_dir={work / 'ckpt'}"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True)
    return proc.returncode, proc.stdout + proc.stderr, time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--launches", type=int, default=20, help="launches in all (pairs: train, then resume)")
    parser.add_argument("--out", default="results/local/fsdp-launches", help="folder of launches.csv and the logs")
    args = parser.parse_args()
    out = ROOT / args.out
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "mlmclm.cli", "data", "tiny"], cwd=ROOT, check=True)  # a launch builds none
    rows, work, trained = [], None, None
    for n in range(1, args.launches + 1):
        kind = "train" if n % 2 else "resume"
        if kind == "train":
            work = Path(tempfile.mkdtemp(prefix="fsdp-launch-"))
        else:  # the final checkpoint removed: the run resumes from its last sharded checkpoint before it
            shutil.rmtree(work / "ckpt" / RUN / FINAL, ignore_errors=True)
        rc, output, seconds = launch(work)
        ranks = ";".join(re.findall(r"exitcode\s*:\s*(-?\d+)", output))
        weights = work / "ckpt" / RUN / FINAL / "hf" / "model.safetensors"
        same = ""
        if rc == 0 and kind == "train":
            trained = load_file(weights)
        elif rc == 0 and trained is not None:
            resumed = load_file(weights)
            same = str(all((resumed[k] == trained[k]).all() for k in trained))
        if rc != 0 or "SIGABRT" in output or "Signal 6" in output:
            (out / f"launch_{n:02d}.log").write_text(output)
        rows.append({"launch": n, "kind": kind, "exit": rc, "rank_exitcodes": ranks, "sigabrt": int(
            "SIGABRT" in output or "Signal 6" in output), "resumed_weights_equal": same, "seconds": f"{seconds:.1f}"})
        print(",".join(str(v) for v in rows[-1].values()), flush=True)
        if kind == "resume":
            shutil.rmtree(work, ignore_errors=True)
    with open(out / "launches.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, rows[0].keys())
        writer.writeheader()
        writer.writerows(rows)
    failed = [r for r in rows if r["exit"] != 0 or r["resumed_weights_equal"] == "False"]
    print(f"{len(rows) - len(failed)} of {len(rows)} launches passed; {out / 'launches.csv'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
