"""The pretraining engine end to end on a small local corpus: phases (mixed and alternating ones and masking-ratio
ramps too), checkpoints,
exact resume after SIGKILL, biphasic reuse of a pre-decay checkpoint, two processes = one, non-finite losses, bad
input."""

import inspect
import re
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from mlmclm.io import working_root
from mlmclm.config import RECIPES_DIR, PretrainConfig, load_config, to_yaml
from mlmclm.errors import ConfigError, NonFiniteLoss
from mlmclm.models.modeling import MlmClmForMaskedLM
from mlmclm.runs import identity
from mlmclm.training.pretrain import pretrain

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def text_corpus(tmp_path_factory):
    """Real English prose that needs no download: the docstrings of Python's standard library, one per line."""
    import importlib

    path = tmp_path_factory.mktemp("corpus") / "stdlib_docs.txt"
    lines = []
    for name in sorted(sys.stdlib_module_names):
        if name.startswith("_") or name in ("antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo"):
            continue
        try:
            module = importlib.import_module(name)
        except Exception:
            continue
        for obj in [module, *[getattr(module, a, None) for a in sorted(dir(module)) if not a.startswith("_")]]:
            doc = inspect.getdoc(obj) if obj is not None else None
            if doc and len(doc) > 200:
                lines.append(" ".join(doc.split()))
    path.write_text("\n".join(dict.fromkeys(lines)) + "\n")
    assert path.stat().st_size > 300_000
    return path


@pytest.fixture(scope="session")
def data_root(tmp_path_factory):
    return tmp_path_factory.mktemp("data")  # shared cache: the tokenizer and shards are built once


def make_config(tmp_path, text_corpus, data_root, run_id="t", phases=(("clm", 12), ("mlm40", 12)), **over):
    data = {"corpus": str(text_corpus), "vocab_size": 512, "seq_len": 32, "root": str(data_root)}
    data.update(over.pop("data", {}))
    cfg = {
        "run_id": run_id, "scale": "test", "phases": [list(p) for p in phases], "batch_size": 8,
        "micro_batch_size": 4, "log_every": 2, "results_dir": str(tmp_path / "runs"),
        "checkpoints_dir": str(tmp_path / "ckpt"), "model": {"size": "tiny"}, "data": data,
        "optim": {"lr": 3e-3, "warmup_steps": 2, "decay_steps": 4},
        "checkpoint": {"every": 8, "keep_last": 1, "steps": [6]},
    }
    for key, value in over.items():
        cfg[key] = {**cfg.get(key, {}), **value} if isinstance(value, dict) else value
    return load_config(PretrainConfig, cfg)


def final_weights(cfg, step=None):
    root = Path(cfg.checkpoints_dir) / cfg.scale / cfg.run_id
    steps = sorted(p.name for p in root.glob("step_*"))
    return load_file(root / (f"step_{step:06d}" if step is not None else steps[-1]) / "model.safetensors")


def read_log(cfg):
    lines = (Path(cfg.results_dir) / cfg.scale / cfg.run_id / "pretrain.csv").read_text().splitlines()
    header = lines[0].split(",")
    return [dict(zip(header, ln.split(","))) for ln in lines[1:]]


