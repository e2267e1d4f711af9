"""The paper's figures: one function per figure, one style, PNG and PDF written deterministically.

Every function takes the tidy results of mlmclm.analysis.results (``scores`` or ``runs``, any mix of sources) and an
output folder, draws one file per source that has the data (the paper's figures at the top of the folder, another
source's in a sub-folder named after it: ``ours-<scale>/``, ``encodeval/``), and returns the PNG paths, empty when no
source has the data. Figures are plain ``matplotlib.figure.Figure`` objects, never registered with pyplot, so nothing is
left open and notebooks show only what ``show`` displays. No torch import here.

The figures of sources other than the paper follow a few rules: a figure whose x axis would hold one value is not
drawn; a line joins only neighbouring points of the design (`_lines`); a model run with several pretraining seeds is
drawn as their mean (`_pool`, a square); every point's interval comes from one function, `_interval`; and a line under
the title says what the bars are (`_bars`).

Each figure function's docstring names the notebook that calls it and the files under results/ it reads;
docs/results.md tables every file in figures/ with its notebook, function and inputs.
"""

from __future__ import annotations

import json
import math
import textwrap
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.ticker import EngFormatter

from ..config import PAPER_CPT_K, PAPER_TOTAL_K
from ..flops import body_parameters
from ..io import atomic_path, lr_text
from . import results

STYLE = {**sns.axes_style("whitegrid"), **sns.plotting_context("paper", font_scale=1.1),
         "font.family": "DejaVu Sans", "axes.titleweight": "bold", "legend.frameon": False,
         "svg.hashsalt": "mlmclm", "pdf.fonttype": 42}
OBJECTIVE_COLORS = {"MLM": "#4C72B0", "CLM": "#C44E52", "CLM+MLM": "#8172B3"}
BASE_COLORS = {"MLM": OBJECTIVE_COLORS["MLM"], "CLM": OBJECTIVE_COLORS["CLM"]}  # the starting point of CPT
PNG_METADATA = {"Software": None}
PDF_METADATA = {"Creator": None, "Producer": None, "CreationDate": None}
SOURCE_LABELS = {"encodeval": "EncodEval per-run results", "encodeval-sample": "the authors' SST-2 sample"}
# results.json's metric names (meta.metric), as axis labels
METRIC_NAMES = {"accuracy": "accuracy", "tag_accuracy": "tag accuracy", "span_f1": "span F1", "squad_f1": "F1",
                "ndcg@10": "NDCG@10"}
SHARES = (0, 25, 50, 75, 100)  # Fig. 6 and 11: the % of steps with CLM of the design (`results.biphasic_view`)
CONTROL_STYLE = {"majority": dict(color="0.25", ls=":", lw=1.2), "random": dict(color="0.5", ls="--", lw=1.2)}
CONTROL_LABELS = {"majority": "majority class", "random": "random init"}
MARKER_LABELS = ("decayed final model", "mean over pretraining seeds")  # legend entries for a kind of point
# Fig. 10's FLOPs, in a caption: the paper's sizes (Table 1's shapes) and ours (each run folder's parameter counts).
FLOPS_RULES = {
    "App. F": "Hoffmann et al. (2022, App. F) on the size's shapes (Table 1), adapted to GQA and SwiGLU: 3 x forward, "
              "attention scores at full context, embeddings and softmax counted; an MLM step computes output logits "
              "only at its masked positions (the mask ratio of its tokens), a CLM step at all of them",
    "6N": "6 x tokens x (V d + body + f V d): the input embedding, the body's parameters (norms included) and the "
          "output layer on a fraction f of the tokens (the mask ratio for MLM steps, 1 for CLM steps), with the counts "
          "of the run folder's meta.json and its config.yaml's tokens a step; App. F without its attention-score and "
          "softmax terms, which need the layer count (a few percent at a 64-token context)",
}
AXES = results.AXES  # the axes of tokens per parameter and their labels (defined in results, for tables too)
# The parameters each axis counts (`parameter_counts`)
AXIS_PARTS = {"body": ("body",), "body+embedding": ("body", "embeddings"),
              "all": ("body", "embeddings", "output_layer")}
# Table 1 does not say whether the paper's models tie their output layer to the input embedding; they do not: the
# released models' config.json says tie_word_embeddings false, EuroBERT/Optimus's 210m and 610m configs
# tied_weights False (and `mlmclm.sizes` builds Table 1's sizes untied, `MlmClmConfig`'s default).
PAPER_TIED_EMBEDDINGS = False


# ----------------------------------------------------------------------------------------------- plumbing


def _label(source: str, scale: str, paper_tables: str = "") -> str:
    """Whose numbers a figure draws, for its title."""
    if source == "paper":
        return f"the paper's {paper_tables}, redrawn" if paper_tables else "the paper's numbers, redrawn"
    return f"ours, scale {scale}" if source == "ours" else SOURCE_LABELS.get(source, source)


def _interval(rows: pd.DataFrame, minus: pd.DataFrame | None = None) -> tuple[float, float]:
    """(estimate, 95% half-width) of one figure point: the only place a figure computes an interval.

    ``rows`` are the score rows (`results.summarize`: ``score`` = the mean over fine-tuning seeds at the selected
    learning rate, ``ci`` its half-width) of the pretraining seeds of one model and cell, one row a seed; with
    ``minus``, the same for a second model, and the point is the difference (``rows`` minus ``minus``). One seed: its
    own score and half-width; k seeds: their mean and t95(k - 1) x sd / sqrt(k) over the seed means (a seed's mean
    carries its fine-tuning noise, so this counts both sources); a difference: the two half-widths in quadrature. The
    half-width is NaN where there is none (one pretraining seed with one fine-tuning seed)."""
    def one(r: pd.DataFrame) -> tuple[float, float]:
        if len(r) == 1:
            return float(r["score"].iloc[0]), float(r["ci"].iloc[0])
        mean, half, _ = results.mean_ci(r["score"])
        return mean, half
    estimate, half = one(rows)
    if minus is None:
        return estimate, half
    other, other_half = one(minus)
    return estimate - other, math.hypot(half, other_half)


