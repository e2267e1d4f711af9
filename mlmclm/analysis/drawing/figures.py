"""The paper's figures: one function per figure, drawn with one kit (`kit`), PNG and PDF written
deterministically.

Every function takes the tidy results of mlmclm.analysis.loading.results (``scores`` or ``runs``, any mix of sources)
and an output folder, draws one file per source that has the data (the paper's figures at the top of the folder, another
source's in a sub-folder named after it: ``ours-<scale>/``, ``encodeval/``), and returns the PNG paths, empty when no
source has the data. Figures are plain ``matplotlib.figure.Figure`` objects, never registered with pyplot, so nothing is
left open and notebooks show only what ``show`` displays. No torch import here.

The figures of sources other than the paper follow a few rules: a figure whose x axis would hold one value is not
drawn; a line joins neighbouring points of the design, a faint one points across values not run
(`drawing.plot_lines`); a model run with several pretraining seeds is drawn as their mean (`points.pool`, a square);
every point's interval comes from one function, `points.interval`; and a line under the title says what the bars are
(`drawing.bars_note`).

Each figure function's docstring names the notebook that calls it and the files under results/ it reads;
docs/results.md tables every file in figures/ with its notebook, function and inputs.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ...config import PAPER_CPT_K, PAPER_TOTAL_K
from ...io import lr_text
from ..loading import ids
from ..loading import views
from ..loading.compute import AXES, tokens_per_axis, with_flops
from .kit import (DISPLAY_DPI, DPI, MARKER_LABELS, STYLE, Drawn, bars_note, by_size, control_lines,
                      draw_per_source, finish, palette, palettes, panels, plot_lines, plot_spread, positions, save,
                      save_source, skipped, source_key, source_label, squares, steps_axis)
from .points import mlm_lead, pool

OBJECTIVE_COLORS = {"MLM": "#4C72B0", "CLM": "#C44E52", "CLM+MLM": "#8172B3"}
BASE_COLORS = {"MLM": OBJECTIVE_COLORS["MLM"], "CLM": OBJECTIVE_COLORS["CLM"]}  # the starting point of CPT
METRIC_NAMES = {"accuracy": "accuracy", "tag_accuracy": "tag accuracy", "span_f1": "span F1", "squad_f1": "F1",
                "ndcg@10": "NDCG@10"}
SHARES = (0, 25, 50, 75, 100)  # Fig. 6 and 11: the % of steps with CLM of the design (`views.biphasic_view`)


def with_metrics(df: pd.DataFrame, metrics: dict) -> pd.DataFrame:
    """Add ``metric`` (axis labels) to our rows of scores or runs: ``metrics`` maps (scale, task group, dataset) to the
    metric its results.json files name (``notebooks.read_metrics``); a group average gets its datasets' metric(s).
    Other rows get none: a panel of them is labelled with the paper's metric (``ids.METRICS``)."""
    def name(source, scale, group, dataset):
        names = [METRIC_NAMES.get(m, m) for (s, g, d), m in metrics.items()
                 if source == "ours" and (s, g) == (scale, group) and dataset in (d, ids.AVG)]
        return " / ".join(dict.fromkeys(names)) or None
    return df.assign(metric=[name(*k) for k in zip(df["source"], df["scale"], df["task_group"], df["dataset"])])


def _obj(df: pd.DataFrame) -> pd.Series:
    return df["objective"].str.upper()


