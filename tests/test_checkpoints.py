"""The checkpoint layout has one definition of a complete checkpoint, and every reader (resume, init, fine-tuning,
the studies' bookkeeping, pruning) uses it. Folders are made by hand here; tests/test_pretrain.py writes real ones."""

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from mlmclm import store
from mlmclm.paths import STATE, run_folder, step_dir, step_of, tmp_dir
from mlmclm.io import working_root
from mlmclm import studies
from mlmclm.config import scale_config
from mlmclm.errors import ConfigError
from mlmclm.fetch import sha256
from mlmclm.runs import config_identity
from mlmclm.training import checkpoints as ck


def _weights(path, value=0.0):
    save_file({"w": np.full((4, 4), value, dtype=np.float32)}, str(path))


def _write(root, step, state=True, hf=True, identity=None):
    """A step folder holding what a checkpoint holds: trainer_state.json (with its weights' hashes, and `identity`)
    and/or hf/config.json, and small weights."""
    path = step_dir(root, step)
    (path / "hf").mkdir(parents=True)
    _weights(path / "model.safetensors", step)
    _weights(path / "hf" / "model.safetensors", step)
    if hf:
        (path / "hf" / "config.json").write_text("{}")
    if state:
        ck.write_state(path, {"step": step, **({"identity": identity} if identity else {})})
    return path


def test_layout_names():
    assert step_dir("r", 42).name == "step_000042" and tmp_dir("r", 42).name == ".tmp-step_000042"
    assert run_folder("ckpt", "tiny", "run").parts == ("ckpt", "tiny", "run")
    assert step_of("x/step_000042") == 42 and step_of("x/step_1234567") == 1234567
    assert step_of("x/.tmp-step_000042") is None and step_of("x/step_abc") is None and step_of("hf") is None


@pytest.mark.parametrize("state,hf", [(False, True), (True, False), (False, False)])
def test_a_folder_without_trainer_state_or_hf_config_is_not_a_checkpoint(tmp_path, state, hf):
    root = tmp_path / "run"
    _write(root, 4)
    bad = _write(root, 8, state=state, hf=hf)
    assert store.complete(step_dir(root, 4)) and not store.complete(bad)
    assert store.checkpoint_steps(root) == [4] and store.last(root) == step_dir(root, 4)
    assert store.find_checkpoint(root, working_root(), 4) == step_dir(root, 4)
    with pytest.raises(ConfigError, match="has no checkpoint at step 8; it has steps 4"):
        store.find_checkpoint(root, working_root(), 8)
    for asked in (root, bad, bad / "hf"):  # the run's final checkpoint (its highest step: no record here) is step 8
        for read in (store.find_checkpoint, store.pretrained_model):  # refused, never step 4 in its place
            with pytest.raises(ConfigError, match=f"^{bad}: damaged checkpoint .*; write it again by re-running"):
                read(asked, working_root())
    assert store.pretrained_model(step_dir(root, 4), working_root()) == (step_dir(root, 4) / "hf", "run-4", 4)
    # the studies count the same checkpoints as on disk: a hf/-only folder used to count for them, not for resume
    plan = studies.build_plan(scale_config("tiny"))
    paths = studies.Paths(tmp_path, checkpoints=tmp_path / "ckpt")
    run_id = next(iter(plan.runs))
    where = paths.checkpoint(plan.scale.scale, run_id, 8)
    assert where == step_dir(run_folder(tmp_path / "ckpt", "tiny", run_id), 8)
    _write(where.parent, 8, state=state, hf=hf)
    assert not studies.has_checkpoint(plan, paths, run_id, 8)
    _write(where.parent, 4)
    assert studies.has_checkpoint(plan, paths, run_id, 4)


def test_temporary_and_foreign_folders_are_ignored_and_cleared(tmp_path):
    root = tmp_path / "run"
    _write(root, 2)
    ck.begin(root, 6)
    (tmp_dir(root, 6) / "trainer_state.json").write_text("{}")
    (root / "step_abc").mkdir()
    assert store.checkpoint_steps(root) == [2]
    ck.clear_temporary(root)
    assert not tmp_dir(root, 6).exists() and (root / "step_abc").is_dir()
    assert store.checkpoint_steps(tmp_path / "missing") == [] and store.last(tmp_path / "missing") is None
    with pytest.raises(ConfigError, match="holds no checkpoint"):
        store.find_checkpoint(tmp_path / "missing", working_root())


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
    assert store.damage(bad) == fault or store.damage(bad).startswith(fault)
    assert store.checkpoint_steps(root) == [4] and store.last(root) == step_dir(root, 4)
    ck.clear_temporary(root)  # what the run's writer does before it resumes
    assert f"{bad}: damaged checkpoint ({fault}" in capsys.readouterr().out
    assert not bad.exists() and store.complete(step_dir(root, 4))


