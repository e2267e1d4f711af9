"""The benchmarks run and measure what they say: every variant and ratio of the pretraining benchmark, and a
fine-tuning grid whose three ways (separate processes, one process, worker processes) write the same results."""

import numpy as np
import pytest

from helpers import write_offline_sources
from mlmclm import bench
from mlmclm.evaluation.offline_suite import build_offline


@pytest.mark.slow  # a benchmark's whole measurement (several variants, compiles): `make test`, not test-quick
def test_pretrain_bench_measures_every_variant_and_ratio():
    rows = bench.bench_pretrain(sizes=["tiny"], seq_len=32, batch=2, reps=1)
    steps = {r["variant"] for r in rows if r["bench"] == "pretrain_step"}
    for group, names in bench.PRETRAIN_GROUPS.items():
        assert {f"{n} ({group} group)" for n in names} <= steps
    ratios = {r["variant"]: float(r["ratio"]) for r in rows if r["bench"] == "pretrain_ratio"}
    assert set(ratios) == {label for label, *_ in bench.RATIOS}
    assert all(np.isfinite(r) and r > 0 for r in ratios.values()), ratios  # speeds: no bounds (a loaded machine)


@pytest.mark.slow  # a benchmark's whole measurement (several variants, compiles): `make test`, not test-quick
def test_finetune_bench_runs_one_grid_three_ways_with_the_same_results(tmp_path):
    build_offline(["multiemo_sentiment"], tmp_path / "tasks", roots=write_offline_sources(tmp_path / "src"),
                  progress=False)
    rows = bench.bench_finetune("multiemo_sentiment", lrs=2, seeds=1, size="tiny", data_dir=str(tmp_path / "tasks"))
    kinds = {r["bench"] for r in rows}
    assert kinds == {"finetune_grid_s", "finetune_grid_speedup", "finetune_max_abs_diff", "finetune_workers",
                     "finetune_pad_fraction"}
    assert len([r for r in rows if r["bench"] == "finetune_grid_s"]) == 3
    diffs = [float(r["ratio"]) for r in rows if r["bench"] == "finetune_max_abs_diff"]
    assert len(diffs) == 4 and max(diffs) < 1e-6
    pads = {r["variant"]: float(r["ratio"]) for r in rows if r["bench"] == "finetune_pad_fraction"}
    assert 0 <= pads["length grouping on"] <= pads["length grouping off"] < 1  # (the fake sentences are alike)
    assert all(np.isfinite(float(r["ratio"])) for r in rows if r["bench"] == "finetune_grid_speedup")


def test_mfu_bench_counts_model_flops_and_reports_backends_it_cannot_run():
    rows = bench.bench_mfu("tiny", seq_len=32, batch=2, backends=("sdpa", "flex"), steps=2, warmup=1, device="cpu",
                           peak=1e-3)
    by = {r["variant"].split(" failed")[0]: r for r in rows}
    assert set(by) == {"MLM40 [sdpa]", "CLM [sdpa]", "MLM40 [flex]", "CLM [flex]"}
    assert "GPU only" in by["CLM [flex]"]["variant"] and "ratio" not in by["CLM [flex]"]
    from mlmclm.models.configuration import MlmClmConfig
    c = MlmClmConfig.from_size("tiny", max_position_embeddings=128)
    body = 6 * c.num_parameters_by_part()["body"] + 3 * 4 * c.num_hidden_layers * c.num_attention_heads * c.head_dim * 32
    for objective, labelled in (("MLM40", None), ("CLM", 31 / 32)):
        r = by[f"{objective} [sdpa]"]
        flops = float(r["ratio"]) * 1e9 / float(r["tokens_per_s"])  # MFU x peak / tokens per second
        head = flops - body
        fraction = labelled or head / (6 * c.vocab_size * c.hidden_size)
        assert fraction == pytest.approx(labelled or 0.4, abs=0.02 if labelled else 0.2), objective
    assert bench.peak_tflops("NVIDIA H100 80GB HBM3") == 989.4 and bench.peak_tflops("NVIDIA H100 PCIe") == 756.0
    assert bench.peak_tflops("NVIDIA H200") == 989.4
    assert bench.peak_tflops("NVIDIA H100 NVL") == bench.peak_tflops("NVIDIA H200 NVL") == 835.5  # not the SXM's
    assert bench.peak_tflops("Tesla T4") is None