def fig2(scores: pd.DataFrame, out_dir: str | Path, controls: pd.DataFrame | None = None) -> Drawn:
    """Fig. 2: MLM-40% vs CLM, task-group averages, against model size (ours: the mean over pretraining seeds). A
    source of ours with one model size has no axis of sizes: its figure puts the two objectives side by side at
    that size (not drawn with one objective). Notebook 01_scaling; reads, through ``scores`` and ``controls``
    (`results.load`), results/paper/table02.csv ... table05.csv and results/runs/<scale>/*/*/*/lr*_sd*/results.json."""
    v = ids.group_averages(views.scaling_view(pool(scores)))
    v = v[(v["objective"] == "clm") | (v["mask_ratio"] == 40)].assign(Objective=_obj)
    sizes = v.groupby(["source", "scale"])["size"].nunique()
    single = {key for key, n in sizes.items() if n == 1 and key[0] != "paper"}
    objectives = lambda d: positions(d["Objective"], list(OBJECTIVE_COLORS).index)  # noqa: E731

    def draw(ax, d):
        if source_key(d) in single:
            plot_lines(ax, d, "Objective", "Objective", OBJECTIVE_COLORS, xpos=objectives(d))
            ax.set_xlabel("objective")
        else:
            plot_lines(ax, d, "size", "Objective", OBJECTIVE_COLORS, dodge=0.12,
                       xpos=positions(d["size"], ids.size_key))

    def reference(ax, c, d):
        control_lines(ax, c, d, xpos=None if source_key(d) in single else positions(d["size"], ids.size_key))
    return draw_per_source(
        v, out_dir, "fig02_mlm_vs_clm",
        lambda d: ("Fig. 2: MLM (40%) vs CLM at size " + d["size"].iloc[0] if source_key(d) in single
                   else "Fig. 2: MLM (40%) vs CLM by model size"),
        draw, "model size", "objective", tables="Tables 2-5", controls=controls, reference=reference,
        x=lambda d: "Objective" if source_key(d) in single else "size")


def _scale_lines(frame: pd.DataFrame) -> list[str]:
    """The legend label of each row's line in a figure across scales: "paper (610M)", "ours, mini (mini-m)"; a scale
    whose one size bears its name (the twin) once: "ours, twin"."""
    return [("paper" if src == "paper" else f"ours, {scale}") + ("" if z == scale else f" ({z})")
            for src, scale, z in zip(frame["source"], frame["scale"], frame["size"])]


def fig3(scores: pd.DataFrame, out_dir: str | Path, controls: pd.DataFrame | None = None) -> Drawn:
    """Fig. 3: MLM task-group averages against the masking ratio, one line per model size. Notebook 01_scaling;
    reads results/paper/table02.csv ... table05.csv and results/runs/<scale>/*/*/*/lr*_sd*/results.json (``scores``,
    ``controls``)."""
    v = ids.group_averages(views.scaling_view(pool(scores)))
    v = v[v["objective"] == "mlm"]
    colors = palettes(v, "crest", lambda d: ids.ordered_sizes(d["size"]))
    return draw_per_source(
        v, out_dir, "fig03_masking_ratio", "Fig. 3: MLM performance by masking ratio",
        lambda ax, d: plot_lines(ax, d, "mask_ratio", "size", colors[source_key(d)]), "masking ratio (%)", "model size",
        tables="Tables 2-5", controls=controls, x="mask_ratio",
        reference=lambda ax, c, d: control_lines(ax, c, d, colors=colors[source_key(d)]))


def fig3_scales(scores: pd.DataFrame, out_dir: str | Path) -> Drawn:
    """Fig. 3 across scales: each MLM line of Fig. 3 (a source, scale and size with two masking ratios or more)
    centered on its own mean over the ratios it ran, so that a scale of ours and the paper's sizes share one axis
    per task group (their datasets differ: their shapes, which ratio is best and by how much, compare; their levels
    do not). Bars: each point's 95% half-width before centering (ours over its pretraining seeds, `points.pool`;
    the paper's printed ±). One figure for all (``figures/fig03_scales``), drawn only when a source of ours has a
    ratio sweep; else an empty list. Notebook 01_scaling; reads results/paper/table02.csv ... table05.csv and
    results/runs/<scale>/*/*/*/lr*_sd*/results.json (``scores``)."""
    v = ids.group_averages(views.scaling_view(pool(scores)))
    v = v[(v["objective"] == "mlm") & v["mask_ratio"].notna()]
    line = ["source", "scale", "size", "task_group"]
    v = v[v.groupby(line)["mask_ratio"].transform("nunique") > 1]
    if not (v["source"] != "paper").any():
        return Drawn()
    v = v.assign(score=v["score"] - v.groupby(line)["score"].transform("mean"),
                 line=_scale_lines(v))
    first = v.drop_duplicates("line")  # the paper's sizes from the smallest (Fig. 3's colours), then ours
    lines = sorted(first["line"], key=dict(zip(first["line"], zip(
        first["source"] != "paper", first["scale"], first["size"].map(ids.size_key)))).get)
    paper = [line for line in lines if line.startswith("paper")]
    colors = {**palette("crest", paper), **palette("flare", lines[len(paper):])}
    groups = [g for g in ids.GROUPS if g in set(v["task_group"])]
    with matplotlib.rc_context(STYLE):
        fig, axes = panels(len(groups))
        for ax, group in zip(axes, groups):
            ax.axhline(0, color="0.3", lw=0.8)
            plot_lines(ax, v[v["task_group"] == group], "mask_ratio", "line", colors, dodge=0.8)
            ax.set_title(group)
            ax.set_xlabel("masking ratio (%)")
            ax.set_ylabel("centered score")
        finish(fig, axes, "Fig. 3 across scales: MLM by masking ratio, each line minus its mean over the ratios",
               None, "bars: 95% half-width before centering (ours: over pretraining seeds; the paper's: printed ±); "
               "the datasets differ: compare shapes, not levels")
    return Drawn([save(fig, out_dir, "fig03_scales")])


