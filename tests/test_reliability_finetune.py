"""Nothing silently wrong in fine-tuning: a number that makes no sense is refused in one line before any work, and a
run's checkpoint folder is fine-tuned at its final checkpoint or refused in one line, never at an earlier step."""

import json
from pathlib import Path

import pytest

from mlmclm import store
from mlmclm.paths import hf_dir, run_folder, step_dir
from mlmclm.io import working_root
from mlmclm.cli import main
from mlmclm.config import RECIPES_DIR, PretrainConfig, load_config, to_yaml
from helpers import offline_suite


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A pretraining run of the tiny recipe (8 CLM steps; named checkpoints 0 and 4, the final one 8), its offline
    task suite, and its config.yaml as the run recorded it."""
    from mlmclm.training.pretrain import pretrain

    root = tmp_path_factory.mktemp("run")
    offline_suite(root)
    cfg = load_config(PretrainConfig, RECIPES_DIR / "tiny.yaml", [
        "run_id=tiny-s-clm-8", "phases=[[clm, 8]]", "model.size=tiny-s", f"results_dir={root / 'runs'}",
        f"checkpoints_dir={root / 'ckpt'}", "checkpoint.steps=[0, 4]", "optim.decay_steps=0"])
    results = pretrain(cfg, root=working_root())
    assert (results / "config.yaml").read_text() == to_yaml(cfg)
    return root, run_folder(cfg.checkpoints_dir, cfg.scale, cfg.run_id), results


def _finetune(root, model, *extra):
    return main(["finetune", str(model), "--scale", "tiny", "--data-dir", str(root / "tasks"), "--runs-dir",
                 str(root / "results"), "--datasets", "multiemo_sentiment", "--seeds", "0", *extra])


@pytest.mark.parametrize("extra, message", [
    (["--set", "ir_logit_scale=0"], "ir_logit_scale must be in (0, inf), got 0.0: InfoNCE's factor on the cosine "
                                    "similarity: 0 gives no gradient"),
    (["--set", "ir_logit_scale=-20"], "ir_logit_scale must be in (0, inf), got -20.0: "),
    (["--seeds", "0,1,0"], "seeds names 0 twice ([0, 1, 0]); list each once"),
    (["--lrs", "1e-3,0.001"], "lrs names 0.001 twice ([0.001, 0.001]); list each once"),
    (["--datasets", "squad11,brown_upos,squad11"], "datasets names 'squad11' twice"),
    (["--set", "max_train=0"],
     "max_train must be in [1, inf), got 0: a cap on examples; leave it unset (null) for all"),
    (["--set", "max_eval=-2"], "max_eval must be in [1, inf), got -2: "),
    (["--set", "qa_stride=-1", "--set", "max_length=null"], "qa_stride must be in [0, inf), got -1: "),
    (["--set", "per_dataset={multiemo_sentiment: {seeds: [1, 1]}}"],
     "per_dataset.multiemo_sentiment: seeds names 1 twice ([1, 1]); list each once"),
    (["--set", "per_dataset={brown_upos: {max_train: 0}}"], "per_dataset.brown_upos: max_train must be in [1, inf)"),
])
def test_a_number_that_makes_no_sense_is_refused_in_one_line_before_any_work(tiny_run, capsys, extra, message):
    root, ckpt, _ = tiny_run
    capsys.readouterr()
    assert _finetune(root, ckpt, *extra) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"mlmclm: error: {err[0].removeprefix('mlmclm: error: ')}"] and message in err[0], err
    assert not (root / "results").exists()


def test_a_study_refuses_them_before_any_work_too(tmp_path, capsys):
    argv = ["study", "run", "stability", "--scale", "tiny", "--set", "stability.seeds=[3, 3]", "--runs-dir",
            str(tmp_path / "runs"), "--checkpoints-dir", str(tmp_path / "ckpt")]
    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == "mlmclm: error: seeds names 3 twice ([3, 3]); list each once"
    assert not list(tmp_path.iterdir())


def test_a_damaged_final_checkpoint_is_refused_with_the_command_that_writes_it_again(tiny_run, capsys):
    """The run folder asks for the run's final model: with its weights cut short, fine-tuning refuses in one line
    naming the step and the pretraining command that repairs it (it used to fine-tune step 4 under the run's name and
    exit 0); an earlier step is fine-tuned only when named, under its own name; the command repairs the run."""
    root, ckpt, results = tiny_run
    final = step_dir(ckpt, 8)
    weights = hf_dir(final) / "model.safetensors"
    whole = weights.read_bytes()
    weights.write_bytes(whole[:1000])
    capsys.readouterr()
    for asked in (ckpt, final, hf_dir(final)):
        assert _finetune(root, asked) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [f"mlmclm: error: {final}: damaged checkpoint (hf/model.safetensors: 1000 bytes, cut short "
                       f"inside its {int.from_bytes(whole[:8], 'little')}-byte header); write it again by re-running "
                       f"its run's pretraining: mlmclm pretrain {results}/config.yaml"], err
        assert not (root / "results").exists()
    assert _finetune(root, step_dir(ckpt, 4)) == 0
    assert [p.name for p in (root / "results" / "tiny").iterdir()] == ["tiny-s-clm-8-4"]
    assert main(["pretrain", str(results / "config.yaml")]) == 0  # the command the refusal names
    assert store.complete(final, verify=True)
    assert _finetune(root, ckpt) == 0
    doc = json.loads(next((root / "results" / "tiny" / "tiny-s-clm-8").rglob("results.json")).read_text())
    assert doc["meta"]["step"] == 8 and Path(doc["meta"]["checkpoint"]) == hf_dir(final)


def test_qa_windows_that_cannot_overlap_so_much_on_this_model_are_refused_before_any_work(tiny_run, capsys):
    root, ckpt, _ = tiny_run  # no max_length: the windows are 0.99 x the model's 128-token context
    before = sorted((root / "results").rglob("*"))
    capsys.readouterr()
    assert _finetune(root, ckpt, "--datasets", "squad11", "--set", "max_length=null", "--set", "qa_stride=63") == 2
    assert capsys.readouterr().err.strip() == (
        "mlmclm: error: qa_stride=63: squad11's windows on tiny-s-clm-8 are 126 tokens long (max_length, or the "
        "model's context), and must overlap by less than half of that; lower qa_stride below 63")
    assert sorted((root / "results").rglob("*")) == before


def test_a_checkpoint_removed_while_its_grid_runs_is_one_line(tiny_run, tmp_path):
    """Another process wrote the run's checkpoints again after the grid opened it: each run loads the model anew,
    and the folder that is gone is said in one line, not taken for a hub id (a 60-line HFValidationError)."""
    import shutil

    from mlmclm.errors import FinetuneError
    from mlmclm.evaluation.checkpoint import load_model, open_checkpoint
    from mlmclm.evaluation.tasks import select_tasks

    _, ckpt, _ = tiny_run
    copy = tmp_path / "tiny-s-clm-8"
    shutil.copytree(hf_dir(step_dir(ckpt, 8)), copy)
    opened = open_checkpoint(copy, root=working_root())
    shutil.rmtree(copy)
    task = select_tasks("offline", ["SC"], ["multiemo_sentiment"])[0]
    with pytest.raises(FinetuneError, match=f"^{copy} was removed while it was being fine-tuned \\(another process "
                                            "wrote its run's checkpoints again\\); run the command again$"):
        load_model(opened, task, 0, None, "cpu")