def test_two_phase_run_writes_its_folder_and_checkpoints(tmp_path, text_corpus, data_root):
    cfg = make_config(tmp_path, text_corpus, data_root, checkpoint={"steps": [0, 6]})
    run_dir = pretrain(cfg, root=working_root())
    assert (run_dir / "config.yaml").read_text() == to_yaml(cfg)
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["status"] == "complete" and meta["attention_backend"] == "sdpa" and meta["tokens_seen"] == 24 * 256
    assert meta["versions"]["torch"] and meta["hardware"]["cpu_count"] and meta["commit"]
    assert meta["data"]["shards"].startswith(f"{Path(cfg.data.root).as_posix()}/shards/")  # as the config names it
    # its identity (the hash of config.yaml) in meta.json, in its checkpoint folder and in every trainer state
    from mlmclm.runs import config_identity, legacy_identity
    assert meta["identity"] == identity(cfg) == config_identity(to_yaml(cfg)) != legacy_identity(to_yaml(cfg))
    ckpt_root = Path(cfg.checkpoints_dir) / "test" / "t"
    assert json.loads((ckpt_root / "run.json").read_text()) == {"identity": identity(cfg), "run_id": "t",
                                                                 "results": str(run_dir)}
    assert {json.loads(p.read_text())["identity"] for p in ckpt_root.glob("step_*/trainer_state.json")} == {
        identity(cfg)}
    # each step folder holds the config that trained it (recorded in its trainer state's files): copied elsewhere,
    # without the results folder, the checkpoint is still its run's record
    assert {p.read_text() for p in ckpt_root.glob("step_*/config.yaml")} == {to_yaml(cfg)}
    assert all("config.yaml" in json.loads(p.read_text())["files"] for p in ckpt_root.glob("step_*/trainer_state.json"))
    from mlmclm.runs import read_record
    assert read_record(ckpt_root / "step_000006").identity == identity(cfg)
    log = read_log(cfg)
    assert [int(r["step"]) for r in log] == [2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24]
    assert {r["objective"] for r in log[:6]} == {"clm"} and {r["objective"] for r in log[6:]} == {"mlm40"}
    assert float(log[5]["loss"]) < float(log[0]["loss"]) - 0.5  # it learns
    assert float(log[-1]["lr"]) == 0.0 and float(log[-4]["lr"]) == 3e-3
    mlm_labels = [int(r["label_tokens"]) for r in log[6:]]
    assert all(abs(n / (2 * 8 * 32) - 0.4) < 0.06 for n in mlm_labels)  # 40% of the tokens of 2 steps
    ckpts = sorted(p.name for p in (Path(cfg.checkpoints_dir) / "test" / "t").glob("step_*"))
    # named: 0 (the initial weights: a random-init control), 6 (intermediate), 20 (pre-decay), 24 (final); periodic
    # every 8 with keep_last=1: 16
    assert ckpts == ["step_000000", "step_000006", "step_000016", "step_000020", "step_000024"]
    w0, w6 = final_weights(cfg, 0), final_weights(cfg, 6)
    assert w0.keys() == w6.keys() and not any(torch.equal(w0[k], w6[k]) for k in w0 if "norm" not in k)
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM, AutoTokenizer
    last = Path(cfg.checkpoints_dir) / "test" / "t" / "step_000024" / "hf"
    assert type(AutoModelForMaskedLM.from_pretrained(last)).__name__ == "MlmClmForMaskedLM"
    clm_export = Path(cfg.checkpoints_dir) / "test" / "t" / "step_000006" / "hf"
    assert json.loads((clm_export / "config.json").read_text())["architectures"] == ["MlmClmForCausalLM"]
    assert AutoModelForCausalLM.from_pretrained(clm_export).config.is_causal
    assert AutoTokenizer.from_pretrained(last).mask_token == "<|mask|>"
    # fine-tuning reads a run's checkpoints under the paper's names: the run id, and -<step> for intermediate ones
    from mlmclm.evaluation.finetune import open_checkpoint
    run_ckpts = Path(cfg.checkpoints_dir) / "test" / "t"
    assert (open_checkpoint(run_ckpts, root=working_root()).model_id, open_checkpoint(run_ckpts, root=working_root()).step) == ("t", 24)
    assert (open_checkpoint(run_ckpts / "step_000006", root=working_root()).model_id, open_checkpoint(clm_export, root=working_root()).step) == ("t-6", 6)
    # idempotent: a second run of the same config does nothing
    stamp = (run_dir / "pretrain.csv").stat().st_mtime_ns
    pretrain(cfg, root=working_root())
    assert (run_dir / "pretrain.csv").stat().st_mtime_ns == stamp


# an alternating phase, then a mixed one whose 2 CLM rows (of 8) straddle the first micro-batch of 4: a run killed
# after step 8 resumes inside the alternating phase; in two processes the first holds all the CLM rows
MIXED = (("alt1clm1mlm40", 12), ("mix1clm3mlm40", 12))
PHASES = pytest.mark.parametrize("phases", [(("clm", 12), ("mlm40", 12)), MIXED], ids=["clm-mlm40", "alt-mix"])
RAMP = (("mlm40to20", 24),)  # a masking-ratio ramp: killed after step 8, it resumes mid-ramp


@pytest.mark.parametrize("phases", [(("clm", 12), ("mlm40", 12)), MIXED, RAMP], ids=["clm-mlm40", "alt-mix", "ramp"])
def test_resume_after_sigkill_is_bitwise_identical(tmp_path, text_corpus, data_root, phases):
    straight = make_config(tmp_path, text_corpus, data_root, run_id="straight", log_every=1, phases=phases)
    pretrain(straight, root=working_root())
    killed = make_config(tmp_path, text_corpus, data_root, run_id="killed", log_every=1, phases=phases)
    path = tmp_path / "killed.yaml"
    path.write_text(to_yaml(killed))
    cmd = [sys.executable, "-m", "mlmclm.cli", "pretrain", str(path)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    target = Path(killed.checkpoints_dir) / "test" / "killed" / "step_000008" / "trainer_state.json"
    deadline = time.time() + 300
    while not target.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (Path(killed.checkpoints_dir) / "test" / "killed" / "step_000024").exists()
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True)
    a, b = final_weights(straight), final_weights(killed)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert [r["loss"] for r in read_log(straight)] == [r["loss"] for r in read_log(killed)]
    assert [r["label_tokens"] for r in read_log(straight)] == [r["label_tokens"] for r in read_log(killed)]
    if phases == RAMP:  # logged under the phase's name, each step masked at its own ratio: 40% down to 20%
        log = read_log(killed)
        assert {r["objective"] for r in log} == {"mlm40to20"}
        share = [sum(int(r["label_tokens"]) for r in rows) / (6 * 8 * 32) for rows in (log[:6], log[-6:])]
        assert 0.34 < share[0] < 0.44 and 0.15 < share[1] < 0.24
        step_6 = Path(killed.checkpoints_dir) / "test" / "killed" / "step_000006"  # named: kept
        assert json.loads((step_6 / "trainer_state.json").read_text())["objective"] == "mlm40to20"
        assert json.loads((step_6 / "hf" / "config.json").read_text())["architectures"] == ["MlmClmForMaskedLM"]


