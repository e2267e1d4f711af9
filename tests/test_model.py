"""The model: parity with transformers' Llama and EuroBert, per-call causality, packing, heads, serialisation."""

import pytest
import torch
import torch.nn.functional as F
from transformers import (
    AutoConfig, AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM, AutoModelForQuestionAnswering,
    AutoModelForSequenceClassification, AutoModelForTokenClassification, EuroBertConfig, EuroBertForMaskedLM,
    EuroBertModel, LlamaConfig, LlamaForCausalLM, LlamaModel,
)

import mlmclm
from mlmclm import (
    MlmClmConfig, MlmClmForCausalLM, MlmClmForMaskedLM, MlmClmForQuestionAnswering,
    MlmClmForSequenceClassification, MlmClmForTokenClassification, MlmClmModel, from_hf, to_hf,
)

SHAPE = dict(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=64, pad_token_id=0, bos_token_id=1, eos_token_id=2)


def small_config(**kw):
    return MlmClmConfig(**{**SHAPE, "mask_token_id": 3, **kw})


@pytest.fixture
def batch():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(4, 300, (3, 12), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 8:] = 0
    mask[2, 5:] = 0
    return ids.masked_fill(mask == 0, 0), mask


def _max_diff_on_real_tokens(a, b, mask):
    return (a - b)[mask.bool()].abs().max().item()


@pytest.mark.parametrize("hf_cls,hf_config_cls,kind", [
    (LlamaForCausalLM, LlamaConfig, "llama"), (EuroBertForMaskedLM, EuroBertConfig, "eurobert"),
    (LlamaModel, LlamaConfig, "llama"), (EuroBertModel, EuroBertConfig, "eurobert"),
])
def test_from_hf_and_to_hf_match_transformers(hf_cls, hf_config_cls, kind, batch):
    torch.manual_seed(0)
    ids, mask = batch
    hf = hf_cls(hf_config_cls(**SHAPE, rope_parameters={"rope_type": "default", "rope_theta": 5000.0},
                              attn_implementation="eager")).eval()
    ours = from_hf(hf).eval()
    assert ours.config.is_causal == (kind == "llama") and ours.config.rope_theta == 5000.0
    with torch.no_grad():
        ref = hf(ids, attention_mask=mask)
        out = ours(ids, attention_mask=mask)
        key = "logits" if hasattr(ref, "logits") else "last_hidden_state"
        assert _max_diff_on_real_tokens(ref[key], out[key], mask) <= 1e-4
        back = to_hf(ours, kind).eval()
        assert type(back) is hf_cls
        assert _max_diff_on_real_tokens(back(ids, attention_mask=mask)[key], out[key], mask) <= 1e-4


def test_llama_decoder_continues_as_masked_lm(batch, tmp_path):
    """A Llama-family decoder converted with from_hf loads into the masked-LM class and trains bidirectionally."""
    torch.manual_seed(0)
    ids, mask = batch
    clm = from_hf(LlamaForCausalLM(LlamaConfig(**SHAPE)))
    clm.save_pretrained(tmp_path)
    mlm = MlmClmForMaskedLM.from_pretrained(tmp_path)
    for (n1, p1), (n2, p2) in zip(clm.state_dict().items(), mlm.state_dict().items()):
        assert n1 == n2 and torch.equal(p1, p2)
    labels = torch.full_like(ids, -100)
    labels[:, 3] = ids[:, 3]
    loss = mlm(ids.clone().index_fill_(1, torch.tensor([3]), 3), attention_mask=mask, labels=labels,
               is_causal=False).loss
    loss.backward()
    assert torch.isfinite(loss) and mlm.lm_head.weight.grad is not None


def test_is_causal_is_a_per_call_choice(batch):
    torch.manual_seed(0)
    ids, _ = batch
    model = MlmClmModel(small_config()).eval()
    changed = ids.clone()
    changed[:, -1] = (changed[:, -1] + 1) % 300
    with torch.no_grad():
        causal_a = model(ids, is_causal=True).last_hidden_state
        causal_b = model(changed, is_causal=True).last_hidden_state
        bi_a = model(ids, is_causal=False).last_hidden_state
        bi_b = model(changed, is_causal=False).last_hidden_state
        default = model(ids).last_hidden_state
    assert torch.equal(causal_a[:, :-1], causal_b[:, :-1])  # the future never reaches the past
    assert not torch.allclose(bi_a[:, :-1], bi_b[:, :-1])    # but it does bidirectionally
    assert torch.equal(default, bi_a)                        # config.is_causal defaults to False
    model.config.is_causal = True
    with torch.no_grad():
        assert torch.equal(model(ids).last_hidden_state, causal_a)