def fig4(scores: pd.DataFrame, out_dir: str | Path, controls: pd.DataFrame | None = None) -> Drawn:
    """Fig. 4: CLM vs MLM-40% task-group averages against the pretraining step (intermediate checkpoints). Notebook
    02_data_efficiency; reads results/paper/table06.csv ... table09.csv and
    results/runs/<scale>/*/*/*/lr*_sd*/results.json (``scores``, ``controls``)."""
    v = ids.group_averages(views.data_efficiency_view(pool(scores)))
    v = v.assign(Objective=_obj)

    def draw(ax, d):
        plot_lines(ax, d, "steps", "Objective", OBJECTIVE_COLORS, band=True)
        steps_axis(ax, d["scale"].iloc[0])
    return draw_per_source(
        v, out_dir, "fig04_data_efficiency", "Fig. 4: performance during pretraining", draw, "pretraining step",
        "objective", tables="Tables 6-9", per_size=True, controls=controls, x="steps",
        note=lambda d: bars_note(d, "bands"))


def fig5(runs: pd.DataFrame, out_dir: str | Path, split: str = "test") -> Drawn:
    """Fig. 5: centered scores over seeds and learning rates (the paper's: those in [1e-5, 1e-4]; a scale of ours:
    its whole stability grid, `views.centered_scores`), CLM vs MLM-40%, mean +- sd. Notebook 03_stability; reads,
    through ``runs``, results/runs/<scale>/*/*/*/lr*_sd*/results.json (results/runs/stability/<scale>/ where a scale
    has a stability grid), and results/samples/encodeval-610m-sst2.csv (the authors' sample,
    ``split="validation"``)."""
    c = views.centered_scores(runs, split=split)
    # the figure draws pretraining seed 0; claim 4 pools every pretraining seed a source has: the caption says so
    pretraining_seeds = views.centered_scores(runs, split=split, every_seed=True).groupby("source")["pretrain_seed"]

    def note(d):
        lrs, (lo, hi) = sorted(d["lr"].unique()), views.STABILITY_LRS
        over = f"{len(lrs)} learning rates ({lr_text(lrs[0])} to {lr_text(lrs[-1])}) x {d['seed'].nunique()} seeds"
        n = pretraining_seeds.nunique().get(d["source"].iloc[0], 1)
        over += f" of pretraining seed 0 (claim 4 pools all {n} pretraining seeds)" if n > 1 else ""
        if lrs[0] >= lo and lrs[-1] <= hi:
            return f"bars: ±1 sd over {over}; dots: runs"
        return (f"bars: ±1 sd over the whole grid, {over}; the paper's: over {lr_text(lo)} to {lr_text(hi)} only; "
                "dots: runs")
    return draw_per_source(
        c.assign(Objective=_obj(c)), out_dir, "fig05_lr_sensitivity", f"Fig. 5: learning-rate sensitivity ({split})",
        lambda ax, d: plot_spread(ax, d, "Objective", OBJECTIVE_COLORS), "", "objective", ylabel="centered",
        per_size=True, note=note)


