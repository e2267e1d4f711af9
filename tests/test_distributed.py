"""A run's meta.json names its distributed setup (issue 25, item 7); FSDP2 trains on CPU processes over gloo as one
process does, and resumes from its sharded checkpoints (issue 48)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from safetensors.torch import load_file

from mlmclm import store
from mlmclm.paths import STATE, hf_dir, step_dir, tmp_dir
from mlmclm.io import shown, working_root
from mlmclm.config import PretrainConfig, load_config, to_yaml
from mlmclm.errors import ConfigError
from helpers import sentence
from mlmclm.training import checkpoints, reshard
from mlmclm.training.build import shard_on_cpu
from mlmclm.training.pretrain import pretrain

ROOT = Path(__file__).resolve().parents[1]
FSDP_CONFIG = ROOT / "mlmclm" / "shipped" / "accelerate" / "fsdp.yaml"


def _config(tmp_path, run_id, **over):
    corpus = tmp_path / "corpus.txt"
    if not corpus.exists():
        corpus.write_text("\n".join(sentence(i, 12) + " " + sentence(i * 5 + 1, 9) for i in range(4000)) + "\n")
    return load_config(PretrainConfig, {
        "run_id": run_id, "scale": "test", "phases": [["clm", 4]], "batch_size": 8, "micro_batch_size": 4,
        "log_every": 2, "results_dir": str(tmp_path / "runs"), "checkpoints_dir": str(tmp_path / "ckpt"),
        "model": {"size": "tiny"}, "data": {"corpus": str(corpus), "vocab_size": 512, "seq_len": 32,
                                            "root": str(tmp_path / "data")},
        "optim": {"lr": 3e-3, "warmup_steps": 1, "decay_steps": 1}, "checkpoint": {"every": 4}, **over})


def test_meta_names_the_distributed_setup(tmp_path):
    run = pretrain(_config(tmp_path, "one"), root=working_root())
    meta = json.loads((run / "meta.json").read_text())
    assert meta["distributed"]["type"] == "NO" and meta["distributed"]["processes"] == meta["processes"] == 1


def _launch(tmp_path, port, config_path, *asked):
    return subprocess.run([sys.executable, "-m", "accelerate.commands.launch", *asked, "--dynamo_backend", "no",
                           "--main_process_port", str(port), "-m", "mlmclm.cli", "pretrain", str(config_path)],
                          cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True,
                          timeout=600)


def _hf_weights(cfg, step):
    folder = step_dir(Path(cfg.checkpoints_dir) / cfg.scale / cfg.run_id, step)
    return load_file(hf_dir(folder) / "model.safetensors")


def _losses(cfg):
    rows = (Path(cfg.results_dir) / cfg.scale / cfg.run_id / "pretrain.csv").read_text().splitlines()[1:]
    return [(int(r.split(",")[0]), float(r.split(",")[4])) for r in rows]


@pytest.mark.slow  # end to end (several processes, or a whole command): `make test`, not test-quick
@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU path of FSDP (gloo); on GPUs the GPU check runs it")
def test_fsdp_on_two_cpu_processes_trains_as_one_and_resumes_from_its_shards(tmp_path, free_port):
    """The shipped accelerate config (FSDP2, sharded state) in two CPU processes: the losses and weights of one
    process; every file of a checkpoint (each process's shard) in its sha256 record, a changed shard named; a resume
    from the sharded step-3 checkpoint ends with the weights of the uninterrupted launch, bit for bit."""
    schedule = {"phases": [["clm", 3], ["mlm40", 3]], "log_every": 1, "checkpoint": {"every": 3, "keep_last": 2}}
    one = _config(tmp_path, "one", **schedule)
    pretrain(one, root=working_root())
    two = _config(tmp_path, "two", **schedule)
    path = tmp_path / "two.yaml"
    path.write_text(to_yaml(two))
    fsdp = ["--config_file", str(FSDP_CONFIG), "--num_processes", "2", "--mixed_precision", "no"]
    proc = _launch(tmp_path, free_port, path, *fsdp)
    assert proc.returncode == 0, proc.stderr[-3000:]
    meta = json.loads((Path(two.results_dir) / "test" / "two" / "meta.json").read_text())
    assert meta["distributed"]["type"] == "FSDP" and meta["distributed"]["processes"] == 2
    assert meta["distributed"]["fsdp"]["version"] == 2
    assert [s for s, _ in _losses(one)] == [s for s, _ in _losses(two)] == list(range(1, 7))
    assert [l for _, l in _losses(two)] == pytest.approx([l for _, l in _losses(one)], rel=1e-5)
    a, b = _hf_weights(one, 6), _hf_weights(two, 6)
    assert a.keys() == b.keys() and all(torch.allclose(a[k], b[k], atol=1e-5) for k in a)

    step3 = step_dir(Path(two.checkpoints_dir) / "test" / "two", 3)
    state = store.read_state(step3)
    on_disk = {str(p.relative_to(step3)) for p in step3.rglob("*") if p.is_file() and p.name != STATE}
    assert on_disk == state["weights"].keys() | state["files"].keys()
    shards = sorted(n for n in state["files"] if n.startswith("pytorch_model_fsdp_0/") and n.endswith(".distcp"))
    assert len(shards) == 2, state["files"]  # one a process: the model is sharded on disk
    changed = tmp_path / "changed"
    shutil.copytree(step3, changed)
    with open(changed / shards[1], "r+b") as f:
        f.seek(-1, 2)
        last = f.read(1)
        f.seek(-1, 2)
        f.write(bytes([last[0] ^ 1]))
    assert store.damage(changed) is None  # present: complete, as a reader without hashes sees it
    assert store.damage(changed, verify=True) == f"{shards[1]}: its sha256 is not the one recorded when it " \
                                                      "was saved"

    straight = _losses(two)
    checkpoints.remove(step_dir(step3.parent, 6))  # the run resumes from its sharded step-3 checkpoint
    proc = _launch(tmp_path, free_port, path, *fsdp)
    assert proc.returncode == 0, proc.stderr[-3000:]
    resumed = _hf_weights(two, 6)
    assert all(torch.equal(resumed[k], b[k]) for k in b)
    assert _losses(two) == straight


def test_fsdp1_on_cpu_processes_is_refused_in_one_line(monkeypatch):
    """On CPU processes only FSDP2 runs (and is tested); FSDP1 is refused, saying how to ask for FSDP2."""
    monkeypatch.setenv("FSDP_VERSION", "1")
    with pytest.raises(ConfigError, match=r"^FSDP version 1 is not run on CPU processes here \(FSDP2 is\); launch "
                                          r"FSDP2: --fsdp_version 2"):
        shard_on_cpu(None)


def _as_ranks(ranks, port: int, *args) -> list[tuple[int, list[str]]]:
    """`mlmclm ARGS` as processes `ranks` of a two-process launch, each started alone with no launcher (so one whose
    peer never comes): what each does before any barrier (after one, it would wait for its peer until the timeout).
    Each one's exit status and the lines of its stderr."""
    procs = [subprocess.Popen([sys.executable, "-m", "mlmclm.cli", *args], cwd=ROOT, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "OMP_NUM_THREADS": "1", "WORLD_SIZE": "2", "RANK": str(rank),
                                   "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                                   "MASTER_PORT": str(port)}) for rank in ranks]
    return [(p.wait(timeout=600), [ln for ln in p.stderr.read().splitlines() if ln.strip()]) for p in procs]


@pytest.mark.slow  # end to end (several processes, or a whole command): `make test`, not test-quick
def test_a_launch_without_prepared_data_is_refused_by_every_process_before_any_barrier(tmp_path, free_port):
    """No shards: each process says so in one line, naming `mlmclm data`, and builds nothing; after `mlmclm data`,
    shards cut short (a partial copy) are refused likewise, naming the file."""
    cfg = _config(tmp_path, "two")
    path = tmp_path / "two.yaml"
    path.write_text(to_yaml(cfg))
    for status, lines in _as_ranks((0, 1), free_port, "pretrain", str(path)):
        assert status == 2 and len(lines) == 1, lines
        assert lines[0].startswith("mlmclm: error: data not prepared for this multi-process launch: its tokenizer "), \
            lines[0]
        assert "mlmclm data CONFIG" in lines[0]  # a config of no shipped recipe: the launch's own file
    assert not (tmp_path / "data" / "shards").exists() and not (tmp_path / "runs" / "test" / "two").exists()

    from mlmclm.cli import main
    assert main(["data", str(path)]) == 0
    train = next((tmp_path / "data" / "shards").glob("*/train.bin"))
    with open(train, "r+b") as f:
        f.truncate(train.stat().st_size - 4)
    [(status, lines)] = _as_ranks([1], free_port, "pretrain", str(path))  # a process that is not the main one
    assert status == 2 and len(lines) == 1, lines
    assert f"shards {train.parent}: partial: train.bin holds" in lines[0] and "remove that folder" in lines[0]


def test_data_names_the_scale_recipe_and_a_seeds_own_shards():
    """The command a refusal gives: the scale's recipe, with the data fields in which the run differs from it."""
    from mlmclm.config import recipe_path
    from mlmclm.training.corpus import prepare_command

    root = working_root()  # a run's config is resolved against it (`PretrainConfig.resolved`) before it is refused
    paper = load_config(PretrainConfig, recipe_path("paper")).resolved(root)
    assert prepare_command(paper, root) == "mlmclm data paper"
    seeded = load_config(PretrainConfig, recipe_path("tiny"), ["data.seed=2"]).resolved(root)
    assert prepare_command(seeded, root) == "mlmclm data tiny data.seed=2"


def test_study_run_under_a_launch_fine_tunes_nowhere_and_says_how(tmp_path, free_port):
    """Every process of a launch would run every fine-tuning grid: refused in one line before any work, naming
    --pretrain-only and the command that fine-tunes in one process."""
    [(status, lines)] = _as_ranks([1], free_port, "study", "run", "scaling", "--scale", "tiny", "--runs-dir",
                                  str(tmp_path / "runs"), "--checkpoints-dir", str(tmp_path / "ckpt"))
    assert status == 2 and len(lines) == 1, lines
    assert lines[0] == ("mlmclm: error: study run under a multi-process launch pretrains only (every process trains "
                        "each run together): add --pretrain-only; then fine-tune in one process, without accelerate "
                        "launch: mlmclm study run scaling --scale tiny (it finds the runs trained)")
    assert not (tmp_path / "runs").exists() and not (tmp_path / "ckpt").exists()


@pytest.mark.slow  # end to end (several processes, or a whole command): `make test`, not test-quick
@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU processes (gloo)")
def test_study_run_pretrain_only_under_a_launch_trains_each_run_on_every_process(tmp_path, free_port):
    """`study run --pretrain-only` under a two-process launch: each missing run is trained by both processes together
    (its meta.json: two processes), once its data is prepared (`mlmclm data`)."""
    from mlmclm.cli import main

    recipe = tmp_path / "tiny2.yaml"  # the tiny template, its batch split over two processes
    recipe.write_text((ROOT / "mlmclm" / "recipes" / "tiny.yaml").read_text().replace("micro_batch_size: 8",
                                                                                        "micro_batch_size: 4"))
    assert main(["data", str(recipe), f"data.root={tmp_path / 'data'}"]) == 0
    proc = subprocess.run([sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
                           "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
                           "--main_process_port", str(free_port), "-m", "mlmclm.cli", "study", "run", "scaling",
                           "--scale", "tiny", "--set", f"run_config={recipe}", "--model", "tiny-s-clm-42",
                           "--runs-dir", str(tmp_path / "runs"), "--checkpoints-dir", str(tmp_path / "ckpt"),
                           "--data-dir", str(tmp_path / "data"), "--pretrain-only"],
                          cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    meta = json.loads((tmp_path / "runs" / "tiny" / "tiny-s-clm-42" / "meta.json").read_text())
    assert meta["status"] == "complete" and meta["processes"] == 2


# ---- FSDP checkpoints and process counts (issue 62 item 3, issue 63) ----
FSDP = ["--config_file", str(FSDP_CONFIG), "--num_processes", "2", "--mixed_precision", "no"]
SCHEDULE = {"phases": [["clm", 3], ["mlm40", 3]], "log_every": 1, "checkpoint": {"every": 3, "keep_last": 2}}


def _back_to_step_3(cfg) -> Path:
    """The run's checkpoint folder, its checkpoints after step 3 removed: a resume starts at step 4 (the MLM phase)."""
    root = Path(cfg.checkpoints_dir) / cfg.scale / cfg.run_id
    checkpoints.drop_after(root, 3)
    assert store.checkpoint_steps(root) == [3]
    return root


@pytest.mark.slow  # end to end (several processes, or a whole command): `make test`, not test-quick
@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU path of FSDP (gloo); on GPUs the GPU check runs it")
def test_a_checkpoint_resumes_on_another_process_count_as_the_run_would_have_gone_on(tmp_path, free_port):
    """A run trained by two FSDP processes (its state sharded on disk) resumed by one, and a run trained by one (its
    state whole) resumed by two under FSDP: each ends with the losses and weights of its uninterrupted run, within
    float tolerance; the checkpoint each resumed run writes is in the layout of its new process count."""
    one, two = _config(tmp_path, "one", **SCHEDULE), _config(tmp_path, "two", **SCHEDULE)
    pretrain(one, root=working_root())
    paths = {c.run_id: tmp_path / f"{c.run_id}.yaml" for c in (one, two)}
    for cfg in (one, two):
        paths[cfg.run_id].write_text(to_yaml(cfg))
    proc = _launch(tmp_path, free_port, paths["two"], *FSDP)
    assert proc.returncode == 0, proc.stderr[-3000:]
    straight = {c.run_id: (_losses(c), _hf_weights(c, 6)) for c in (one, two)}
    roots = {c.run_id: _back_to_step_3(c) for c in (one, two)}
    assert (step_dir(roots["two"], 3) / "pytorch_model_fsdp_0").is_dir()  # saved sharded: one shard a process
    assert (step_dir(roots["one"], 3) / "model.safetensors").is_file()  # saved whole

    pretrain(two, root=working_root())  # two processes -> one
    proc = _launch(tmp_path, free_port, paths["one"], *FSDP)  # one process -> two
    assert proc.returncode == 0, proc.stderr[-3000:]
    for cfg in (one, two):
        losses, weights = straight[cfg.run_id]
        assert [s for s, _ in _losses(cfg)] == list(range(1, 7))
        assert [l for _, l in _losses(cfg)] == pytest.approx([l for _, l in losses], rel=1e-5)
        resumed = _hf_weights(cfg, 6)
        assert resumed.keys() == weights.keys()
        assert all(torch.allclose(resumed[k], weights[k], atol=1e-5) for k in weights)
    assert (step_dir(roots["two"], 6) / "model.safetensors").is_file()
    assert (step_dir(roots["one"], 6) / "pytorch_model_fsdp_0").is_dir()


def test_a_checkpoint_no_layout_reads_is_refused_naming_the_process_count_it_was_saved_with(tmp_path):
    """A checkpoint holding neither accelerate's whole state nor its FSDP shards (here: only the random generators of
    its two processes) is refused in one line naming the process count to resume it with."""
    from accelerate import Accelerator

    step = tmp_path / "step_000003"
    step.mkdir()
    for rank in (0, 1):
        (step / f"random_states_{rank}.pkl").write_bytes(b"")
    with pytest.raises(ConfigError, match=r"^checkpoint \S+step_000003 was saved by 2 process\(es\) in a layout this "
                                          r"launch of 1 does not read .*; resume it with 2 process\(es\)"):
        reshard.load_state(Accelerator(cpu=True), step, None, None)


def test_an_interruption_while_a_checkpoint_is_written_keeps_the_last_complete_one(tmp_path, monkeypatch):
    """Ctrl-C or SIGTERM (`cli.main` raises KeyboardInterrupt) while checkpoint 6 is written: the run says so, and
    which checkpoint is the last complete one; the half-written one is no checkpoint (under its temporary name), and
    the run resumed from step 5 ends as the uninterrupted run does."""
    write = checkpoints.write_state

    def interrupted(path, state):
        if state["step"] == 6:
            raise KeyboardInterrupt
        write(path, state)

    straight = _config(tmp_path, "straight", **SCHEDULE)
    pretrain(straight, root=working_root())
    cfg = _config(tmp_path, "stopped", **SCHEDULE)
    root = Path(cfg.checkpoints_dir) / "test" / "stopped"
    monkeypatch.setattr(checkpoints, "write_state", interrupted)
    with pytest.raises(KeyboardInterrupt) as stop:
        pretrain(cfg, root=working_root())
    assert stop.value.args == (f"stopped: interrupted while writing checkpoint 6, which is not kept; the last "
                               f"complete checkpoint is {shown(step_dir(root, 5))}",)
    assert store.checkpoint_steps(root) == [3, 5] and store.last(root) == step_dir(root, 5)
    assert (tmp_dir(root, 6) / "hf").is_dir()  # written but for its trainer state: not a checkpoint
    monkeypatch.undo()
    pretrain(cfg, root=working_root())
    assert store.checkpoint_steps(root) == [3, 5, 6] and not tmp_dir(root, 6).exists()
    assert _losses(cfg) == _losses(straight)
    a, b = _hf_weights(cfg, 6), _hf_weights(straight, 6)
    assert all(torch.equal(a[k], b[k]) for k in a)


SIGTERM_DRIVER = '''"""`mlmclm` as its command line runs it, with SIGTERM sent to this process while it writes
checkpoint $SIGTERM_AT: as every process writes its model shard (SIGTERM_IN=shards), or as the main process writes
the trainer state, once every shard is written (SIGTERM_IN=state)."""
import os
import signal
import sys

from torch.distributed.checkpoint import FileSystemWriter

from mlmclm.cli import main
from mlmclm.training import checkpoints, reshard

STEP = f"step_{int(os.environ['SIGTERM_AT']):06d}"
write_data, write_state = FileSystemWriter.write_data, checkpoints.write_state


def shard(self, plan, planner):
    if STEP in str(self.path) and "pytorch_model_fsdp" in str(self.path):
        os.kill(os.getpid(), signal.SIGTERM)
    return write_data(self, plan, planner)


def state(path, state):
    if STEP in str(path):
        os.kill(os.getpid(), signal.SIGTERM)
    return write_state(path, state)


if os.environ["SIGTERM_IN"] == "shards":
    FileSystemWriter.write_data = shard
else:
    checkpoints.write_state = state
sys.exit(main())
'''


def _launch_stopped(tmp_path, port, config_path, where: str):
    """An FSDP launch of two processes, each running `mlmclm pretrain` under `SIGTERM_DRIVER` (SIGTERM `where`)."""
    driver = tmp_path / "sigterm_driver.py"
    driver.write_text(SIGTERM_DRIVER)
    return subprocess.run([sys.executable, "-m", "accelerate.commands.launch", *FSDP, "--dynamo_backend", "no",
                           "--main_process_port", str(port), str(driver), "pretrain", str(config_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), "SIGTERM_AT": "6",
                               "SIGTERM_IN": where})


@pytest.mark.slow  # end to end (several processes, or a whole command): `make test`, not test-quick
@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU path of FSDP (gloo); on GPUs the GPU check runs it")
def test_a_sigterm_while_fsdp_processes_write_a_checkpoint_stops_in_one_line_and_resumes(tmp_path, free_port):
    """SIGTERM in each FSDP process as it writes its shard of checkpoint 6 (torch's checkpoint writer gathers the
    processes' interruptions into one exception), then in the main process alone once the shards are written (the
    other finds it gone): each process stops with one line naming the checkpoint not kept, the last complete one and
    how to resume, and no traceback of theirs; checkpoint 6 is never published; the run resumed ends as it would
    have."""
    cfg = _config(tmp_path, "two", **SCHEDULE)
    path = tmp_path / "two.yaml"
    path.write_text(to_yaml(cfg))
    root = Path(cfg.checkpoints_dir) / "test" / "two"
    said = (f"mlmclm: two: terminated (SIGTERM) while writing checkpoint 6, which is not kept; the last complete "
            f"checkpoint is {step_dir(root, 5)}; re-run the same command to resume")
    from mlmclm.cli import main
    assert main(["data", str(path)]) == 0
    proc = _launch_stopped(tmp_path, free_port, path, "shards")
    ours = [ln for ln in proc.stderr.splitlines() if ln.startswith("mlmclm:")]
    assert proc.returncode != 0 and ours and set(ours) == {said}, proc.stderr[-3000:]
    for stopped in (proc, _launch_stopped(tmp_path, free_port, path, "state")):
        err = stopped.stderr
        assert "[rank" not in err and "CheckpointException" not in err and "Connection closed" not in err, err[-3000:]
        assert err.count("Traceback") == err.count("ChildFailedError:") <= 1, err[-3000:]  # the launcher's report
        assert store.checkpoint_steps(root) == [3, 5] and tmp_dir(root, 6).is_dir(), err[-3000:]
    assert said in err.splitlines()  # the main process, signalled; the other says its peer ended, or nothing
    assert all(ln.endswith("; re-run the same command to resume") for ln in err.splitlines()
               if ln.startswith("mlmclm:")), err[-3000:]

    before = _losses(cfg)  # its log through step 6, whose checkpoint was not kept
    proc = _launch(tmp_path, free_port, path, *FSDP)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert store.checkpoint_steps(root) == [3, 5, 6] and not tmp_dir(root, 6).exists()
    assert _losses(cfg) == before and [s for s, _ in before] == list(range(1, 7))
