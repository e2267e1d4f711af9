"""The paper's figures: one function per figure, one style, PNG and PDF written deterministically.

Every function takes the tidy results of mlmclm.analysis.results (``scores`` or ``runs``, any mix of sources) and an
output folder, draws one file per source that has the data (the paper's figures at the top of the folder, another
source's in a sub-folder named after it: ``ours-<scale>/``, ``encodeval/``), and returns the PNG paths, empty when no
source has the data. Figures are plain ``matplotlib.figure.Figure`` objects, never registered with pyplot, so nothing is
left open and notebooks show only what ``show`` displays. No torch import here.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.ticker import EngFormatter

from . import results as R

STYLE = {**sns.axes_style("whitegrid"), **sns.plotting_context("paper", font_scale=1.1),
         "font.family": "DejaVu Sans", "axes.titleweight": "bold", "legend.frameon": False,
         "svg.hashsalt": "mlmclm", "pdf.fonttype": 42}
OBJECTIVE_COLORS = {"MLM": "#4C72B0", "CLM": "#C44E52", "CLM+MLM": "#8172B3"}
BASE_COLORS = {"MLM": OBJECTIVE_COLORS["MLM"], "CLM": OBJECTIVE_COLORS["CLM"]}  # the starting point of CPT
PNG_METADATA = {"Software": None}
PDF_METADATA = {"Creator": None, "Producer": None, "CreationDate": None}
SOURCE_LABELS = {"paper": "paper", "ours": "this repository's runs", "encodeval": "EncodEval per-run results",
                 "encodeval-sample": "authors' sample (EncodEval, 610M, SST-2 only)"}


# ----------------------------------------------------------------------------------------------- plumbing


def _label(source: str, scale: str, paper_tables: str = "") -> str:
    if source == "paper":
        return f"paper, {paper_tables}" if paper_tables else "paper"
    return SOURCE_LABELS.get(source, source) + (f", {scale}" if source == "ours" else "")


def _by_source(df: pd.DataFrame):
    for (source, scale), part in df.groupby(["source", "scale"], sort=False):
        yield source, scale, part


def _by_size(df: pd.DataFrame):
    for size in R.ordered_sizes(df["size"]):
        yield size, df[df["size"] == size]


def _save(fig: Figure, out_dir: str | Path, source: str, scale: str, name: str) -> Path:
    return save(fig, Path(out_dir) / R.output_subdir(source, scale), name)


def save(fig: Figure, out_dir: str | Path, name: str) -> Path:
    """Write ``<name>.png`` and ``<name>.pdf`` without timestamps or version strings; return the PNG path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    png = out / f"{name}.png"
    with matplotlib.rc_context(STYLE):
        fig.savefig(png, dpi=150, metadata=PNG_METADATA)
        fig.savefig(out / f"{name}.pdf", metadata=PDF_METADATA)
    return png


def _panels(n: int, width: float = 3.2, height: float = 2.9) -> tuple[Figure, list]:
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(max(width * n, 6.4), height), layout="constrained")
        axes = fig.subplots(1, n, squeeze=False)[0]
    return fig, list(axes)


def _finish(fig: Figure, axes: list, title: str, legend_title: str | None) -> None:
    handles = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    if handles:
        fig.legend(list(handles.values()), list(handles), title=legend_title, loc="outside lower center",
                   ncol=len(handles))
    fig.suptitle(textwrap.fill(title, int(fig.get_figwidth() * 12)), fontsize="medium")


def _group_grid(df: pd.DataFrame, draw, title: str, xlabel: str, legend_title: str | None, ylabel: str = "",
                groups=R.GROUPS) -> Figure:
    """One panel per task group present; ``draw(ax, rows)`` draws a panel."""
    groups = [g for g in groups if g in set(df["task_group"])]
    with matplotlib.rc_context(STYLE):
        fig, axes = _panels(len(groups))
        for ax, group in zip(axes, groups):
            draw(ax, df[df["task_group"] == group])
            ax.set_title(group)
            ax.set_xlabel(xlabel)
            ax.set_ylabel(ylabel or f"{R.METRICS.get(group, 'score')}")
        _finish(fig, axes, title, legend_title)
    return fig