def test_biphasic_run_resumes_the_clm_runs_pre_decay_checkpoint(tmp_path, text_corpus, data_root):
    """CLM 8 then MLM 8, trained straight, equals: a CLM-only run of 16 steps, then a run that takes its step-8
    checkpoint (optimizer included, learning rate not yet decayed) and does the MLM phase."""
    phases = (("clm", 8), ("mlm40", 8))
    straight = make_config(tmp_path, text_corpus, data_root, run_id="straight", phases=phases,
                           checkpoint={"steps": []})
    pretrain(straight, root=working_root())
    clm = make_config(tmp_path, text_corpus, data_root, run_id="clm", phases=(("clm", 16),),
                      checkpoint={"steps": [8]})
    pretrain(clm, root=working_root())
    biphasic = make_config(tmp_path, text_corpus, data_root, run_id="biphasic", phases=phases,
                           checkpoint={"steps": []},
                           init={"kind": "run", "path": str(Path(clm.checkpoints_dir) / "test" / "clm"), "step": 8,
                                 "optimizer": True})
    pretrain(biphasic, root=working_root())
    assert [int(r["step"]) for r in read_log(biphasic)][0] == 10  # it starts after the CLM run's step 8
    a, b = final_weights(straight), final_weights(biphasic)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_continued_pretraining_from_a_decayed_checkpoint(tmp_path, text_corpus, data_root):
    base = make_config(tmp_path, text_corpus, data_root, run_id="base", phases=(("clm", 8),))
    pretrain(base, root=working_root())
    cpt = make_config(tmp_path, text_corpus, data_root, run_id="cpt", phases=(("mlm40", 6),),
                      init={"kind": "run", "path": str(Path(base.checkpoints_dir) / "test" / "base")},
                      checkpoint={"steps": []})
    pretrain(cpt, root=working_root())
    log = read_log(cpt)
    assert int(log[0]["step"]) == 2 and float(log[0]["lr"]) == 3e-3  # fresh optimizer and schedule
    other = make_config(tmp_path, text_corpus, data_root, run_id="cpt400", phases=(("mlm40", 6),),  # another
                        data={"vocab_size": 400}, init={"kind": "run", "path": cpt.init.path})  # tokenizer than its init
    with pytest.raises(ConfigError, match=r"init checkpoint \S+step_000008 has a 512-token vocabulary, the run's "
                                          r"tokenizer 400 .*set data.tokenizer and data.vocab_size to those its run"):
        pretrain(other, root=working_root())
    assert not (Path(other.results_dir) / "test" / "cpt400").exists()  # refused before its run folder (issue 63)
    start = MlmClmForMaskedLM.from_pretrained(Path(base.checkpoints_dir) / "test" / "base" / "step_000008" / "hf")
    assert torch.equal(start.lm_head.weight, final_weights(base)["lm_head.weight"])
    assert not torch.equal(final_weights(cpt)["lm_head.weight"], start.lm_head.weight)


def _rank_error(stderr: str) -> str:
    """What a failed launch's ranks said: their one-line errors and the first traceback (torchrun's closing summary
    names only exit codes, and a rank's progress bars can push its error out of the stderr's tail)."""
    errors = [ln for ln in stderr.splitlines() if ln.startswith("mlmclm: error:")]
    start = stderr.find("Traceback")
    return "\n".join([*errors, stderr[start:start + 4000] if start >= 0 else stderr[-2000:]])


@pytest.mark.slow  # a launch of two torchrun processes beside a run of one, per phase schedule
@PHASES
def test_two_processes_train_the_same_model_as_one(tmp_path, text_corpus, data_root, phases, free_port):
    one = make_config(tmp_path, text_corpus, data_root, run_id="one", log_every=1, checkpoint={"steps": []},
                      phases=phases)
    pretrain(one, root=working_root())
    two = make_config(tmp_path, text_corpus, data_root, run_id="two", log_every=1, checkpoint={"steps": []},
                      phases=phases)
    path = tmp_path / "two.yaml"
    path.write_text(to_yaml(two))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    # on a machine without GPUs, --multi_gpu launches torchrun processes that accelerate runs on CPU with gloo
    proc = subprocess.run([sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
                           "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
                           "--main_process_port", str(free_port),
                           "-m", "mlmclm.cli", "pretrain", str(path)], cwd=ROOT, env=env, capture_output=True,
                          text=True)
    assert proc.returncode == 0, _rank_error(proc.stderr)
    meta = json.loads((Path(two.results_dir) / "test" / "two" / "meta.json").read_text())
    assert meta["processes"] == 2
    for r1, r2 in zip(read_log(one), read_log(two), strict=True):
        assert r1["objective"] == r2["objective"] and r1["label_tokens"] == r2["label_tokens"]
        assert float(r1["loss"]) == pytest.approx(float(r2["loss"]), rel=1e-4)
    a, b = final_weights(one), final_weights(two)
    assert all(torch.allclose(a[k], b[k], atol=2e-4) for k in a)


def test_non_finite_loss_stops_with_the_step_and_keeps_the_last_good_checkpoint(tmp_path, text_corpus, data_root,
                                                                                 monkeypatch):
    calls = {"n": 0}
    forward = MlmClmForMaskedLM.forward

    def poisoned(self, *args, **kwargs):
        out = forward(self, *args, **kwargs)
        calls["n"] += 1
        if calls["n"] == 2 * 10 - 1:  # step 10 (two micro-batches a step)
            out.loss = out.loss * float("nan")
        return out

    monkeypatch.setattr(MlmClmForMaskedLM, "forward", poisoned)
    cfg = make_config(tmp_path, text_corpus, data_root, run_id="nan", log_every=4)
    with pytest.raises(NonFiniteLoss, match=r"non-finite loss at step 10; .*step_000008"):
        pretrain(cfg, root=working_root())
    steps = sorted(p.name for p in (Path(cfg.checkpoints_dir) / "test" / "nan").glob("step_*"))
    assert steps == ["step_000006", "step_000008"]
    meta = json.loads((Path(cfg.results_dir) / "test" / "nan" / "meta.json").read_text())
    assert meta["status"] == "running"


