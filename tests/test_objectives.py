"""MLM masking statistics, CLM labels and the warmup-stable-decay phase schedule, mixed and alternating phases and
masking-ratio ramps included (their FLOPs too)."""

import re

import pytest
import torch

from mlmclm import flops
from mlmclm.errors import ConfigError
from mlmclm.schedule import CLM, Alternating, Mixed, Objective, Ramp
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
    """The two label conventions of `mlmclm.models.modeling` (its docstring): `shift=True` (pretraining, the
    benchmarks: MlmClmForMaskedLM run causally) gives the loss MlmClmForCausalLM computes from aligned labels, on
    the same batch, padded or not; a document start (bos) is never a target."""
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
    mask = torch.ones_like(ids)
    mask[0, 30:] = 0  # right padding: no target there, none predicted from there
    a = masked(ids, mask, labels=clm_labels(ids, mask, bos_token_id=1, shift=True), is_causal=True).loss
    b = causal(ids, mask, labels=clm_labels(ids, mask, bos_token_id=1), is_causal=True).loss
    assert torch.allclose(a, b, rtol=1e-5, atol=1e-6)
    documents = (ids == 1).cumsum(-1)  # packed documents: the causal head drops targets across a boundary itself
    a = masked(ids, labels=shifted, document_ids=documents, is_causal=True).loss
    b = causal(ids, labels=ids, document_ids=documents, is_causal=True).loss
    assert torch.allclose(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("spec,kind,shares,ratio", [("mix1clm15mlm40", Mixed, (1, 15), 0.4),
                                                   ("MIX1clm1mlm40", Mixed, (1, 1), 0.4),
                                                   ("alt1clm1mlm40", Alternating, (1, 1), 0.4),
                                                   ("alt2clm6mlm30", Alternating, (2, 6), 0.3)])
def test_mixed_and_alternating_objectives_parse_and_print_as_one_id_token(spec, kind, shares, ratio):
    o = parse_objective(spec)
    assert type(o) is kind and (o.clm, o.mlm) == shares and o.masked == Objective("mlm", ratio)
    assert str(o) == spec.lower() and re.fullmatch(r"[a-z0-9]+", str(o)) and parse_objective(str(o)) == o
    assert not o.is_causal and o.has_mlm  # exported and fine-tuned as a masked LM; needs a mask token
    assert parse_objective("mix1clm1mlm40") != parse_objective("alt1clm1mlm40")


@pytest.mark.parametrize("spec,match", [
    ("mix1:15", r"'mix1:15' is not valid; .*'mix\{c\}clm\{m\}mlm\{percent\}'"),
    ("alt1mlm401clm", "not valid"), ("mix1clm1clm", "not valid"), ("mix1clm1mlm", "not valid"),
    ("mix0clm15mlm40", r"both shares must be positive \(got 0:15\); .* 'clm' or 'mlm40'"),
    ("alt1clm1mlm100", r"masking ratio must be in \(0, 1\)")])
def test_bad_mixed_and_alternating_objectives(spec, match):
    with pytest.raises(ConfigError, match=match) as err:
        parse_objective(spec)
    assert "\n" not in str(err.value)


def test_an_alternating_phase_counts_its_steps_from_its_own_start_and_a_mixed_one_splits_every_batch():
    s = Schedule([("clm", 3), ("alt1clm2mlm40", 7), ("mix1clm3mlm40", 2)], 1e-3, 0, 0)
    assert [str(s.step_objective(k)) for k in range(1, 13)] == (
        ["clm"] * 3 + ["clm", "mlm40", "mlm40"] * 2 + ["clm"] + ["mix1clm3mlm40"] * 2)
    assert {str(s.objective(k)) for k in range(4, 11)} == {"alt1clm2mlm40"} and s.phase_index(11) == 2
    mlm = Objective("mlm", 0.4)
    assert s.parts(11, 16) == [(CLM, 0, 4), (mlm, 4, 16)] and s.parts(5, 16) == [(mlm, 0, 16)]
    assert s.parts(1, 16) == [(CLM, 0, 16)]
    assert parse_objective("mix1clm15mlm40").parts(16) == [(CLM, 0, 1), (mlm, 1, 16)]
    s.check_batch(8)
    with pytest.raises(ConfigError, match="batch_size 6 cannot be split 1:3 .* a multiple of 4"):
        s.check_batch(6)


def test_flops_of_mixed_and_alternating_schedules():
    """A mixed step costs its rows' mean output-layer fraction (attention counts the same causal or not), an
    alternating phase each step's own: counted step by step against `flops_per_token`."""
    counts = flops.terms(layers=2, d_model=32, ffn=64, heads=4, kv_heads=2, vocab=500, seq_len=64)
    tokens = 16 * 64

    def step(fraction):
        return tokens * flops.flops_per_token("model", **counts, output_fraction=fraction)
    clm, mlm = step(1.0), step(0.4)
    assert mlm < clm
    s = Schedule([("alt1clm3mlm40", 6), ("mix1clm15mlm40", 4), ("mix1clm1mlm40", 2)], 1e-3, 0, 0)
    assert s.output_fractions() == {1.0: 2, 0.4: 4, (1 + 15 * 0.4) / 16: 4, 0.7: 2}
    assert s.output_fractions(upto=5) == {1.0: 2, 0.4: 3}
    mix15 = step(7 / 16)
    assert mix15 == pytest.approx((clm + 15 * mlm) / 16, rel=1e-12)  # the mean of its rows' steps
    assert flops.schedule_flops(s.output_fractions(), "model", tokens, **counts) == pytest.approx(
        2 * clm + 4 * mlm + 4 * mix15 + 2 * (clm + mlm) / 2, rel=1e-12)
    plain = Schedule([("clm", 3), ("mlm40", 5)], 1e-3, 0, 0)
    assert flops.schedule_flops(plain.output_fractions(), "model", tokens, **counts) == pytest.approx(
        3 * clm + 5 * mlm, rel=1e-12)


@pytest.mark.parametrize("spec,ends", [("mlm40to20", (40, 20)), ("MLM15to30", (15, 30)), ("mlm1to99", (1, 99))])
def test_a_masking_ratio_ramp_parses_and_prints_as_one_id_token(spec, ends):
    o = parse_objective(spec)
    assert type(o) is Ramp and (o.start, o.end) == ends and o.kind == "ramp"
    assert str(o) == spec.lower() and re.fullmatch(r"[a-z0-9]+", str(o)) and parse_objective(str(o)) == o
    assert not o.is_causal and o.has_mlm and o.clm_steps(100) == 0  # a masked LM; needs a mask token


@pytest.mark.parametrize("spec,match", [
    ("mlm40to40", r"'mlm40to40': a ramp from 40% to 40% does not move; .* written 'mlm40'"),
    ("mlm0to20", r"percentages of a ramp must be in \(0, 100\), got 0 and 20"),
    ("mlm40to100", r"must be in \(0, 100\), got 40 and 100"),
    ("mlm40.5to20", r"is not valid; .*'mlm\{a\}to\{b\}'"), ("mlm40to", "not valid"), ("clm40to20", "not valid")])
def test_bad_masking_ratio_ramps(spec, match):
    with pytest.raises(ConfigError, match=match) as err:
        parse_objective(spec)
    assert "\n" not in str(err.value)


def test_a_ramp_trains_plain_mlm_at_each_steps_ratio_from_its_phases_first_step_to_its_last():
    s = Schedule([("clm", 2), ("mlm40to20", 5), ("mlm10to30", 3), ("mlm25to5", 1)], 1e-3, 0, 0)
    ratios = [s.step_objective(k) for k in range(3, 12)]
    assert all(type(o) is Objective and o.name == "mlm" for o in ratios)
    assert [o.mask_ratio for o in ratios] == pytest.approx([0.4, 0.35, 0.3, 0.25, 0.2, 0.1, 0.2, 0.3, 0.25])
    assert s.step_objective(3) == parse_objective("mlm40") and s.step_objective(7) == parse_objective("mlm20")
    assert s.step_objective(1) == CLM and s.step_objective(11) == parse_objective("mlm25")  # one step: its start
    assert {str(s.objective(k)) for k in range(3, 8)} == {"mlm40to20"} and s.phase_index(8) == 2  # the log's name
    assert s.parts(5, 8) == [(Objective("mlm", 0.3), 0, 8)]
    long = Schedule([("mlm40to20", 21001)], 1e-3, 0, 0)  # first, middle and last step of a twin-sized ramp
    assert [long.step_objective(k).mask_ratio for k in (1, 10501, 21001)] == pytest.approx([0.4, 0.3, 0.2])


def test_flops_of_a_ramp_count_each_steps_ratio():
    counts = flops.terms(layers=2, d_model=32, ffn=64, heads=4, kv_heads=2, vocab=500, seq_len=64)
    tokens = 16 * 64
    s = Schedule([("mlm40to20", 5)], 1e-3, 0, 0)
    assert sum(s.output_fractions().values()) == 5 and sorted(s.output_fractions()) == pytest.approx(
        [0.2, 0.25, 0.3, 0.35, 0.4])
    mean = Schedule([("mlm30", 5)], 1e-3, 0, 0)  # the ramp's mean ratio: a step's FLOPs are linear in its fraction
    assert flops.schedule_flops(s.output_fractions(), "model", tokens, **counts) == pytest.approx(
        flops.schedule_flops(mean.output_fractions(), "model", tokens, **counts), rel=1e-12)
    assert flops.schedule_flops(s.output_fractions(2), "model", tokens, **counts) == pytest.approx(
        tokens * (flops.flops_per_token("model", **counts, output_fraction=0.4)
                  + flops.flops_per_token("model", **counts, output_fraction=0.35)), rel=1e-12)