def _pool(scores: pd.DataFrame) -> pd.DataFrame:
    """Scores with the models that differ only in their pretraining seed (`results.family`) pooled into one row under
    the seed-0 id, per source, scale, task group and dataset: ``score`` and ``ci`` from `_interval` over the seeds'
    rows, ``pretrain_seeds`` = k, ``members`` = the index labels of those rows in ``scores`` (for a difference of two
    pooled models, `mlm_lead`). A family without its seed-0 row is left out (the views select by the seed-0 id)."""
    if not scores.index.is_unique:
        scores = scores.reset_index(drop=True)
    df = scores.assign(_family=scores["model"].map(results.family))
    out = []
    for _, rows in df.groupby(["source", "scale", "_family", "task_group", "dataset"], sort=False, dropna=False):
        seed0 = rows.index[rows["model"] == rows["_family"]]
        if len(seed0):
            score, ci = _interval(rows)
            out.append((seed0[0], score, ci, len(rows), tuple(rows.index)))
    index = [o[0] for o in out]
    pooled = df.loc[index].drop(columns="_family")
    return pooled.assign(score=[o[1] for o in out], ci=[o[2] for o in out],
                         pretrain_seeds=pd.Series([o[3] for o in out], index=index, dtype="int64"),
                         members=pd.Series([o[4] for o in out], index=index, dtype=object)).reset_index(drop=True)


def _bars(rows: pd.DataFrame, what: str = "bars") -> str:
    """What the intervals (`_interval`) of ``rows`` (pooled scores with ``pretrain_seeds``, `_pool`) are, for the
    line under a figure's title: over fine-tuning seeds, or over pretraining seeds where a point (a square, see
    `_lines`) is the mean of several."""
    seeds = rows["pretrain_seeds"] if "pretrain_seeds" in rows else pd.Series(1, index=rows.index)
    k = _seeds(seeds[seeds > 1])
    none = "; hollow: a single run, no interval" if "ci" in rows and rows["ci"].isna().any() else ""
    if not k:
        return f"{what}: 95% CI over fine-tuning seeds{none}"
    mixed = "" if (seeds > 1).all() else " (squares), else fine-tuning seeds"
    return f"{what}: 95% CI over {k} pretraining seeds{mixed}{none}"


def with_metrics(df: pd.DataFrame, metrics: dict) -> pd.DataFrame:
    """Add ``metric`` (axis labels) to our rows of scores or runs: ``metrics`` maps (scale, task group, dataset) to the
    metric its results.json files name (``notebooks.read_metrics``); a group average gets its datasets' metric(s).
    Other rows get none: a panel of them is labelled with the paper's metric (``results.METRICS``)."""
    def name(source, scale, group, dataset):
        names = [METRIC_NAMES.get(m, m) for (s, g, d), m in metrics.items()
                 if source == "ours" and (s, g) == (scale, group) and dataset in (d, results.AVG)]
        return " / ".join(dict.fromkeys(names)) or None
    return df.assign(metric=[name(*k) for k in zip(df["source"], df["scale"], df["task_group"], df["dataset"])])


def _metric(rows: pd.DataFrame, group: str) -> str:
    """The metric of a panel's rows: theirs (``with_metrics``), else the paper's for the paper's scale, else "score"."""
    if "metric" in rows and rows["metric"].notna().any():
        return " / ".join(dict.fromkeys(rows["metric"].dropna()))
    return results.METRICS.get(group, "score") if (rows["scale"] == "paper").all() else "score"


def _by_source(df: pd.DataFrame):
    for (source, scale), part in df.groupby(["source", "scale"], sort=False):
        yield source, scale, part


def _by_size(df: pd.DataFrame):
    for size in results.ordered_sizes(df["size"]):
        yield size, df[df["size"] == size]


def _save(fig: Figure, out_dir: str | Path, source: str, scale: str, name: str) -> Path:
    return save(fig, Path(out_dir) / results.output_subdir(source, scale), name)


def save(fig: Figure, out_dir: str | Path, name: str) -> Path:
    """Write ``<name>.png`` and ``<name>.pdf`` without timestamps or version strings; return the PNG path."""

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    png = out / f"{name}.png"
    with matplotlib.rc_context(STYLE), atomic_path(png) as tmp_png, atomic_path(out / f"{name}.pdf") as tmp_pdf:
        fig.savefig(tmp_png, format="png", dpi=150, metadata=PNG_METADATA)  # a kill leaves the old files whole
        fig.savefig(tmp_pdf, format="pdf", metadata=PDF_METADATA)
    return png


def _panels(n: int, width: float = 3.2, height: float = 2.9) -> tuple[Figure, list]:
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(max(width * n, 6.4), height), layout="constrained")
        axes = fig.subplots(1, n, squeeze=False)[0]
    return fig, list(axes)