@pytest.mark.parametrize("backend", ["eager", "sdpa", "kernels"])
@pytest.mark.parametrize("is_causal", [False, True])
def test_packed_documents_equal_separate_sequences(backend, is_causal):
    torch.manual_seed(0)
    model = MlmClmModel(small_config(attention_backend=backend)).eval()
    a, b = torch.randint(4, 300, (1, 5)), torch.randint(4, 300, (1, 7))
    packed = torch.cat([a, b], dim=1)
    docs = torch.tensor([[0] * 5 + [1] * 7])
    with torch.no_grad():
        out = model(packed, document_ids=docs, is_causal=is_causal).last_hidden_state
        sep = torch.cat([model(a, is_causal=is_causal).last_hidden_state,
                         model(b, is_causal=is_causal).last_hidden_state], dim=1)
        crossing = model(packed, is_causal=is_causal).last_hidden_state  # the paper's default: no boundaries
    assert (out - sep).abs().max() <= 1e-5
    assert (crossing[:, 5:] - sep[:, 5:]).abs().max() > 1e-3


def test_sparse_masked_lm_loss_equals_dense(batch):
    torch.manual_seed(0)
    ids, mask = batch
    model = MlmClmForMaskedLM(small_config())
    labels = torch.full_like(ids, -100)
    picked = (torch.rand(ids.shape, generator=torch.Generator().manual_seed(1)) < 0.4) & mask.bool()
    labels[picked] = ids[picked]
    inputs = ids.masked_fill(picked, 3)
    sparse = model(inputs, attention_mask=mask, labels=labels)
    dense_logits = model(inputs, attention_mask=mask).logits
    dense = F.cross_entropy(dense_logits.flatten(0, 1), labels.flatten(), ignore_index=-100)
    assert sparse.logits.shape == (int(picked.sum()), 300)
    assert torch.allclose(sparse.loss, dense, atol=1e-6)
    torch.testing.assert_close(sparse.logits, dense_logits[picked])
    # normalised by a global label count under gradient accumulation
    half = model(inputs, attention_mask=mask, labels=labels, num_items_in_batch=2 * int(picked.sum()))
    assert torch.allclose(half.loss, dense / 2, atol=1e-6)


def test_causal_lm_loss_matches_transformers(batch):
    torch.manual_seed(0)
    ids, mask = batch
    hf = LlamaForCausalLM(LlamaConfig(**SHAPE, attn_implementation="eager"))
    ours = from_hf(hf)
    labels = ids.masked_fill(mask == 0, -100)
    assert torch.allclose(ours(ids, attention_mask=mask, labels=labels).loss,
                          hf(ids, attention_mask=mask, labels=labels).loss, atol=1e-5)
    with pytest.raises(ValueError, match="is_causal=True"):
        ours(ids, labels=labels, is_causal=False)


def test_causal_lm_does_not_predict_across_documents():
    torch.manual_seed(0)
    model = MlmClmForCausalLM(small_config(is_causal=True))
    ids = torch.randint(4, 300, (1, 10))
    docs = torch.tensor([[0] * 4 + [1] * 6])
    out = model(ids, document_ids=docs, labels=ids)
    assert out.logits.shape[0] == 8  # 9 shifted targets minus the first token of document 1


