"""mlmclm.analysis.drawing.figures: deterministic files, one per source, and the figures drawn from per-run data."""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd
import pytest
import yaml
from mlmclm.analysis.drawing import kit, points
from mlmclm.analysis.loading import compute, run_tree
from helpers import REPO, scores_frame, write_sample_tree, write_synthetic_study

from mlmclm import figures, flops, results, tables


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


def test_per_run_figures_from_our_runs(tmp_path, monkeypatch):
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
    drawn = _capture(monkeypatch)
    assert figures.fig12(logs, out, scale="mini") == [out / "ours-mini" / "fig12_cpt_loss.png"]
    ax = drawn[0].axes[0]
    lines = {line.get_label(): line for line in ax.get_lines()}
    assert ax.get_yscale() == "linear" and list(lines["CPT starts"].get_xdata()) == [400, 400]
    clm, mlm = lines["CLM-based, CLM loss (before CPT)"], lines["CLM-based, MLM loss"]
    assert clm.get_linestyle() == ":" and max(clm.get_xdata()) == 400 < min(mlm.get_xdata())


def _config(root, model, parent=None, step=None, resumed=False, size="mini-m"):
    init = ({"kind": "run", "path": f"checkpoints/mini/{parent}", "step": step, "optimizer": resumed} if parent
            else {"kind": "scratch", "path": None, "step": None, "optimizer": False})
    folder = root / model
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.yaml").write_text(yaml.safe_dump({"run_id": model, "batch_size": 16, "init": init,
                                                        "model": {"size": size}, "data": {"seq_len": 64}}))


def test_fig12_follows_a_cpt_run_started_from_another_cpt_run(tmp_path):
    """mini's layout: the 100-step CPT continues the 200-step CPT's pre-decay checkpoint (its step 80, optimizer
    kept), which started from the base run's step 400 with a fresh optimizer: the curve runs through the parent's
    steps 420-480, not in a straight line from 400 to 500."""
    runs_dir = tmp_path / "runs" / "mini"
    for base in ("clm", "mlm40"):
        _logs(runs_dir, f"mini-m-{base}-400", list(range(20, 401, 20)), 9.0)
        _config(runs_dir, f"mini-m-{base}-400")
        long, short = f"mini-m-{base}-dec400-mlm40-600", f"mini-m-{base}-dec400-mlm40-500"
        _logs(runs_dir, long, list(range(20, 201, 20)), 6.0)
        _config(runs_dir, long, f"mini-m-{base}-400", 400)
        _logs(runs_dir, short, [100], 5.0)
        _config(runs_dir, short, long, 80, resumed=True)
    curves = results.cpt_loss_curves(results.load_pretrain_logs(runs_dir))
    short = curves[curves["model"] == "mini-m-clm-dec400-mlm40-500"]
    assert short["step"].tolist() == [*range(20, 401, 20), 420, 440, 460, 480, 500]
    assert short["step"].is_monotonic_increasing and short["step"].diff().max() == 20
    assert curves.groupby("model")["step"].max().to_dict() == {
        f"mini-m-{b}-dec400-mlm40-{n}": n for b in ("clm", "mlm40") for n in (500, 600)}


def _capture(monkeypatch) -> list:
    """The figures drawn (Figure objects), in order, as save receives them (the kit's, and figures' own name for it,
    which Fig. 4 across scales calls)."""
    drawn, save = [], kit.save

    def spy(fig, out, name):
        drawn.append(fig)
        return save(fig, out, name)
    monkeypatch.setattr(kit, "save", spy)
    monkeypatch.setattr(figures, "save", spy)
    return drawn


def _labels(fig) -> dict:
    return {ax.get_title(): ax.get_ylabel() for ax in fig.axes}


def test_axis_labels_name_the_metric_and_titles_whose_numbers(tmp_path, monkeypatch):
    runs_dir = tmp_path / "runs" / "mini"
    write_synthetic_study(runs_dir, size="mini-m")
    runs = results.load_run_tree(runs_dir, "ours", "mini")
    metrics = {("mini", "SC", "sst2"): "accuracy", ("mini", "SC", "toy_sc"): "accuracy",
               ("mini", "TC", "toy_ner"): "tag_accuracy", ("mini", "QA", "toy_qa"): "squad_f1"}
    paper = results.load(REPO / "results", sources=["paper"]).scores
    scores = figures.with_metrics(pd.concat([paper, results.aggregate(runs)], ignore_index=True), metrics)
    drawn = _capture(monkeypatch)
    figures.fig2(scores, tmp_path / "figs")
    theirs, ours = drawn
    assert _labels(theirs) == {"SC": "accuracy", "TC": "F1", "QA": "F1", "IR": "NDCG@10"}
    assert _labels(ours) == {"SC": "accuracy", "TC": "tag accuracy", "QA": "F1", "IR": "score"}
    assert "the paper's Tables 2-5, redrawn" in theirs._suptitle.get_text()
    assert "ours, scale mini" in ours._suptitle.get_text()
    figures.fig7(figures.with_metrics(runs, metrics), tmp_path / "figs")
    assert _labels(drawn[-1])["TC"] == "centered tag accuracy"