def _compiler() -> bool:
    import shutil

    return shutil.which("cc") is not None or shutil.which("gcc") is not None


def _chunked_batch(objective: str):
    """A tiny model's config, inputs, labels and label positions of `objective`, and a `CE_CHUNK_ELEMENTS` below
    its labelled logits (about 10 rows a chunk): the chunked loss as the 210M step at 128k vocabulary runs it."""
    import torch

    from mlmclm.models.configuration import MlmClmConfig
    from mlmclm.training.objectives import label_positions

    config = MlmClmConfig.from_size("tiny", vocab_size=300, **bench.SPECIAL_IDS)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(4, 300, (2, 16), generator=g)
    labels = (torch.where(torch.rand(ids.shape, generator=g) < 0.4, ids, -100) if objective == "MLM" else
              torch.cat([ids[:, 1:], torch.full((2, 1), -100)], dim=1))
    return config, ids, labels, label_positions(labels), 300 * 10


def test_the_loss_chunk_loop_stays_out_of_the_compiled_graph(monkeypatch):
    """The graphs `torch.compile` makes of a CLM step do not grow with the number of loss chunks: the chunk loop runs
    eagerly between them (traced, it was unrolled at about 26 nodes a chunk, and the 210M step's compile ran over 10
    minutes). Counted with a backend that only records the graphs (no code generation)."""
    import torch

    from mlmclm.models import modeling
    from mlmclm.models.modeling import MlmClmForMaskedLM

    config, ids, labels, positions, chunked = _chunked_batch("CLM")
    nodes = {}
    for elements in (chunked, chunked // 10):  # 3 and 30 chunks (30 labelled rows)
        monkeypatch.setattr(modeling, "CE_CHUNK_ELEMENTS", elements)
        torch._dynamo.reset()
        counts = []

        def backend(gm, inputs):
            counts.append(sum(len(m.graph.nodes) for m in gm.modules() if hasattr(m, "graph")))
            return gm.forward
        torch.manual_seed(0)
        model = torch.compile(MlmClmForMaskedLM(config), backend=backend)
        model(ids, labels=labels, is_causal=True, label_positions=positions).loss.backward()
        nodes[elements] = sum(counts)
    assert nodes[chunked] == nodes[chunked // 10], nodes


@pytest.mark.slow  # a benchmark's whole measurement (several variants, compiles): `make test`, not test-quick
@pytest.mark.skipif(not _compiler(), reason="torch.compile on CPU needs a C compiler")
def test_the_compiled_model_equals_the_eager_one(monkeypatch):
    """`torch.compile` of a training step (the GPU check's compiled variants): the same loss and gradients as eager
    on CPU, for MLM and CLM, through the chunked linear cross-entropy (logits above `CE_CHUNK_ELEMENTS`, as at the
    210M step) with the label positions the pretraining loop passes."""
    import torch

    from mlmclm.models import modeling
    from mlmclm.models.modeling import MlmClmForMaskedLM

    for objective in ("MLM", "CLM"):
        config, ids, y, positions, chunked = _chunked_batch(objective)
        monkeypatch.setattr(modeling, "CE_CHUNK_ELEMENTS", chunked)
        assert len(positions) * config.vocab_size > chunked  # the chunked loss, several chunks
        torch.manual_seed(0)
        model = MlmClmForMaskedLM(config)
        out = {}
        for name, fwd in (("eager", model), ("compiled", torch.compile(model))):
            model.zero_grad(set_to_none=True)
            loss = fwd(ids, labels=y, is_causal=objective == "CLM", label_positions=positions).loss
            loss.backward()
            out[name] = (loss.detach(), [p.grad.clone() for p in model.parameters()])
        assert torch.allclose(out["eager"][0], out["compiled"][0], atol=1e-5)
        assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(out["eager"][1], out["compiled"][1]))