def test_save_load_and_auto_classes_round_trip(tmp_path, batch):
    torch.manual_seed(0)
    ids, mask = batch
    for auto, cls in [(AutoModel, MlmClmModel), (AutoModelForMaskedLM, MlmClmForMaskedLM),
                      (AutoModelForCausalLM, MlmClmForCausalLM),
                      (AutoModelForSequenceClassification, MlmClmForSequenceClassification),
                      (AutoModelForTokenClassification, MlmClmForTokenClassification),
                      (AutoModelForQuestionAnswering, MlmClmForQuestionAnswering)]:
        model = cls(small_config(num_labels=3, attention_backend="kernels")).eval()
        path = tmp_path / cls.__name__
        model.save_pretrained(path)
        assert isinstance(AutoConfig.from_pretrained(path), MlmClmConfig)
        loaded = auto.from_pretrained(path).eval()
        assert type(loaded) is cls and loaded.config.attention_backend == "kernels"
        for (n1, p1), (n2, p2) in zip(model.state_dict().items(), loaded.state_dict().items()):
            assert n1 == n2 and torch.equal(p1, p2), n1
        with torch.no_grad():
            a, b = model(ids, attention_mask=mask), loaded(ids, attention_mask=mask)
        assert all(torch.equal(x, y) for x, y in zip(a.to_tuple(), b.to_tuple()))


def test_attn_implementation_where_transformers_passes_it_sets_the_attention_backend(tmp_path, batch):
    """transformers' `attn_implementation` (config, `from_pretrained`, `set_attn_implementation`) means the backend
    of the same name (`mlmclm.models.configuration`'s docstring) and wins over a saved one; without it, the saved
    backend stays; a name we have no backend for is refused in one line."""
    from mlmclm.errors import ConfigError
    from mlmclm.models.configuration import hf_attn_implementation

    ids, mask = batch
    assert small_config(attn_implementation="eager").attention_backend == "eager"
    torch.manual_seed(0)
    MlmClmForMaskedLM(small_config(attention_backend="kernels")).save_pretrained(tmp_path)
    assert AutoModelForMaskedLM.from_pretrained(tmp_path).config.attention_backend == "kernels"
    logits = {}
    for name, backend in (("sdpa", "sdpa"), ("eager", "eager"), ("flex_attention", "flex")):
        model = AutoModelForMaskedLM.from_pretrained(tmp_path, attn_implementation=name).eval()
        assert (model.config.attention_backend, model.config._attn_implementation) == (backend, name)
        assert hf_attn_implementation(backend) == name
        if backend != "flex":  # GPU only
            with torch.no_grad():
                logits[backend] = model(ids, attention_mask=mask).logits
    torch.testing.assert_close(logits["sdpa"], logits["eager"], rtol=1e-4, atol=1e-5)
    model.set_attn_implementation("eager")
    assert (model.config.attention_backend, model.config._attn_implementation) == ("eager", "eager")
    with pytest.raises(ConfigError, match="attn_implementation='flash_attention_2' has no mlmclm attention backend"):
        MlmClmForMaskedLM.from_pretrained(tmp_path, attn_implementation="flash_attention_2")
    with pytest.raises(ConfigError, match="'kernels' has no transformers attn_implementation"):
        hf_attn_implementation("kernels")


def test_masked_and_causal_checkpoints_share_one_layout(tmp_path):
    mlm = MlmClmForMaskedLM(small_config())
    mlm.save_pretrained(tmp_path)
    clm = AutoModelForCausalLM.from_pretrained(tmp_path)
    assert isinstance(clm, MlmClmForCausalLM)
    assert all(torch.equal(a, b) for a, b in zip(mlm.state_dict().values(), clm.state_dict().values()))


def test_tied_output_layer_option(tmp_path):
    model = MlmClmForMaskedLM(small_config(tie_word_embeddings=True))
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert model.config.num_parameters_by_part()["output_layer"] == 0
    assert sum(p.numel() for p in model.parameters()) == model.config.num_parameters_by_part()["total"]
    model.save_pretrained(tmp_path)
    loaded = MlmClmForMaskedLM.from_pretrained(tmp_path)
    assert loaded.lm_head.weight is loaded.model.embed_tokens.weight
    untied = MlmClmForMaskedLM(small_config())
    assert untied.lm_head.weight is not untied.model.embed_tokens.weight


def test_architecture_init_and_no_biases():
    torch.manual_seed(0)
    config = MlmClmConfig.from_size("mini-m")
    model = MlmClmForMaskedLM(config)
    assert sum(p.numel() for p in model.parameters()) == config.num_parameters_by_part()["total"]
    assert not any(n.endswith("bias") for n, _ in model.named_parameters())
    w = torch.cat([m.weight.flatten() for m in model.modules() if isinstance(m, (torch.nn.Linear,
                                                                                torch.nn.Embedding))])
    assert abs(w.std().item() - 0.02) < 1e-3 and abs(w.mean().item()) < 1e-3
    assert all(torch.equal(m.weight, torch.ones_like(m.weight)) for m in model.modules()
               if type(m).__name__ == "MlmClmRMSNorm")


