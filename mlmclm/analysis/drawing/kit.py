"""The figures' drawing kit: one style, task-group panels, the lines, bands, squares and controls every figure of the
paper draws, a title with a line saying what the bars are, and PNG and PDF files written deterministically.

`draw_per_source` draws one figure per source that has the data (the paper's at the top of the output folder, another
source's in a sub-folder named after it: ``ours-<scale>/``, ``encodeval/``) and skips, saying why, a figure of ours
whose x axis would hold one value. Figures are plain ``matplotlib.figure.Figure`` objects, never registered with
pyplot, so nothing is left open. No torch import here.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib import patheffects
from matplotlib.figure import Figure
from matplotlib.ticker import EngFormatter

from ...io import atomic_path
from ..judging import matching
from ..loading import ids

STYLE = {**sns.axes_style("whitegrid"), **sns.plotting_context("paper", font_scale=1.1),
         "font.family": "DejaVu Sans", "axes.titleweight": "bold", "legend.frameon": False,
         "svg.hashsalt": "mlmclm", "pdf.fonttype": 42}
PNG_METADATA = {"Software": None}
PDF_METADATA = {"Creator": None, "Producer": None, "CreationDate": None}
SOURCE_LABELS = {"encodeval": "EncodEval per-run results", "encodeval-sample": "the authors' SST-2 sample"}
CONTROL_STYLE = {"majority": dict(color="0.25", ls=":", lw=1.2), "random": dict(color="0.5", ls="--", lw=1.2)}
CONTROL_LABELS = {"majority": "majority class", "random": "random init"}
MARKER_LABELS = ("decayed final model", "mean over pretraining seeds")  # legend entries for a kind of point
DPI = 150  # of the PNG files; notebooks show them at `DISPLAY_DPI`, so that a panel has one size in every figure
DISPLAY_DPI = 100
OVER_MARKER = [patheffects.withStroke(linewidth=3, foreground="white")]  # an error bar drawn over its square


def source_label(source: str, scale: str, paper_tables: str = "") -> str:
    """Whose numbers a figure draws, for its title."""
    if source == "paper":
        return f"the paper's {paper_tables}, redrawn" if paper_tables else "the paper's numbers, redrawn"
    return f"ours, scale {scale}" if source == "ours" else SOURCE_LABELS.get(source, source)


def bars_note(rows: pd.DataFrame, what: str = "bars") -> str:
    """What the intervals (`interval`) of ``rows`` (pooled scores with ``pretrain_seeds``, `pool`) are, for the
    line under a figure's title: over fine-tuning seeds, or over pretraining seeds where a point (a square, see
    `plot_lines`) is the mean of several."""
    seeds = rows["pretrain_seeds"] if "pretrain_seeds" in rows else pd.Series(1, index=rows.index)
    k = _seeds(seeds[seeds > 1])
    none = "; hollow: a single run, no interval" if "ci" in rows and rows["ci"].isna().any() else ""
    if not k:
        return f"{what}: 95% CI over fine-tuning seeds{none}"
    mixed = "" if (seeds > 1).all() else " (squares), else fine-tuning seeds"
    return f"{what}: 95% CI over {k} pretraining seeds{mixed}{none}"


def _metric(rows: pd.DataFrame, group: str) -> str:
    """The metric of a panel's rows: theirs (``with_metrics``), else the paper's for the paper's scale, else "score"."""
    if "metric" in rows and rows["metric"].notna().any():
        return " / ".join(dict.fromkeys(rows["metric"].dropna()))
    return ids.METRICS.get(group, "score") if (rows["scale"] == "paper").all() else "score"


def _by_source(df: pd.DataFrame):
    for (source, scale), part in df.groupby(["source", "scale"], sort=False):
        yield source, scale, part


def by_size(df: pd.DataFrame):
    for size in ids.ordered_sizes(df["size"]):
        yield size, df[df["size"] == size]


def save_source(fig: Figure, out_dir: str | Path, source: str, scale: str, name: str) -> Path:
    return save(fig, Path(out_dir) / ids.output_subdir(source, scale), name)


