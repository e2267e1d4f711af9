"""Any transformers model under the fine-tuning protocol: random-weight BERT, ModernBERT (AutoModel encoders under
mlmclm's heads), Llama and EuroBert (converted to mlmclm on the fly) built from configs (no hub), one small grid end to
end for each, results under the model's name that the results loader reads; bad models fail in one line."""

import json
import re
from pathlib import Path

import pytest
import torch

from mlmclm.io import working_root
from mlmclm.analysis.loading.results import load_run_tree
from mlmclm.cli import main
from mlmclm.config import finetune_config, scale_config
from mlmclm.errors import FinetuneError, ResultFileError
from mlmclm.evaluation.finetune import open_checkpoint, run_grid
from helpers import offline_suite, random_transformers_model

TINY = scale_config("tiny")  # the scale of every grid here
FAMILIES = {"bert": ("encoder", False), "modernbert": ("encoder", False), "llama": ("converted", True),
            "eurobert": ("converted", False)}  # kind, whether the source model is causal


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    root = tmp_path_factory.mktemp("any")
    texts = offline_suite(root)
    models = {f: random_transformers_model(root / "models" / f"{f}-tiny", f, texts) for f in FAMILIES}
    return root, models


def _finetune(suite, model, *extra):
    root, _ = suite
    return main(["finetune", str(model), "--scale", "tiny", "--data-dir", str(root / "tasks"),
                 "--runs-dir", str(root / "results"), "--lrs", "1e-3", "--seeds", "0", "--set", "max_steps=2",
                 *extra])


@pytest.mark.parametrize("family", FAMILIES)
def test_one_grid_end_to_end_per_family(suite, family, capsys):
    root, models = suite
    kind, _ = FAMILIES[family]
    datasets = "multiemo_sentiment,brown_propn_spans" + (",squad11,squad_retrieval" if family in ("bert", "llama")
                                                         else "")
    assert _finetune(suite, models[family], "--datasets", datasets) == 0
    assert open_checkpoint(models[family], root=working_root()).kind == kind
    files = sorted((root / "results" / "tiny" / f"{family}-tiny").glob("*/*/lr1e-03_sd0/results.json"))
    assert sorted(f.parts[-3] for f in files) == sorted(datasets.split(","))
    for f in files:
        doc = json.loads(f.read_text())
        meta = doc["meta"]
        assert meta["model_id"] == f"{family}-tiny" and meta["model_type"] == family and meta["is_causal"] is False
        assert meta["train_steps"] == 2 and meta["attention_backend"]
        assert 0 <= doc["test"]["score"] <= 1 and len(doc["test"]["scores_i"]) == meta["n_test"] > 0
    runs = load_run_tree(root / "results" / "tiny", "ours", "tiny")  # an arbitrary model id: attributes missing
    mine = runs[runs["model"] == f"{family}-tiny"]
    assert len(mine) == len(files) and mine["size"].isna().all() and mine["steps"].isna().all()


def test_a_decoder_fine_tunes_causally_as_an_option_an_encoder_refuses(suite, tmp_path):
    root, models = suite
    cfg = finetune_config(TINY, [f"data_dir={root / 'tasks'}", f"results_dir={tmp_path}", "max_steps=2",
                                 "datasets=[multiemo_sentiment]", "lrs=[1e-3]", "seeds=[0]", "is_causal=true"])
    run_grid(models["llama"], cfg, model_id="llama-causal", progress=False, root=working_root())
    doc = json.loads(next((tmp_path / "tiny" / "llama-causal").rglob("results.json")).read_text())
    assert doc["meta"]["is_causal"] is True and doc["meta"]["config"]["is_causal"] is True
    with pytest.raises(FinetuneError, match="'bert' encoder, which has no causal mode"):
        run_grid(models["bert"], cfg, progress=False, root=working_root())


def test_converted_decoder_body_keeps_its_weights(suite):
    """The converted body is the Llama model's: same hidden states, causal, as transformers' LlamaModel."""
    from transformers import LlamaModel

    from mlmclm.models import MlmClmModel

    _, models = suite
    ckpt = open_checkpoint(models["llama"], root=working_root())
    ours = MlmClmModel(ckpt.config)
    ours.load_state_dict(ckpt.body)
    ids = torch.tensor([[1, 5, 9, 12, 3]])
    ref = LlamaModel.from_pretrained(models["llama"]).eval()(input_ids=ids).last_hidden_state
    got = ours.eval()(input_ids=ids, is_causal=True).last_hidden_state
    torch.testing.assert_close(got, ref, atol=1e-4, rtol=1e-4)