def fig6(scores: pd.DataFrame, out_dir: str | Path, controls: pd.DataFrame | None = None) -> Drawn:
    """Fig. 6: CLM-then-MLM under fixed budgets: task-group averages against the % of steps given to CLM (lines
    between neighbouring splits of the design, ``SHARES``; faint ones across splits not run). Notebook 04_biphasic;
    reads results/paper/table10.csv ... table13.csv and results/runs/<scale>/*/*/*/lr*_sd*/results.json (``scores``,
    ``controls``)."""
    v = ids.group_averages(views.biphasic_view(pool(scores)))
    v = v[_main_size(v)].assign(Budget=lambda d: d["budget"].map(ids.step_label))
    colors = palettes(v, "flare", lambda d: [ids.step_label(b) for b in sorted(d["budget"].unique())])
    return draw_per_source(
        v, out_dir, "fig06_biphasic", "Fig. 6: CLM-then-MLM splits of fixed budgets",
        lambda ax, d: plot_lines(ax, d, "clm_share", "Budget", colors[source_key(d)], grid=SHARES),
        "% of steps with CLM", "budget (steps)", tables="Tables 10-13", per_size=True, controls=controls, x="clm_share",
        note=lambda d: bars_note(d) + _not_run(d))


def _not_run(rows: pd.DataFrame) -> str:
    """The line under Fig. 6's title on the splits of the design its budgets skip (joined by a faint line)."""
    gaps = sorted({g for _, b in rows.groupby("budget") for g in skipped(b["clm_share"], SHARES)})
    return f"; faint lines: across splits not run ({', '.join(f'{g:g}%' for g in gaps)} CLM)" if gaps else ""


def _main_size(view: pd.DataFrame) -> np.ndarray:
    """Whether a row is of the size its source and scale ran the budget x split grid on: the one with the most
    two-phase models."""
    main = {}
    for key, part in view.groupby(["source", "scale"]):
        counts = part.groupby("size")["model"].nunique()
        main[key] = min(counts.index, key=lambda s: (-counts[s], ids.size_key(s)))
    return np.array([main[source, scale] == size
                     for source, scale, size in zip(view["source"], view["scale"], view["size"])], dtype=bool)


def fig7(runs: pd.DataFrame, out_dir: str | Path) -> Drawn:
    """Fig. 7: spread over masking ratios (and seeds) of centered scores, MLM-only vs CLM+MLM, mean +- sd; only for
    the sizes that have CLM+MLM runs (the comparison needs both families); every pretraining seed, each centered on
    its own mean as claim 6 reads them; the note under the title gives the paper's finding in words (it prints no
    numbers for it). Notebook 04_biphasic; reads, through ``runs``, results/runs/<scale>/*/*/*/lr*_sd*/results.json."""
    colors = {"MLM": OBJECTIVE_COLORS["MLM"], "CLM+MLM": OBJECTIVE_COLORS["CLM+MLM"]}
    spread = views.masking_ratio_spread(runs, every_seed=True)
    both = spread.groupby(["source", "scale", "size"])["family"].transform(lambda f: f.nunique() == 2)
    return draw_per_source(
        spread[both.astype(bool)], out_dir, "fig07_masking_robustness", "Fig. 7: sensitivity to the masking ratio",
        lambda ax, d: plot_spread(ax, d, "family", colors), "", "pretraining", ylabel="centered", per_size=True,
        note=lambda d: f"bars: ±1 sd over {d['mask_ratio'].nunique()} masking ratios x seeds; dots: runs; the "
                       "paper's Fig. 7 (610M, no numbers printed): CLM+MLM is less sensitive to the masking ratio")


