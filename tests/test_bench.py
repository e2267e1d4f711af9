"""The benchmarks run and measure what they say: every variant and ratio of the pretraining benchmark, and a
fine-tuning grid whose three ways (separate processes, one process, worker processes) write the same results."""

import numpy as np

from helpers_finetune import write_offline_sources
from mlmclm import bench
from mlmclm.offline_suite import build_offline


def test_pretrain_bench_measures_every_variant_and_ratio():
    rows = bench.bench_pretrain(sizes=["tiny"], seq_len=32, batch=2, reps=1)
    steps = {r["variant"] for r in rows if r["bench"] == "pretrain_step"}
    for group, names in bench.PRETRAIN_GROUPS.items():
        assert {f"{n} ({group} group)" for n in names} <= steps
    ratios = {r["variant"]: float(r["ratio"]) for r in rows if r["bench"] == "pretrain_ratio"}
    assert set(ratios) == {label for label, *_ in bench.RATIOS}
    assert all(0.05 < r < 20 for r in ratios.values()), ratios


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