def test_arbitrary_model_ids_load_with_empty_attributes(suite):
    """Any model id loads: its scores are aggregated beside ours, its attributes missing, and the study views (which
    select on size and objective) leave it out."""
    from mlmclm.analysis.loading import results

    for model_id in ("bert-tiny", "all-MiniLM-L6-v2", "SmolLM2-135M"):
        with pytest.raises(ResultFileError):
            results.parse_model_id(model_id)
    root, models = suite
    cfg = finetune_config(TINY, [f"data_dir={root / 'tasks'}", f"results_dir={root / 'ids'}", "max_steps=2",
                                 "datasets=[multiemo_sentiment]", "lrs=[1e-3]", "seeds=[0]"])
    run_grid(models["bert"], cfg, model_id="all-MiniLM-L6-v2", progress=False, root=working_root())
    scores = results.aggregate(results.load_run_tree(root / "ids" / "tiny", "ours", "tiny"))
    row = scores[scores["model"] == "all-MiniLM-L6-v2"]
    assert len(row) and row[["size", "objective", "steps"]].isna().all().all()
    assert results.scaling_view(scores).empty


def _copy_without(src: Path, dst: Path, drop) -> Path:
    dst.mkdir()
    for f in src.iterdir():
        if not drop(f.name):
            (dst / f.name).write_bytes(f.read_bytes())
    return dst


def test_bad_models_fail_in_one_line(suite, tmp_path):
    from transformers import GPT2Config, GPT2LMHeadModel, T5Config, T5Model

    _, models = suite
    no_tok = _copy_without(models["bert"], tmp_path / "no-tokenizer", lambda n: n.startswith(("tokenizer", "special")))
    cases = [(no_tok, "has no tokenizer \\(none of tokenizer.json")]
    tok_files = [f for f in models["bert"].iterdir() if f.name.startswith(("tokenizer", "special"))]
    for name, model, what in (("t5", T5Model(T5Config(vocab_size=300, d_model=32, d_kv=8, d_ff=64, num_layers=1,
                                                      num_heads=2, decoder_start_token_id=0)), "encoder-decoder"),
                              ("gpt2", GPT2LMHeadModel(GPT2Config(vocab_size=300, n_embd=32, n_layer=1, n_head=2)),
                               "decoder")):
        model.save_pretrained(tmp_path / name)
        for f in tok_files:
            (tmp_path / name / f.name).write_bytes(f.read_bytes())
        cases.append((tmp_path / name, f"a '{name}' {what} has no usable hidden states"))
    for path, message in cases:
        with pytest.raises(FinetuneError, match=message) as e:
            open_checkpoint(path, root=working_root())
        assert "\n" not in str(e.value)


@pytest.mark.parametrize("name", ["nowhere/deeper/still", "bert-base-uncased", "./nope", "-x/y"])
def test_a_folder_that_is_no_hub_id_is_not_fetched(name, tmp_path, monkeypatch):
    """A path that does not exist and is no hub id owner/name: one line saying so and what fine-tuning takes (it said
    "no config.json", as if the folder were there)."""
    monkeypatch.chdir(tmp_path)
    shown = re.escape(str(Path(name)))
    with pytest.raises(FinetuneError, match=f"{shown}: no such file or folder; fine-tuning takes a checkpoint folder"):
        open_checkpoint(name, root=working_root())


def test_a_hub_id_is_fetched_through_the_hub_client_and_named_after_its_name(suite, monkeypatch):
    """A hub id that is no local folder goes to `snapshot_download` (replaced here: no network in tests); what the
    hub cannot provide (offline, unknown id) is one line."""
    import huggingface_hub

    _, models = suite
    asked = []
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda repo, **kw: asked.append(repo) or
                        str(models["bert"]))
    ckpt = open_checkpoint("someone/tiny-bert", root=working_root())
    assert asked == ["someone/tiny-bert"] and ckpt.model_id == "tiny-bert" and ckpt.kind == "encoder"

    def offline(repo, **kw):
        raise OSError("outgoing traffic has been disabled\nmore")
    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    with pytest.raises(FinetuneError, match=r"someone/x: no such folder, and the hub did not provide it \(OSError: "
                                            r"outgoing traffic has been disabled\)$"):
        open_checkpoint("someone/x", root=working_root())
