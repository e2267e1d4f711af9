"""The checkpoint layout has one definition of a complete checkpoint, and every reader (resume, init, fine-tuning,
the studies' bookkeeping, pruning) uses it. Folders are made by hand here; tests/test_pretrain.py writes real ones."""

import json

import pytest

from mlmclm import studies
from mlmclm.errors import ConfigError
from mlmclm.training import checkpoints as ck


def _write(root, step, state=True, hf=True):
    """A step folder holding what a checkpoint holds (without weights): trainer_state.json and/or hf/config.json."""
    path = ck.step_dir(root, step)
    (path / "hf").mkdir(parents=True)
    if state:
        (path / "trainer_state.json").write_text(json.dumps({"step": step}))
    if hf:
        (path / "hf" / "config.json").write_text("{}")
    return path


def test_layout_names():
    assert ck.step_dir("r", 42).name == "step_000042" and ck.tmp_dir("r", 42).name == ".tmp-step_000042"
    assert ck.run_root("ckpt", "tiny", "run").parts == ("ckpt", "tiny", "run")
    assert ck.step_of("x/step_000042") == 42 and ck.step_of("x/step_1234567") == 1234567
    assert ck.step_of("x/.tmp-step_000042") is None and ck.step_of("x/step_abc") is None and ck.step_of("hf") is None


@pytest.mark.parametrize("state,hf", [(False, True), (True, False), (False, False)])
def test_a_folder_without_trainer_state_or_hf_config_is_not_a_checkpoint(tmp_path, state, hf):
    root = tmp_path / "run"
    _write(root, 4)
    bad = _write(root, 8, state=state, hf=hf)
    assert ck.complete(ck.step_dir(root, 4)) and not ck.complete(bad)
    assert ck.checkpoint_steps(root) == [4] and ck.last(root) == ck.step_dir(root, 4)
    assert ck.find_checkpoint(root) == ck.step_dir(root, 4)
    with pytest.raises(ConfigError, match="has no checkpoint at step 8; it has steps 4"):
        ck.find_checkpoint(root, 8)
    assert ck.pretrained_model(bad) is None and ck.pretrained_model(bad / "hf") is None
    assert ck.pretrained_model(root) == (ck.step_dir(root, 4) / "hf", "run", 4)
    # the studies count the same checkpoints as on disk: a hf/-only folder used to count for them, not for resume
    plan = studies.build_plan("tiny")
    paths = studies.Paths(checkpoints=tmp_path / "ckpt")
    run_id = next(iter(plan.runs))
    where = studies.checkpoint_dir(plan, paths, run_id, 8)
    assert where == ck.step_dir(ck.run_root(tmp_path / "ckpt", "tiny", run_id), 8)
    _write(where.parent, 8, state=state, hf=hf)
    assert not studies.has_checkpoint(plan, paths, run_id, 8)
    _write(where.parent, 4)
    assert studies.has_checkpoint(plan, paths, run_id, 4)


def test_temporary_and_foreign_folders_are_ignored_and_cleared(tmp_path):
    root = tmp_path / "run"
    _write(root, 2)
    ck.begin(root, 6)
    (ck.tmp_dir(root, 6) / "trainer_state.json").write_text("{}")
    (root / "step_abc").mkdir()
    assert ck.checkpoint_steps(root) == [2]
    ck.clear_temporary(root)
    assert not ck.tmp_dir(root, 6).exists() and (root / "step_abc").is_dir()
    assert ck.checkpoint_steps(tmp_path / "missing") == [] and ck.last(tmp_path / "missing") is None
    with pytest.raises(ConfigError, match="holds no checkpoint"):
        ck.find_checkpoint(tmp_path / "missing")


@pytest.mark.parametrize("state, fault", [
    ('{"step": 8', "trainer_state.json: not valid JSON"),
    ('{"lr": 0.1}', "trainer_state.json has no step"),
    ("[8]", "trainer_state.json has no step"),
])
def test_a_damaged_checkpoint_does_not_count_and_is_named_and_removed(tmp_path, capsys, state, fault):
    root = tmp_path / "run"
    _write(root, 4)
    bad = _write(root, 8)
    (bad / "trainer_state.json").write_text(state)
    assert ck.damage(bad) == fault or ck.damage(bad).startswith(fault)
    assert ck.checkpoint_steps(root) == [4] and ck.last(root) == ck.step_dir(root, 4)
    ck.clear_temporary(root)  # what the run's writer does before it resumes
    assert f"{bad}: damaged checkpoint ({fault}" in capsys.readouterr().out
    assert not bad.exists() and ck.complete(ck.step_dir(root, 4))


def test_publish_replaces_and_names_intermediate_checkpoints(tmp_path):
    root = tmp_path / "ckpt" / "tiny" / "r"
    for step in (3, 9):
        tmp = ck.begin(root, step)
        (tmp / "hf").mkdir()
        (tmp / "hf" / "config.json").write_text("{}")
        ck.write_state(tmp, {"step": step})
        assert ck.publish(root, step) == ck.step_dir(root, step)
    tmp = ck.begin(root, 9)  # a rewritten step replaces the old folder
    (tmp / "hf").mkdir()
    (tmp / "hf" / "config.json").write_text("{}")
    ck.write_state(tmp, {"step": 9, "again": True})
    ck.publish(root, 9)
    assert ck.read_state(ck.step_dir(root, 9)) == {"step": 9, "again": True} and not ck.tmp_dir(root, 9).exists()
    assert ck.find_checkpoint(ck.step_dir(root, 3)) == ck.step_dir(root, 3)
    assert ck.pretrained_model(ck.step_dir(root, 3) / "hf") == (ck.step_dir(root, 3) / "hf", "r-3", 3)
    assert ck.pretrained_model(root)[1:] == ("r", 9)


def test_prune_keeps_named_and_the_last_periodic_ones_and_drop_after_rewinds(tmp_path):
    root = tmp_path / "run"
    for step in (2, 4, 6, 8, 10, 12):
        _write(root, step)
    incomplete = _write(root, 14, state=False)
    ck.prune(root, named={4, 12}, keep_last=2)
    assert ck.checkpoint_steps(root) == [4, 8, 10, 12] and incomplete.is_dir()  # only checkpoints are pruned
    ck.drop_after(root, 8)
    assert ck.checkpoint_steps(root) == [4, 8]