def save(fig: Figure, out_dir: str | Path, name: str) -> Path:
    """Write ``<name>.png`` and ``<name>.pdf`` without timestamps or version strings; return the PNG path."""

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    png = out / f"{name}.png"
    with matplotlib.rc_context(STYLE), atomic_path(png) as tmp_png, atomic_path(out / f"{name}.pdf") as tmp_pdf:
        fig.savefig(tmp_png, format="png", dpi=DPI, metadata=PNG_METADATA)  # a kill leaves the old files whole
        fig.savefig(tmp_pdf, format="pdf", metadata=PDF_METADATA)
    return png


def panels(n: int, width: float = 3.2, height: float = 2.9) -> tuple[Figure, list]:
    """A figure of ``n`` panels of one size: in a row, four in two rows of two (a row of four shown in a notebook's
    width has unreadable ticks); one panel is not stretched to a wide figure."""
    cols = 2 if n == 4 else n
    rows = math.ceil(n / cols)
    with matplotlib.rc_context(STYLE):
        fig = Figure(figsize=(max(width * cols, 6.4 if n > 1 else 6.0), height * rows), layout="constrained")
        axes = fig.subplots(rows, cols, squeeze=False).ravel()
    return fig, list(axes)


def finish(fig: Figure, axes: list, title: str, legend_title: str | None, note: str = "") -> None:
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
    width = int(fig.get_figwidth() * 12.5)  # characters of a title line at this size
    lines = [part for line in [title, note] if line for part in wrap(line, width)]
    fig.set_figheight(fig.get_figheight() + 0.2 * (rows - 1) + 0.2 * (len(lines) - 1))  # the panels keep their height
    fig.suptitle("\n".join(lines), fontsize="medium")


def wrap(line: str, width: int) -> list[str]:
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
                groups=ids.GROUPS, controls: pd.DataFrame | None = None, reference=None, note: str = "") -> Figure:
    """One panel per task group present; ``draw(ax, rows)`` draws a panel (and may relabel its axes), then
    ``reference(ax, controls, rows)`` the controls of the drawn models, if ``controls`` are given."""
    groups = [g for g in groups if g in set(df["task_group"])]
    with matplotlib.rc_context(STYLE):
        fig, axes = panels(len(groups))
        for ax, group in zip(axes, groups):
            rows = df[df["task_group"] == group]
            ax.set_title(group)
            ax.set_xlabel(xlabel)
            ax.set_ylabel(f"{ylabel} {_metric(rows, group)}".strip() if ylabel else _metric(rows, group))
            draw(ax, rows)
            if controls is not None:
                (reference or control_lines)(ax, _controls_of(controls, rows), rows)
        finish(fig, axes, title, legend_title, note)
    return fig