def fig8(scores: pd.DataFrame, out_dir: str | Path, controls: pd.DataFrame | None = None) -> Drawn:
    """Fig. 8: base model vs after the longest MLM continued pretraining, for CLM- and MLM-based models. Notebook
    05_cpt; reads results/paper/table14.csv ... table17.csv and results/runs/<scale>/*/*/*/lr*_sd*/results.json
    (``scores``, ``controls``)."""
    v = ids.group_averages(views.cpt_view(pool(scores)))
    longest = v.groupby(["source", "scale"])["cpt_steps"].transform("max")
    v = v[(v["cpt_steps"] == 0) | (v["cpt_steps"] == longest)]
    v = v.assign(stage=["Base" if c == 0 else f"+{ids.step_label(c)} MLM CPT" for c in v["cpt_steps"]])
    return draw_per_source(
        v, out_dir, "fig08_cpt", "Fig. 8: continued pretraining with MLM",
        lambda ax, d: plot_lines(ax, d, "stage", "base", BASE_COLORS, dodge=0.06,
                                 xpos=positions(d["stage"], lambda s: s != "Base")),
        "", "starting point", tables="Tables 14-17", controls=controls, x="stage")


def _cpt_lengths(view: pd.DataFrame) -> list[int]:
    """The CPT lengths of the paper's design (`config.PAPER_CPT_K` of its `config.PAPER_TOTAL_K`-thousand-step base
    runs) at the base budget of ``view``'s CPT runs, with 0 (the base model) and the lengths that were run."""
    base = (view["steps"] - view["cpt_steps"])[view["cpt_steps"] > 0]
    design = {round(b * k / PAPER_TOTAL_K) for b in base.unique() for k in PAPER_CPT_K}
    return sorted({0, *design, *view["cpt_steps"]})


def fig9(scores: pd.DataFrame, out_dir: str | Path, controls: pd.DataFrame | None = None) -> Drawn:
    """Fig. 9: task-group averages against the CPT length, for CLM- and MLM-based models (lines only between
    neighbouring lengths of the design, `_cpt_lengths`). Notebook 05_cpt; reads results/paper/table14.csv ...
    table17.csv and results/runs/<scale>/*/*/*/lr*_sd*/results.json (``scores``, ``controls``)."""
    def draw(ax, d):
        plot_lines(ax, d, "cpt_steps", "base", BASE_COLORS, grid=_cpt_lengths(d), dodge=0.015 * d["cpt_steps"].max())
        steps_axis(ax, d["scale"].iloc[0])
    v = ids.group_averages(views.cpt_view(pool(scores)))
    return draw_per_source(
        v, out_dir, "fig09_cpt_length", "Fig. 9: performance by CPT length", draw, "MLM continued-pretraining steps",
        "starting point", tables="Tables 14-17", controls=controls, x="cpt_steps")


def fig10(scores: pd.DataFrame, out_dir: str | Path, architecture: dict,
          controls: pd.DataFrame | None = None) -> Drawn:
    """Fig. 10: Fig. 4 against training FLOPs (``with_flops``), for sizes of known shapes or parameter counts; the
    x axis names the rule (``FLOPS_RULES``). Notebook 02_data_efficiency; reads results/paper/table06.csv ...
    table09.csv and results/runs/<scale>/*/*/*/lr*_sd*/results.json (``scores``, ``controls``), and for ``architecture``
    results/paper/table01.csv and each run's results/runs/<scale>/<run_id>/meta.json and config.yaml."""
    v = with_flops(ids.group_averages(views.data_efficiency_view(pool(scores))),
                   architecture)
    v = v.assign(Objective=_obj)

    def draw(ax, d):
        exp = int(np.floor(np.log10(d["flops"].max())))
        plot_lines(ax, d.assign(flops=d["flops"] / 10**exp), "flops", "Objective", OBJECTIVE_COLORS, band=True)
        ax.set_xlabel(f"training FLOPs (x 1e{exp})\n{d['flops_rule'].iloc[0]} rule")  # one line overran a panel
    return draw_per_source(
        v, out_dir, "fig10_data_efficiency_flops", "Fig. 10: performance against training FLOPs", draw,
        "training FLOPs", "objective", tables="Tables 6-9", per_size=True, controls=controls, x="steps",
        one="pretraining step", note=lambda d: bars_note(d, "bands"))


