"""The benchmarks run and measure what they say: every variant and ratio of the pretraining benchmark, and a
fine-tuning grid whose three ways (separate processes, one process, worker processes) write the same results."""

import numpy as np
import pytest

from helpers import write_offline_sources
from mlmclm import bench
from mlmclm.evaluation.offline_suite import build_offline


def test_pretrain_bench_measures_every_variant_and_ratio():
    rows = bench.bench_pretrain(sizes=["tiny"], seq_len=32, batch=2, reps=1)
    steps = {r["variant"] for r in rows if r["bench"] == "pretrain_step"}
    for group, names in bench.PRETRAIN_GROUPS.items():
        assert {f"{n} ({group} group)" for n in names} <= steps
    ratios = {r["variant"]: float(r["ratio"]) for r in rows if r["bench"] == "pretrain_ratio"}
    assert set(ratios) == {label for label, *_ in bench.RATIOS}
    assert all(np.isfinite(r) and r > 0 for r in ratios.values()), ratios  # speeds: no bounds (a loaded machine)


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
    assert bench.peak_tflops("Tesla T4") is None
