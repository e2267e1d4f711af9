"""MLM masking statistics, CLM labels and the warmup-stable-decay phase schedule."""

import pytest
import torch

from mlmclm.errors import ConfigError
from mlmclm.training.objectives import IGNORE, Schedule, clm_labels, mlm_inputs, parse_objective

MASK, SPECIAL = 3, torch.tensor([0, 1, 2, 3])


def _ids(n=200_000, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, 1000, (n // 100, 100), generator=g)
    ids[:, 0], ids[:, -1] = 1, 2  # bos / eos
    return ids


@pytest.mark.parametrize("ratio", [0.2, 0.3, 0.4, 0.5])
def test_masking_rate_within_one_percent_and_specials_never_masked(ratio):
    ids = _ids()
    inputs, labels = mlm_inputs(ids, ratio, MASK, SPECIAL, torch.Generator().manual_seed(1))
    selectable = ~torch.isin(ids, SPECIAL)
    rate = (labels != IGNORE)[selectable].float().mean().item()
    assert abs(rate - ratio) < 0.01
    assert (labels[:, 0] == IGNORE).all() and (labels[:, -1] == IGNORE).all()
    selected = labels != IGNORE
    assert (inputs[selected] == MASK).all() and torch.equal(inputs[~selected], ids[~selected])  # paper: all [mask]
    assert torch.equal(labels[selected], ids[selected])


def test_80_10_10_recipe_proportions():
    ids = _ids()
    inputs, labels = mlm_inputs(ids, 0.4, MASK, SPECIAL, torch.Generator().manual_seed(2), recipe="80-10-10",
                                vocab_size=1000)
    sel = labels != IGNORE
    masked = (inputs[sel] == MASK).float().mean().item()
    kept = (inputs[sel] == ids[sel]).float().mean().item()
    assert abs(masked - 0.8) < 0.01 and abs(kept - 0.1) < 0.01  # random tokens rarely equal the original
    assert torch.equal(inputs[~sel], ids[~sel])


def test_masks_are_a_function_of_the_generator_seed_only():
    ids = _ids(10_000)
    a = mlm_inputs(ids, 0.4, MASK, SPECIAL, torch.Generator().manual_seed(7))
    b = mlm_inputs(ids, 0.4, MASK, SPECIAL, torch.Generator().manual_seed(7))
    c = mlm_inputs(ids, 0.4, MASK, SPECIAL, torch.Generator().manual_seed(8))
    assert torch.equal(a[1], b[1]) and not torch.equal(a[1], c[1])


def test_padding_is_never_masked_and_clm_labels_skip_padding():
    ids = _ids(1000)
    pad = torch.ones_like(ids)
    pad[:, 50:] = 0
    _, labels = mlm_inputs(ids, 0.5, MASK, SPECIAL, torch.Generator().manual_seed(0), attention_mask=pad)
    assert (labels[:, 50:] == IGNORE).all()
    assert (clm_labels(ids, pad)[:, 50:] == IGNORE).all() and torch.equal(clm_labels(ids, pad)[:, :50], ids[:, :50])


@pytest.mark.parametrize("spec,expected", [("clm", ("clm", 0.0)), ("mlm40", ("mlm", 0.4)), ("MLM20", ("mlm", 0.2)),
                                           ("mlm12.5", ("mlm", 0.125))])
def test_parse_objective(spec, expected):
    o = parse_objective(spec)
    assert (o.name, o.mask_ratio) == expected and o.is_causal == (o.name == "clm")


@pytest.mark.parametrize("spec,match", [("mlm", "masking percentage"), ("mlm0", r"must be in \(0, 1\)"),
                                        ("mlm100", r"must be in \(0, 1\)"), ("clm40", "not valid"),
                                        ("nsp", "not valid")])
def test_bad_objectives(spec, match):
    with pytest.raises(ConfigError, match=match):
        parse_objective(spec)


def test_warmup_stable_decay_over_phases():
    """The paper's schedule: 2k warmup, constant 5e-4, linear decay over the last 2k of 42k steps; a biphasic run
    [clm 10k, mlm40 32k] shares the curve."""
    s = Schedule([("clm", 10_000), ("mlm40", 32_000)], 5e-4, 2000, 2000)
    assert s.total == 42_000 and s.decay_start == 40_000
    assert s.lr_at(1) == pytest.approx(5e-4 / 2000) and s.lr_at(2000) == pytest.approx(5e-4)
    assert s.lr_at(2001) == s.lr_at(40_000) == 5e-4
    assert s.lr_at(41_000) == pytest.approx(2.5e-4) and s.lr_at(42_000) == 0.0
    assert str(s.objective(10_000)) == "clm" and str(s.objective(10_001)) == "mlm40"
    assert s.phase_index(42_000) == 1
    clm_only = Schedule([("clm", 42_000)], 5e-4, 2000, 2000)
    assert all(clm_only.lr_at(k) == s.lr_at(k) for k in range(1, 42_001, 500))


def test_schedule_rejects_bad_phases():
    with pytest.raises(ConfigError, match="positive step count"):
        Schedule([("clm", 0)], 1e-3, 0, 0)
    with pytest.raises(ConfigError, match="must fit"):
        Schedule([("clm", 10)], 1e-3, 8, 8)


def test_shifted_clm_labels_are_the_causal_lm_objective_and_skip_document_starts():
    """`shift=True` (pretraining, the benchmarks: MlmClmForMaskedLM run causally) gives the loss MlmClmForCausalLM
    computes from aligned labels; a document start (bos) is never a target."""
    from mlmclm import MlmClmConfig, MlmClmForCausalLM, MlmClmForMaskedLM

    ids = _ids(400)[:, :40]
    ids[:, 20] = 1  # a second document starts mid-row
    shifted = clm_labels(ids, bos_token_id=1, shift=True)
    assert (shifted[:, -1] == IGNORE).all() and (shifted[:, 19] == IGNORE).all() and (shifted[:, 0] == ids[:, 1]).all()
    torch.manual_seed(0)
    config = MlmClmConfig.from_size("tiny", vocab_size=1000)
    masked = MlmClmForMaskedLM(config)
    causal = MlmClmForCausalLM(config)
    causal.load_state_dict(masked.state_dict())
    a = masked(ids, labels=shifted, is_causal=True).loss
    b = causal(ids, labels=clm_labels(ids, bos_token_id=1), is_causal=True).loss
    assert torch.allclose(a, b, rtol=1e-5, atol=1e-6)