def _lines(ax, df: pd.DataFrame, x: str, hue: str, colors: dict, band: bool = False, xpos: dict | None = None,
           dodge: float = 0.0) -> None:
    """score +- ci against ``x``, one line per ``hue`` level (in ``colors``' order), error bars or a band."""
    levels = [h for h in colors if h in set(df[hue])]
    for i, level in enumerate(levels):
        d = df[df[hue] == level]
        xs = d[x].map(xpos) if xpos else d[x].astype(float)
        d = d.assign(_x=xs.astype(float) + dodge * (i - (len(levels) - 1) / 2)).sort_values("_x")
        ci = d["ci"].astype(float).fillna(0)
        if band:
            ax.plot(d["_x"], d["score"], marker="o", ms=3.5, color=colors[level], label=str(level))
            ax.fill_between(d["_x"], d["score"] - ci, d["score"] + ci, color=colors[level], alpha=0.2, lw=0)
        else:
            ax.errorbar(d["_x"], d["score"], yerr=ci, marker="o", ms=4, capsize=2.5, color=colors[level],
                        label=str(level))
    if xpos:
        ax.set_xticks(list(xpos.values()), list(xpos))
        ax.set_xlim(min(xpos.values()) - 0.4, max(xpos.values()) + 0.4)


def _spread(ax, df: pd.DataFrame, hue: str, colors: dict) -> None:
    """Per dataset and hue level: every run's centered score (light dots) and mean +- sd (bar)."""
    datasets = R.dataset_order(df["dataset"])
    levels = [h for h in colors if h in set(df[hue])]
    width = 0.5 / max(len(levels), 1)
    for i, dataset in enumerate(datasets):
        for j, level in enumerate(levels):
            vals = np.sort(df[(df["dataset"] == dataset) & (df[hue] == level)]["centered"].to_numpy())
            if len(vals) == 0:
                continue
            x = i + width * (j - (len(levels) - 1) / 2)
            jitter = ((np.arange(len(vals)) * 0.618034) % 1 - 0.5) * width * 0.7  # deterministic scatter
            ax.scatter(x + jitter, vals, s=6, color=colors[level], alpha=0.35, lw=0)
            sd = vals.std(ddof=1) if len(vals) > 1 else 0.0
            ax.errorbar([x], [vals.mean()], yerr=[sd], fmt="o", ms=4, capsize=3, color=colors[level],
                        label=str(level))
    ax.axhline(0, color="0.5", lw=0.8, zorder=0)
    ax.set_xticks(range(len(datasets)), datasets)
    ax.set_xlim(-0.6, len(datasets) - 0.4)


def _palette(name: str, levels) -> dict:
    levels = list(levels)
    return dict(zip(levels, sns.color_palette(name, len(levels)).as_hex()))


def _obj(df: pd.DataFrame) -> pd.Series:
    return df["objective"].str.upper()


# ----------------------------------------------------------------------------------------------- figures


def _draw(df: pd.DataFrame, out_dir, name: str, title: str, draw, xlabel: str, legend: str, *, tables: str = "",
          ylabel: str = "", per_size: bool = False) -> list[Path]:
    """One figure per source (and per size if ``per_size``) of task-group panels; return the PNG paths."""
    paths = []
    for source, scale, part in _by_source(df):
        for size, rows in _by_size(part) if per_size else [("", part)]:
            what = f"{title}, {size}" if size else title
            fig = _group_grid(rows, draw, f"{what} ({_label(source, scale, tables)})", xlabel, legend, ylabel)
            file = f"{name}_{size}" if size and part["size"].nunique() > 1 else name
            paths.append(_save(fig, out_dir, source, scale, file))
    return paths


def _positions(values, key=None) -> dict:
    return {v: i for i, v in enumerate(sorted(set(values), key=key))}


def _steps_axis(ax) -> None:
    ax.xaxis.set_major_formatter(EngFormatter(sep=""))


def fig2(scores: pd.DataFrame, out_dir: str | Path) -> list[Path]:
    """Fig. 2: MLM-40% vs CLM, task-group averages, against model size."""
    v = R.group_averages(R.scaling_view(scores))
    v = v[(v["objective"] == "clm") | (v["mask_ratio"] == 40)].assign(Objective=_obj)
    return _draw(v, out_dir, "fig02_mlm_vs_clm", "Fig. 2: MLM (40%) vs CLM by model size",
                 lambda ax, d: _lines(ax, d, "size", "Objective", OBJECTIVE_COLORS, dodge=0.12,
                                      xpos=_positions(d["size"], R.size_key)),
                 "model size", "objective", tables="Tables 2-5")