def _finish(fig: Figure, axes: list, title: str, legend_title: str | None, note: str = "") -> None:
    """The legend under the panels (the series, then the marker kinds, then the controls) and the title, with
    ``note`` (what the bars are) under it."""
    handles = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    labels = sorted(handles, key=lambda lab: (lab.startswith(tuple(CONTROL_LABELS.values())), lab in MARKER_LABELS))
    rows = 1
    if labels:  # in as many columns as fit the figure's width (about 0.07 inch a character, 0.5 for a handle)
        ncol = max(1, min(len(labels), int(fig.get_figwidth() / (0.5 + 0.07 * max(map(len, labels))))))
        rows = -(-len(labels) // ncol)
        fig.legend([handles[lab] for lab in labels], labels, title=legend_title, loc="outside lower center",
                   ncol=ncol)
    width = int(fig.get_figwidth() * 13)  # characters of a title line at this size
    lines = [part for line in [title, note] if line for part in _wrap(line, width)]
    fig.set_figheight(fig.get_figheight() + 0.2 * (rows - 1) + 0.2 * (len(lines) - 1))  # the panels keep their height
    fig.suptitle("\n".join(lines), fontsize="medium")


def _wrap(line: str, width: int) -> list[str]:
    """A title line as lines of at most ``width`` characters, broken where a reader expects it: after a "; " (a
    clause), else before the closing parenthesis of whose numbers (``... (ours, scale long)``), else after a ", ",
    else between words."""
    out = []
    while len(line) > width:
        label = line.rfind(" (") if line.endswith(")") else -1
        for cut in (line.rfind("; ", 0, width) + 2, label if 0 < label <= width else 1,
                    line.rfind(", ", 0, width) + 2):
            if cut > 1:
                break
        else:
            break
        out.append(line[:cut].rstrip())
        line = line[cut:].lstrip()
    return out + textwrap.wrap(line, width, break_on_hyphens=False)


def _group_grid(df: pd.DataFrame, draw, title: str, xlabel: str, legend_title: str | None, ylabel: str = "",
                groups=results.GROUPS, controls: pd.DataFrame | None = None, reference=None, note: str = "") -> Figure:
    """One panel per task group present; ``draw(ax, rows)`` draws a panel (and may relabel its axes), then
    ``reference(ax, controls, rows)`` the controls of the drawn models, if ``controls`` are given."""
    groups = [g for g in groups if g in set(df["task_group"])]
    with matplotlib.rc_context(STYLE):
        fig, axes = _panels(len(groups))
        for ax, group in zip(axes, groups):
            rows = df[df["task_group"] == group]
            ax.set_title(group)
            ax.set_xlabel(xlabel)
            ax.set_ylabel(f"{ylabel} {_metric(rows, group)}".strip() if ylabel else _metric(rows, group))
            draw(ax, rows)
            if controls is not None:
                (reference or _reference)(ax, _controls_of(controls, rows), rows)
        _finish(fig, axes, title, legend_title, note)
    return fig


def _controls_of(controls: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """The controls (``evidence.controls``) of the models drawn in ``rows``: same source, scale, sizes, task group and
    dataset (``Avg`` for a group-average panel)."""
    keys = rows[["source", "scale", "size", "task_group", "dataset"]].drop_duplicates()
    return controls.merge(keys, on=list(keys.columns))


def _reference(ax, ctl: pd.DataFrame, rows: pd.DataFrame, colors: dict | None = None, xpos: dict | None = None) -> None:
    """The controls as horizontal lines: the majority class (dotted) and each size's random-init model (dashed, band =
    its 95% half-width); in the sizes' ``colors`` when several share the panel, or as a short segment at each size's
    position on an x axis of sizes (``xpos``)."""
    majority = ctl["majority"].dropna() if "majority" in ctl else ()
    random = ctl.dropna(subset=["random"]) if "random" in ctl else ctl.iloc[0:0]
    if len(majority):
        m = float(majority.iloc[0])
        drawn = pd.concat([rows["score"], random["random"]]) if "score" in rows else random["random"]
        lo, hi = drawn.min(), drawn.max()
        if drawn.empty or m >= lo - 2 * max(hi - lo, 1.0):
            ax.axhline(m, **CONTROL_STYLE["majority"], label=CONTROL_LABELS["majority"], zorder=1)
        else:  # far below every model: a line would squash the differences the panel is about
            ax.plot([], [], **CONTROL_STYLE["majority"], label=f"{CONTROL_LABELS['majority']} ({m:.1f}, below)")
    sizes = results.ordered_sizes(random["size"])
    for size in sizes:
        r = random[random["size"] == size].iloc[0]
        style = dict(CONTROL_STYLE["random"], color=(colors or {}).get(size, CONTROL_STYLE["random"]["color"]))
        label = CONTROL_LABELS["random"] + (f", {size}" if colors and len(sizes) > 1 else "")
        ci = 0.0 if pd.isna(r.get("random_ci")) else float(r["random_ci"])
        if xpos:
            x = xpos[size]
            ax.hlines(r["random"], x - 0.3, x + 0.3, **style, label=label, zorder=1)
            ax.fill_between([x - 0.3, x + 0.3], r["random"] - ci, r["random"] + ci, color=style["color"], alpha=0.12,
                            lw=0)
        else:
            ax.axhline(r["random"], **style, label=label, zorder=1)
            ax.axhspan(r["random"] - ci, r["random"] + ci, color=style["color"], alpha=0.12, lw=0)


def _lines(ax, df: pd.DataFrame, x: str, hue: str, colors: dict, band: bool = False, xpos: dict | None = None,
           dodge: float = 0.0, grid=None) -> None:
    """score +- ci against ``x``, one series per ``hue`` level (in ``colors``' order), error bars or a band. A line
    joins two neighbouring points only where no value of ``grid`` (the x values the design has, run or not) lies
    between them: elsewhere the points stand alone, with error bars. Points that are the mean of several pretraining
    seeds (``pretrain_seeds`` > 1) are squares."""
    levels = [h for h in colors if h in set(df[hue])]
    grid = np.sort(np.asarray(list(grid if grid is not None else []), dtype=float))
    for i, level in enumerate(levels):
        d = df[df[hue] == level]
        xs = (d[x].map(xpos) if xpos else d[x]).astype(float)
        d = d.assign(_x=xs + dodge * (i - (len(levels) - 1) / 2), _raw=xs)
        d = d.sort_values("_x").assign(_none=lambda t: t["ci"].isna(), ci=lambda t: t["ci"].astype(float).fillna(0))
        cut = [((grid > a) & (grid < b)).any() for a, b in zip(d["_raw"], d["_raw"].iloc[1:])]
        for j, part in enumerate(np.split(np.arange(len(d)), np.flatnonzero(cut) + 1)):
            p, label = d.iloc[part], str(level) if j == 0 else "_nolegend_"
            if band and len(p) > 1:
                ax.plot(p["_x"], p["score"], marker="o", ms=3.5, color=colors[level], label=label)
                ax.fill_between(p["_x"], p["score"] - p["ci"], p["score"] + p["ci"], color=colors[level], alpha=0.2,
                                lw=0)
            else:
                ax.errorbar(p["_x"], p["score"], yerr=p["ci"], marker="o", ms=4, capsize=2.5, color=colors[level],
                            ls="-" if len(p) > 1 else "none", label=label)
        _squares(ax, d, colors[level])
        bare = d[d["_none"]]  # no interval to draw (one pretraining seed, one fine-tuning seed): hollow
        if len(bare):
            ax.plot(bare["_x"], bare["score"], ls="none", marker="o", ms=5, mfc="white", color=colors[level],
                    zorder=3)
    if xpos:
        ax.set_xticks(list(xpos.values()), list(xpos))
        ax.set_xlim(min(xpos.values()) - 0.4, max(xpos.values()) + 0.4)


def _squares(ax, d: pd.DataFrame, color, x: str = "_x", y: str = "score", **style) -> None:
    """Over the points of ``d`` that are the mean of several pretraining seeds, a square (and its legend entry)."""
    seeds = d["pretrain_seeds"] if "pretrain_seeds" in d else pd.Series(1, index=d.index)
    pooled = d[seeds > 1]
    if len(pooled):
        style = {"ls": "none", "marker": "s", "ms": 5.5, "color": color, "zorder": 3, **style}
        ax.plot(pooled[x], pooled[y], **style)
        ax.plot([], [], **{**style, "color": "0.35"}, label=MARKER_LABELS[1])


def _seeds(counts) -> str:
    """Pretraining seed counts in words: "3", "2 or 3"."""
    return " or ".join(str(n) for n in sorted(set(counts)))


def _spread(ax, df: pd.DataFrame, hue: str, colors: dict) -> None:
    """Per dataset and hue level: every run's centered score (light dots) and mean +- sd (bar)."""
    datasets = results.dataset_order(df["dataset"])
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


class Drawn(list):
    """What a figure function returns: the PNG paths it wrote (a list), and ``skipped``, one sentence for each figure
    of a source it did not draw and why (`show` prints them)."""

    def __init__(self, paths=(), skipped=()):
        super().__init__(paths)
        self.skipped = list(skipped)


def _values(values) -> str:
    """Values of an x axis, for a sentence: whole numbers as such, other numbers to 3 significant digits."""
    def one(v) -> str:
        if not isinstance(v, (int, float, np.integer, np.floating)):
            return str(v)
        return str(int(v)) if float(v).is_integer() and abs(v) < 1e6 else f"{float(v):.3g}"
    return ", ".join(one(v) for v in sorted(set(values), key=str))


def _draw(df: pd.DataFrame, out_dir, name: str, title, draw, xlabel: str, legend: str, *, tables: str = "",
          ylabel: str = "", per_size: bool = False, controls: pd.DataFrame | None = None, reference=None,
          x=None, one: str = "value", note=_bars) -> Drawn:
    """One figure per source (and per size if ``per_size``) of task-group panels; return the PNG paths (`Drawn`). A
    figure of ours (any source but the paper) whose x axis, column ``x`` (or ``x(rows)``), has fewer than two values
    is not drawn, and ``skipped`` says so (``one``: what a value of ``x`` is, where the axis shows something else:
    Fig. 10 draws FLOPs, which differ between the objectives at a single checkpoint). ``title`` is a string or
    ``title(rows)``. With ``controls`` (``evidence.controls``), each panel also shows its models' controls
    (``reference``, default ``_reference``). ``note(rows)`` is the line under the title that says what the bars are
    (`_bars`)."""
    paths, skipped = [], []
    for source, scale, part in _by_source(df):
        for size, rows in _by_size(part) if per_size else [("", part)]:
            what = title(rows) if callable(title) else title
            what = f"{what}, {size}" if size else what
            column = x(rows) if callable(x) else x
            if column is not None and source != "paper" and rows[column].nunique() < 2:
                skipped.append(f"{what.split(':')[0]} ({_label(source, scale)}{', ' + size if size else ''}) is not "
                               f"drawn: its x axis{f' ({xlabel})' if xlabel else ''} would hold one {one} "
                               f"({_values(rows[column].dropna())}).")
                continue
            fig = _group_grid(rows, draw, f"{what} ({_label(source, scale, tables)})", xlabel, legend, ylabel,
                              controls=controls, reference=reference, note="" if source == "paper" else note(rows))
            file = f"{name}_{size}" if size and part["size"].nunique() > 1 else name
            paths.append(_save(fig, out_dir, source, scale, file))
    return Drawn(paths, skipped)


def _positions(values, key=None) -> dict:
    return {v: i for i, v in enumerate(sorted(set(values), key=key))}


def _steps_axis(ax) -> None:
    ax.xaxis.set_major_formatter(EngFormatter(sep=""))


def _palettes(view: pd.DataFrame, name: str, levels) -> dict:
    """Per source and scale, colors for ``levels(part)``: one figure's colors never depend on another's data."""
    return {key: _palette(name, levels(part)) for key, part in view.groupby(["source", "scale"])}


def _key(d: pd.DataFrame) -> tuple:
    return d["source"].iloc[0], d["scale"].iloc[0]


def fig2(scores: pd.DataFrame, out_dir: str | Path, controls: pd.DataFrame | None = None) -> Drawn:
    """Fig. 2: MLM-40% vs CLM, task-group averages, against model size (ours: the mean over pretraining seeds). A
    source of ours with one model size has no axis of sizes: its figure puts the two objectives side by side at
    that size (not drawn with one objective). Notebook 01_scaling; reads, through ``scores`` and ``controls``
    (`results.load`), results/paper/table02.csv ... table05.csv and results/runs/<scale>/*/*/*/lr*_sd*/results.json."""
    v = results.group_averages(results.scaling_view(_pool(scores)))
    v = v[(v["objective"] == "clm") | (v["mask_ratio"] == 40)].assign(Objective=_obj)
    sizes = v.groupby(["source", "scale"])["size"].nunique()
    single = {key for key, n in sizes.items() if n == 1 and key[0] != "paper"}
    objectives = lambda d: _positions(d["Objective"], list(OBJECTIVE_COLORS).index)  # noqa: E731

    def draw(ax, d):
        if _key(d) in single:
            _lines(ax, d, "Objective", "Objective", OBJECTIVE_COLORS, xpos=objectives(d))
            ax.set_xlabel("objective")
        else:
            _lines(ax, d, "size", "Objective", OBJECTIVE_COLORS, dodge=0.12,
                   xpos=_positions(d["size"], results.size_key))

    def reference(ax, c, d):
        _reference(ax, c, d, xpos=None if _key(d) in single else _positions(d["size"], results.size_key))
    return _draw(v, out_dir, "fig02_mlm_vs_clm",
                 lambda d: ("Fig. 2: MLM (40%) vs CLM at size " + d["size"].iloc[0] if _key(d) in single
                            else "Fig. 2: MLM (40%) vs CLM by model size"),
                 draw, "model size", "objective", tables="Tables 2-5", controls=controls, reference=reference,
                 x=lambda d: "Objective" if _key(d) in single else "size")


def fig3(scores: pd.DataFrame, out_dir: str | Path, controls: pd.DataFrame | None = None) -> Drawn:
    """Fig. 3: MLM task-group averages against the masking ratio, one line per model size. Notebook 01_scaling;
    reads results/paper/table02.csv ... table05.csv and results/runs/<scale>/*/*/*/lr*_sd*/results.json (``scores``,
    ``controls``)."""
    v = results.group_averages(results.scaling_view(_pool(scores)))
    v = v[v["objective"] == "mlm"]
    colors = _palettes(v, "crest", lambda d: results.ordered_sizes(d["size"]))
    return _draw(v, out_dir, "fig03_masking_ratio", "Fig. 3: MLM performance by masking ratio",
                 lambda ax, d: _lines(ax, d, "mask_ratio", "size", colors[_key(d)]),
                 "masking ratio (%)", "model size", tables="Tables 2-5", controls=controls, x="mask_ratio",
                 reference=lambda ax, c, d: _reference(ax, c, d, colors=colors[_key(d)]))


def fig4(scores: pd.DataFrame, out_dir: str | Path, controls: pd.DataFrame | None = None) -> Drawn:
    """Fig. 4: CLM vs MLM-40% task-group averages against the pretraining step (intermediate checkpoints). Notebook
    02_data_efficiency; reads results/paper/table06.csv ... table09.csv and
    results/runs/<scale>/*/*/*/lr*_sd*/results.json (``scores``, ``controls``)."""
    v = results.group_averages(results.data_efficiency_view(_pool(scores)))
    v = v.assign(Objective=_obj)

    def draw(ax, d):
        _lines(ax, d, "steps", "Objective", OBJECTIVE_COLORS, band=True)
        _steps_axis(ax)
    return _draw(v, out_dir, "fig04_data_efficiency", "Fig. 4: performance during pretraining", draw,
                 "pretraining step", "objective", tables="Tables 6-9", per_size=True, controls=controls, x="steps",
                 note=lambda d: _bars(d, "bands"))


def fig5(runs: pd.DataFrame, out_dir: str | Path, split: str = "test") -> Drawn:
    """Fig. 5: centered scores over seeds and learning rates (the paper's: those in [1e-5, 1e-4]; a scale of ours:
    its whole stability grid, `results.centered_scores`), CLM vs MLM-40%, mean +- sd. Notebook 03_stability; reads,
    through ``runs``, results/runs/<scale>/*/*/*/lr*_sd*/results.json (results/runs/stability/<scale>/ where a scale
    has a stability grid), and results/samples/encodeval-610m-sst2.csv (the authors' sample,
    ``split="validation"``)."""
    c = results.centered_scores(runs, split=split)

    def note(d):
        lrs, (lo, hi) = sorted(d["lr"].unique()), results.STABILITY_LRS
        over = f"{len(lrs)} learning rates ({lr_text(lrs[0])} to {lr_text(lrs[-1])}) x {d['seed'].nunique()} seeds"
        if lrs[0] >= lo and lrs[-1] <= hi:
            return f"bars: ±1 sd over {over}; dots: runs"
        return (f"bars: ±1 sd over the whole grid, {over}; the paper's: over {lr_text(lo)} to {lr_text(hi)} only; "
                "dots: runs")
    return _draw(c.assign(Objective=_obj(c)), out_dir, "fig05_lr_sensitivity",
                 f"Fig. 5: learning-rate sensitivity ({split})",
                 lambda ax, d: _spread(ax, d, "Objective", OBJECTIVE_COLORS), "", "objective",
                 ylabel="centered", per_size=True, note=note)


def fig6(scores: pd.DataFrame, out_dir: str | Path, controls: pd.DataFrame | None = None) -> Drawn:
    """Fig. 6: CLM-then-MLM under fixed budgets: task-group averages against the % of steps given to CLM (lines
    only between neighbouring splits of the design, ``SHARES``). Notebook 04_biphasic; reads
    results/paper/table10.csv ... table13.csv and results/runs/<scale>/*/*/*/lr*_sd*/results.json (``scores``,
    ``controls``)."""
    v = results.group_averages(results.biphasic_view(_pool(scores)))
    v = v[_main_size(v)].assign(Budget=lambda d: d["budget"].map(results.step_label))
    colors = _palettes(v, "flare", lambda d: [results.step_label(b) for b in sorted(d["budget"].unique())])
    return _draw(v, out_dir, "fig06_biphasic", "Fig. 6: CLM-then-MLM splits of fixed budgets",
                 lambda ax, d: _lines(ax, d, "clm_share", "Budget", colors[_key(d)], grid=SHARES),
                 "% of steps with CLM", "budget (steps)", tables="Tables 10-13", per_size=True, controls=controls,
                 x="clm_share")


def _main_size(view: pd.DataFrame) -> np.ndarray:
    """Whether a row is of the size its source and scale ran the budget x split grid on: the one with the most
    two-phase models."""
    main = {}
    for key, part in view.groupby(["source", "scale"]):
        counts = part.groupby("size")["model"].nunique()
        main[key] = min(counts.index, key=lambda s: (-counts[s], results.size_key(s)))
    return np.array([main[source, scale] == size
                     for source, scale, size in zip(view["source"], view["scale"], view["size"])], dtype=bool)


def fig7(runs: pd.DataFrame, out_dir: str | Path) -> Drawn:
    """Fig. 7: spread over masking ratios (and seeds) of centered scores, MLM-only vs CLM+MLM, mean +- sd; only for
    the sizes that have CLM+MLM runs (the comparison needs both families). Notebook 04_biphasic; reads, through
    ``runs``, results/runs/<scale>/*/*/*/lr*_sd*/results.json (the paper prints no numbers for it)."""
    colors = {"MLM": OBJECTIVE_COLORS["MLM"], "CLM+MLM": OBJECTIVE_COLORS["CLM+MLM"]}
    spread = results.masking_ratio_spread(runs)
    both = spread.groupby(["source", "scale", "size"])["family"].transform(lambda f: f.nunique() == 2)
    return _draw(spread[both.astype(bool)], out_dir, "fig07_masking_robustness",
                 "Fig. 7: sensitivity to the masking ratio", lambda ax, d: _spread(ax, d, "family", colors), "",
                 "pretraining", ylabel="centered", per_size=True,
                 note=lambda d: f"bars: ±1 sd over {d['mask_ratio'].nunique()} masking ratios x seeds; dots: runs")


def fig8(scores: pd.DataFrame, out_dir: str | Path, controls: pd.DataFrame | None = None) -> Drawn:
    """Fig. 8: base model vs after the longest MLM continued pretraining, for CLM- and MLM-based models. Notebook
    05_cpt; reads results/paper/table14.csv ... table17.csv and results/runs/<scale>/*/*/*/lr*_sd*/results.json
    (``scores``, ``controls``)."""
    v = results.group_averages(results.cpt_view(_pool(scores)))
    longest = v.groupby(["source", "scale"])["cpt_steps"].transform("max")
    v = v[(v["cpt_steps"] == 0) | (v["cpt_steps"] == longest)]
    v = v.assign(stage=["Base" if c == 0 else f"+{results.step_label(c)} MLM CPT" for c in v["cpt_steps"]])
    return _draw(v, out_dir, "fig08_cpt", "Fig. 8: continued pretraining with MLM",
                 lambda ax, d: _lines(ax, d, "stage", "base", BASE_COLORS, dodge=0.06,
                                      xpos=_positions(d["stage"], lambda s: s != "Base")),
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
        _lines(ax, d, "cpt_steps", "base", BASE_COLORS, grid=_cpt_lengths(d), dodge=0.015 * d["cpt_steps"].max())
        _steps_axis(ax)
    v = results.group_averages(results.cpt_view(_pool(scores)))
    return _draw(v, out_dir, "fig09_cpt_length",
                 "Fig. 9: performance by CPT length", draw, "MLM continued-pretraining steps", "starting point",
                 tables="Tables 14-17", controls=controls, x="cpt_steps")


def run_parameters(runs_dir: str | Path) -> dict:
    """Per model size of a scale's runs (``results/runs/<scale>/``), what Fig. 10 counts our FLOPs from (the "6N"
    rule of ``FLOPS_RULES``) and `tokens_per_parameter` our tokens per parameter: the parameter counts of a run's
    meta.json (``embeddings``, ``body``, and ``output_layer`` where it has one: 0 when tied) and the tokens a step
    of its config.yaml (``batch_size`` x ``data.seq_len``). Sizes without both files are left out."""
    import yaml

    out = {}
    for meta in sorted(Path(runs_dir).glob("*/meta.json")):
        config = meta.parent / "config.yaml"
        try:
            size = results.parse_model_id(meta.parent.name)["size"]
        except ValueError:
            continue
        if size in out or not config.is_file():
            continue
        counts, cfg = json.loads(meta.read_text()).get("parameters") or {}, yaml.safe_load(config.read_text())
        if {"embeddings", "body"} <= set(counts):
            out[size] = {**{k: counts[k] for k in ("embeddings", "body", "output_layer") if k in counts},
                         "tokens_per_step": cfg["batch_size"] * cfg["data"]["seq_len"]}
    return out


def with_flops(view: pd.DataFrame, architecture: dict) -> pd.DataFrame:
    """Add ``flops`` (training FLOPs of each checkpoint) and ``flops_rule`` (a key of ``FLOPS_RULES``) for the sizes
    in ``architecture``: Table 1's shapes (``results.architecture``) by App. F (``results.with_flops``), parameter
    counts (``run_parameters``) by 6N."""
    shapes = {s: a for s, a in architecture.items() if "layers" in a}
    counts = {s: a for s, a in architecture.items() if "layers" not in a}
    df = view[view["size"].isin(list(counts))]

    def six_n(r) -> float:
        a, f = counts[r.size], float(r.mask_ratio) / 100 if pd.notna(r.mask_ratio) else 1.0
        per_token = [a["embeddings"] + a["body"] + share * a["embeddings"] for share in (1.0, f)]  # CLM, MLM steps
        return 6 * a["tokens_per_step"] * (r.clm_steps * per_token[0] + r.mlm_steps * per_token[1])

    ours = df.assign(flops=[six_n(r) for r in df.itertuples()], flops_rule="6N")
    return pd.concat([results.with_flops(view, shapes).assign(flops_rule="App. F"), ours], ignore_index=True)


def fig10(scores: pd.DataFrame, out_dir: str | Path, architecture: dict,
          controls: pd.DataFrame | None = None) -> Drawn:
    """Fig. 10: Fig. 4 against training FLOPs (``with_flops``), for sizes of known shapes or parameter counts; the
    x axis names the rule (``FLOPS_RULES``). Notebook 02_data_efficiency; reads results/paper/table06.csv ...
    table09.csv and results/runs/<scale>/*/*/*/lr*_sd*/results.json (``scores``, ``controls``), and for ``architecture``
    results/paper/table01.csv and each run's results/runs/<scale>/<run_id>/meta.json and config.yaml."""
    v = with_flops(results.group_averages(results.data_efficiency_view(_pool(scores))),
                   architecture)
    v = v.assign(Objective=_obj)

    def draw(ax, d):
        exp = int(np.floor(np.log10(d["flops"].max())))
        _lines(ax, d.assign(flops=d["flops"] / 10**exp), "flops", "Objective", OBJECTIVE_COLORS, band=True)
        ax.set_xlabel(f"training FLOPs (x 1e{exp})\n{d['flops_rule'].iloc[0]} rule")  # one line overran a panel
    return _draw(v, out_dir, "fig10_data_efficiency_flops", "Fig. 10: performance against training FLOPs", draw,
                 "training FLOPs", "objective", tables="Tables 6-9", per_size=True, controls=controls, x="steps",
                 one="pretraining step",
                 note=lambda d: _bars(d, "bands"))


def parameter_counts(a: dict) -> dict:
    """{embeddings, body, output_layer} of one size of ``architecture``: our run folder's counts (``run_parameters``;
    ``output_layer`` NaN where its meta.json has none), or from Table 1's shape for the paper's sizes: the body by
    `flops.body_parameters` (norms included), the input embedding vocab x d_model, and the output layer as large
    again unless tied (a shape's ``tied``, default ``PAPER_TIED_EMBEDDINGS``: the paper's models are not)."""
    if "layers" not in a:
        return {"embeddings": a["embeddings"], "body": a["body"], "output_layer": a.get("output_layer", math.nan)}
    embeddings = a["vocab"] * a["d_model"]
    tied = a.get("tied", PAPER_TIED_EMBEDDINGS)
    return {"embeddings": embeddings, "output_layer": 0 if tied else embeddings,
            "body": body_parameters(layers=a["layers"], d_model=a["d_model"], ffn=a["ffn"], heads=a["heads"],
                                    kv_heads=a["kv_heads"])}


def tokens_per_parameter(architecture: dict, axis: str = "body") -> dict:
    """Per size, pretraining tokens a step per parameter on ``axis`` (a key of ``AXES``: the parameters of
    ``AXIS_PARTS[axis]`` by `parameter_counts`): Table 1's shapes for the paper's sizes, a run folder's parameter
    counts for ours (``run_parameters``). NaN where a count is unknown (a meta.json without ``output_layer``)."""
    if axis not in AXES:
        raise ValueError(f"unknown axis {axis!r}; choose one of {', '.join(AXES)}")
    out = {}
    for size, a in architecture.items():
        counts = parameter_counts(a)
        out[size] = a["tokens_per_step"] / sum(counts[part] for part in AXIS_PARTS[axis])
    return out


def tokens_per_axis(architecture: dict) -> dict:
    """{axis: `tokens_per_parameter` on that axis} for every axis of ``AXES``, in their order."""
    return {axis: tokens_per_parameter(architecture, axis) for axis in AXES}


def mlm_lead(scores: pd.DataFrame) -> pd.DataFrame:
    """MLM-40% minus CLM (``gap`` and its 95% half-width ``gap_ci``, both from `_interval` over the two models'
    pretraining seeds, and the larger ``pretrain_seeds`` of the two) per source, scale, size and task group: at each
    intermediate checkpoint and, as ``final``, at the full budget, for the sizes with intermediate checkpoints."""
    scores = scores.reset_index(drop=True)
    pooled = results.group_averages(_pool(scores))
    early = results.data_efficiency_view(pooled)
    final = results.scaling_view(pooled).merge(early[["source", "scale", "size"]].drop_duplicates())
    both = pd.concat([early.assign(final=False), final[results.is_clm_or_mlm40(final)].assign(final=True)])
    keys = ["source", "scale", "size", "task_group", "steps", "final"]
    cols = [*keys, "members", "pretrain_seeds"]
    m = both[both["objective"] == "mlm"][cols].merge(both[both["objective"] == "clm"][cols], on=keys,
                                                     suffixes=("_mlm", "_clm"))
    gaps = [_interval(scores.loc[list(a)], minus=scores.loc[list(b)]) for a, b in zip(m["members_mlm"],
                                                                                       m["members_clm"])]
    return m.assign(gap=[g for g, _ in gaps], gap_ci=[h for _, h in gaps],
                    pretrain_seeds=np.maximum(m["pretrain_seeds_mlm"], m["pretrain_seeds_clm"]))[
        [*keys, "gap", "gap_ci", "pretrain_seeds"]]


def _lead_panel(ax, rows: pd.DataFrame, x: str, colors: dict) -> None:
    """One panel of `fig4_scales`: per line (source, scale, size) of ``rows`` (`mlm_lead`), the stable-phase
    checkpoints joined against column ``x``, the decayed final models hollow (squares: means over seeds)."""
    ax.axhline(0, color="0.3", lw=0.8)
    for line, d in rows.groupby("line", sort=False):
        c, mid, end = colors[line], d[~d["final"]].sort_values(x), d[d["final"]]
        ax.errorbar(mid[x], mid["gap"], yerr=mid["gap_ci"], marker="o", ms=4, capsize=2, color=c, label=line)
        ax.errorbar(end[x], end["gap"], yerr=end["gap_ci"], fmt="o", mfc="white", color=c, ms=6, capsize=2,
                    label=MARKER_LABELS[0])
        _squares(ax, end, c, x=x, y="gap", mfc="white", ms=6.5)
    ax.set_xscale("log")


def fig4_scales(scores: pd.DataFrame, out_dir: str | Path, architecture: dict) -> Drawn:
    """Fig. 4 across scales: MLM-40% minus CLM (``mlm_lead``, bars = the difference's 95% half-width) against
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
    rows["line"] = [("paper" if src == "paper" else f"ours, {scale}") + f" ({z})"
                    for src, scale, z in zip(rows["source"], rows["scale"], rows["size"])]
    colors = _palette("colorblind", list(dict.fromkeys(rows.sort_values("body")["line"])))
    groups = [g for g in results.GROUPS if g in set(rows["task_group"])]
    axes_drawn = [axis for axis in AXES if rows[axis].notna().any()]
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(max(3.8 * len(groups), 6.4), 3.4 * len(axes_drawn)), layout="constrained")
        grid = fig.subplots(len(axes_drawn), len(groups), squeeze=False)
        for panels, axis in zip(grid, axes_drawn):
            for ax, group in zip(panels, groups):
                _lead_panel(ax, rows[(rows["task_group"] == group) & rows[axis].notna()], axis, colors)
                ax.set_title(group)
                ax.set_xlabel(AXES[axis])
                ax.set_ylabel("MLM-40% minus CLM")
        _finish(fig, list(grid.ravel()), "Fig. 4 across scales: MLM-40% minus CLM", None,
                _bars(rows, "bars (the difference)"))
    return Drawn([save(fig, out_dir, "fig04_scales")])


def fig11(scores: pd.DataFrame, out_dir: str | Path, controls: pd.DataFrame | None = None) -> Drawn:
    """Fig. 11: CLM-then-MLM at the other model sizes (the paper's 1B, 25%-75% only), at their full budget. Notebook
    04_biphasic; reads results/runs/<scale>/*/*/*/lr*_sd*/results.json (``scores``, ``controls``: the paper prints no
    numbers for it)."""
    v = results.group_averages(results.biphasic_view(_pool(scores)))
    v = v[~_main_size(v)]
    v = v[v["budget"] == v.groupby(["source", "scale", "size"])["budget"].transform("max")]
    v = v.merge(v[v["clm_share"].between(1, 99)][["source", "scale", "size"]].drop_duplicates())  # sizes with a split
    colors = _palettes(v, "crest", lambda d: results.ordered_sizes(d["size"]))
    return _draw(v, out_dir, "fig11_biphasic_sizes", "Fig. 11: CLM-then-MLM at other model sizes",
                 lambda ax, d: _lines(ax, d, "clm_share", "size", colors[_key(d)], grid=SHARES),
                 "% of steps with CLM", "model size", controls=controls, x="clm_share",
                 reference=lambda ax, c, d: _reference(ax, c, d, colors=colors[_key(d)]))


def fig12(logs: pd.DataFrame, out_dir: str | Path, source: str = "ours", scale: str = "") -> Drawn:
    """Fig. 12: pretraining loss against step for each CPT length, CLM-based (red) vs MLM-based (blue); each curve
    follows its run's lineage (``results.cpt_loss_curves``): the base run's loss, then the CPT's MLM loss from the
    step it starts at (a vertical line). The CLM-based curve's base part is a CLM loss: dotted. Notebook 05_cpt;
    reads, through ``logs`` (`results.load_pretrain_logs`), results/runs/<scale>/<run_id>/pretrain.csv and
    config.yaml (``init``: the run a CPT continues)."""
    curves = results.cpt_loss_curves(logs)
    curves = curves.assign(start=[results.parse_model_id(m)["steps"] - c for m, c in zip(curves["model"],
                                                                                  curves["cpt_steps"])])
    paths = []
    for size, part in _by_size(curves):
        lengths = sorted(part["cpt_steps"].unique())
        fig, axes = _panels(len(lengths))
        with matplotlib.rc_context(STYLE):
            for ax, length in zip(axes, lengths):
                p = part[part["cpt_steps"] == length]
                for base, color in BASE_COLORS.items():
                    d = p[p["base"] == base].sort_values("step")
                    base_part = d["step"] <= d["start"]
                    if base == "CLM":
                        ax.plot(d["step"][base_part], d["loss"][base_part], color=color, lw=1, ls=":",
                                label="CLM-based, CLM loss (before CPT)")
                        d = d[~base_part]
                    ax.plot(d["step"], d["loss"], color=color, lw=1, label=f"{base}-based, MLM loss")
                for start in sorted(p["start"].unique()):
                    ax.axvline(start, color="0.5", ls="--", lw=1, label="CPT starts", zorder=1)
                ax.set(title=f"{results.step_label(length)}-step CPT", xlabel="step", ylabel="training loss")
                _steps_axis(ax)
            _finish(fig, axes, f"Fig. 12: pretraining loss, {size} ({_label(source, scale)})", None)
        file = f"fig12_cpt_loss_{size}" if curves["size"].nunique() > 1 else "fig12_cpt_loss"
        paths.append(_save(fig, out_dir, source, scale, file))
    return Drawn(paths)


def show(paths: list[Path], absent: str = "No source has the data this figure needs.") -> None:
    """Display the PNGs in a notebook; first say which figures of ours were not drawn and why (`Drawn.skipped`), and
    print ``absent`` when nothing was drawn or skipped."""
    from IPython.display import Image, display

    skipped = getattr(paths, "skipped", [])
    if not paths and not skipped:
        print(absent)
    for line in skipped:
        print(line)
    for path in paths:
        display(Image(filename=str(path)))