@pytest.mark.parametrize("size,layers,hidden,ffn,heads,kv,total", [
    ("210m", 12, 768, 3072, 12, 12, 211.8e6), ("610m", 26, 1152, 4096, 18, 6, 607.9e6),
    ("1b", 28, 1728, 5120, 18, 6, 1187.9e6),
])
def test_paper_sizes_follow_table_1(size, layers, hidden, ffn, heads, kv, total):
    c = MlmClmConfig.from_size(size)
    assert (c.num_hidden_layers, c.hidden_size, c.intermediate_size, c.num_attention_heads,
            c.num_key_value_heads) == (layers, hidden, ffn, heads, kv)
    assert (c.vocab_size, c.max_position_embeddings, c.rms_norm_eps, c.rope_theta) == (128_256, 2048, 1e-5, 1e4)
    assert c.mask_token_id == 128_002 and not c.tie_word_embeddings
    p = c.num_parameters_by_part()
    assert round((p["embeddings"] + p["body"]) / 1e5) == round(total / 1e5)


def test_parameter_count_matches_an_allocated_model():
    for size in ("tiny", "mini-s", "mini-l"):
        c = MlmClmConfig.from_size(size)
        with torch.device("meta"):
            model = MlmClmForCausalLM(c)
        assert sum(p.numel() for p in model.parameters()) == c.num_parameters_by_part()["total"]


def test_task_heads_shapes_and_losses(batch):
    torch.manual_seed(0)
    ids, mask = batch
    c = small_config(num_labels=3)
    sc = MlmClmForSequenceClassification(c)
    out = sc(ids, attention_mask=mask, labels=torch.tensor([0, 1, 2]))
    assert out.logits.shape == (3, 3) and torch.isfinite(out.loss)
    # mean pooling ignores padding: extra padding does not change the pooled output
    padded = torch.cat([ids, torch.zeros(3, 4, dtype=ids.dtype)], 1)
    padded_mask = torch.cat([mask, torch.zeros(3, 4, dtype=mask.dtype)], 1)
    with torch.no_grad():
        assert torch.allclose(sc(ids, attention_mask=mask).logits, sc(padded, attention_mask=padded_mask).logits,
                              atol=1e-5)
    tc = MlmClmForTokenClassification(c)
    labels = torch.randint(0, 3, ids.shape).masked_fill(mask == 0, -100)
    out = tc(ids, attention_mask=mask, labels=labels)
    assert out.logits.shape == (3, 12, 3) and torch.isfinite(out.loss)
    qa = MlmClmForQuestionAnswering(c)
    out = qa(ids, attention_mask=mask, start_positions=torch.tensor([1, 2, 3]), end_positions=torch.tensor([2, 4, 4]))
    assert out.start_logits.shape == (3, 12) and torch.isfinite(out.loss)
    assert out.start_logits[2, 6] < -1e30  # padding is never an answer


@pytest.mark.filterwarnings("ignore:`gradient_checkpointing_enable` is deprecated")
def test_gradient_checkpointing_gives_the_same_gradients(batch):
    torch.manual_seed(0)
    ids, mask = batch
    model = MlmClmForCausalLM(small_config(is_causal=True)).train()
    labels = ids.masked_fill(mask == 0, -100)
    model(ids, attention_mask=mask, labels=labels).loss.backward()
    ref = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model.gradient_checkpointing_enable()
    model(ids, attention_mask=mask, labels=labels).loss.backward()
    for r, p in zip(ref, model.parameters()):
        torch.testing.assert_close(p.grad, r)