def test_fig7_only_for_sizes_with_clm_then_mlm_runs(tmp_path):
    runs_dir = tmp_path / "runs" / "mini"
    write_synthetic_study(runs_dir, size="mini-s")
    write_synthetic_study(runs_dir, size="mini-m", seed=1)
    runs = results.load_run_tree(runs_dir, "ours", "mini")
    runs = runs[(runs["size"] != "mini-s") | (runs["objective"] != "clm+mlm")]  # mini-s: MLM-only runs
    assert figures.fig7(runs, tmp_path / "figs") == [tmp_path / "figs" / "ours-mini" / "fig07_masking_robustness.png"]


def _meta(root, model, embeddings, body):
    (root / model / "meta.json").write_text(json.dumps({"parameters": {
        "embeddings": embeddings, "body": body, "output_layer": embeddings, "total": 2 * embeddings + body}}))


def test_fig10_for_our_runs_counts_flops_from_parameters(tmp_path, monkeypatch):
    runs_dir = tmp_path / "runs" / "mini"
    write_synthetic_study(runs_dir, size="mini-m")
    _config(runs_dir, "mini-m-clm-400")
    _meta(runs_dir, "mini-m-clm-400", 1000, 5000)
    arch = run_tree.run_parameters(runs_dir)
    assert arch == {"mini-m": {"embeddings": 1000, "body": 5000, "output_layer": 1000, "tokens_per_step": 16 * 64}}
    scores = results.aggregate(results.load_run_tree(runs_dir, "ours", "mini"))
    view = compute.with_flops(results.data_efficiency_view(scores), arch).set_index("model")
    assert view.loc["mini-m-clm-400-100", "flops"].iloc[0] == 6 * 1024 * 100 * (1000 + 5000 + 1000)
    assert view.loc["mini-m-mlm40-400-100", "flops"].iloc[0] == 6 * 1024 * 100 * (1000 + 5000 + 0.4 * 1000)
    drawn = _capture(monkeypatch)
    assert figures.fig10(scores, tmp_path / "figs", arch) == [
        tmp_path / "figs" / "ours-mini" / "fig10_data_efficiency_flops.png"]
    assert {ax.get_xlabel() for ax in drawn[0].axes} == {"training FLOPs (x 1e9)\n6N rule"}
    paper = results.load(REPO / "results", sources=["paper"]).scores
    figures.fig10(paper, tmp_path / "figs", results.architecture(REPO / "results" / "paper"))
    assert {ax.get_xlabel() for ax in drawn[-1].axes} == {"training FLOPs (x 1e20)\nApp. F rule"}
    assert set(compute.FLOPS_RULES) == {"6N", "App. F"} <= set(flops.RULES)  # captions of rules flops counts


def test_fig4_scales_puts_every_source_on_each_axis_of_tokens_per_parameter(tmp_path, monkeypatch):
    runs_dir = tmp_path / "runs" / "mini"
    write_synthetic_study(runs_dir, size="mini-m")
    _config(runs_dir, "mini-m-clm-400")
    _meta(runs_dir, "mini-m-clm-400", 1000, 5000)  # an untied output layer of 1,000
    ours = results.aggregate(results.load_run_tree(runs_dir, "ours", "mini"))
    paper = results.load(REPO / "results", sources=["paper"]).scores
    arch = {**run_tree.run_parameters(runs_dir), **results.architecture(REPO / "results" / "paper")}
    per_axis = compute.tokens_per_axis(arch)
    assert compute.tokens_per_parameter(arch) == per_axis["body"]
    assert per_axis["body"]["mini-m"] == 1024 / 5000 and per_axis["body"]["610M"] == 2_359_296 / 460_123_776
    assert per_axis["body+embedding"]["mini-m"] == 1024 / 6000 and per_axis["all"]["mini-m"] == 1024 / 7000
    drawn = _capture(monkeypatch)
    assert figures.fig4_scales(pd.concat([paper, ours], ignore_index=True), tmp_path, arch) == [
        tmp_path / "fig04_scales.png"]
    tc = [ax for ax in drawn[0].axes if ax.get_title() == "TC"]  # one row of panels per axis, in AXES' order
    assert [ax.get_xlabel() for ax in tc] == list(compute.AXES.values()) == [
        "tokens per body parameter", "tokens per body+embedding parameter", "tokens per parameter (all)"]
    for ax, axis in zip(tc, compute.AXES):
        lines = {c.get_label(): c.lines[0].get_xdata() for c in ax.containers}  # error bars: one container a series
        ours_x = [steps * per_axis[axis]["mini-m"] for steps in (100, 200)]  # stable-phase checkpoints
        assert list(lines["ours, mini (mini-m)"]) == pytest.approx(ours_x)
        assert list(lines["paper (610M)"])[-1] == pytest.approx(40_000 * per_axis[axis]["610M"])
    assert figures.fig4_scales(paper[paper["scale"] == "none"], tmp_path, arch) == []