def test_publish_replaces_and_names_intermediate_checkpoints(tmp_path):
    root = tmp_path / "ckpt" / "tiny" / "r"
    for step in (3, 9):
        tmp = ck.begin(root, step)
        (tmp / "hf").mkdir()
        (tmp / "hf" / "config.json").write_text("{}")
        _weights(tmp / "hf" / "model.safetensors")
        ck.write_state(tmp, {"step": step})
        assert ck.publish(root, step) == step_dir(root, step)
    tmp = ck.begin(root, 9)  # a rewritten step replaces the old folder
    (tmp / "hf").mkdir()
    (tmp / "hf" / "config.json").write_text("{}")
    _weights(tmp / "hf" / "model.safetensors")
    ck.write_state(tmp, {"step": 9, "again": True})
    ck.publish(root, 9)
    new = step_dir(root, 9)
    digest, config = (sha256(new / "hf" / name) for name in ("model.safetensors", "config.json"))  # at save time
    assert store.read_state(new) == {"step": 9, "again": True, "weights": {"hf/model.safetensors": digest},
                                  "files": {"hf/config.json": config}}
    assert not tmp_dir(root, 9).exists()
    assert store.find_checkpoint(step_dir(root, 3), working_root()) == step_dir(root, 3)
    assert store.pretrained_model(step_dir(root, 3) / "hf", working_root()) == (step_dir(root, 3) / "hf", "r-3", 3)
    assert store.pretrained_model(root, working_root())[1:] == ("r", 9)


def test_prune_keeps_named_and_the_last_periodic_ones_and_drop_after_rewinds(tmp_path):
    root = tmp_path / "run"
    for step in (2, 4, 6, 8, 10, 12):
        _write(root, step)
    incomplete = _write(root, 14, state=False)
    ck.prune(root, named={4, 12}, keep_last=2)
    assert store.checkpoint_steps(root) == [4, 8, 10, 12] and incomplete.is_dir()  # only checkpoints are pruned
    ck.drop_after(root, 8)
    assert store.checkpoint_steps(root) == [4, 8]


# ---- complete means loadable: the weights, by header, size and recorded hash ----
@pytest.mark.parametrize("cut, fault", [
    (lambda b: b[:-3], r"hf/model.safetensors: \d+ bytes, its header says \d+"),
    (lambda b: b + b"xx", r"hf/model.safetensors: \d+ bytes, its header says \d+"),
    (lambda b: b[:20], r"hf/model.safetensors: 20 bytes, cut short inside its \d+-byte header"),
    (lambda b: b[:5], r"hf/model.safetensors: 5 bytes, shorter than a safetensors header"),
    (lambda b: b[:8] + b"{" * (len(b) - 8), "hf/model.safetensors: its safetensors header does not parse"),
])
def test_weights_cut_short_or_garbled_make_no_checkpoint_and_are_named_and_removed(tmp_path, capsys, cut, fault):
    root = tmp_path / "run"
    _write(root, 4)
    bad = _write(root, 8)
    weights = bad / "hf" / "model.safetensors"
    weights.write_bytes(cut(weights.read_bytes()))
    assert re.fullmatch(fault, store.damage(bad)) and not store.complete(bad)
    assert store.checkpoint_steps(root) == [4] and store.pretrained_model(step_dir(root, 4), working_root())[1:] == ("run-4", 4)
    with pytest.raises(ConfigError, match=f"^{bad}: damaged checkpoint \\(hf/model.safetensors: "):
        store.pretrained_model(root, working_root())  # the final one asked for: refused, not step 4 under the run's name
    ck.clear_temporary(root)
    assert f"{bad}: damaged checkpoint (hf/model.safetensors: " in capsys.readouterr().out and not bad.exists()


def test_missing_weights_and_legacy_checkpoints_without_recorded_hashes(tmp_path):
    root = tmp_path / "run"
    gone = _write(root, 2)
    (gone / "model.safetensors").unlink()  # recorded at save time, gone since
    assert store.damage(gone) == "model.safetensors: missing"
    (gone / "hf" / "model.safetensors").unlink()
    assert store.damage(gone) == "no hf/model.safetensors"
    legacy = _write(root, 4)  # written before hashes were recorded: the files present count, by header and size
    (legacy / "trainer_state.json").write_text(json.dumps({"step": 4}))
    assert store.complete(legacy, verify=True)
    _weights(legacy / "model.safetensors", 7.0)  # another whole file: nothing recorded to tell
    assert store.complete(legacy, verify=True)
    (legacy / "model.safetensors").write_bytes((legacy / "model.safetensors").read_bytes()[:-1])
    assert store.damage(legacy).startswith("model.safetensors: ")


