"""A checkpoint that loads only with its own code (transformers' `trust_remote_code`), as the paper's released
`MLMvsCLM/*` models (`SLModel`) do, offline: a folder whose config.json names a small modeling file of its own
(`auto_map`, a BERT subclass that reads `is_causal` as the released configs have it) is fine-tuned under the protocol
with the explicit opt-in, recorded in results.json; without it the command refuses in one line and writes nothing."""

import json
from pathlib import Path

import pytest
import torch

from helpers import offline_suite, random_transformers_model, tokenizer
from mlmclm.analysis.loading.results import load_run_tree
from mlmclm.cli import main
from mlmclm.config import finetune_config, scale_config
from mlmclm.errors import FinetuneError
from mlmclm.evaluation.checkpoint import open_checkpoint
from mlmclm.evaluation.finetune import run_grid
from mlmclm.io import working_root

MODELING = '''"""A tiny encoder of its own: BERT, causal when its config says `is_causal` (or `always_causal`)."""
import torch
from transformers import BertConfig, BertModel


class TinyRemoteConfig(BertConfig):
    model_type = "tiny_remote_encoder"

    def __init__(self, is_causal=False, always_causal=False, **kwargs):
        super().__init__(**kwargs)
        self.is_causal, self.always_causal = is_causal, always_causal


class TinyRemoteModel(BertModel):
    config_class = TinyRemoteConfig

    def forward(self, input_ids=None, attention_mask=None, **kwargs):
        out = super().forward(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
        if self.config.is_causal or self.config.always_causal:  # each position sees its prefix only
            out.last_hidden_state = torch.stack([super(TinyRemoteModel, self).forward(
                input_ids=input_ids[:, :i + 1]).last_hidden_state[:, i] for i in range(input_ids.shape[1])], 1)
        return out
'''
DATASETS = "multiemo_sentiment,brown_propn_spans"


def own_code_checkpoint(path: Path, texts, model_type: str = "tiny_remote_encoder", **config) -> Path:
    """A random 2-layer BERT's weights and tokenizer under a config.json that names `modeling_tiny.py` (beside it)."""
    from transformers import BertConfig, BertModel

    tok = tokenizer(texts, 512)
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, max_position_embeddings=128, pad_token_id=tok.pad_token_id)
              ).save_pretrained(path)
    tok.save_pretrained(path)
    (path / "modeling_tiny.py").write_text(MODELING)
    doc = json.loads((path / "config.json").read_text())
    doc.update(model_type=model_type, architectures=["TinyRemoteModel"], **config,
               auto_map={"AutoConfig": "modeling_tiny.TinyRemoteConfig", "AutoModel": "modeling_tiny.TinyRemoteModel"})
    (path / "config.json").write_text(json.dumps(doc))
    return path


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    root = tmp_path_factory.mktemp("remote")
    texts = offline_suite(root)
    return root, texts, own_code_checkpoint(root / "models" / "released-like", texts, is_causal=True)


def _finetune(root: Path, model: Path, runs: Path, *extra) -> int:
    return main(["finetune", str(model), "--scale", "tiny", "--data-dir", str(root / "tasks"), "--runs-dir",
                 str(runs), "--datasets", DATASETS, "--lrs", "1e-3", "--seeds", "0", "--set", "max_steps=2", *extra])


def test_without_the_opt_in_a_checkpoint_of_its_own_code_is_refused_in_one_line(suite, tmp_path, capsys):
    root, _, model = suite
    assert _finetune(root, model, tmp_path / "runs") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("mlmclm: error: ") and "--trust-remote-code" in err, err
    assert "auto_map" in err and "modeling_tiny.TinyRemoteModel" in err and "Traceback" not in err
    assert not (tmp_path / "runs").exists()  # a refused command writes nothing
    cfg = finetune_config(scale_config("tiny"), [f"data_dir={root / 'tasks'}", f"results_dir={tmp_path}"])
    with pytest.raises(FinetuneError, match="pass --trust-remote-code"):  # the Python API: off by default too
        run_grid(model, cfg, progress=False, root=working_root())


def test_with_the_opt_in_it_fine_tunes_under_the_protocol_and_results_record_it(suite, tmp_path, capsys):
    root, _, model = suite
    ckpt = open_checkpoint(model, root=working_root(), trust_remote_code=True)
    assert ckpt.kind == "encoder" and ckpt.trust_remote_code is True
    assert type(ckpt.config).__name__ == "TinyRemoteConfig" and "transformers_modules" in type(ckpt.config).__module__
    assert ckpt.config.is_causal is False  # its config says true: loaded bidirectionally, as the protocol fine-tunes
    runs = tmp_path / "runs"
    assert _finetune(root, model, runs, "--trust-remote-code") == 0
    files = sorted((runs / "tiny" / "released-like").glob("*/*/lr1e-03_sd0/results.json"))
    assert sorted(f.parts[-3] for f in files) == sorted(DATASETS.split(","))
    for f in files:
        doc = json.loads(f.read_text())
        meta = doc["meta"]
        assert meta["trust_remote_code"] is True and meta["model_type"] == "tiny_remote_encoder"
        assert meta["is_causal"] is False and meta["train_steps"] == 2 and 0 <= doc["test"]["score"] <= 1
    old = json.loads(files[0].read_text())  # a results.json written before the field existed
    del old["meta"]["trust_remote_code"]
    files[0].write_text(json.dumps(old))
    capsys.readouterr()
    assert _finetune(root, model, runs, "--trust-remote-code") == 0  # still complete: nothing redone
    assert capsys.readouterr().out.startswith("0 results written (0 trainings), 2 already complete")
    table = load_run_tree(runs / "tiny", "ours", "tiny")  # the loader reads old and new files alike
    assert len(table) == 2 and set(table["model"]) == {"released-like"}


def test_the_opt_in_is_off_by_default_and_recorded_false(suite, tmp_path):
    root, texts, _ = suite
    bert = random_transformers_model(tmp_path / "bert-tiny", "bert", texts)
    assert _finetune(root, bert, tmp_path / "runs", "--datasets", "multiemo_sentiment") == 0
    doc = json.loads(next((tmp_path / "runs" / "tiny" / "bert-tiny").rglob("results.json")).read_text())
    assert doc["meta"]["trust_remote_code"] is False


def test_a_known_model_type_loads_with_transformers_own_code_unless_opted_in(suite, tmp_path):
    _, texts, _ = suite
    model = own_code_checkpoint(tmp_path / "bert-own", texts, model_type="bert")
    assert type(open_checkpoint(model, root=working_root()).config).__name__ == "BertConfig"
    ours = open_checkpoint(model, root=working_root(), trust_remote_code=True).config
    assert type(ours).__name__ == "TinyRemoteConfig"


def test_an_encoder_that_still_attends_causally_is_refused(suite, tmp_path):
    _, texts, _ = suite
    model = own_code_checkpoint(tmp_path / "causal", texts, always_causal=True)
    with pytest.raises(FinetuneError, match="attends causally .* fine-tunes every model bidirectionally"):
        open_checkpoint(model, root=working_root(), trust_remote_code=True)
