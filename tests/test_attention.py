"""Every CPU attention backend agrees with the eager reference, forward and backward; the kernels package loads
from disk in the Hugging Face `kernels` layout."""

import json

import pytest
import torch

from mlmclm import MlmClmConfig, MlmClmForMaskedLM
from mlmclm.models.attention import KERNEL_DIR, attention, load_kernel, prepare_mask

CPU_BACKENDS = ["sdpa", "kernels"]


def _inputs(padding, documents, b=3, h=4, hkv=2, t=20, d=16):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(b, n, t, d, generator=g, dtype=torch.float64).float() for n in (h, hkv, hkv))
    mask = None
    if padding:  # at t=20: row 1 keeps 13 tokens, row 2 keeps 4 (the same fractions at any t)
        mask = torch.ones(b, t, dtype=torch.long)
        mask[1, t * 13 // 20:] = 0
        mask[2, t // 5:] = 0
    docs = None
    if documents:  # at t=20: [0]*7 + [1]*13, [0]*3 + [1]*3 + [2]*14, [5]*20
        ids = torch.arange(t)
        docs = torch.stack([(ids >= t * 7 // 20).long(), (ids >= t * 3 // 20).long() + (ids >= t * 6 // 20).long(),
                            torch.full((t,), 5)])[:b]
    weights = torch.randn(b, h, t, d, generator=g)
    return q, k, v, mask, docs, weights


def _run(backend, causal, q, k, v, mask, docs, weights):
    q, k, v = (x.clone().requires_grad_() for x in (q, k, v))
    out = attention(q, k, v, is_causal=causal, attention_mask=mask, document_ids=docs, backend=backend)
    if mask is not None:  # outputs at padded positions are not meaningful; they never reach the loss
        out = out * mask[:, None, :, None]
    (out * weights).sum().backward()
    return out.detach(), q.grad, k.grad, v.grad


@pytest.mark.parametrize("backend", CPU_BACKENDS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("padding", [False, True])
@pytest.mark.parametrize("documents", [False, True])
def test_backend_matches_eager_forward_and_backward(backend, causal, padding, documents):
    inputs = _inputs(padding, documents)
    ref = _run("eager", causal, *inputs)
    got = _run(backend, causal, *inputs)
    for name, a, r in zip(("output", "dq", "dk", "dv"), got, ref):
        assert (a - r).abs().max() <= 1e-5, f"{backend} {name}: {(a - r).abs().max():.2e}"


@pytest.mark.parametrize("backend", ["eager"] + CPU_BACKENDS)
def test_the_model_prepares_the_mask_once_a_forward(backend, monkeypatch):
    q, k, v, mask, docs, _ = _inputs(True, True)
    prepared = prepare_mask(mask, docs, is_causal=True, backend=backend, batch=3, seq_len=20, device="cpu")
    for _ in range(2):  # reused as is: the same outputs as a mask built by the call itself
        assert torch.equal(attention(q, k, v, is_causal=True, attention_mask=prepared, backend=backend),
                           attention(q, k, v, is_causal=True, attention_mask=mask, document_ids=docs, backend=backend))
    with pytest.raises(ValueError, match="prepared for"):
        attention(q, k, v, is_causal=False, attention_mask=prepared, backend=backend)
    from mlmclm.models import attention as attention_module, modeling
    calls = []

    def counting(*args, **kwargs):
        calls.append(kwargs["backend"])
        return prepare_mask(*args, **kwargs)
    monkeypatch.setattr(attention_module, "prepare_mask", counting)
    monkeypatch.setattr(modeling, "prepare_mask", counting)
    model = MlmClmForMaskedLM(MlmClmConfig.from_size("tiny", attention_backend=backend))
    model(torch.randint(4, 100, (3, 20)), attention_mask=mask, document_ids=docs)
    assert calls == [backend] and model.config.num_hidden_layers > 1


def test_eager_reference_is_right():
    """The reference itself, against a per-sequence softmax written out by hand (one document, GQA, causal)."""
    q, k, v, *_ = _inputs(False, False, b=1)
    out = attention(q, k, v, is_causal=True, backend="eager")
    kk, vv = k.repeat_interleave(2, 1), v.repeat_interleave(2, 1)
    for i in (0, 7, 19):
        w = torch.softmax(torch.einsum("hd,hjd->hj", q[0, :, i], kk[0, :, : i + 1]) / 4.0, -1)  # scale 1/sqrt(16)
        torch.testing.assert_close(out[0, :, i], torch.einsum("hj,hjd->hd", w, vv[0, :, : i + 1]))


def test_documents_are_isolated():
    q, k, v, _, docs, _ = _inputs(False, True)
    for backend in ["eager"] + CPU_BACKENDS:
        base = attention(q, k, v, is_causal=False, document_ids=docs, backend=backend)
        k2 = k.clone()
        k2[0, :, 8:] += 1.0  # change only document 1 of row 0
        out = attention(q, k2, v, is_causal=False, document_ids=docs, backend=backend)
        assert torch.equal(out[0, :, :7], base[0, :, :7]), backend
        assert not torch.allclose(out[0, :, 7:], base[0, :, 7:]), backend


def test_kernel_package_layout_and_local_loading():
    for variant in ("torch-cpu", "torch-cuda"):
        root = KERNEL_DIR / "build" / variant
        meta = json.loads((root / "metadata.json").read_text())
        assert meta["backend"]["type"] == variant.split("-")[1] and meta["name"] == "varlen-attention"
        assert (root / "varlen_attention" / "__init__.py").is_file()
    kernel = load_kernel("cpu")
    assert "build/torch-cpu" in kernel.__file__.replace("\\", "/")
    # the CPU kernel is real varlen attention: two packed documents equal two separate calls
    g = torch.Generator().manual_seed(1)
    q, k, v = torch.randn(9, 4, 8, generator=g), torch.randn(9, 2, 8, generator=g), torch.randn(9, 2, 8, generator=g)
    packed = kernel.varlen_attention(q, k, v, torch.tensor([0, 4, 9], dtype=torch.int32), 5, causal=True)
    first = kernel.varlen_attention(q[:4], k[:4], v[:4], torch.tensor([0, 4], dtype=torch.int32), 4, causal=True)
    torch.testing.assert_close(packed[:4], first)


def test_flex_on_cpu_fails_at_once_with_one_line():
    q, k, v, *_ = _inputs(False, False)
    with pytest.raises(ValueError, match="'flex' is GPU only .*use 'sdpa' or 'kernels' on CPU") as err:
        attention(q, k, v, is_causal=False, backend="flex")
    assert "\n" not in str(err.value)
    model = MlmClmForMaskedLM(MlmClmConfig.from_size("tiny"))
    with pytest.raises(ValueError, match="GPU only"):
        model.set_attention_backend("flex")
    with pytest.raises(ValueError, match="unknown; choose one of sdpa, eager, kernels, flex"):
        model.set_attention_backend("xformers")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("backend", ["sdpa", "kernels", "flex"])
@pytest.mark.parametrize("causal", [False, True])
def test_cuda_backends_match_eager(backend, causal):
    inputs = [x.cuda() if x is not None else None for x in _inputs(True, True, t=256, d=64)]
    ref = _run("eager", causal, *inputs)
    got = _run(backend, causal, *inputs)
    for a, r in zip(got, ref):
        assert (a - r).abs().max() <= 2e-3  # TF32/fused-kernel accumulation order on the GPU
