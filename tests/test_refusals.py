"""Nothing silently wrong (reliability round 3): every name, number and path a command takes is checked before work
starts, `--dry-run` runs exactly that check, and a refused command writes nothing."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from mlmclm import cli
from mlmclm.config import scale_config
from mlmclm.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*")) if folder.exists() else []


def _pretrain(tmp_path, *overrides, dry=False):
    argv = ["pretrain", "tiny", f"results_dir={tmp_path / 'runs'}", f"checkpoints_dir={tmp_path / 'ckpt'}",
            f"data.root={tmp_path / 'data'}", *overrides]
    return cli.main(argv + (["--dry-run"] if dry else []))


@pytest.mark.parametrize("backend, says", [("sdpz", "model.attention_backend='sdpz' is unknown"),
                                           ("flex", "'flex' is GPU only")])
def test_a_backend_that_cannot_run_is_refused_by_the_dry_run_and_the_run_alike(backend, says, tmp_path, capsys):
    if backend == "flex":
        pytest.importorskip("torch")
        import torch

        if torch.cuda.is_available():
            pytest.skip("flex runs on this machine's GPU")
    for dry in (True, False):
        assert _pretrain(tmp_path, f"model.attention_backend={backend}", dry=dry) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and says in err, err
    assert _files(tmp_path) == []  # no run folder, no checkpoint folder, no data: the run_id is not taken


def test_the_dry_run_writes_nothing_and_refuses_a_run_id_another_config_holds(tmp_path, capsys):
    assert _pretrain(tmp_path, dry=True) == 0
    assert "run_id: tiny-m-clm-14-mlm40-42" in capsys.readouterr().out and _files(tmp_path) == []
    record = tmp_path / "runs" / "tiny" / "tiny-m-clm-14-mlm40-42"
    record.mkdir(parents=True)
    (record / "config.yaml").write_text("run_id: tiny-m-clm-14-mlm40-42\noptim:\n  lr: 1.0\n")
    assert _pretrain(tmp_path, dry=True) == 2
    assert "with another config (its config.yaml differs)" in capsys.readouterr().err


@pytest.mark.parametrize("tokenizer_kept", [True, False])
def test_a_study_run_refused_by_pretrainings_data_check_leaves_no_folder(tokenizer_kept, tmp_path, capsys):
    """Issue 63: shards whose meta.json records another vocabulary are refused in one line by a study run as by
    `mlmclm pretrain`, and the study leaves no checkpoint folder (no run.json) nor run folder behind: refused by the
    checks before work (tokenizer on disk), or later, as the run builds its tokenizer (tokenizer missing)."""
    data = tmp_path / "data"
    assert cli.main(["data", "tiny", f"data.root={data}"]) == 0
    meta = next(data.glob("shards/*/meta.json"))
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "vocab_size": 600}))
    if not tokenizer_kept:
        shutil.rmtree(next(data.glob("tokenizers/*")))
    before = _files(data) if tokenizer_kept else None
    capsys.readouterr()
    argv = ["study", "run", "scaling", "--scale", "tiny", "--model", "tiny-m-mlm40-42", "--pretrain-only",
            "--runs-dir", str(tmp_path / "runs"), "--checkpoints-dir", str(tmp_path / "ckpt"), "--data-dir", str(data)]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "they were tokenised with a 600-token vocabulary" in err, err
    assert _files(tmp_path / "ckpt") == [] and _files(tmp_path / "runs") == []
    assert before is None or _files(data) == before


@pytest.mark.parametrize("k", ["[50]", "[42]", "[0]"])
def test_a_checkpoint_outside_the_budget_is_refused_by_the_plan(k):
    with pytest.raises(ConfigError, match="intermediate_k must hold checkpoints inside the 42k budget"):
        scale_config("tiny", [f"intermediate_k={k}"])
    assert scale_config("tiny", ["intermediate_k=[21]"]).intermediate_k == [21]


def test_sigterm_says_what_ctrl_c_says(tmp_path):
    """A scheduler's SIGTERM mid-run: one line naming it and how to go on, and status 143."""
    import time

    config = tmp_path / "run.yaml"
    config.write_text(f"run_id: r\nscale: tiny\nphases: [[clm, 100000]]\nbatch_size: 8\nmicro_batch_size: 8\n"
                      f"data: {{root: {ROOT / 'data'}, sources: [sotu], max_chars: 300000, vocab_size: 512, "
                      f"seq_len: 32}}\nmodel: {{size: tiny-m}}\nresults_dir: {tmp_path / 'runs'}\n"
                      f"checkpoints_dir: {tmp_path / 'ckpt'}\n")
    proc = subprocess.Popen([sys.executable, "-m", "mlmclm.cli", "pretrain", str(config)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        log = tmp_path / "runs" / "tiny" / "r" / "pretrain.csv"
        deadline = time.time() + 240
        while not (log.is_file() and log.read_text().count("\n") > 1) and time.time() < deadline:
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    lines = err.strip().splitlines()
    assert proc.returncode == 143 and "Traceback" not in err, err[-1000:]
    assert lines[-1].startswith("mlmclm: r: terminated (SIGTERM) at step ") and lines[-1].endswith(
        "; re-run the same command to resume"), lines[-1]


def test_an_argument_that_is_not_utf8_is_one_line_before_any_work(tmp_path, capsys):
    bad = str(tmp_path / b"runs\xff".decode("utf-8", "surrogateescape"))
    assert cli.main(["study", "run", "scaling", "--scale", "tiny", "--runs-dir", bad]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "runs\\udcff: not valid UTF-8" in err
    assert _files(tmp_path) == []


def test_a_vocabulary_the_text_cannot_reach_is_said_with_the_size_reached(tmp_path, capsys):
    from mlmclm.config import PretrainConfig, load_config
    from mlmclm.training.tokenizer import prepare_tokenizer

    texts = tmp_path / "corpus.txt"
    texts.write_text("the cat sat on the mat\n" * 50)
    cfg = load_config(PretrainConfig, {"data": {"corpus": str(texts), "vocab_size": 5000, "root": str(tmp_path)}})
    tok = prepare_tokenizer(cfg, root=tmp_path)
    out = capsys.readouterr().out
    assert len(tok) < 5000 and f"data.vocab_size=5,000: the corpus gives a vocabulary of {len(tok):,}" in out


def test_overrides_after_an_option_are_overrides(capsys):
    assert cli.main(["pretrain", "tiny", "--dry-run", "run_id=x", "optim.lr=1e-3"]) == 0
    out = capsys.readouterr().out
    assert "run_id: x\n" in out and "  lr: 0.001\n" in out


def test_the_top_level_help_is_for_users(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    assert "mlmclm reproduce --scale mini" in out and "VERB_MODULES" not in out and "add_cli" not in out


def test_a_run_id_naming_another_model_than_its_config_trains_is_refused(tmp_path, capsys):
    """An id is read back as the run's objective and steps: `x-clm-840` training MLM-40% would be analysed as CLM."""
    assert _pretrain(tmp_path, "run_id=x-clm-840", "phases=[[mlm40,840]]", dry=True) == 2
    err = capsys.readouterr().err
    assert "run_id='x-clm-840' names another model than this config trains (tiny-m-mlm40-840" in err
    assert _pretrain(tmp_path, "run_id=my-run", dry=True) == 0  # a name that is no model id is free
    assert _files(tmp_path) == []


def test_a_folder_argument_that_is_a_file_or_read_only_is_one_line_before_any_work(tmp_path, capsys, monkeypatch):
    """`mlmclm init FILE`, `reproduce --output-dir FILE` (refused before the studies run, not after) and a read-only
    output folder: one line naming the folder."""
    from helpers import read_only_folder

    from mlmclm import studies

    monkeypatch.setattr(studies, "run", lambda *a, **k: pytest.fail("the studies ran"))
    file, ro = tmp_path / "file", read_only_folder(tmp_path)
    file.write_text("")
    for argv, folder in ((["init", str(file)], file), (["init", str(ro / "w")], ro / "w"),
                         (["reproduce", "--scale", "tiny", "--output-dir", str(file)], file),
                         (["reproduce", "--scale", "tiny", "--output-dir", str(file / "out")], file / "out"),
                         (["reproduce", "--scale", "tiny", "--output-dir", str(ro / "out")], ro / "out")):
        assert cli.main(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"mlmclm: error: cannot write in {folder}: "), (argv, err)


@pytest.mark.parametrize("groups", ["", ",", " "])
def test_groups_that_name_no_group_are_refused_not_read_as_every_group(groups, capsys):
    assert cli.main(["study", "plan", "scaling", "--scale", "tiny", "--groups", groups]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "mlmclm: error: --groups '': choose from SC, TC, QA, IR"]  # as --groups , was



def test_a_dry_run_says_which_printed_fields_its_config_does_not_use(capsys):
    """`pretrain paper --dry-run` prints vocab_size 8192 beside the Llama-3 tokenizer (a default, unread): it says
    so, and why, under the config; a config that reads them says nothing."""
    assert cli.main(["pretrain", "paper", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "# data.vocab_size: not used here (data.tokenizer names a tokenizer, whose own size is the vocabulary)" in out
    assert "# data.sources: not used here (data.corpus is not the offline corpus)" in out
    assert cli.main(["pretrain", "tiny", "--dry-run"]) == 0
    assert "not used here" not in capsys.readouterr().out
