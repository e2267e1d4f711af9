"""The SLURM recipe (docs/cluster.md, issue 48): the shipped sbatch script's launch line run in dry form, two "nodes"
as two local launches of one CPU process each (gloo, FSDP2 from the shipped accelerate config), train one model; the
docs show the script as shipped; the 1B recipe is Table 1's."""

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mlmclm.io import working_root
from mlmclm.cli import main
from mlmclm.config import RECIPES_DIR, PretrainConfig, load_config, to_yaml
from mlmclm.models.configuration import MlmClmConfig
from mlmclm.training.pretrain import pretrain

from test_distributed import _config, _losses

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "mlmclm" / "shipped" / "slurm" / "pretrain.sbatch"

FAKE_SRUN = """#!/bin/bash
# srun's stand-in: its command once a "node" of the job (SLURM_NNODES), each with its SLURM_NODEID, on this machine
while [[ $1 == --* ]]; do shift; done
pids=()
for ((n = 0; n < SLURM_NNODES; n++)); do SLURM_NODEID=$n "$@" > "$NODE_LOGS/node$n.log" 2>&1 & pids+=($!); done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
exit $status
"""
FAKE_SCONTROL = """#!/bin/bash
# scontrol's stand-in: `show hostnames` of a job on two nodes, both this machine
echo 127.0.0.1
echo 127.0.0.1
"""


def _tool(folder: Path, name: str, text: str) -> None:
    path = folder / name
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def trained_here_and_to_launch(tmp_path, schedule, *run_ids):
    """The run `one` trained in this process (which also prepares the data that launches find, as `mlmclm data`
    does), and for each of `run_ids` the same run under that id: (its config, the config file a launch is given)."""
    one = _config(tmp_path, "one", **schedule)
    pretrain(one, root=working_root())
    launches = []
    for run_id in run_ids:
        cfg, path = _config(tmp_path, run_id, **schedule), tmp_path / f"{run_id}.yaml"
        path.write_text(to_yaml(cfg))
        launches.append((cfg, path))
    assert main(["data", str(launches[0][1])]) == 0
    return one, launches


def assert_trained_as_one(cfg, one) -> None:
    """`cfg`'s run complete on two processes under FSDP, with the losses of `one`'s run in one process."""
    meta = json.loads((Path(cfg.results_dir) / cfg.scale / cfg.run_id / "meta.json").read_text())
    assert meta["status"] == "complete" and meta["processes"] == 2 and meta["distributed"]["type"] == "FSDP"
    assert [l for _, l in _losses(cfg)] == pytest.approx([l for _, l in _losses(one)], rel=1e-5)