def test_fig3_scales_centers_each_ratio_line_and_puts_ours_beside_the_papers_sizes(tmp_path, monkeypatch):
    runs_dir = tmp_path / "runs" / "mini"
    write_synthetic_study(runs_dir, size="mini-m")
    ours = results.aggregate(results.load_run_tree(runs_dir, "ours", "mini"))
    paper = results.load(REPO / "results", sources=["paper"]).scores
    assert figures.fig3_scales(paper, tmp_path) == []  # the paper alone: Fig. 3 itself
    drawn = _capture(monkeypatch)
    assert figures.fig3_scales(pd.concat([paper, ours], ignore_index=True), tmp_path) == [
        tmp_path / "fig03_scales.png"]
    panels = {ax.get_title(): ax for ax in drawn[0].axes}
    assert list(panels) == ["SC", "TC", "QA", "IR"]
    lines = {c.get_label(): c.lines[0] for c in panels["IR"].containers}  # error bars: one container a series
    assert list(lines) == ["paper (210M)", "paper (610M)", "paper (1B)", "ours, mini (mini-m)"]
    ir = ours[(ours["task_group"] == "IR") & (ours["dataset"] == "Avg")
              & ours["model"].isin([f"mini-m-mlm{r}-400" for r in (20, 30, 40, 50)])].sort_values("model")
    y = lines["ours, mini (mini-m)"].get_ydata()
    assert [round(x, -1) for x in lines["ours, mini (mini-m)"].get_xdata()] == [20, 30, 40, 50]  # dodged
    assert list(y) == pytest.approx(list(ir["score"] - ir["score"].mean()))
    assert abs(sum(lines["paper (610M)"].get_ydata())) < 1e-9  # each line centered on its own mean
    twin = pd.DataFrame({"source": ["ours", "paper"], "scale": ["twin", "paper"], "size": ["twin", "610M"]})
    assert figures._scale_lines(twin) == ["ours, twin", "paper (610M)"]  # a scale named as its one size: once


def test_the_three_axes_count_more_parameters_in_turn():
    # Table 1's 610M: a body of 460,123,776, an input embedding of 128,256 x 1,152 = 147,750,912 and an untied output
    # layer as large (the released configs: tie_word_embeddings false): ~608M and ~756M, as the paper's model cards
    arch = results.architecture(REPO / "results" / "paper")
    counts = compute.parameter_counts(arch["610M"])
    assert counts == {"body": 460_123_776, "embeddings": 147_750_912, "output_layer": 147_750_912}
    per_axis = compute.tokens_per_axis(arch)
    assert list(per_axis) == list(compute.AXES) == ["body", "body+embedding", "all"]
    assert per_axis["body+embedding"]["610M"] == 2_359_296 / 607_874_688
    assert per_axis["all"]["610M"] == 2_359_296 / 755_625_600
    toy = {"layers": 2, "d_model": 8, "ffn": 16, "heads": 2, "kv_heads": 1, "vocab": 50, "tokens_per_step": 64}
    mine = {"toy": toy, "ours": {"embeddings": 400, "body": 1000, "output_layer": 400, "tokens_per_step": 64}}
    for size in mine:
        body, with_embedding, every = (compute.tokens_per_parameter(mine, axis)[size] for axis in compute.AXES)
        assert body > with_embedding > every
    assert compute.tokens_per_parameter(mine, "all")["ours"] == 64 / 1800
    assert compute.PAPER_TIED_EMBEDDINGS is False
    tied = compute.parameter_counts({**toy, "tied": True})  # a shape that ties them: no output layer
    assert tied["output_layer"] == 0 and tied["embeddings"] == 50 * 8
    no_head = compute.tokens_per_parameter({"old": {"embeddings": 400, "body": 1000, "tokens_per_step": 64}}, "all")
    assert math.isnan(no_head["old"])  # a meta.json without an output-layer count: unknown, not guessed
    with pytest.raises(ValueError, match="unknown axis"):
        compute.tokens_per_parameter(mine, "embedding")


def _controls(scores):
    """Controls as evidence.controls gives them (the contract's columns), for every model size and dataset."""
    keys = scores[["source", "scale", "size", "task_group", "dataset"]].drop_duplicates()
    return keys.assign(majority=[31.0 if g == "SC" else float("nan") for g in keys["task_group"]], random=55.0,
                       random_ci=2.0, best_pretrained="", helped=False)