def fig3(scores: pd.DataFrame, out_dir: str | Path) -> list[Path]:
    """Fig. 3: MLM task-group averages against the masking ratio, one line per model size."""
    v = R.group_averages(R.scaling_view(scores))
    v = v[v["objective"] == "mlm"]
    colors = {src: _palette("crest", R.ordered_sizes(part["size"])) for src, part in v.groupby("source")}
    return _draw(v, out_dir, "fig03_masking_ratio", "Fig. 3: MLM performance by masking ratio",
                 lambda ax, d: _lines(ax, d, "mask_ratio", "size", colors[d["source"].iloc[0]]),
                 "masking ratio (%)", "model size", tables="Tables 2-5")


def fig4(scores: pd.DataFrame, out_dir: str | Path) -> list[Path]:
    """Fig. 4: CLM vs MLM-40% task-group averages against the pretraining step (intermediate checkpoints)."""
    v = R.group_averages(R.data_efficiency_view(scores)).assign(Objective=_obj)

    def draw(ax, d):
        _lines(ax, d, "steps", "Objective", OBJECTIVE_COLORS, band=True)
        _steps_axis(ax)
    return _draw(v, out_dir, "fig04_data_efficiency", "Fig. 4: downstream performance during pretraining", draw,
                 "pretraining step", "objective", tables="Tables 6-9", per_size=True)


def fig5(runs: pd.DataFrame, out_dir: str | Path, split: str = "test") -> list[Path]:
    """Fig. 5: centered scores over seeds and learning rates in [1e-5, 1e-4], CLM vs MLM-40%, mean +- sd."""
    c = R.centered_scores(runs, split=split)
    return _draw(c.assign(Objective=_obj(c)), out_dir, "fig05_lr_sensitivity",
                 f"Fig. 5: fine-tuning learning-rate sensitivity ({split} scores)",
                 lambda ax, d: _spread(ax, d, "Objective", OBJECTIVE_COLORS), "", "objective",
                 ylabel="centered score", per_size=True)


def fig6(scores: pd.DataFrame, out_dir: str | Path) -> list[Path]:
    """Fig. 6: CLM-then-MLM under fixed budgets: task-group averages against the % of steps given to CLM."""
    v = R.group_averages(R.biphasic_view(scores))
    v = v[v["size"] == v["source"].map(_main_sizes(v))].assign(Budget=lambda d: d["budget"].map(R.step_label))
    colors = {src: _palette("flare", [R.step_label(b) for b in sorted(part["budget"].unique())])
              for src, part in v.groupby("source")}  # per source: one source's figure never depends on another's
    return _draw(v, out_dir, "fig06_biphasic", "Fig. 6: CLM-then-MLM splits under fixed budgets",
                 lambda ax, d: _lines(ax, d, "clm_share", "Budget", colors[d["source"].iloc[0]]), "% of steps with CLM",
                 "budget (steps)", tables="Tables 10-13", per_size=True)


def _main_sizes(view: pd.DataFrame) -> dict:
    """Per source, the size it ran the budget x split grid on: the one with the most two-phase models."""
    out = {}
    for source, part in view.groupby("source"):
        counts = part.groupby("size")["model"].nunique()
        out[source] = sorted(counts.index, key=lambda s: (-counts[s], R.size_key(s)))[0]
    return out


def fig7(runs: pd.DataFrame, out_dir: str | Path) -> list[Path]:
    """Fig. 7: spread over masking ratios (and seeds) of centered scores, MLM-only vs CLM+MLM, mean +- sd."""
    colors = {"MLM": OBJECTIVE_COLORS["MLM"], "CLM+MLM": OBJECTIVE_COLORS["CLM+MLM"]}
    return _draw(R.masking_ratio_spread(runs), out_dir, "fig07_masking_robustness",
                 "Fig. 7: sensitivity to the masking ratio", lambda ax, d: _spread(ax, d, "family", colors), "",
                 "pretraining", ylabel="centered score", per_size=True)