def test_init_from_a_llama_decoder_adds_a_mask_token_and_trains_mlm(tmp_path, text_corpus, data_root):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    raw = Tokenizer(models.BPE())  # an LLM's tokenizer: bos and eos, no mask, no pad
    raw.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    raw.train_from_iterator(text_corpus.read_text().splitlines()[:300],
                            trainers.BpeTrainer(vocab_size=400, special_tokens=["<s>", "</s>"], show_progress=False,
                                                initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok = PreTrainedTokenizerFast(tokenizer_object=raw, bos_token="<s>", eos_token="</s>")
    decoder_dir = tmp_path / "decoder"
    LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                 num_attention_heads=4, num_key_value_heads=2)).save_pretrained(decoder_dir)
    tok.save_pretrained(decoder_dir)
    cfg = make_config(tmp_path, text_corpus, data_root, run_id="llm", phases=(("mlm40", 4),),
                      optim={"warmup_steps": 1, "decay_steps": 1}, checkpoint={"steps": []},
                      init={"kind": "hf", "path": str(decoder_dir)})
    pretrain(cfg, root=working_root())
    from transformers import AutoTokenizer
    out = Path(cfg.checkpoints_dir) / "test" / "llm" / "step_000004" / "hf"
    model, tok2 = MlmClmForMaskedLM.from_pretrained(out), AutoTokenizer.from_pretrained(out)
    assert tok2.mask_token == "<|mask|>" and model.config.vocab_size == len(tok2) == len(tok) + 2
    assert model.config.mask_token_id == tok2.mask_token_id
    assert all(torch.isfinite(torch.tensor(float(r["loss"]))) for r in read_log(cfg))


