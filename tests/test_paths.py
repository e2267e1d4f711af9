"""One reading of every path (issue 46, item 2): a path typed on the command line is read from the folder one stands
in, by every verb, and every verb that takes one says so in its --help; a path printed is usable from there
(relative to it when inside it, else absolute); a refused command leaves no folder behind."""

from pathlib import Path

import pytest

from helpers import offline_suite, verbs
from mlmclm import cli, locks
from mlmclm.bench import random_checkpoint
from mlmclm.commands import PATH_DESTS, PATHS
from mlmclm.io import check_writable, shown

QUICK = ["--scale", "tiny", "--datasets", "multiemo_sentiment", "--lrs", "1e-3", "--seeds", "0"]


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    src = tmp_path_factory.mktemp("src")
    texts = offline_suite(src)
    return src / "tasks", random_checkpoint(src / "ckpts" / "tiny-mlm40-100", texts)


@pytest.fixture
def inside(tmp_path, monkeypatch):
    """A working root (it holds results/paper/) and a folder inside it where the command is typed."""
    root = tmp_path / "root"
    (root / "results" / "paper").mkdir(parents=True)
    here = root / "sub"
    here.mkdir()
    monkeypatch.delenv("MLMCLM_ROOT", raising=False)
    monkeypatch.chdir(here)
    return root, here


def test_every_verb_that_takes_a_path_says_in_its_help_how_it_is_read(capsys):
    takes = {" ".join(path) for path, p in verbs(cli.build_parser())
             if any(a.dest in PATH_DESTS for a in p._actions)}
    assert {"reproduce", "study plan", "study run", "finetune", "pretrain", "data", "tasks build", "tasks list",
            "export", "init", "coverage", "bench finetune", "bench gpu"} <= takes
    said = {" ".join(path) for path, p in verbs(cli.build_parser()) if p.epilog == PATHS}
    assert said == takes
    with pytest.raises(SystemExit):
        cli.main(["finetune", "--help"])
    assert "read from the folder you are in" in " ".join(capsys.readouterr().out.split())
    with pytest.raises(SystemExit):
        cli.main(["notebooks", "--help"])
    assert "read from the folder you are in" in " ".join(capsys.readouterr().out.split())


def test_a_printed_path_is_relative_to_where_one_stands_when_inside_it_else_absolute(inside):
    root, here = inside
    assert shown(here / "runs" / "tiny") == "runs/tiny" and shown(here) == "."
    assert shown(root / "runs") == str(root / "runs")  # not inside: absolute, never relative to the working root
    assert shown("runs") == "runs"


def test_finetune_reads_its_folders_from_where_one_stands(suite, inside, capsys):
    """--runs-dir and --data-dir typed in a subfolder of the working root name folders there, as `study` reads its
    folders (finetune used to read them from the working root), and the last line names the results from there."""
    tasks, ckpt = suite
    root, here = inside
    (here / "tasks").symlink_to(tasks)
    assert cli.main(["finetune", str(ckpt), *QUICK, "--runs-dir", "runs", "--data-dir", "tasks"]) == 0
    written = [p.relative_to(here) for p in here.rglob("results.json")]
    assert written == [Path("runs/tiny/tiny-mlm40-100/SC/multiemo_sentiment/lr1e-03_sd0/results.json")]
    assert not (root / "runs").exists()
    assert capsys.readouterr().out.rstrip().endswith("-> runs/tiny/tiny-mlm40-100")


def test_a_refused_finetune_leaves_no_folder_behind(suite, inside, capsys):
    tasks, ckpt = suite
    root, here = inside
    (here / "empty").mkdir()
    before = sorted(root.rglob("*"))
    assert cli.main(["finetune", str(ckpt), *QUICK, "--runs-dir", "new/runs", "--data-dir", "empty"]) == 2
    assert "multiemo_sentiment is not built in" in capsys.readouterr().err
    assert sorted(root.rglob("*")) == before  # neither new/runs/tiny/ here nor in the working root


def test_study_plan_names_its_folders_from_where_one_stands(inside, capsys):
    root, here = inside
    assert cli.main(["study", "plan", "scaling", "--scale", "tiny", "--runs-dir", "runs", "--checkpoints-dir",
                     "ckpt"]) == 0
    assert "  results: runs/tiny; checkpoints: ckpt/tiny" in capsys.readouterr().out.splitlines()
    assert sorted(here.iterdir()) == []


def test_checking_a_folder_and_a_released_lock_leave_no_folder_behind(tmp_path):
    check_writable(tmp_path / "new" / "folder")
    assert not (tmp_path / "new").exists()
    with locks.hold(tmp_path / "a" / "b" / "c"):
        assert (tmp_path / "a" / "b" / "c" / locks.LOCK).is_file()
    assert not (tmp_path / "a").exists()  # nothing was written: the parents made for the lock go too
    (tmp_path / "a").mkdir()
    with locks.hold(tmp_path / "a" / "b" / "c"):
        (tmp_path / "a" / "b" / "c" / "results.json").write_text("{}")
    assert (tmp_path / "a" / "b" / "c" / "results.json").is_file()


def test_pretrain_names_its_record_and_checkpoints_from_where_one_stands(tmp_path, monkeypatch, capsys):
    """With the working root set elsewhere, pretrain's last line named its folders relative to that root: from
    where one stands they are found as printed (here inside the current folder: relative to it)."""
    from helpers import REPO

    root = tmp_path / "root"
    (root / "results" / "paper").mkdir(parents=True)
    monkeypatch.setenv("MLMCLM_ROOT", str(root))
    monkeypatch.chdir(tmp_path)
    assert cli.main(["pretrain", "tiny", "run_id=tiny-m-clm-4", "phases=[[clm,4]]", "checkpoint.steps=[]",
                     "checkpoint.every=4", f"data.root={REPO / 'data'}"]) == 0
    assert ("tiny-m-clm-4: complete; record in root/results/runs/tiny/tiny-m-clm-4, checkpoints in "
            "root/checkpoints/tiny/tiny-m-clm-4") in capsys.readouterr().out