def fig8(scores: pd.DataFrame, out_dir: str | Path) -> list[Path]:
    """Fig. 8: base model vs after the longest MLM continued pretraining, for CLM- and MLM-based models."""
    v = R.group_averages(R.cpt_view(scores))
    longest = v.groupby("source")["cpt_steps"].transform("max")
    v = v[(v["cpt_steps"] == 0) | (v["cpt_steps"] == longest)]
    v = v.assign(stage=["Base" if c == 0 else f"+{R.step_label(c)} MLM CPT" for c in v["cpt_steps"]])
    return _draw(v, out_dir, "fig08_cpt", "Fig. 8: continued pretraining with MLM",
                 lambda ax, d: _lines(ax, d, "stage", "base", BASE_COLORS, dodge=0.06,
                                      xpos=_positions(d["stage"], lambda s: s != "Base")),
                 "", "starting point", tables="Tables 14-17")


def fig9(scores: pd.DataFrame, out_dir: str | Path) -> list[Path]:
    """Fig. 9: task-group averages against the CPT length, for CLM- and MLM-based models."""
    def draw(ax, d):
        _lines(ax, d, "cpt_steps", "base", BASE_COLORS)
        _steps_axis(ax)
    return _draw(R.group_averages(R.cpt_view(scores)), out_dir, "fig09_cpt_length", "Fig. 9: performance by CPT length",
                 draw, "MLM continued-pretraining steps", "starting point", tables="Tables 14-17")


def fig10(scores: pd.DataFrame, out_dir: str | Path, architecture: dict) -> list[Path]:
    """Fig. 10: Fig. 4 against training FLOPs (counted by results.with_flops), for sizes of known architecture."""
    v = R.with_flops(R.group_averages(R.data_efficiency_view(scores)), architecture).assign(Objective=_obj)

    def draw(ax, d):
        _lines(ax, d, "flops", "Objective", OBJECTIVE_COLORS, band=True)
        ax.ticklabel_format(axis="x", style="sci", scilimits=(0, 0))
    return _draw(v, out_dir, "fig10_data_efficiency_flops", "Fig. 10: downstream performance against training FLOPs",
                 draw, "training FLOPs", "objective", tables="Tables 6-9", per_size=True)


def fig11(scores: pd.DataFrame, out_dir: str | Path) -> list[Path]:
    """Fig. 11: CLM-then-MLM at the other model sizes (the paper's 1B, 25%-75% only), at their full budget."""
    v = R.group_averages(R.biphasic_view(scores))
    v = v[v["size"] != v["source"].map(_main_sizes(v))]
    v = v[v["budget"] == v.groupby(["source", "size"])["budget"].transform("max")]
    v = v.merge(v[v["clm_share"].between(1, 99)][["source", "size"]].drop_duplicates())  # sizes with a split
    colors = {src: _palette("crest", R.ordered_sizes(part["size"])) for src, part in v.groupby("source")}
    return _draw(v, out_dir, "fig11_biphasic_sizes", "Fig. 11: CLM-then-MLM at other model sizes",
                 lambda ax, d: _lines(ax, d, "clm_share", "size", colors[d["source"].iloc[0]]),
                 "% of steps with CLM", "model size")


def fig12(logs: pd.DataFrame, out_dir: str | Path, source: str = "ours", scale: str = "") -> list[Path]:
    """Fig. 12: pretraining loss against step for each CPT length, CLM-based (red) vs MLM-based (blue)."""
    curves = R.cpt_loss_curves(logs)
    paths = []
    for size, part in _by_size(curves):
        lengths = sorted(part["cpt_steps"].unique())
        fig, axes = _panels(len(lengths))
        with matplotlib.rc_context(STYLE):
            for ax, length in zip(axes, lengths):
                for base, color in BASE_COLORS.items():
                    d = part[(part["cpt_steps"] == length) & (part["base"] == base)].sort_values("step")
                    ax.plot(d["step"], d["loss"], color=color, lw=1, label=f"{base}-based")
                ax.set(yscale="log", title=f"{R.step_label(length)}-step CPT", xlabel="step", ylabel="loss")
                _steps_axis(ax)
            _finish(fig, axes, f"Fig. 12: loss during MLM continued pretraining, {size} ({_label(source, scale)})",
                    "starting point")
        file = f"fig12_cpt_loss_{size}" if curves["size"].nunique() > 1 else "fig12_cpt_loss"
        paths.append(_save(fig, out_dir, source, scale, file))
    return paths


def show(paths: list[Path], absent: str = "No source has the data this figure needs.") -> None:
    """Display the PNGs in a notebook; print ``absent`` when nothing was drawn."""
    from IPython.display import Image, display

    if not paths:
        print(absent)
    for path in paths:
        display(Image(filename=str(path)))