def test_weights_changed_since_saved_fail_verification_and_resume_takes_the_last_good_one(tmp_path, capsys):
    root = tmp_path / "run"
    for step in (2, 4, 6):
        _write(root, step)
    for step in (4, 6):  # same header and size, other bytes: only the hash recorded at save time tells
        path = step_dir(root, step) / "hf" / "model.safetensors"
        data = bytearray(path.read_bytes())
        data[-1] ^= 0xFF
        path.write_bytes(bytes(data))
    assert store.complete(step_dir(root, 6)) and not store.complete(step_dir(root, 6), verify=True)
    assert store.damage(step_dir(root, 6), verify=True) == ("hf/model.safetensors: its sha256 is not the one "
                                                             "recorded when it was saved")
    assert ck.last_verified(root) == step_dir(root, 2)
    said = capsys.readouterr().out
    assert f"{step_dir(root, 4)}: damaged checkpoint (hf/model.safetensors: its sha256 is not the one recorded when " \
           "it was saved); removed with the 1 after it, its steps are trained again" in said
    assert store.checkpoint_steps(root) == [2]


def test_resume_goes_back_before_the_first_checkpoint_whose_files_changed_however_many_good_ones_follow(tmp_path,
                                                                                                       capsys):
    """A checkpoint is written again only by training its steps again: an edited file in an early one (here its
    recorded hf/config.json) removes it and every later one, so that the re-run writes each again (issue 63)."""
    root = tmp_path / "run"
    for step in (2, 4, 6):
        _write(root, step)
    (step_dir(root, 4) / "hf" / "config.json").write_text('{"edited": true}')
    assert ck.first_damaged(root) == (step_dir(root, 4), "hf/config.json: its sha256 is not the one recorded when it "
                                                         "was saved")
    assert ck.last_verified(root) == step_dir(root, 2) and store.checkpoint_steps(root) == [2]
    assert "removed with the 1 after it" in capsys.readouterr().out
    assert ck.first_damaged(root) is None and ck.last_verified(root) == step_dir(root, 2)


# ---- whose checkpoints: a folder belongs to one run identity ----
RUN_A = {"identity": "a" * 16, "run_id": "r", "results": "runsA/tiny/r"}
RUN_B = {"identity": "b" * 16, "run_id": "r", "results": "runsB/tiny/r"}


def test_a_folder_is_claimed_by_its_run_and_refused_to_any_other_naming_both(tmp_path):
    root = tmp_path / "ckpt" / "tiny" / "r"
    ck.claim(root, RUN_A, write=False)  # a check only: nothing written
    assert not root.exists()
    ck.claim(root, RUN_A)
    assert store.owner(root) == RUN_A
    _write(root, 4, identity=RUN_A["identity"])
    ck.claim(root, RUN_A)  # its own run, again
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    with pytest.raises(ConfigError) as err:
        ck.claim(root, RUN_B)
    message = str(err.value)
    assert "\n" not in message and RUN_A["identity"] in message and RUN_B["identity"] in message
    assert "runsA/tiny/r" in message and "runsB/tiny/r" in message and "delete that folder" in message
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before


def test_legacy_folders_are_claimed_unless_a_checkpoint_names_another_run(tmp_path):
    legacy = tmp_path / "legacy"
    _write(legacy, 4)  # no run.json, no identity in its trainer state: written before identities
    ck.claim(legacy, RUN_B)
    assert store.owner(legacy) == RUN_B
    stamped = tmp_path / "stamped"  # run.json lost, but its checkpoints say whose they are
    _write(stamped, 4, identity=RUN_A["identity"])
    with pytest.raises(ConfigError, match=f"of identity {RUN_A['identity']} .*not of this run 'r' of identity "
                                          f"{RUN_B['identity']}"):
        ck.claim(stamped, RUN_B)
    assert store.owner(stamped) is None
    ck.claim(stamped, RUN_A)
    assert store.owner(stamped) == RUN_A