@pytest.mark.slow  # end to end (several processes, or a whole command): `make test`, not test-quick
@pytest.mark.skipif(torch.cuda.is_available(), reason="the dry form runs CPU processes (gloo)")
def test_the_sbatch_launch_line_on_two_local_nodes_trains_one_model(tmp_path, free_port):
    """`bash pretrain.sbatch CONFIG` with srun and scontrol stand-ins, as on nodes without GPUs
    (`--gpus-per-node 0`): one `accelerate launch` a node, node 0 the main one, one process a node; both train one
    model (one run, two processes, FSDP), the model of one process. tests/test_slurm.py submits it to a real SLURM."""
    schedule = {"phases": [["clm", 2], ["mlm40", 2]], "log_every": 1, "checkpoint": {"every": 4}}
    one, [(two, path)] = trained_here_and_to_launch(tmp_path, schedule, "two")
    bin_dir, logs = tmp_path / "bin", tmp_path / "nodes"
    bin_dir.mkdir()
    logs.mkdir()
    _tool(bin_dir, "srun", FAKE_SRUN)
    _tool(bin_dir, "scontrol", FAKE_SCONTROL)
    env = {**os.environ, "PATH": f"{bin_dir}:{Path(sys.executable).parent}:{os.environ['PATH']}",
           "SLURM_JOB_NODELIST": "node[0-1]", "SLURM_NNODES": "2", "SLURM_JOB_ID": "1", "SLURM_GPUS_PER_NODE": "0",
           "MAIN_PORT": str(free_port), "OMP_NUM_THREADS": "1", "NODE_LOGS": str(logs)}
    proc = subprocess.run(["bash", str(SCRIPT), str(path)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    out = {p.name: p.read_text() for p in sorted(logs.iterdir())}
    assert proc.returncode == 0, (proc.stderr[-2000:], {k: v[-3000:] for k, v in out.items()})
    assert sorted(out) == ["node0.log", "node1.log"]
    assert_trained_as_one(two, one)
    assert "two: complete" in out["node0.log"] and "two: complete" in out["node1.log"]  # each node's process


@pytest.mark.parametrize("given, missing", [
    ({}, "SLURM_JOB_ID is not set"),
    ({"SLURM_JOB_ID": "7", "SLURM_NNODES": "2"}, "SLURM_JOB_NODELIST is not set"),
    ({"SLURM_JOB_ID": "7", "SLURM_NNODES": "2", "SLURM_JOB_NODELIST": "node[0-1]"}, "scontrol names no host"),
])
def test_the_sbatch_script_without_slurm_stops_in_one_line(tmp_path, given, missing):
    """Run where SLURM's variables (or its scontrol) are missing, the script says so in one line and exits 2 before
    it launches anything (issue 63): no empty main host, no srun. `scontrol` here answers nothing, as off a cluster."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _tool(bin_dir, "scontrol", "#!/bin/bash\nexit 1\n")
    _tool(bin_dir, "srun", f"#!/bin/bash\ntouch {tmp_path / 'launched'}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update(given, PATH=f"{bin_dir}:{os.environ['PATH']}")
    proc = subprocess.run(["bash", str(SCRIPT), "paper"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and proc.stdout == "" and not (tmp_path / "launched").exists()
    assert len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith("pretrain.sbatch: error: " + missing)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin"]  # nothing written


@pytest.mark.parametrize("name, value", [("SLURM_JOB_ID", "12.5"), ("SLURM_NNODES", "abc"), ("SLURM_NNODES", "0"),
                                         ("SLURM_GPUS_PER_NODE", "4(x2)"), ("SLURM_GPUS_PER_NODE", "gpu:a100:x"),
                                         ("SLURM_GPUS_PER_NODE", "gpu:-1")])
def test_a_slurm_value_that_is_not_a_number_stops_in_one_line(tmp_path, name, value):
    """With every variable set and scontrol answering, a job id, node count or GPU count that is not a whole number
    (SLURM_GPUS_PER_NODE: 8, gpu:8, gpu:a100:8) stops the script in its own one line naming the variable and the
    value, exit 2, before srun (issue 63: no bash arithmetic error, no launch)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _tool(bin_dir, "scontrol", FAKE_SCONTROL)
    _tool(bin_dir, "srun", f"#!/bin/bash\ntouch {tmp_path / 'launched'}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    env.update({"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "node[0-1]", "SLURM_NNODES": "2",
                "SLURM_GPUS_PER_NODE": "8", name: value}, PATH=f"{bin_dir}:{os.environ['PATH']}")
    proc = subprocess.run(["bash", str(SCRIPT), "paper"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and proc.stdout == "" and not (tmp_path / "launched").exists(), proc.stderr
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith(f"pretrain.sbatch: error: {name}='{value}' is not "), proc.stderr


@pytest.mark.parametrize("gpus, processes", [("0", 2), ("4", 8), ("a100:8", 16)])
def test_the_gpus_a_node_set_the_processes_and_the_port_follows_the_job(tmp_path, gpus, processes):
    """sbatch's --gpus-per-node (SLURM_GPUS_PER_NODE in the job, `[TYPE:]COUNT`) is the one setting: one process a
    GPU, one CPU process a node without GPUs (0); the main port is 20000 + the job id modulo 10000."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _tool(bin_dir, "srun", "#!/bin/bash\nwhile [[ $1 == --* ]]; do shift; done\nSLURM_NODEID=0 \"$@\"\n")
    _tool(bin_dir, "scontrol", FAKE_SCONTROL)
    _tool(bin_dir, "accelerate", f"#!/bin/bash\necho \"$@\" > {tmp_path / 'launch'}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_") and k != "MAIN_PORT"}
    env.update(PATH=f"{bin_dir}:{Path(sys.executable).parent}:{os.environ['PATH']}", SLURM_JOB_ID="123456",
               SLURM_JOB_NODELIST="node[0-1]", SLURM_NNODES="2", SLURM_GPUS_PER_NODE=gpus)
    proc = subprocess.run(["bash", str(SCRIPT), "paper"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    launch = (tmp_path / "launch").read_text().split()
    assert launch[launch.index("--num_processes") + 1] == str(processes)
    assert launch[launch.index("--main_process_port") + 1] == "23456"
    assert launch[launch.index("--main_process_ip") + 1] == "127.0.0.1" and launch[-1] == "paper"


def test_the_docs_show_the_shipped_sbatch_script():
    text = (ROOT / "docs" / "cluster.md").read_text()
    assert f"```bash\n{SCRIPT.read_text()}```" in text


def test_the_1b_recipe_is_table_1_with_the_610m_recipe_beside_it():
    one_b, paper = (load_config(PretrainConfig, RECIPES_DIR / f"{n}.yaml") for n in ("paper-1b", "paper"))
    c = MlmClmConfig.from_size(one_b.model.size)
    shape = (c.num_hidden_layers, c.hidden_size, c.intermediate_size, c.num_attention_heads, c.num_key_value_heads)
    assert shape == (28, 1728, 5120, 18, 6) and one_b.run_id == "1b-mlm40-42k" and one_b.scale == "paper"
    same = to_yaml(paper).replace("610m", "1b")
    assert to_yaml(one_b) == same  # everything but the size (and the run id) as the 610M recipe