def test_controls_in_figures_and_tables(tmp_path, monkeypatch):
    runs_dir = tmp_path / "runs" / "mini"
    write_synthetic_study(runs_dir, size="mini-m")
    scores = results.aggregate(results.load_run_tree(runs_dir, "ours", "mini"))
    drawn = _capture(monkeypatch)
    figures.fig4(scores, tmp_path / "figs", _controls(scores))
    legend = [t.get_text() for t in drawn[0].legends[0].get_texts()]
    assert "random init (band: its 95% CI)" in legend and "majority class" in legend
    sc = {ax.get_title(): ax for ax in drawn[0].axes}["SC"]
    assert sorted(line.get_ydata()[0] for line in sc.get_lines() if line.get_linestyle() != "-") == [31.0, 55.0]
    figures.fig4(scores, tmp_path / "figs")
    assert "random init" not in [t.get_text() for t in drawn[-1].legends[0].get_texts()]
    table = tables.study_table(scores, 6, "ours", _controls(scores))
    assert table.iloc[-2:, :2].values.tolist() == [["majority class", "–"], ["random init", "–"]]
    assert table.iloc[-2]["SST-2"] == "31.00" and table.iloc[-1]["SST-2"] == "55.00 (±2.00)"
    assert table.iloc[:-2].equals(tables.study_table(scores, 6, "ours"))
    scaling = tables.study_table(scores, 3, "ours", _controls(scores))  # TC: no majority floor given
    assert scaling.iloc[-1, :3].tolist() == ["mini-m", "random init", "–"]


def _long(cells=()):
    """Scores of ours at a long-like scale (TC group averages): CLM and MLM-40% at 4,620 steps with three pretraining
    seeds (seed by seed, MLM-40% minus CLM is -1, -0.5, -1.5), checkpoints at 220 and 1,100, the 25/75 split and 2,420
    steps of CPT from each base, plus ``cells``."""
    base = [(f"mini-xs-{o}-4620{p}", "TC", s + d, 0.2) for o, s, ds in (("clm", 90.0, (0.0, 0.5, 1.0)),
                                                                         ("mlm40", 89.0, (0.0, 1.0, 0.5)))
            for p, d in zip(("", "-p1", "-p2"), ds)]
    return scores_frame([*base, ("mini-xs-clm-4620-220", "TC", 88.0, 0.3), ("mini-xs-mlm40-4620-220", "TC", 84.0, 0.5),
                         ("mini-xs-clm-4620-1100", "TC", 89.0, 0.3), ("mini-xs-mlm40-4620-1100", "TC", 87.0, 1.0),
                         ("mini-xs-clm-1100-mlm40-4620", "TC", 91.5, 0.2),
                         ("mini-xs-clm-dec4620-mlm40-7040", "TC", 91.4, 0.1),
                         ("mini-xs-mlm40-dec4620-mlm40-7040", "TC", 90.4, 0.2), *cells], "ours", "long")


def _series(fig, title="TC") -> list[tuple[list, list, str]]:
    """A panel's error-bar series: (x, y, line style) each."""
    ax = {ax.get_title(): ax for ax in fig.axes}[title]
    return [(list(c.lines[0].get_xdata()), list(c.lines[0].get_ydata()), c.lines[0].get_linestyle())
            for c in ax.containers]


def test_figures_of_ours_draw_the_mean_over_pretraining_seeds_and_say_what_the_bars_are(tmp_path, monkeypatch):
    drawn = _capture(monkeypatch)
    assert figures.fig2(_long(), tmp_path) == [tmp_path / "ours-long" / "fig02_mlm_vs_clm.png"]
    (mlm_x, mlm, _), (clm_x, clm, _) = _series(drawn[0])
    assert (mlm, clm) == ([89.5], [90.5])  # the mean of the three seeds', under the seed-0 id
    title = drawn[0]._suptitle.get_text()
    assert title.splitlines() == ["Fig. 2: MLM (40%) vs CLM at size mini-xs (ours, scale long)",
                                  "bars: 95% CI over 3 pretraining seeds"]
    squares = [line for line in drawn[0].axes[0].get_lines() if line.get_marker() == "s" and len(line.get_xdata())]
    assert sorted(y for line in squares for y in line.get_ydata()) == [89.5, 90.5]
    figures.fig8(_long(), tmp_path)  # the base models pooled, the CPT runs (one seed) not
    assert drawn[-1]._suptitle.get_text().splitlines()[-1] == (
        "bars: 95% CI over 3 pretraining seeds (squares), else fine-tuning seeds")
    figures.fig4(_long(), tmp_path)
    assert drawn[-1]._suptitle.get_text().splitlines()[-1] == "bands: 95% CI over fine-tuning seeds"