def test_a_checkpoint_of_another_run_in_a_claimed_folder_is_never_resumed(tmp_path):
    root = tmp_path / "r"
    ck.claim(root, RUN_A)
    _write(root, 4, identity=RUN_A["identity"])
    stray = _write(root, 8, identity=RUN_B["identity"])  # copied in from another run's folder
    with pytest.raises(ConfigError, match=f"{stray} is a checkpoint of run identity {RUN_B['identity']}, not of "
                                          f"{RUN_A['identity']}"):
        ck.claim(root, RUN_A)
    assert stray.is_dir()
    (root / "run.json").write_text("[1]")
    with pytest.raises(ConfigError, match="does not name the run these checkpoints belong to"):
        ck.claim(root, RUN_A)


def test_a_folder_recorded_under_a_runs_legacy_identity_stays_its_own(tmp_path):
    """A run's folder written under its legacy identity (`runs.legacy_identity`) is claimed by the run that names it
    as `legacy`, and a checkpoint trained since under its new identity is no stray; without it, both are refused."""
    root = tmp_path / "r"
    ck.claim(root, RUN_A)  # run.json and a checkpoint of identity "a...": the run's legacy one
    _write(root, 4, identity=RUN_A["identity"])
    new = {**RUN_A, "identity": "c" * 16}
    with pytest.raises(ConfigError, match="holds the checkpoints of run 'r' of identity a{16}"):
        ck.claim(root, new)
    ck.claim(root, new, legacy=RUN_A["identity"])
    _write(root, 8, identity=new["identity"])  # resumed: trained under its new identity
    ck.claim(root, new, legacy=RUN_A["identity"])
    assert store.owner(root) == RUN_A
    with pytest.raises(ConfigError, match="is a checkpoint of run identity c{16}, not of a{16}"):
        ck.claim(root, RUN_A)


def test_sharded_transformers_weights_count_each_shard(tmp_path):
    root = tmp_path / "run"
    path = _write(root, 4)
    hf = path / "hf"
    (hf / "model.safetensors").unlink()
    for i in (1, 2):
        _weights(hf / f"model-0000{i}-of-00002.safetensors", i)
    (hf / "model.safetensors.index.json").write_text("{}")
    ck.write_state(path, {"step": 4})
    assert store.complete(path, verify=True)
    shard = hf / "model-00002-of-00002.safetensors"
    shard.write_bytes(shard.read_bytes()[:-4])
    assert store.damage(path).startswith("hf/model-00002-of-00002.safetensors: ")


def test_the_studies_count_a_checkpoint_whose_weights_changed_as_missing(tmp_path):
    """What a study still needs is retrained when its checkpoint is damaged in a way only the hash tells."""
    plan = studies.build_plan(scale_config("tiny"))
    paths = studies.Paths(tmp_path, checkpoints=tmp_path / "ckpt")
    run_id = next(iter(plan.runs))
    where = paths.checkpoint(plan.scale.scale, run_id, 4)
    _write(where.parent, 4)
    assert studies.has_checkpoint(plan, paths, run_id, 4)
    weights = where / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    assert store.complete(where) and not studies.has_checkpoint(plan, paths, run_id, 4)


# ---- which checkpoint a path asks for: that one, or a refusal in one line ----
def _recorded_run(tmp_path, total=12):
    """A run folder whose run.json names a results folder with the run's config.yaml (its phases sum to `total`)."""
    results = tmp_path / "runs" / "tiny" / "r"
    results.mkdir(parents=True)
    (results / "config.yaml").write_text(f"run_id: r\nphases:\n- [clm, {total - 2}]\n- [mlm40, 2]\n")
    root = tmp_path / "ckpt" / "tiny" / "r"
    ck.claim(root, {"identity": "a" * 16, "run_id": "r", "results": str(results)})
    for step in (4, 8):
        _write(root, step)
    return root, results


