"""mlmclm.analysis.figures: deterministic files, one per source, and the figures drawn from per-run data."""

from __future__ import annotations

import pandas as pd
from mlmclm.io import ROOT as REPO
from mlmclm.testing import write_sample_tree, write_synthetic_study

from mlmclm import figures, results


def test_figures_are_byte_identical_across_runs(tmp_path):
    scores = results.load(REPO / "results", sources=["paper"]).scores
    first, second = figures.fig2(scores, tmp_path / "a"), figures.fig2(scores, tmp_path / "b")
    assert [p.relative_to(tmp_path / "a") for p in first] == [p.relative_to(tmp_path / "b") for p in second]
    for ext in ("png", "pdf"):
        a, b = (tmp_path / d / f"fig02_mlm_vs_clm.{ext}" for d in "ab")
        assert a.read_bytes() == b.read_bytes(), ext
    pdf = (tmp_path / "a" / "fig02_mlm_vs_clm.pdf").read_bytes()
    assert b"CreationDate" not in pdf and b"Matplotlib" not in pdf
    assert b"Software" not in (tmp_path / "a" / "fig02_mlm_vs_clm.png").read_bytes()


def test_committed_paper_figures_exist():
    for name in ("fig02_mlm_vs_clm", "fig03_masking_ratio", "fig04_data_efficiency", "fig06_biphasic", "fig08_cpt",
                 "fig09_cpt_length", "fig10_data_efficiency_flops"):
        for ext in ("png", "pdf"):
            assert (REPO / "figures" / f"{name}.{ext}").is_file(), f"{name}.{ext}"


def test_fig5_from_the_authors_sample(tmp_path):
    write_sample_tree(tmp_path / "encodeval")
    runs = results.load_run_tree(tmp_path / "encodeval", "encodeval", "paper", paper_datasets_only=True)
    assert figures.fig5(runs, tmp_path / "figs") == [tmp_path / "figs" / "encodeval" / "fig05_lr_sensitivity.png"]
    assert (tmp_path / "figs" / "encodeval" / "fig05_lr_sensitivity.pdf").is_file()
    assert figures.fig5(runs.iloc[0:0], tmp_path / "none") == []


def _logs(root, model, steps, start_loss):
    folder = root / model
    folder.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"step": steps, "loss": [start_loss / (1 + s / 50) for s in steps]}).to_csv(
        folder / "pretrain.csv", index=False)


def test_per_run_figures_from_our_runs(tmp_path):
    runs_dir = tmp_path / "runs" / "mini"
    write_synthetic_study(runs_dir, size="mini-s")
    write_synthetic_study(runs_dir, size="mini-m", seed=1)
    runs = results.load_run_tree(runs_dir, "ours", "mini")
    scores = results.aggregate(runs)
    out = tmp_path / "figs"
    sized = [out / "ours-mini" / f"fig07_masking_robustness_{s}.png" for s in ("mini-s", "mini-m")]
    assert figures.fig7(runs, out) == sized
    assert figures.fig11(scores, out) == [out / "ours-mini" / "fig11_biphasic_sizes.png"]
    assert figures.fig6(scores, out) == [out / "ours-mini" / "fig06_biphasic.png"]
    for model, steps in [("mini-m-clm-400", range(0, 401, 50)), ("mini-m-mlm40-400", range(0, 401, 50)),
                         ("mini-m-clm-dec400-mlm40-500", range(0, 101, 25)),
                         ("mini-m-mlm40-dec400-mlm40-500", range(400, 501, 25))]:
        _logs(runs_dir, model, list(steps), 9.0)
    logs = results.load_pretrain_logs(runs_dir)
    curves = results.cpt_loss_curves(logs)
    assert curves.groupby("base")["step"].max().tolist() == [500, 500]  # the restarted CPT log is shifted
    assert figures.fig12(logs, out, scale="mini") == [out / "ours-mini" / "fig12_cpt_loss.png"]
