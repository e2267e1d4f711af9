"""One AdamW for pretraining and fine-tuning: the same parameter groups (weight decay on dim >= 2 only) and one rule
for the fused kernel."""

import torch

from mlmclm import MlmClmConfig, MlmClmForMaskedLM, MlmClmForSequenceClassification
from mlmclm.config import OptimSpec, finetune_config, scale_config
from mlmclm.evaluation import finetune
from mlmclm.evaluation.tasks import SUITES
from mlmclm.training import build, optim


def _groups(opt):
    """The optimizer's groups as plain values: parameters by identity, and every hyperparameter."""
    return [{k: [id(p) for p in v] if k == "params" else v for k, v in g.items()} for g in opt.param_groups]


def test_groups_are_the_hand_written_ones():
    model = MlmClmForMaskedLM(MlmClmConfig.from_size("tiny", vocab_size=64))
    groups = _groups(optim.build_optimizer(model, 1e-3, [0.9, 0.95], 1e-5, 0.1))
    decay = [id(p) for p in model.parameters() if p.dim() >= 2]  # the rule both callers wrote out before
    rest = [id(p) for p in model.parameters() if p.dim() < 2]
    assert [g["params"] for g in groups] == [decay, rest] and decay and rest
    assert [g["weight_decay"] for g in groups] == [0.1, 0.0]
    assert all(g["betas"] == (0.9, 0.95) and g["eps"] == 1e-5 and g["lr"] == 1e-3 for g in groups)


def test_pretraining_and_fine_tuning_build_the_same_optimizer(monkeypatch):
    built = []

    def spy(*args, **kwargs):
        opt = optim.build_optimizer(*args, **kwargs)
        built.append(_groups(opt))  # before the learning-rate schedule changes lr
        return opt

    monkeypatch.setattr(finetune, "build_optimizer", spy)
    cfg = finetune_config(scale_config("tiny"), ["max_steps=1", "batch_size=2"])
    model = MlmClmForSequenceClassification(MlmClmConfig.from_size("tiny", vocab_size=64, num_labels=4))
    features = [{"input_ids": [1, 5 + i, 9, 2], "labels": i % 4} for i in range(4)]
    finetune.train(model, SUITES["offline"]["multiemo_sentiment"], features, cfg, 1e-3, 0, 0, torch.device("cpu"))
    o = cfg.optim
    ours = _groups(build.run_optimizer(model, OptimSpec(lr=1e-3, betas=o.betas, eps=o.eps,
                                                        weight_decay=o.weight_decay)))
    assert built == [ours]
    assert all(g["fused"] for g in ours)  # the CPU has a fused AdamW since torch 2.4


def test_fused_only_where_torch_has_the_kernel():
    p = torch.nn.Parameter(torch.zeros(3))
    assert optim.fused_supported([p]) and optim.fused_supported([p], "cuda")
    assert not optim.fused_supported([p], "meta")
    assert not optim.fused_supported([torch.zeros(3, dtype=torch.long)])
    with torch.device("meta"):
        model = MlmClmForMaskedLM(MlmClmConfig.from_size("tiny", vocab_size=64))
    assert all(not g["fused"] for g in optim.build_optimizer(model, 1e-3, (0.9, 0.95), 1e-5, 0.1).param_groups)