def test_a_run_folder_asks_for_its_final_checkpoint_as_its_config_records_it(tmp_path):
    """Its final step is its recorded config's total: a run whose final checkpoint is not on disk is refused with the
    command that writes it, not read at its last step under the run's name."""
    import subprocess
    import sys

    root, results = _recorded_run(tmp_path)
    assert store.final_step(root, working_root()) == 12 and store.requested(root, working_root()) == (root, 12)
    assert store.repair_command(root) == f"mlmclm pretrain {results}/config.yaml"
    for read in (store.find_checkpoint, store.pretrained_model):
        with pytest.raises(ConfigError, match=f"^{step_dir(root, 12)} does not exist \\(complete checkpoints of the "
                                              f"run: steps 4, 8\\); write it by re-running its run's pretraining: "
                                              f"mlmclm pretrain {results}/config.yaml$"):
            read(root, working_root())
    hold = "import sys\nfrom mlmclm import locks\nwith locks.hold(sys.argv[1]):\n    print('held', flush=True)\n" \
           "    sys.stdin.readline()"
    writer = subprocess.Popen([sys.executable, "-c", hold, str(root)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert writer.stdout.readline() == "held\n"  # its run is being trained by another process
        with pytest.raises(ConfigError, match=f"^{step_dir(root, 12)} is not written yet: process {writer.pid} "):
            store.pretrained_model(root, working_root())
    finally:
        writer.communicate("\n")
    _write(root, 12)
    assert store.pretrained_model(root, working_root()) == (step_dir(root, 12) / "hf", "r", 12)
    assert store.pretrained_model(step_dir(root, 8), working_root())[1:] == ("r-8", 8)


def test_without_a_record_the_highest_step_folder_is_the_final_one(tmp_path):
    root = tmp_path / "r"
    for step in (4, 8):
        _write(root, step)
    assert store.final_step(root, working_root()) == 8 and store.pretrained_model(root, working_root())[1:] == ("r", 8)
    assert store.repair_command(root) == "mlmclm pretrain <the run's config.yaml>"
    assert store.requested(tmp_path / "elsewhere", working_root()) is None and store.pretrained_model(tmp_path, working_root()) is None


def test_a_checkpoint_copied_without_its_results_folder_describes_itself(tmp_path):
    """Each step folder holds the config.yaml that trained it (`write_config`): copied elsewhere, without the results
    folder its run.json names, the run's record (config, identity, final step) is read from it."""
    root, results = _recorded_run(tmp_path)
    config = (results / "config.yaml").read_text()
    for step in (4, 8):
        ck.write_config(step_dir(root, step), config)
    copy = tmp_path / "elsewhere" / "r"
    shutil.copytree(root, copy)
    shutil.rmtree(results)
    for folder in (root, copy):
        record = store.run_record(folder, working_root())
        assert record.folder == step_dir(folder, 8) and record.config["run_id"] == "r" and record.meta == {}
        assert record.identity == config_identity(config) and record.final_step == 12 == store.final_step(folder, working_root())
    assert store.run_record(copy, working_root(), step_dir(copy, 4)).folder == step_dir(copy, 4)


def test_a_checkpoint_is_renamed_aside_before_any_of_it_is_deleted(tmp_path, monkeypatch):
    """Pruning, rewinding, replacing and clearing a damaged step delete only folders already out of a reader's sight:
    at the first deletion the step folder is gone whole, under a name no `step_*` reader matches."""
    deleted = []  # (the folder deleted, the step folders a reader sees at that moment)

    def rmtree(path, ignore_errors=False):
        if Path(path).exists():
            deleted.append((Path(path).name.rsplit(".", 1)[0], sorted(p.name for p in root.glob("step_*"))))
        real_rmtree(path, ignore_errors=ignore_errors)
    real_rmtree = shutil.rmtree
    monkeypatch.setattr(ck.shutil, "rmtree", rmtree)
    root = tmp_path / "run"
    for step in (2, 4, 6, 8, 10):
        _write(root, step)
    ck.prune(root, named={4, 10}, keep_last=1)
    ck.drop_after(root, 4)
    tmp = ck.begin(root, 4)  # a rewritten step replaces the old one
    real_rmtree(tmp)
    shutil.copytree(step_dir(root, 4), tmp)
    ck.publish(root, 4)
    (step_dir(root, 4) / STATE).write_text("{")
    ck.clear_temporary(root)  # a damaged one
    assert deleted == [(".removed-step_000002", ["step_000004", "step_000006", "step_000008", "step_000010"]),
                       (".removed-step_000006", ["step_000004", "step_000008", "step_000010"]),  # pruned
                       (".removed-step_000008", ["step_000004", "step_000010"]),  # dropped
                       (".removed-step_000010", ["step_000004"]),
                       (".removed-step_000004", ["step_000004"]),  # replaced: the new one is there
                       (".removed-step_000004", [])]  # damaged
    assert not list(root.iterdir())  # nothing left aside


def test_what_a_killed_remover_left_aside_is_cleared_by_the_writer(tmp_path):
    root = tmp_path / "run"
    _write(root, 2)
    left = _write(root, 4).rename(root / ".removed-step_000004.12345")
    assert store.checkpoint_steps(root) == [2] and store.final_step(root, working_root()) == 2
    ck.clear_temporary(root)
    assert not left.exists() and store.checkpoint_steps(root) == [2]