def test_figures_of_ours_need_two_x_values(tmp_path):
    scores = _long()
    assert figures.fig3(scores, tmp_path) == []  # one masking ratio
    assert figures.fig4(scores, tmp_path) == [tmp_path / "ours-long" / "fig04_data_efficiency.png"]
    one = scores[~scores["model"].str.endswith("-1100")]  # one checkpoint: no figure, not an axis of 190-210
    assert figures.fig4(one, tmp_path / "one") == []
    arch = {"mini-xs": {"embeddings": 1000, "body": 5000, "tokens_per_step": 2048}}
    assert figures.fig10(one, tmp_path / "one", arch) == []  # two FLOPs values (MLM and CLM), one checkpoint
    assert figures.fig10(one, tmp_path / "one", arch).skipped == [
        "Fig. 10 (ours, scale long, mini-xs) is not drawn: its x axis (training FLOPs) would hold one pretraining step "
        "(220)."]
    assert figures.fig10(scores, tmp_path, arch) == [tmp_path / "ours-long" / "fig10_data_efficiency_flops.png"]


def test_lines_join_only_neighbouring_points_of_the_design(tmp_path, monkeypatch):
    drawn = _capture(monkeypatch)
    figures.fig6(_long(), tmp_path)  # splits 0, 25 and 100% run; 50 and 75% not
    assert [(x, style) for x, _, style in _series(drawn[0])] == [([0.0, 25.0], "-"), ([100.0], "None")]
    figures.fig9(_long(), tmp_path)  # CPT lengths 0 and 2,420 run; the design's 220 and 1,320 not
    assert {(len(x), style) for x, _, style in _series(drawn[-1])} == {(1, "None")}
    paper = results.load(REPO / "results", sources=["paper"]).scores
    figures.fig9(paper, tmp_path)  # the paper ran its whole design: one line a base model
    assert [(len(x), style) for x, _, style in _series(drawn[-1], "SC")] == [(4, "-"), (4, "-")]


def test_fig4_scales_pools_the_final_models_and_gives_every_point_its_interval(tmp_path, monkeypatch):
    arch = {"mini-xs": {"embeddings": 1000, "body": 5000, "tokens_per_step": 2048}}
    drawn = _capture(monkeypatch)
    one = _long()[lambda d: ~d["model"].str.endswith("-1100")]  # a single checkpoint, as at mini
    assert figures.fig4_scales(one, tmp_path, arch) == [tmp_path / "fig04_scales.png"]
    (x, gap, _), (final_x, final, _) = _series(drawn[0])
    assert (gap, final) == ([84.0 - 88.0], [89.5 - 90.5])  # the final models: the means over pretraining seeds
    ax = drawn[0].axes[0]
    (bar, *_), (final_bar, *_) = (c.lines[2][0].get_segments() for c in ax.containers)  # every point has its bar
    # the verdicts' interval: for the one-seed checkpoints (bootstrap.seed_mean_replicas) Student-t on the seed spread
    # pooled over the two final families (sd 0.5, 3 seeds each: 4 df), a one-seed checkpoint's mean drawn with the
    # whole sd (percentiles of SEED_MEAN_DRAWS replicas, within a few percent of the exact bound); for the finals,
    # three seeds each, the test paired by seed (bootstrap.seed_test): the seeds' differences -1, -0.5, -1.5
    half = results.t95(4) * 0.5 * math.sqrt(1 + 1)
    assert bar[:, 1].tolist() == pytest.approx([-4.0 - half, -4.0 + half], rel=0.05)
    half = results.t95(2) * 0.5 / math.sqrt(3)
    assert final_bar[:, 1].tolist() == pytest.approx([-1.0 - half, -1.0 + half], rel=1e-4)
    assert ax.get_xlabel() == "tokens per body parameter"
    assert drawn[0]._suptitle.get_text().splitlines()[0] == "Fig. 4 across scales: MLM-40% minus CLM"


def test_fig5_says_what_its_bars_are(tmp_path, monkeypatch):
    runs_dir = tmp_path / "runs" / "mini"
    write_synthetic_study(runs_dir, size="mini-m")
    runs = results.load_run_tree(runs_dir, "ours", "mini")
    drawn = _capture(monkeypatch)
    figures.fig5(runs, tmp_path / "figs")
    note = lambda fig: " ".join(fig._suptitle.get_text().splitlines()[1:])  # noqa: E731
    assert note(drawn[0]) == ("bars: ±1 sd over the whole grid, 3 learning rates (1e-05 to 1e-03) x 3 seeds; "
                              "the paper's: over 1e-05 to 1e-04 only; dots: runs")  # beyond the paper's range
    figures.fig5(runs[runs["lr"] <= 1e-4], tmp_path / "within")
    assert note(drawn[-1]) == "bars: ±1 sd over 2 learning rates (1e-05 to 1e-04) x 3 seeds; dots: runs"
    seeds = pd.concat([runs, runs.assign(pretrain_seed=1, model=runs["model"] + "-p1")], ignore_index=True)
    figures.fig5(seeds[seeds["lr"] <= 1e-4], tmp_path / "seeds")  # the figure draws seed 0, claim 4 pools both
    assert note(drawn[-1]) == ("bars: ±1 sd over 2 learning rates (1e-05 to 1e-04) x 3 seeds of pretraining seed 0 "
                               "(claim 4 pools all 2 pretraining seeds); dots: runs")