def _controls_of(controls: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """The controls (``evidence.controls``) of the models drawn in ``rows``: same source, scale, sizes, task group and
    dataset (``Avg`` for a group-average panel)."""
    keys = rows[["source", "scale", "size", "task_group", "dataset"]].drop_duplicates()
    return controls.merge(keys, on=list(keys.columns))


def control_lines(ax, ctl: pd.DataFrame, rows: pd.DataFrame, colors: dict | None = None,
                  xpos: dict | None = None) -> None:
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
        else:  # far below every model: a line would squash the differences the panel is about; the entry says whose
            panel = "/".join(dict.fromkeys(rows["task_group"])) if "task_group" in rows else ""
            ax.plot([], [], **CONTROL_STYLE["majority"],
                    label=f"{CONTROL_LABELS['majority']}, {panel}: {m:.1f} (off the axis, below)")
    sizes = ids.ordered_sizes(random["size"])
    for size in sizes:
        r = random[random["size"] == size].iloc[0]
        style = dict(CONTROL_STYLE["random"], color=(colors or {}).get(size, CONTROL_STYLE["random"]["color"]))
        ci = 0.0 if pd.isna(r.get("random_ci")) else float(r["random_ci"])
        label = (CONTROL_LABELS["random"] + (f", {size}" if colors and len(sizes) > 1 else "")
                 + (" (band: its 95% CI)" if ci else ""))
        if xpos:
            x = xpos[size]
            ax.hlines(r["random"], x - 0.3, x + 0.3, **style, label=label, zorder=1)
            ax.fill_between([x - 0.3, x + 0.3], r["random"] - ci, r["random"] + ci, color=style["color"], alpha=0.12,
                            lw=0)
        else:
            ax.axhline(r["random"], **style, label=label, zorder=1)
            ax.axhspan(r["random"] - ci, r["random"] + ci, color=style["color"], alpha=0.12, lw=0)


def plot_lines(ax, df: pd.DataFrame, x: str, hue: str, colors: dict, band: bool = False, xpos: dict | None = None,
               dodge: float = 0.0, grid=None) -> None:
    """score +- ci against ``x``, one series per ``hue`` level (in ``colors``' order), error bars or a band. A line
    joins two neighbouring points where no value of ``grid`` (the x values the design has, run or not) lies between
    them; across such values (`skipped`) a faint thin line joins them. Points that are the mean of several pretraining
    seeds (``pretrain_seeds`` > 1) are squares, their error bars drawn over them."""
    levels = [h for h in colors if h in set(df[hue])]
    grid = np.sort(np.asarray(list(grid if grid is not None else []), dtype=float))
    for i, level in enumerate(levels):
        d = df[df[hue] == level]
        xs = (d[x].map(xpos) if xpos else d[x]).astype(float)
        d = d.assign(_x=xs + dodge * (i - (len(levels) - 1) / 2), _raw=xs)
        d = d.sort_values("_x").assign(_none=lambda t: t["ci"].isna(), ci=lambda t: t["ci"].astype(float).fillna(0))
        pooled = "pretrain_seeds" in d and bool((d["pretrain_seeds"] > 1).any())  # squares (`squares`) to draw over
        cut = [bool(skipped([a, b], grid)) for a, b in zip(d["_raw"], d["_raw"].iloc[1:])]
        for j, part in enumerate(np.split(np.arange(len(d)), np.flatnonzero(cut) + 1)):
            p, label = d.iloc[part], str(level) if j == 0 else "_nolegend_"
            if j:  # across values of the design that were not run: a faint line, so the series reads as one
                ax.plot(d["_x"].iloc[part[0] - 1:part[0] + 1], d["score"].iloc[part[0] - 1:part[0] + 1],
                        color=colors[level], lw=0.8, alpha=0.45, zorder=1)
            if band and len(p) > 1:
                ax.plot(p["_x"], p["score"], marker="o", ms=3.5, color=colors[level], label=label)
                ax.fill_between(p["_x"], p["score"] - p["ci"], p["score"] + p["ci"], color=colors[level], alpha=0.2,
                                lw=0)
            else:
                _, caps, bars = ax.errorbar(p["_x"], p["score"], yerr=p["ci"], marker="o", ms=4, capsize=3,
                                            color=colors[level], ls="-" if len(p) > 1 else "none", label=label)
                for artist in (*caps, *bars) if pooled else ():  # over the squares: a bar shorter than one shows
                    artist.set(zorder=4, path_effects=OVER_MARKER)
        squares(ax, d, colors[level])
        bare = d[d["_none"]]  # no interval to draw (one pretraining seed, one fine-tuning seed): hollow
        if len(bare):
            ax.plot(bare["_x"], bare["score"], ls="none", marker="o", ms=5, mfc="white", color=colors[level],
                    zorder=3)
    if xpos:
        ax.set_xticks(list(xpos.values()), list(xpos))
        ax.set_xlim(min(xpos.values()) - 0.4, max(xpos.values()) + 0.4)


def skipped(xs, grid) -> list:
    """The values of ``grid`` (a design's x values) that lie between neighbouring values of ``xs`` (those drawn)."""
    xs, grid = np.sort(np.asarray(list(xs), dtype=float)), np.asarray(list(grid), dtype=float)
    return [g for a, b in zip(xs, xs[1:]) for g in grid if a < g < b]


def squares(ax, d: pd.DataFrame, color, x: str = "_x", y: str = "score", **style) -> None:
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


def plot_spread(ax, df: pd.DataFrame, hue: str, colors: dict) -> None:
    """Per dataset and hue level: every run's centered score (light dots) and mean +- sd (bar)."""
    datasets = ids.dataset_order(df["dataset"])
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
    crowded = len(datasets) > 2  # three long names side by side overlap: break each at its underscores
    ax.set_xticks(range(len(datasets)), [d.replace("_", "\n") if crowded else d for d in datasets])
    ax.set_xlim(-0.6, len(datasets) - 0.4)


def palette(name: str, levels) -> dict:
    levels = list(levels)
    return dict(zip(levels, sns.color_palette(name, len(levels)).as_hex()))


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


def draw_per_source(df: pd.DataFrame, out_dir, name: str, title, draw, xlabel: str, legend: str, *, tables: str = "",
                    ylabel: str = "", per_size: bool = False, controls: pd.DataFrame | None = None, reference=None,
                    x=None, one: str = "value", note=bars_note) -> Drawn:
    """One figure per source (and per size if ``per_size``) of task-group panels; return the PNG paths (`Drawn`). A
    figure of ours (any source but the paper) whose x axis, column ``x`` (or ``x(rows)``), has fewer than two values
    is not drawn, and ``skipped`` says so (``one``: what a value of ``x`` is, where the axis shows something else:
    Fig. 10 draws FLOPs, which differ between the objectives at a single checkpoint). ``title`` is a string or
    ``title(rows)``. With ``controls`` (``evidence.controls``), each panel also shows its models' controls
    (``reference``, default ``control_lines``). ``note(rows)`` is the line under the title that says what the bars are
    (`bars_note`)."""
    paths, skipped = [], []
    for source, scale, part in _by_source(df):
        for size, rows in by_size(part) if per_size else [("", part)]:
            what = title(rows) if callable(title) else title
            what = f"{what}, {size}" if size else what
            column = x(rows) if callable(x) else x
            if column is not None and source != "paper" and rows[column].nunique() < 2:
                skipped.append(f"{what.split(':')[0]} ({source_label(source, scale)}{', ' + size if size else ''}) "
                               f"is not drawn: its x axis{f' ({xlabel})' if xlabel else ''} would hold one {one} "
                               f"({_values(rows[column].dropna())}).")
                continue
            fig = _group_grid(rows, draw, f"{what} ({source_label(source, scale, tables)})", xlabel, legend, ylabel,
                              controls=controls, reference=reference, note="" if source == "paper" else note(rows))
            file = f"{name}_{size}" if size and part["size"].nunique() > 1 else name
            paths.append(save_source(fig, out_dir, source, scale, file))
    return Drawn(paths, skipped)


def positions(values, key=None) -> dict:
    return {v: i for i, v in enumerate(sorted(set(values), key=key))}


def steps_axis(ax, scale: str | None = None) -> None:
    """Steps in engineering notation (10k); for a scale of ours whose step is not the paper's, a second axis above
    in the paper's steps at the same fraction of the 42K budget (`config.ScaleConfig.paper_steps`: the twin's 5k is
    the paper's 10k), so that a reader meets the paper's units."""
    ax.xaxis.set_major_formatter(EngFormatter(sep=""))
    cfg = matching.placement(scale) if scale else None
    if cfg is not None and cfg.steps_per_k != 1000:
        top = ax.secondary_xaxis("top", functions=(cfg.paper_steps, lambda x: x * cfg.steps_per_k / 1000))
        top.xaxis.set_major_formatter(EngFormatter(sep=""))
        top.set_xlabel("the paper's step", fontsize="small")


def palettes(view: pd.DataFrame, name: str, levels) -> dict:
    """Per source and scale, colors for ``levels(part)``: one figure's colors never depend on another's data."""
    return {key: palette(name, levels(part)) for key, part in view.groupby(["source", "scale"])}


def source_key(d: pd.DataFrame) -> tuple:
    return d["source"].iloc[0], d["scale"].iloc[0]