# ---- bad input: one clear line, before any work ----
def _cli_error(tmp_path, yaml_text, *overrides):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml_text)
    proc = subprocess.run([sys.executable, "-m", "mlmclm.cli", "pretrain", str(path), *overrides], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mlmclm: error: "), proc.stderr
    return lines[0]


def test_malformed_yaml_and_unknown_keys_via_the_cli(tmp_path):
    assert "bad.yaml: malformed YAML (line 2, column 1)" in _cli_error(tmp_path, "phases: [[clm, 3]\n")
    assert "unknown config key optim.lrr; did you mean optim.lr?" in _cli_error(tmp_path, "optim: {lrr: 1}\n")
    assert "batch_size must be an integer" in _cli_error(tmp_path, "batch_size: many\n")


def test_mixed_and_alternating_steps_run_each_part_with_its_attention_and_one_normaliser(tmp_path, text_corpus,
                                                                                        data_root, monkeypatch):
    """Every forward call of a mixed step (2 CLM rows : 6 MLM rows, micro-batches of 4) and of an alternating phase:
    CLM rows causal with next-token labels, MLM rows bidirectional with labels at the masked positions only, every
    call of a step normalised by the step's label tokens (the log's label_tokens)."""
    calls = []
    forward = MlmClmForMaskedLM.forward

    def spy(self, input_ids=None, labels=None, is_causal=None, num_items_in_batch=None, **kwargs):
        calls.append((input_ids.clone(), labels.clone(), is_causal, int(num_items_in_batch)))
        return forward(self, input_ids=input_ids, labels=labels, is_causal=is_causal,
                       num_items_in_batch=num_items_in_batch, **kwargs)

    monkeypatch.setattr(MlmClmForMaskedLM, "forward", spy)
    cfg = make_config(tmp_path, text_corpus, data_root, run_id="mixed", phases=(("mix1clm3mlm40", 2),
                      ("alt1clm1mlm40", 3)), log_every=1, optim={"warmup_steps": 1, "decay_steps": 1},
                      checkpoint={"steps": []})
    pretrain(cfg, root=working_root())
    steps = [calls[0:3], calls[3:6], calls[6:8], calls[8:10], calls[10:12]]
    assert len(calls) == 12
    mask = json.loads((Path(cfg.checkpoints_dir) / "test" / "mixed" / "step_000005" / "hf" /
                       "config.json").read_text())["mask_token_id"]
    expected = [[(True, 2), (False, 2), (False, 4)]] * 2 + [[(True, 4)] * 2, [(False, 4)] * 2, [(True, 4)] * 2]
    for step_calls, want, row in zip(steps, expected, read_log(cfg), strict=True):
        assert [(causal, len(ids)) for ids, _, causal, _ in step_calls] == want
        for ids, labels, causal, _ in step_calls:
            if causal:  # next tokens, nothing masked
                assert (ids != mask).all() and (labels[:, :-1] == ids[:, 1:])[labels[:, :-1] != -100].all()
            else:  # the masked positions and only those
                assert torch.equal(labels != -100, ids == mask) and 0.25 < (ids == mask).float().mean() < 0.55
        total = sum(int((labels != -100).sum()) for _, labels, _, _ in step_calls)
        assert {n for *_, n in step_calls} == {total} == {int(row["label_tokens"])}
    assert [r["objective"] for r in read_log(cfg)] == ["mix1clm3mlm40"] * 2 + ["alt1clm1mlm40"] * 3


@pytest.mark.parametrize("over,match", [
    ({"phases": [["clm", 0]]}, "phase clm has 0 steps; every phase needs a positive step count"),
    ({"phases": [["clm", 10], ["mlm40", 10]], "steps": 42}, "phases sum to 20 steps but steps .the budget. is 42"),
    ({"phases": [["mlm0", 10]]}, r"the masking ratio must be in \(0, 1\)"),
    ({"phases": [["mlm150", 10]]}, r"the masking ratio must be in \(0, 1\)"),
    ({"init": {"kind": "run"}}, "init.path is required with init.kind=run"),
    ({"batch_size": 10, "micro_batch_size": 4}, r"batch_size \(10\) must be a multiple of micro_batch_size \(4\)"),
    ({"checkpoint": {"steps": [99]}}, r"checkpoint.steps \[99\] fall outside"),
    ({"phases": [["mix1clm15mlm40", 10]], "batch_size": 8, "micro_batch_size": 4},
     r"objective mix1clm15mlm40: batch_size 8 cannot be split 1:15 .* a multiple of 16"),
    ({"phases": [["mix1:15", 10]]}, r"objective 'mix1:15' is not valid; .* 'mix1clm15mlm40'"),
    ({"phases": [["mlm40to40", 10]]}, r"objective 'mlm40to40': a ramp from 40% to 40% does not move; .* 'mlm40'"),
])
def test_bad_configs(over, match):
    base = {"phases": [["clm", 10]], "optim": {"warmup_steps": 1, "decay_steps": 1}}
    with pytest.raises(ConfigError, match=match) as err:
        load_config(PretrainConfig, {**base, **over})
    assert "\n" not in str(err.value)


def test_missing_init_checkpoint_and_tokenizer_without_mask(tmp_path, text_corpus, data_root):
    cfg = make_config(tmp_path, text_corpus, data_root, run_id="x",
                      init={"kind": "run", "path": str(tmp_path / "nowhere")})
    with pytest.raises(ConfigError, match="holds no checkpoint"):
        pretrain(cfg, root=working_root())
    assert not (tmp_path / "runs" / "test" / "x").exists()
    from transformers import PreTrainedTokenizerFast

    from mlmclm.training.tokenizer import train_tokenizer
    tok = PreTrainedTokenizerFast.from_pretrained(train_tokenizer(iter(["some text"] * 50), 300, tmp_path / "t0"))
    tok.mask_token = None
    tok.save_pretrained(tmp_path / "nomask")
    cfg = make_config(tmp_path, text_corpus, data_root, run_id="y", data={"tokenizer": str(tmp_path / "nomask")})
    with pytest.raises(ConfigError, match="has no mask token and the run has an MLM phase; set data.mask_token"):
        pretrain(cfg, root=working_root())
    assert not (tmp_path / "runs" / "test" / "y").exists()


@pytest.mark.parametrize("scale", ["tiny", "mini", "long", "small", "paper"])
def test_shipped_configs_are_valid(scale):
    cfg = load_config(PretrainConfig, RECIPES_DIR / f"{scale}.yaml")
    assert cfg.scale == scale
    if scale == "paper":  # Table 1 and section 2 of the paper
        assert cfg.model.size == "610m" and cfg.batch_size * cfg.data.seq_len == 2_359_296
        assert cfg.phases == [("mlm40", 42_000)] and cfg.optim.lr == 5e-4 and cfg.mlm_recipe == "mask"
        assert (cfg.optim.warmup_steps, cfg.optim.decay_steps) == (2000, 2000)
        assert (cfg.optim.betas, cfg.optim.eps, cfg.optim.weight_decay, cfg.optim.grad_clip) == (
            (0.9, 0.95), 1e-5, 0.1, 1.0)


def test_document_masking_with_the_kernels_backend(tmp_path, text_corpus, data_root):
    cfg = make_config(tmp_path, text_corpus, data_root, run_id="docs", phases=(("clm", 3), ("mlm40", 3)),
                      data={"document_masking": True}, model={"attention_backend": "kernels"},
                      optim={"warmup_steps": 1, "decay_steps": 1}, checkpoint={"steps": []})
    run_dir = pretrain(cfg, root=working_root())
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["attention_backend"] == "kernels" and meta["status"] == "complete"
    assert all(torch.isfinite(torch.tensor(float(r["loss"]))) for r in read_log(cfg))


# ---- damaged files, checks before work, interruptions ----
@pytest.mark.parametrize("damage", ["last row lost", "garbage line"])
def test_a_damaged_log_is_named_and_trained_again_to_the_same_rows(tmp_path, text_corpus, data_root, capsys,
                                                                    damage):
    cfg = make_config(tmp_path, text_corpus, data_root, run_id="log", checkpoint={"steps": []})
    run_dir = pretrain(cfg, root=working_root())
    log = run_dir / "pretrain.csv"
    rows, weights = read_log(cfg), final_weights(cfg)
    lines = log.read_text().splitlines()
    log.write_text("\n".join(lines[:-1] if damage == "last row lost" else lines[:5] + ["x,y"] + lines[5:]) + "\n")
    capsys.readouterr()
    pretrain(cfg, root=working_root())
    said = capsys.readouterr().out
    assert f"{log}: whole up to step {22 if damage == 'last row lost' else 8} of 24" in said
    assert "already complete" not in said
    assert [(r["step"], r["loss"]) for r in read_log(cfg)] == [(r["step"], r["loss"]) for r in rows]
    assert all(torch.equal(weights[k], v) for k, v in final_weights(cfg).items())


def test_seq_len_against_the_context_and_the_corpus(tmp_path, text_corpus, data_root):
    cfg = make_config(tmp_path, text_corpus, data_root, run_id="wide", data={"seq_len": 100_000})
    with pytest.raises(ConfigError, match=r"data.seq_len \(100000\) exceeds the 256-token context of model size "
                                          r"tiny; lower data.seq_len, or widen the model with model.overrides="):
        pretrain(cfg, root=working_root())
    assert not (tmp_path / "runs").exists()
    small = tmp_path / "small.txt"
    small.write_text("A few words of text, not enough for a batch of blocks.\n" * 4)
    cfg = make_config(tmp_path, small, data_root, run_id="small", data={"vocab_size": 300})
    with pytest.raises(ConfigError, match=r"holds \d+ block\(s\) of data.seq_len=32 tokens, fewer than one batch "
                                          r"of 8; lower data.seq_len"):
        pretrain(cfg, root=working_root())
    assert not (tmp_path / "ckpt" / "test" / "small").exists()


def test_ctrl_c_says_where_and_how_to_resume(tmp_path, text_corpus, data_root):
    cfg = make_config(tmp_path, text_corpus, data_root, run_id="int", phases=(("clm", 5000),), log_every=1,
                      checkpoint={"steps": [], "every": 10**6})  # no checkpoint for the signal to land in
    path = tmp_path / "int.yaml"
    path.write_text(to_yaml(cfg))
    # SIGINT back to its default in the child: a test run started in the background (`make test &`) inherits an
    # ignored SIGINT, and Python then never raises KeyboardInterrupt
    proc = subprocess.Popen([sys.executable, "-m", "mlmclm.cli", "pretrain", str(path)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    log = Path(cfg.results_dir) / "test" / "int" / "pretrain.csv"
    try:
        deadline = time.time() + 300
        while (not log.exists() or len(log.read_text().splitlines()) < 3) and time.time() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130
    last = err.strip().splitlines()[-1]
    assert re.fullmatch(r"mlmclm: int: interrupted at step \d+; re-run the same command to resume", last), err[-500:]
    assert "Traceback" not in err


def test_an_interruption_names_the_step_being_trained(tmp_path, text_corpus, data_root, monkeypatch):
    """Ctrl-C in the middle of a step (here in the forward of step 5's second micro-batch) names that step."""
    calls = {"n": 0}
    forward = MlmClmForMaskedLM.forward

    def interrupted(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2 * 5:  # two micro-batches a step
            raise KeyboardInterrupt
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(MlmClmForMaskedLM, "forward", interrupted)
    cfg = make_config(tmp_path, text_corpus, data_root, run_id="intr", phases=(("clm", 8),), checkpoint={"steps": []})
    with pytest.raises(KeyboardInterrupt, match=r"^intr: interrupted at step 5$"):
        pretrain(cfg, root=working_root())


# ---- a run's identity: its checkpoints survive any other run; complete means loadable ----
def _files(folder):
    return {p: p.read_bytes() for p in Path(folder).rglob("*") if p.is_file() and p.name != ".lock"}


def test_another_config_under_the_same_run_id_never_touches_the_first_runs_checkpoints(tmp_path, text_corpus,
                                                                                       data_root, capsys):
    first = make_config(tmp_path, text_corpus, data_root, run_id="same", checkpoint={"steps": []})
    pretrain(first, root=working_root())
    ckpt_root = Path(first.checkpoints_dir) / "test" / "same"
    before = _files(ckpt_root)
    # the same run_id with another config and another results folder: the same checkpoint folder
    other = make_config(tmp_path, text_corpus, data_root, run_id="same", checkpoint={"steps": []},
                        optim={"lr": 1e-3}, results_dir=str(tmp_path / "other-runs"))
    with pytest.raises(ConfigError) as err:
        pretrain(other, root=working_root())
    message = str(err.value)
    assert "\n" not in message and identity(first) in message and identity(other) in message
    assert str(tmp_path / "runs") in message and str(tmp_path / "other-runs") in message
    assert _files(ckpt_root) == before and not (tmp_path / "other-runs" / "test" / "same" / "meta.json").exists()
    capsys.readouterr()
    pretrain(first, root=working_root())  # the first run is still whole, and its own
    assert "already complete" in capsys.readouterr().out and _files(ckpt_root) == before
    # a trainer state of another run in a run's folder is never resumed (its steps would be skipped)
    copied = Path(first.checkpoints_dir) / "test" / "copied"
    shutil.copytree(ckpt_root / "step_000016", copied / "step_000016")
    stray = make_config(tmp_path, text_corpus, data_root, run_id="copied", checkpoint={"steps": []})
    with pytest.raises(ConfigError, match=f"of identity {identity(first)} .* not of this run 'copied' of identity "
                                          f"{identity(stray)}"):
        pretrain(stray, root=working_root())
    assert not (copied / "run.json").exists() and (copied / "step_000016").is_dir()
    assert not (tmp_path / "runs" / "test" / "copied" / "meta.json").exists()


def test_a_results_folder_of_another_identity_is_refused(tmp_path, text_corpus, data_root):
    cfg = make_config(tmp_path, text_corpus, data_root, run_id="meta", phases=(("clm", 2),), checkpoint={"steps": []},
                      optim={"warmup_steps": 1, "decay_steps": 1})
    run_dir = pretrain(cfg, root=working_root())
    meta = json.loads((run_dir / "meta.json").read_text())
    (run_dir / "meta.json").write_text(json.dumps({**meta, "identity": "0123456789abcdef"}))
    with pytest.raises(ConfigError, match=f"holds run 'meta' with another config .identity 0123456789abcdef., not "
                                          f"this one .identity {identity(cfg)}."):
        pretrain(cfg, root=working_root())
    (run_dir / "meta.json").write_text(json.dumps({k: v for k, v in meta.items() if k != "identity"}))
    assert pretrain(cfg, root=working_root()) == run_dir  # written before identities: its config.yaml alone decides


def test_where_a_runs_files_go_is_not_part_of_its_identity(tmp_path, text_corpus, data_root, capsys):
    """A run's identity leaves out its results, checkpoint and data folders (`runs.LOCATIONS`): moved, it is the same
    run, complete; any other key is another run. Its checkpoints are never shared by a second results folder."""
    from dataclasses import replace
    cfg = make_config(tmp_path, text_corpus, data_root, run_id="moved", phases=(("clm", 2),),
                      checkpoint={"steps": []}, optim={"warmup_steps": 1, "decay_steps": 1})
    run_dir = pretrain(cfg, root=working_root())
    moved = replace(cfg, results_dir=str(tmp_path / "runs2"), checkpoints_dir=str(tmp_path / "ckpt2"),
                    data=replace(cfg.data, root=str(tmp_path / "data2")))
    assert identity(moved) == identity(cfg) != identity(replace(cfg, seed=1))
    assert identity(cfg) != identity(replace(cfg, data=replace(cfg.data, seed=1)))
    # the same config with a second results folder beside the first: refused, the checkpoints shared by none
    twice = replace(cfg, results_dir=str(tmp_path / "runs3"))
    with pytest.raises(ConfigError, match=f"holds the checkpoints of the run recorded in {run_dir}, not in "):
        pretrain(twice, root=working_root())
    assert not (tmp_path / "runs3" / "test" / "moved" / "meta.json").exists()
    (tmp_path / "runs2" / "test").mkdir(parents=True)
    (tmp_path / "ckpt2" / "test").mkdir(parents=True)
    shutil.move(run_dir, tmp_path / "runs2" / "test" / "moved")
    shutil.move(Path(cfg.checkpoints_dir) / "test" / "moved", tmp_path / "ckpt2" / "test" / "moved")
    capsys.readouterr()
    assert pretrain(moved, root=working_root()) == tmp_path / "runs2" / "test" / "moved"
    assert "already complete" in capsys.readouterr().out


def test_a_run_recorded_under_its_legacy_identity_is_still_its_own(tmp_path, text_corpus, data_root, capsys):
    """Runs recorded before identities left out where files go carry the hash of their config's whole text
    (`runs.legacy_identity`) in meta.json, run.json and their trainer states: read, found complete and resumed as
    their own, never refused as another run's."""
    from mlmclm.runs import legacy_identity, read_record
    cfg = make_config(tmp_path, text_corpus, data_root, run_id="old", phases=(("clm", 2),), checkpoint={"steps": []},
                      optim={"warmup_steps": 1, "decay_steps": 1})
    run_dir = pretrain(cfg, root=working_root())
    ckpt_root = Path(cfg.checkpoints_dir) / "test" / "old"
    old = legacy_identity(to_yaml(cfg))
    for path in [run_dir / "meta.json", ckpt_root / "run.json", *ckpt_root.glob("step_*/trainer_state.json")]:
        path.write_text(json.dumps({**json.loads(path.read_text()), "identity": old}))
    record = read_record(run_dir)
    assert (record.identity, record.legacy) == (identity(cfg), old) and record.answers_to(old)
    capsys.readouterr()
    assert pretrain(cfg, root=working_root()) == run_dir and "already complete" in capsys.readouterr().out
    shutil.rmtree(ckpt_root / "step_000002")  # its last checkpoint lost: trained again, under the identity of today
    pretrain(cfg, root=working_root())
    assert json.loads((ckpt_root / "step_000002" / "trainer_state.json").read_text())["identity"] == identity(cfg)
    assert json.loads((ckpt_root / "run.json").read_text())["identity"] == old  # the folder still the run's
    assert pretrain(cfg, root=working_root()) == run_dir and "already complete" in capsys.readouterr().out


def test_damaged_weights_are_named_and_their_steps_trained_again(tmp_path, text_corpus, data_root, capsys):
    cfg = make_config(tmp_path, text_corpus, data_root, run_id="hurt", checkpoint={"steps": []})
    pretrain(cfg, root=working_root())
    root = Path(cfg.checkpoints_dir) / "test" / "hurt"
    weights = final_weights(cfg)
    cut = root / "step_000024" / "hf" / "model.safetensors"  # cut short: no header and size agree
    cut.write_bytes(cut.read_bytes()[:-100])
    size = cut.stat().st_size
    flipped = root / "step_000020" / "model.safetensors"  # one byte changed: only its recorded hash tells
    data = bytearray(flipped.read_bytes())
    data[-1] ^= 0xFF
    flipped.write_bytes(bytes(data))
    capsys.readouterr()
    pretrain(cfg, root=working_root())
    said = capsys.readouterr().out
    assert f"{root / 'step_000024'}: damaged checkpoint (hf/model.safetensors: {size} bytes, its header says " \
           f"{size + 100})" in said
    assert f"{root / 'step_000020'}: damaged checkpoint (model.safetensors: its sha256 is not the one" in said
    assert sorted(p.name for p in root.glob("step_*")) == ["step_000016", "step_000020", "step_000024"]
    assert all(torch.equal(weights[k], v) for k, v in final_weights(cfg).items())


def test_two_data_seeds_read_two_orders(tmp_path, text_corpus, data_root):
    """data.seed shuffles the documents (meta.json's order_sha256) and the block order: two seeds, two orders."""
    metas = []
    for seed in (0, 1):
        cfg = make_config(tmp_path, text_corpus, data_root, run_id=f"d{seed}", phases=[("clm", 6)],
                          data={"seed": seed}, checkpoint={"steps": []})
        metas.append(json.loads((pretrain(cfg, root=working_root()) / "meta.json").read_text())["data"])
    assert metas[0]["seed"] == 0 and metas[1]["seed"] == 1
    assert metas[0]["order_sha256"] != metas[1]["order_sha256"] and metas[0]["documents"] == metas[1]["documents"]


def test_a_full_disk_while_torch_writes_a_checkpoint_is_named_as_such(tmp_path, text_corpus, data_root, monkeypatch):
    """torch's archive writer turns ENOSPC into "[enforce fail ...] unexpected pos": with the disk (nearly) full it
    is an ENOSPC OSError naming the checkpoint folder (the CLI's one line); with room left the error is kept."""
    import errno
    from collections import namedtuple

    import accelerate

    from mlmclm.training import pretrain as module

    def failing(self, *args, **kwargs):
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534")

    monkeypatch.setattr(accelerate.Accelerator, "save_state", failing)
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(module.shutil, "disk_usage", lambda path: usage(1 << 30, (1 << 30) - 4096, 4096))
    cfg = make_config(tmp_path, text_corpus, data_root, phases=(("clm", 8),))
    with pytest.raises(OSError) as e:
        pretrain(cfg, root=working_root())
    assert e.value.errno == errno.ENOSPC and "/ckpt/test/t/" in e.value.filename
    monkeypatch.setattr(module.shutil, "disk_usage", lambda path: usage(1 << 40, 0, 1 << 40))
    with pytest.raises(RuntimeError, match="unexpected pos"):
        pretrain(cfg, root=working_root())


def test_a_process_records_the_commit_it_started_with(tmp_path):
    """The commit is read once a process: a checkout that moves on (a new commit, an edit) while a long run trains or
    fine-tunes does not change what the run's records name (they named three commits before)."""
    from mlmclm.io import git_commit

    def git(*args):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path, check=True,
                       capture_output=True)

    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    git("init", "-q")
    git("add", "pyproject.toml")
    git("commit", "-q", "-m", "first")
    first = git_commit(tmp_path)
    assert first and not first.endswith("-dirty")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'y'\n")
    git("commit", "-q", "-am", "second")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'z'\n")
    assert git_commit(tmp_path) == first
    git_commit.cache_clear()
    assert git_commit(tmp_path).endswith("-dirty") and git_commit(tmp_path) != first


def test_a_checkpoint_edited_after_it_was_recorded_is_made_again_by_the_command_its_refusal_names(
        tmp_path, text_corpus, data_root, capsys):
    """Issue 63: a complete run whose checkpoint had a recorded file edited (the final one's tokenizer, a named
    one's weights) is refused by fine-tuning and export with a command; that command re-runs the pretraining, which
    checks every checkpoint's hashes (not "already complete"), writes the edited ones again from the last good one
    before them (the same weights: exact resume), and the refusal clears."""
    from mlmclm import cli, store

    cfg = make_config(tmp_path, text_corpus, data_root, run_id="edited", phases=(("clm", 12),),
                      checkpoint={"steps": [6], "every": 100})
    pretrain(cfg, root=working_root())
    root = Path(cfg.checkpoints_dir) / "test" / "edited"
    weights = final_weights(cfg)
    for step, name in ((12, "hf/tokenizer_config.json"), (6, "model.safetensors")):
        edited = root / f"step_{step:06d}" / name
        data = bytearray(edited.read_bytes())
        data[-2] ^= 0x01  # same size, parses: only the recorded sha256 tells
        edited.write_bytes(bytes(data))
        with pytest.raises(ConfigError) as refused:
            store.pretrained_model(root / f"step_{step:06d}", working_root(), verify=True)
        command = str(refused.value).split("re-running its run's pretraining: ")[1]
        assert command == f"mlmclm pretrain {tmp_path / 'runs' / 'test' / 'edited'}/config.yaml"
        capsys.readouterr()
        assert cli.main(command.split()[1:]) == 0
        said = capsys.readouterr().out
        assert "already complete" not in said
        assert f"{root / f'step_{step:06d}'}: damaged checkpoint ({name}: its sha256 is not the one recorded" in said
        assert store.pretrained_model(root, working_root(), verify=True)[1:] == ("edited", 12)
        assert store.pretrained_model(root / f"step_{step:06d}", working_root(), verify=True)
        assert all(torch.equal(weights[k], v) for k, v in final_weights(cfg).items())
    assert [int(r["step"]) for r in read_log(cfg)][-1] == 12
    pretrain(cfg, root=working_root())
    assert "already complete" in capsys.readouterr().out
