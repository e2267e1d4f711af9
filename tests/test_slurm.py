"""The SLURM recipe on a real SLURM (issue 62): Debian's slurm-wlm and munge (installed where missing), munged,
slurmctld and two slurmd "nodes" of one CPU each on this machine, every file of theirs in a temporary folder; the
shipped sbatch script submitted with `sbatch` as docs/cluster.md says (documented options and environment only). Two
nodes of one CPU process train as one process; a requeue by the script's own USR1 trap resumes from the last
checkpoint, ends with the weights of the uninterrupted job, and the job's log keeps both attempts; a cancelled job
submitted again resumes. tests/test_cluster.py holds the stand-in tests (no SLURM) and the tiny runs they compare."""

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from mlmclm import store
from mlmclm.paths import step_dir

from helpers import free_port
from test_cluster import SCRIPT, assert_trained_as_one, trained_here_and_to_launch
from test_distributed import _hf_weights

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "scontrol", "scancel", "sinfo")
# two nodes of one CPU, each its own slurmd (`slurmd -N NAME`: its port, spool folder and pid file), named after this
# host and `localhost`, both this machine; no accounting (`scontrol show job` says how a job ended)
SLURM_CONF = """ClusterName=mlmclmtest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmctldPidFile={d}/slurmctld.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdPidFile={d}/slurmd-%n.pid
SlurmdSpoolDir={d}/spool-%n
SlurmdLogFile={d}/slurmd-%n.log
StateSaveLocation={d}/state
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={d}/munge.sock
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
ReturnToService=2
MpiDefault=none
NodeName={host} NodeAddr=127.0.0.1 Port={port0} CPUs=1 State=UNKNOWN
NodeName=localhost NodeAddr=127.0.0.1 Port={port1} CPUs=1 State=UNKNOWN
PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"}
# long enough that a signal sent at the first checkpoint finds the run training
SCHEDULE = {"phases": [["clm", 20], ["mlm40", 20]], "log_every": 1, "checkpoint": {"every": 10, "keep_last": 2}}
STEPS = 40

pytestmark = [
    pytest.mark.slow,  # end to end (several processes, or a whole command): `make test`, not test-quick
    pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU path (gloo): nodes without GPUs"),
    pytest.mark.skipif(os.name != "posix" or os.geteuid() != 0, reason="a real SLURM needs root (its daemons)"),
    pytest.mark.skipif(not all(map(shutil.which, DAEMONS)) and not shutil.which("apt-get"),
                       reason="no SLURM here and no apt-get to install it (slurm-wlm, munge)"),
]


def _install() -> None:
    """slurm-wlm and munge from the distribution's packages, where missing (about 45 s)."""
    if all(map(shutil.which, DAEMONS)):
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "slurm-wlm", "munge"]):
        proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
        if proc.returncode:  # no package source here (offline, no Debian mirror): the machine cannot start SLURM
            pytest.skip(f"{' '.join(command)} failed, so no SLURM to start here: {proc.stderr.strip()[-300:]}")


def _run(env, *command, check=True, cwd=None) -> str:
    proc = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 or not check, f"{' '.join(command)}: {proc.stdout[-1000:]} {proc.stderr[-2000:]}"
    return proc.stdout


def _stop(folder: Path, env: dict) -> None:
    """Every job of this cluster cancelled and awaited (their steps end with them), then each daemon stopped by its
    pid file: TERM, and KILL after 10 s."""
    if (folder / "slurmctld.pid").exists():
        _run(env, "scancel", "--user", "root", check=False)
        deadline = time.monotonic() + 60
        while _run(env, "squeue", "--noheader", check=False).strip() and time.monotonic() < deadline:
            time.sleep(1)
    for pid_file in [*folder.glob("slurmd-*.pid"), folder / "slurmctld.pid", folder / "munged.pid"]:
        if pid_file.exists():
            _kill(int(pid_file.read_text().split()[0]))


def _kill(pid: int) -> None:
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.2)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, request):
    """A SLURM of two one-CPU nodes on this machine; the environment its commands (and jobs) run in. Its daemons are
    stopped by their pid files whatever the tests' outcome."""
    _install()
    host = socket.gethostname()
    if host == "localhost" or socket.gethostbyname(host) != "127.0.0.1":
        pytest.skip(f"this host's name ({host}) must resolve to 127.0.0.1 beside localhost for two local nodes")
    folder = tmp_path_factory.mktemp("slurm")
    (folder / "state").mkdir()
    conf = folder / "slurm.conf"
    conf.write_text(SLURM_CONF.format(host=host, d=folder, ctld_port=free_port(), port0=free_port(),
                                      port1=free_port()))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_"))}
    env.update(SLURM_CONF=str(conf), PATH=f"{Path(sys.executable).parent}:{env['PATH']}", OMP_NUM_THREADS="1")
    request.addfinalizer(lambda: _stop(folder, env))
    key = folder / "munge.key"
    key.write_bytes(os.urandom(128))
    key.chmod(0o400)
    _run(env, "munged", "--force", f"--socket={folder}/munge.sock", f"--key-file={key}",
         f"--log-file={folder}/munged.log", f"--pid-file={folder}/munged.pid", f"--seed-file={folder}/munged.seed")
    _run(env, "slurmctld", "-i", "-f", str(conf))
    for node in (host, "localhost"):
        _run(env, "slurmd", "-f", str(conf), "-N", node)
    deadline = time.monotonic() + 60
    while _run(env, "sinfo", "--noheader", "--format=%t", check=False).split() != ["idle"]:
        assert time.monotonic() < deadline, (folder / "slurmctld.log").read_text()[-3000:]
        time.sleep(0.5)
    return env