def test_table11_spells_both_phases_in_the_budget_unit():
    scores = _long([("mini-xs-clm-4400-mlm40-4620", "TC", 90.5, 0.3)])
    assert tables.study_table(scores, 11, "ours")["Mix"].tolist() == ["0+4620", "1100+3520", "4620+0"]


def test_a_kill_while_saving_leaves_the_previous_figure_and_table_whole(tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    scores = results.load(REPO / "results", sources=["paper"]).scores
    figures.fig2(scores, tmp_path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    real = Figure.savefig

    def killed_in_pdf(self, fname, *args, **kwargs):
        if kwargs.get("format") == "pdf":
            real(self, fname, *args, **kwargs)
            with open(fname, "r+b") as f:  # the PDF half-written when the kill comes
                f.truncate(2900)
            raise KeyboardInterrupt
        return real(self, fname, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", killed_in_pdf)
    try:
        figures.fig2(scores, tmp_path)
    except KeyboardInterrupt:
        pass
    else:
        raise AssertionError("the kill did not reach the save")
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # no temporary file left either
    table = pd.DataFrame({"a": [1, 2]})
    tables.write(table, tmp_path / "t", "table02")
    written = {p.name: p.read_bytes() for p in (tmp_path / "t").iterdir()}
    monkeypatch.setattr(pd.DataFrame, "to_latex", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        tables.write(pd.DataFrame({"a": [3]}), tmp_path / "t", "table02")
    except KeyboardInterrupt:
        pass
    now = {p.name: p.read_bytes() for p in (tmp_path / "t").iterdir()}
    assert now.keys() == written.keys() and now["table02.tex"] == written["table02.tex"]


def test_a_figure_of_ours_with_one_x_value_is_skipped_and_show_says_why(tmp_path, capsys):
    drawn = figures.fig3(_long(), tmp_path)  # one masking ratio: not a 38-42% axis with one point
    assert drawn == [] and not list(tmp_path.rglob("*.png"))
    assert drawn.skipped == ["Fig. 3 (ours, scale long) is not drawn: its x axis (masking ratio (%)) would hold one "
                             "value (40)."]
    figures.show(drawn)
    assert capsys.readouterr().out == drawn.skipped[0] + "\n"  # not "no source has the data"
    figures.show(figures.Drawn())
    assert capsys.readouterr().out == "No source has the data this figure needs.\n"
    clm = _long()[lambda d: ~d["model"].str.contains("mlm")]  # one size and one objective: nothing to compare
    assert figures.fig2(clm, tmp_path) == [] and "x axis (model size) would hold one value (CLM)" in (
        figures.fig2(clm, tmp_path).skipped[0])


def test_fig2_at_one_size_puts_the_two_objectives_on_its_x_axis(tmp_path, monkeypatch):
    drawn = _capture(monkeypatch)
    figures.fig2(_long(), tmp_path, _controls(_long()))
    ax = drawn[0].axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["MLM", "CLM"] and ax.get_xlabel() == "objective"
    assert [(x, y) for x, y, _ in _series(drawn[0])] == [([0.0], [89.5]), ([1.0], [90.5])]
    paper = results.load(REPO / "results", sources=["paper"]).scores
    figures.fig2(paper, tmp_path)  # several sizes: the axis of sizes, as in the paper
    assert [t.get_text() for t in drawn[-1].axes[0].get_xticklabels()] == ["210M", "610M", "1B"]


def _half_widths(ax) -> list[float]:
    """Every interval drawn in a panel: error bars (each point's segment) and bands (each x of a fill)."""
    from matplotlib.collections import LineCollection, PolyCollection

    out = []
    for c in ax.collections:
        if isinstance(c, LineCollection):
            out += [abs(seg[1, 1] - seg[0, 1]) / 2 for seg in c.get_segments()]
        elif isinstance(c, PolyCollection):
            for path in c.get_paths():
                xy = path.vertices[:-1]
                half = len(xy) // 2 if len(xy) % 2 == 0 else (len(xy) - 1) // 2
                low, high = xy[1:half + 1], xy[half + 1:][::-1]  # fill_between: start, low edge, high edge back
                out += [abs(h - lo) / 2 for (_, lo), (_, h) in zip(low, high)]
    return out


def _points(ax) -> int:
    """The data points of ours drawn in a panel (round markers; squares sit on them, controls have none)."""
    return sum(len(line.get_xdata()) for line in ax.get_lines() if line.get_marker() == "o")


def test_every_point_of_ours_has_the_interval_of_the_one_interval_function(tmp_path, monkeypatch):
    """points.interval is the one place a point's interval comes from (but for the MLM-40% minus CLM lead of Fig. 4
    across scales, whose bars are the verdicts' interval of that difference, `points.mlm_lead`): replaced, every bar
    and band of every other figure of ours changes with it, and no point is drawn without one."""
    def fake(rows, minus=None):
        return float(rows["score"].mean() - (0 if minus is None else minus["score"].mean())), 0.75
    monkeypatch.setattr(points, "interval", fake)
    drawn = _capture(monkeypatch)
    arch = {"mini-xs": {"embeddings": 1000, "body": 5000, "tokens_per_step": 2048}}
    for draw in (figures.fig2, figures.fig4, figures.fig6, figures.fig8, figures.fig9,
                 lambda s, out: figures.fig10(s, out, arch)):
        draw(_long(), tmp_path)
    assert len(drawn) == 6  # Fig. 4 across scales draws the verdicts' interval of its difference (the next test)
    for fig in drawn:
        for ax in fig.axes:
            halves = _half_widths(ax)
            assert halves and halves == pytest.approx([0.75] * len(halves)), fig._suptitle.get_text()
            assert len(halves) == _points(ax), fig._suptitle.get_text()  # one a point


def test_a_point_without_an_interval_is_hollow_and_the_note_says_so(tmp_path, monkeypatch):
    scores = _long()
    scores.loc[scores["model"] == "mini-xs-clm-4620-220", "ci"] = float("nan")  # one run: no interval
    drawn = _capture(monkeypatch)
    figures.fig6(scores.assign(ci=lambda d: d["ci"].where(d["model"] != "mini-xs-clm-1100-mlm40-4620")), tmp_path)
    ax = drawn[0].axes[0]
    hollow = [line for line in ax.get_lines() if line.get_marker() == "o" and line.get_mfc() == "white"]
    assert [list(line.get_xdata()) for line in hollow] == [[25.0]]
    assert "; hollow: a single run, no interval" in " ".join(drawn[0]._suptitle.get_text().splitlines())


def _inside(fig) -> bool:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig).draw()
    box, (w, h) = fig.get_tightbbox(fig.canvas.get_renderer()), fig.get_size_inches()
    return box.x0 >= 0 and box.y0 >= 0 and box.x1 <= w and box.y1 <= h


def test_no_text_falls_outside_the_figure_at_its_saved_size(tmp_path, monkeypatch):
    """Every label, tick, legend and title lies within the saved figure (the FLOPs axis label once overran the IR
    panel of the paper's Fig. 10 by a few letters)."""
    paper = results.load(REPO / "results", sources=["paper"]).scores
    arch = {**results.architecture(REPO / "results" / "paper"),
            "mini-xs": {"embeddings": 1000, "body": 5000, "tokens_per_step": 2048}}
    scores = pd.concat([paper, _long()], ignore_index=True)
    drawn = _capture(monkeypatch)
    for draw in (figures.fig2, figures.fig3, figures.fig4, figures.fig6, figures.fig8, figures.fig9):
        draw(scores, tmp_path, _controls(scores))
    figures.fig10(scores, tmp_path, arch, _controls(scores))
    figures.fig4_scales(scores, tmp_path, arch)
    assert len(drawn) == 14  # the paper's 8, ours 6 (Fig. 3: one masking ratio)
    outside = [fig._suptitle.get_text().splitlines()[0] for fig in drawn if not _inside(fig)]
    assert outside == []


def test_title_lines_break_after_a_clause_or_before_whose_numbers():
    assert kit.wrap("Fig. 6: CLM-then-MLM splits of fixed budgets, mini-xs (ours, scale long)", 60) == [
        "Fig. 6: CLM-then-MLM splits of fixed budgets, mini-xs", "(ours, scale long)"]
    assert kit.wrap("bars: ±1 sd over 3 learning rates x 4 seeds; the paper's: 1e-05 to 1e-04; dots: runs",
                         60) == ["bars: ±1 sd over 3 learning rates x 4 seeds;",
                                 "the paper's: 1e-05 to 1e-04; dots: runs"]
    assert kit.wrap("short title", 60) == ["short title"]


def test_controls_off_the_axis_name_their_panel_and_the_band_is_said(tmp_path, monkeypatch):
    """A majority class far below every model is not drawn (it would squash the panel): its legend entry says whose
    panel it is and where it lies; the random-init line's entry says what its band is (issue 46)."""
    runs_dir = tmp_path / "runs" / "mini"
    write_synthetic_study(runs_dir, size="mini-m")
    scores = results.aggregate(results.load_run_tree(runs_dir, "ours", "mini"))
    controls = _controls(scores).assign(majority=lambda c: c["majority"].where(c["task_group"] != "SC", 1.0))
    drawn = _capture(monkeypatch)
    figures.fig4(scores, tmp_path / "figs", controls)
    legend = [t.get_text() for t in drawn[0].legends[0].get_texts()]
    assert "majority class, SC: 1.0 (off the axis, below)" in legend
    assert "random init (band: its 95% CI)" in legend


def test_a_split_not_run_is_crossed_by_a_faint_line_and_bars_show_over_their_squares(tmp_path, monkeypatch):
    """Fig. 6 of a scale that runs 0, 25 and 100% CLM: the 100% point is joined to the 25% one by a faint line, the
    note says which splits it crosses, and the error bars lie over the squares of the pooled points (a bar shorter
    than a square showed nothing: issue 46)."""
    drawn = _capture(monkeypatch)
    figures.fig6(_long(), tmp_path)
    ax = {ax.get_title(): ax for ax in drawn[0].axes}["TC"]
    faint = [line for line in ax.get_lines() if line.get_alpha() is not None and line.get_alpha() < 1]
    assert [list(line.get_xdata()) for line in faint] == [[25.0, 100.0]]
    assert drawn[0]._suptitle.get_text().splitlines()[-1].endswith("faint lines: across splits not run (50%, 75% CLM)")
    square = max(line.get_zorder() for line in ax.get_lines() if line.get_marker() == "s")
    bars = [bar for c in ax.containers for bar in (*c[1], *c[2])]
    assert bars and all(bar.get_zorder() > square and bar.get_path_effects() for bar in bars)


def test_panels_have_one_size_and_four_stand_in_two_rows(tmp_path):
    """A row of four panels shown in a notebook's width had unreadable ticks and one panel was shown huge: four
    panels stand in two rows of two, one panel is not stretched, and every figure is shown at one scale."""
    sizes = {n: kit.panels(n)[0].get_size_inches() for n in (1, 3, 4)}
    assert [x for n in (4, 3, 1) for x in sizes[n]] == pytest.approx([6.4, 5.8, 9.6, 2.9, 6.0, 2.9])
    assert len(kit.panels(4)[1]) == 4
    fig, _ = kit.panels(1)
    png = kit.save(fig, tmp_path, "one")
    assert figures.display_width(png) == 600  # 6 inches at the notebooks' 100 pixels an inch


def test_the_figures_table_names_every_committed_figure_of_ours():
    """docs/results.md's figures table: where a row names `figures/ours-{...}/`, the scales in braces are those with
    that figure committed (the twin was left out)."""
    text = (REPO / "docs" / "results.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| `figures/") and "ours-{" in line]
    assert rows
    for row in rows:
        listed = set(re.search(r"ours-\{([a-z,]+)\}/", row).group(1).split(","))
        name = re.search(r"(fig\d\d_[a-z_]+)\.png", row).group(1)
        committed = {p.parent.name.removeprefix("ours-") for p in (REPO / "figures").glob(f"ours-*/{name}.png")}
        assert listed == committed, (name, listed, committed)


def test_fig12_draws_the_mean_of_the_pretraining_seeds_as_one_line(tmp_path, monkeypatch):
    """Two pretraining seeds of each CPT and its base run: one line a base, at each step the seeds' mean (they were
    drawn as one line zigzagging between the seeds' values)."""
    runs_dir = tmp_path / "runs" / "mini"
    for base in ("clm", "mlm40"):
        for seed, level in (("", 9.0), ("-p1", 7.0)):
            _logs(runs_dir, f"mini-m-{base}-400{seed}", list(range(20, 401, 20)), level)
            _config(runs_dir, f"mini-m-{base}-400{seed}")
            cpt = f"mini-m-{base}-dec400-mlm40-600{seed}"
            _logs(runs_dir, cpt, list(range(20, 201, 20)), level - 3)
            _config(runs_dir, cpt, f"mini-m-{base}-400{seed}", 400)
    drawn = _capture(monkeypatch)
    figures.fig12(results.load_pretrain_logs(runs_dir), tmp_path, "ours", "mini")
    lines = [line for line in drawn[0].axes[0].get_lines() if "based" in line.get_label()]
    assert len(lines) == 3  # MLM-based; CLM-based before its CPT (CLM loss) and after
    for line in lines:
        assert np.all(np.diff(line.get_xdata()) > 0) and "(mean of 2 seeds)" in line.get_label()
