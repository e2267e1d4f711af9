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


@pytest.mark.slow  # end to end (several processes, or a whole command): `make test`, not test-quick
@pytest.mark.skipif(torch.cuda.is_available(), reason="the dry form runs CPU processes (gloo)")
def test_the_sbatch_launch_line_on_two_local_nodes_trains_one_model(tmp_path, free_port):
    """`bash pretrain.sbatch CONFIG` with srun and scontrol stand-ins: one `accelerate launch` a node, node 0 the
    main one, one process a node; both train one model (one run, two processes, FSDP), the model of one process."""
    schedule = {"phases": [["clm", 2], ["mlm40", 2]], "log_every": 1, "checkpoint": {"every": 4}}
    one = _config(tmp_path, "one", **schedule)
    pretrain(one, root=working_root())  # also prepares the data the launch finds (as `mlmclm data` does)
    two = _config(tmp_path, "two", **schedule)
    path = tmp_path / "two.yaml"
    path.write_text(to_yaml(two))
    assert main(["data", str(path)]) == 0
    bin_dir, logs = tmp_path / "bin", tmp_path / "nodes"
    bin_dir.mkdir()
    logs.mkdir()
    _tool(bin_dir, "srun", FAKE_SRUN)
    _tool(bin_dir, "scontrol", FAKE_SCONTROL)
    env = {**os.environ, "PATH": f"{bin_dir}:{Path(sys.executable).parent}:{os.environ['PATH']}",
           "SLURM_JOB_NODELIST": "node[0-1]", "SLURM_NNODES": "2", "SLURM_JOB_ID": "1", "GPUS_PER_NODE": "1",
           "MAIN_PORT": str(free_port), "OMP_NUM_THREADS": "1", "NODE_LOGS": str(logs)}
    proc = subprocess.run(["bash", str(SCRIPT), str(path)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    out = {p.name: p.read_text() for p in sorted(logs.iterdir())}
    assert proc.returncode == 0, (proc.stderr[-2000:], {k: v[-3000:] for k, v in out.items()})
    assert sorted(out) == ["node0.log", "node1.log"]
    meta = json.loads((Path(two.results_dir) / "test" / "two" / "meta.json").read_text())
    assert meta["status"] == "complete" and meta["processes"] == 2 and meta["distributed"]["type"] == "FSDP"
    assert [l for _, l in _losses(two)] == pytest.approx([l for _, l in _losses(one)], rel=1e-5)
    assert "two: complete" in out["node0.log"] and "two: complete" in out["node1.log"]  # each node's process


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