def _submit(env, cwd: Path, config: Path) -> int:
    """`sbatch` as docs/cluster.md says, on nodes without GPUs: `--nodes 2 --gpus-per-node 0`."""
    out = _run(env, "sbatch", "--nodes", "2", "--gpus-per-node", "0", str(SCRIPT), str(config), cwd=cwd)
    return int(re.search(r"Submitted batch job (\d+)", out).group(1))


def _state(env, job: int) -> str:
    return re.search(r"JobState=(\S+)", _run(env, "scontrol", "show", "job", str(job))).group(1)


def _log(folder: Path, job: int) -> str:
    """The job's log; a process killed by the requeue may have cut a character of its progress bar in two."""
    return (folder / f"mlmclm-pretrain-{job}.out").read_bytes().decode(errors="replace")


def _wait_ended(env, job: int, timeout: float = 300) -> str:
    deadline = time.monotonic() + timeout
    while (state := _state(env, job)) not in ENDED:
        assert time.monotonic() < deadline, f"job {job} still {state} after {timeout} s"
        time.sleep(0.5)
    return state


def _wait_checkpoint(env, cfg, job: int) -> None:
    """Until the run has a checkpoint (its first, step 10), while the job runs."""
    root = Path(cfg.checkpoints_dir) / cfg.scale / cfg.run_id
    deadline = time.monotonic() + 300
    while store.last(root) is None:
        assert time.monotonic() < deadline and _state(env, job) not in ENDED, f"job {job}: no checkpoint"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, cluster):
    """The run trained in this process, the same run submitted to the two nodes uninterrupted, and the configs of the
    runs the tests below interrupt; the job's log and state."""
    folder = tmp_path_factory.mktemp("runs")
    one, launches = trained_here_and_to_launch(folder, SCHEDULE, "two", "requeued", "cancelled")
    launches = {cfg.run_id: (cfg, path) for cfg, path in launches}
    job = _submit(cluster, folder, launches["two"][1])
    state = _wait_ended(cluster, job)
    log = _log(folder, job)
    assert state == "COMPLETED", log[-3000:]
    return folder, one, launches, log


def _same_weights(cfg, reference) -> None:
    a, b = _hf_weights(cfg, STEPS), _hf_weights(reference, STEPS)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _bar_starts(log: str, run_id: str) -> list[int]:
    """Where each attempt's progress bar starts (tqdm's first display: no rate yet): the step training resumed after
    (0: from the start)."""
    first = rf"{run_id}:[^|\r\n]*\|[^|\r\n]*\| (\d+)/{STEPS} \[00:00<\?, \?step/s\]"
    return [int(m.group(1)) for m in re.finditer(first, log)]


def test_two_nodes_of_one_cpu_process_train_as_one_process(runs):
    folder, one, launches, log = runs
    assert_trained_as_one(launches["two"][0], one)
    assert log.count("two: complete") == 2  # each node's process


def test_a_requeue_by_the_scripts_trap_resumes_and_the_log_keeps_both_attempts(runs, cluster):
    """USR1 as SLURM sends it near the time limit (`--signal=B:USR1@600`): the trap requeues the job; the requeued
    job, started at once as docs/cluster.md says, resumes from the last checkpoint and ends with the uninterrupted
    job's weights, bit for bit; its log (`--open-mode=append`) holds the first attempt, the requeue and the second."""
    folder, one, launches, _ = runs
    (cfg, path), two = launches["requeued"], launches["two"][0]
    job = _submit(cluster, folder, path)
    _wait_checkpoint(cluster, cfg, job)
    _run(cluster, "scancel", "--batch", "--signal=USR1", str(job))
    deadline = time.monotonic() + 60
    while "BeginTime" not in _run(cluster, "scontrol", "show", "job", str(job)):  # requeued: held ~2 minutes
        assert time.monotonic() < deadline and _state(cluster, job) not in ENDED, _state(cluster, job)
        time.sleep(0.2)
    _run(cluster, "scontrol", "update", f"JobId={job}", "StartTime=now")
    state = _wait_ended(cluster, job)
    log = _log(folder, job)
    assert state == "COMPLETED", log[-3000:]
    assert f"time limit near: requeueing job {job}" in log and log.count("requeued: complete") == 2
    starts = _bar_starts(log, "requeued")
    assert starts[0] == 0 and len(starts) == 2 and starts[1] >= 10, starts  # the second attempt resumed
    assert log.index(f"requeueing job {job}") < log.rindex(f"| {starts[1]}/{STEPS} [00:00<?, ?step/s]")
    _same_weights(cfg, two)


def test_a_cancelled_job_submitted_again_resumes(runs, cluster):
    folder, one, launches, _ = runs
    (cfg, path), two = launches["cancelled"], launches["two"][0]
    first = _submit(cluster, folder, path)
    _wait_checkpoint(cluster, cfg, first)
    _run(cluster, "scancel", str(first))
    assert _wait_ended(cluster, first) == "CANCELLED"
    again = _submit(cluster, folder, path)
    state = _wait_ended(cluster, again)
    log = _log(folder, again)
    assert state == "COMPLETED", log[-3000:]
    starts = _bar_starts(log, "cancelled")
    assert len(starts) == 1 and starts[0] >= 10, starts
    _same_weights(cfg, two)