@pytest.mark.parametrize("kwargs,match", [
    (dict(hidden_size=100, num_attention_heads=3), "hidden_size .100. must be divisible by num_attention_heads"),
    (dict(num_attention_heads=4, num_key_value_heads=3), "num_attention_heads .4. must be divisible by "
                                                         "num_key_value_heads"),
    (dict(attention_backend="flash"), "attention_backend='flash' is unknown; choose one of sdpa, eager, kernels"),
    (dict(num_hidden_layers=0), "num_hidden_layers must be a positive integer"),
])
def test_bad_configs_fail_with_one_clear_line(kwargs, match):
    with pytest.raises(ValueError, match=match) as err:
        small_config(**kwargs)
    assert "\n" not in str(err.value)


def test_unknown_size_names_the_allowed_values():
    with pytest.raises(ValueError, match="unknown model size '3b'; choose one of 210m, 610m, 1b"):
        MlmClmConfig.from_size("3b")


def test_unsupported_conversions_are_refused():
    with pytest.raises(ValueError, match="attention_bias=True is not supported"):
        from_hf(LlamaForCausalLM(LlamaConfig(**SHAPE, attention_bias=True)))
    with pytest.raises(ValueError, match="kind must be 'llama' or 'eurobert'"):
        to_hf(MlmClmForMaskedLM(small_config()), "bert")
    with pytest.raises(ValueError, match="cannot convert"):
        from_hf(torch.nn.Linear(2, 2))


def test_public_api():
    for name in ("MlmClmConfig", "MlmClmModel", "MlmClmForMaskedLM", "MlmClmForCausalLM",
                 "MlmClmForSequenceClassification", "MlmClmForTokenClassification", "MlmClmForQuestionAnswering",
                 "from_hf", "to_hf"):
        assert hasattr(mlmclm, name)


def test_chunked_cross_entropy_equals_the_full_one(monkeypatch):
    """Above CE_CHUNK_ELEMENTS the output layer runs chunk by chunk: same loss and gradients, no full logits."""
    import mlmclm.models.modeling as modeling

    torch.manual_seed(0)
    model = MlmClmForCausalLM(small_config(is_causal=True))
    ids = torch.randint(4, 300, (3, 12))
    labels = ids.clone()
    labels[0, :4] = -100

    def run():
        model.zero_grad()
        out = model(ids, labels=labels, num_items_in_batch=40)
        out.loss.backward()
        return out, [p.grad.clone() for p in model.parameters()]

    full, full_grads = run()
    monkeypatch.setattr(modeling, "CE_CHUNK_ELEMENTS", 300 * 5)  # chunks of 5 rows, 29 rows in all
    chunked, chunked_grads = run()
    assert full.logits is not None and chunked.logits is None
    torch.testing.assert_close(chunked.loss, full.loss, rtol=1e-6, atol=1e-6)
    for a, b in zip(chunked_grads, full_grads):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)
    with torch.no_grad():
        torch.testing.assert_close(model(ids, labels=labels, num_items_in_batch=40).loss, full.loss, rtol=1e-6,
                                   atol=1e-6)