def _lead_panel(ax, rows: pd.DataFrame, x: str, colors: dict) -> None:
    """One panel of `fig4_scales`: per line (source, scale, size) of ``rows`` (`mlm_lead`), the stable-phase
    checkpoints joined against column ``x``, the decayed final models hollow (squares: means over seeds)."""
    ax.axhline(0, color="0.3", lw=0.8)
    for line, d in rows.groupby("line", sort=False):
        c, mid, end = colors[line], d[~d["final"]].sort_values(x), d[d["final"]]
        ax.errorbar(mid[x], mid["gap"], yerr=mid["gap_ci"], marker="o", ms=4, capsize=2, color=c, label=line)
        ax.errorbar(end[x], end["gap"], yerr=end["gap_ci"], fmt="o", mfc="white", color=c, ms=6, capsize=2,
                    label=MARKER_LABELS[0])
        squares(ax, end, c, x=x, y="gap", mfc="white", ms=6.5)
    ax.set_xscale("log")


LEAD_BARS = ("bars: ours, the verdicts' 95% interval of the difference (the test on both families' pretraining "
             "seeds, paired where they share them; else pooled);\nthe paper's, its printed ± combined")


def fig4_scales(scores: pd.DataFrame, out_dir: str | Path, architecture: dict) -> Drawn:
    """Fig. 4 across scales: MLM-40% minus CLM (``mlm_lead``, bars = the difference's 95% half-width, the verdicts'
    for ours: ``LEAD_BARS``) against
    pretraining tokens per parameter, one row of task-group panels per axis of ``AXES`` (`tokens_per_axis`: per body
    parameter, per body+embedding parameter, per parameter of any kind; an axis without the counts of any drawn size
    is left out), for every source and scale with intermediate checkpoints (the paper's 610M, each scale of ours):
    the checkpoints of the stable phase joined by a line, the decayed final models as hollow markers (squares where
    they average several pretraining seeds). Above zero, MLM is ahead. One figure for all
    (``figures/fig04_scales``); an empty list when no source has both. Notebook 02_data_efficiency; reads the
    paper's 610M in results/paper/table02.csv ... table09.csv and results/runs/<scale>/*/*/*/lr*_sd*/results.json
    (``scores``), and for ``architecture`` results/paper/table01.csv and each run's
    results/runs/<scale>/<run_id>/meta.json and config.yaml."""
    per_axis = tokens_per_axis(architecture)
    rows = mlm_lead(scores)
    rows = rows[rows["size"].isin(list(architecture))]
    if rows.empty:
        return Drawn()
    rows = rows.assign(**{axis: [s * per_axis[axis][z] for s, z in zip(rows["steps"], rows["size"])]
                          for axis in AXES})
    rows["line"] = _scale_lines(rows)
    colors = palette("colorblind", list(dict.fromkeys(rows.sort_values("body")["line"])))
    groups = [g for g in ids.GROUPS if g in set(rows["task_group"])]
    axes_drawn = [axis for axis in AXES if rows[axis].notna().any()]
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(max(3.8 * len(groups), 6.4), 3.4 * len(axes_drawn)), layout="constrained")
        grid = fig.subplots(len(axes_drawn), len(groups), squeeze=False)
        for row, axis in zip(grid, axes_drawn):
            for ax, group in zip(row, groups):
                _lead_panel(ax, rows[(rows["task_group"] == group) & rows[axis].notna()], axis, colors)
                ax.set_title(group)
                ax.set_xlabel(AXES[axis])
                ax.set_ylabel("MLM-40% minus CLM")
        finish(fig, list(grid.ravel()), "Fig. 4 across scales: MLM-40% minus CLM", None, LEAD_BARS)
    return Drawn([save(fig, out_dir, "fig04_scales")])


def fig11(scores: pd.DataFrame, out_dir: str | Path, controls: pd.DataFrame | None = None) -> Drawn:
    """Fig. 11: CLM-then-MLM at the other model sizes (the paper's 1B, 25%-75% only), at their full budget. Notebook
    04_biphasic; reads results/runs/<scale>/*/*/*/lr*_sd*/results.json (``scores``, ``controls``: the paper prints no
    numbers for it)."""
    v = ids.group_averages(views.biphasic_view(pool(scores)))
    v = v[~_main_size(v)]
    v = v[v["budget"] == v.groupby(["source", "scale", "size"])["budget"].transform("max")]
    v = v.merge(v[v["clm_share"].between(1, 99)][["source", "scale", "size"]].drop_duplicates())  # sizes with a split
    colors = palettes(v, "crest", lambda d: ids.ordered_sizes(d["size"]))
    return draw_per_source(
        v, out_dir, "fig11_biphasic_sizes", "Fig. 11: CLM-then-MLM at other model sizes",
        lambda ax, d: plot_lines(ax, d, "clm_share", "size", colors[source_key(d)], grid=SHARES), "% of steps with CLM",
        "model size", controls=controls, x="clm_share",
        reference=lambda ax, c, d: control_lines(ax, c, d, colors=colors[source_key(d)]))