def test_chunked_cross_entropy_runs_in_the_autocast_dtype(monkeypatch):
    """Under bf16 autocast the chunked output layer multiplies in bf16, as `lm_head` would (the final norm hands it
    fp32 hidden states; in fp32 those products took most of a 210m CLM step on an H100), and its loss stays close to
    the materialised one."""
    from torch.utils._python_dispatch import TorchDispatchMode

    import mlmclm.models.modeling as modeling

    dtypes = []

    class Products(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func is torch.ops.aten.mm.default and args[1].shape[-1] == 300:  # logits: (rows, d) @ (d, vocab)
                dtypes.append(args[0].dtype)
            return func(*args, **(kwargs or {}))

    torch.manual_seed(0)
    model = MlmClmForCausalLM(small_config(is_causal=True))
    ids = torch.randint(4, 300, (3, 12))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        full = model(ids, labels=ids).loss
        monkeypatch.setattr(modeling, "CE_CHUNK_ELEMENTS", 300 * 5)
        with Products():
            chunked = model(ids, labels=ids).loss
    assert dtypes and set(dtypes) == {torch.bfloat16}
    torch.testing.assert_close(chunked, full, rtol=1e-2, atol=1e-2)

def test_flops_callers_agree_with_the_one_definition(monkeypatch):
    """Model info, the Fig. 10 count and bench mfu all count with `mlmclm.flops.flops_per_token` (torch-free), each
    by its rule."""
    import subprocess
    import sys
    from pathlib import Path

    from mlmclm import bench, flops
    from mlmclm.analysis.loading import compute, results

    code = "import mlmclm.flops, mlmclm.analysis.loading.results, sys; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"
    for size in ("210m", "610m", "1b", "mini-m", "tiny"):  # MlmClmConfig.flops_per_token: 6N (norms in) + attention
        c = MlmClmConfig.from_size(size)
        shape = dict(layers=c.num_hidden_layers, d_model=c.hidden_size, ffn=c.intermediate_size,
                     heads=c.num_attention_heads, kv_heads=c.num_key_value_heads, head_dim=c.head_dim,
                     vocab=c.vocab_size)
        for t, training in ((None, True), (512, True), (512, False)):
            got = c.flops_per_token(t, training=training)
            t = t or c.max_position_embeddings
            assert type(got) is int and got == flops.flops_per_token(
                "model", **flops.terms(**shape, seq_len=t), training=training)
            dense = 2 * (c.num_parameters_by_part()["body"] + c.vocab_size * c.hidden_size)
            assert got == (dense + 4 * c.num_hidden_layers * c.num_attention_heads * c.head_dim * t) * (
                3 if training else 1)
    arch = results.architecture(Path(__file__).resolve().parents[1] / "results" / "paper")
    for a in arch.values():  # Fig. 10: App. F per step (embeddings, softmax, no norms), sparse MLM head
        shape = {k: a[k] for k in ("layers", "d_model", "ffn", "heads", "kv_heads", "vocab")}
        t = flops.terms(**shape, seq_len=a["seq_len"])
        hd = a["d_model"] // a["heads"]
        for fraction in (1.0, 0.4, 0.15):
            got = results.flops_per_step(a, fraction)
            assert got == a["tokens_per_step"] * flops.flops_per_token("App. F", **t, output_fraction=fraction)
            weights = t["body"] + (1 + fraction) * a["vocab"] * a["d_model"]  # App. F by hand: no norm weights
            scores = a["layers"] * a["seq_len"] * (4 * a["heads"] * hd + 3 * a["heads"])
            assert got == pytest.approx(3 * a["tokens_per_step"] * (2 * weights + scores), rel=1e-12)
        n = {"embeddings": a["vocab"] * a["d_model"], "body": flops.body_parameters(**{
            k: a[k] for k in ("layers", "d_model", "ffn", "heads", "kv_heads")}), "tokens_per_step": 7}
        six_n, rule = compute.checkpoint_flops(n, 2, 3, 40)  # 6N: 6 x tokens x (V d + body + f V d)
        assert rule == "6N" and six_n == pytest.approx(
            6 * 7 * (2 * (2 * n["embeddings"] + n["body"]) + 3 * (1.4 * n["embeddings"] + n["body"])), rel=1e-12)
    with pytest.raises(ValueError, match="unknown FLOPs rule"):
        flops.flops_per_token("7N", body=1, embedding=1)
    calls = []  # bench mfu: the config's count with the measured fraction of labelled positions

    def spy(rule, **kw):
        calls.append((rule, kw, flops_per_token(rule, **kw)))
        return calls[-1][2]
    flops_per_token = flops.flops_per_token
    monkeypatch.setattr(flops, "flops_per_token", spy)
    rows = bench.bench_mfu("tiny", seq_len=32, batch=2, backends=("sdpa",), steps=1, warmup=0, device="cpu",
                           peak=1e-3)
    fractions = [kw["output_fraction"] for _, kw, _ in calls]  # MLM40, then CLM (the last position has no label)
    assert len(fractions) == len(rows) == 2 and abs(fractions[0] - 0.4) < 0.2 and fractions[1] == 31 / 32
    for r, (rule, kw, value) in zip(rows, calls):
        assert rule == "model" and kw["training"] and kw["attention"] == flops.terms(
            layers=2, d_model=64, ffn=192, heads=4, kv_heads=2, seq_len=32)["attention"]
        # tokens_per_s is printed to 0.1: on a slow machine its rounding alone moves the product by up to 0.05 x value
        assert float(r["ratio"]) == pytest.approx(float(r["tokens_per_s"]) * value / 1e9, rel=1e-3,
                                                  abs=0.051 * value / 1e9)