def fig12(logs: pd.DataFrame, out_dir: str | Path, source: str = "ours", scale: str = "") -> Drawn:
    """Fig. 12: pretraining loss against step for each CPT length, CLM-based (red) vs MLM-based (blue), the mean over
    the CPT runs' pretraining seeds at each step (they were drawn as one zigzag line); each curve follows its run's
    lineage (``views.cpt_loss_curves``): the base run's loss, then the CPT's MLM loss from the
    step it starts at (a vertical line). The CLM-based curve's base part is a CLM loss: dotted. Notebook 05_cpt;
    reads, through ``logs`` (`run_tree.load_pretrain_logs`), results/runs/<scale>/<run_id>/pretrain.csv and
    config.yaml (``init``: the run a CPT continues)."""
    curves = views.cpt_loss_curves(logs)
    paths = []
    for size, part in by_size(curves):
        lengths = sorted(part["cpt_steps"].unique())
        fig, axes = panels(len(lengths))
        with matplotlib.rc_context(STYLE):
            for ax, length in zip(axes, lengths):
                p = part[part["cpt_steps"] == length]
                for base, color in BASE_COLORS.items():  # pretraining seeds: their mean at each step, one line
                    runs = p[p["base"] == base]
                    d = runs.groupby("step", as_index=False).agg(loss=("loss", "mean"), start=("start", "first"))
                    seeds = f" (mean of {runs['model'].nunique()} seeds)" if runs["model"].nunique() > 1 else ""
                    base_part = d["step"] <= d["start"]
                    if base == "CLM":
                        ax.plot(d["step"][base_part], d["loss"][base_part], color=color, lw=1, ls=":",
                                label=f"CLM-based, CLM loss (before CPT){seeds}")
                        d = d[~base_part]
                    ax.plot(d["step"], d["loss"], color=color, lw=1, label=f"{base}-based, MLM loss{seeds}")
                for start in sorted(p["start"].unique()):
                    ax.axvline(start, color="0.5", ls="--", lw=1, label="CPT starts", zorder=1)
                ax.set(title=f"{ids.step_label(length)}-step CPT", xlabel="step", ylabel="training loss")
                steps_axis(ax, scale)
            finish(fig, axes, f"Fig. 12: pretraining loss, {size} ({source_label(source, scale)})", None)
        file = f"fig12_cpt_loss_{size}" if curves["size"].nunique() > 1 else "fig12_cpt_loss"
        paths.append(save_source(fig, out_dir, source, scale, file))
    return Drawn(paths)


def show(paths: list[Path], absent: str = "No source has the data this figure needs.") -> None:
    """Display the PNGs in a notebook, each at `drawing.DISPLAY_DPI` (`display_width`: a panel is as large in every
    figure); first say which figures of ours were not drawn and why (`Drawn.skipped`), and print ``absent`` when
    nothing was drawn or skipped."""
    from IPython.display import Image, display

    skipped = getattr(paths, "skipped", [])
    if not paths and not skipped:
        print(absent)
    for line in skipped:
        print(line)
    for path in paths:
        display(Image(filename=str(path), width=display_width(path)))


def display_width(png: Path) -> int:
    """The width, in pixels, a notebook shows ``png`` at: its width in inches (written at `drawing.DPI`) at
    `drawing.DISPLAY_DPI`."""
    with open(png, "rb") as f:
        width = int.from_bytes(f.read(24)[16:20], "big")  # the IHDR chunk's width
    return round(width * DISPLAY_DPI / DPI)
