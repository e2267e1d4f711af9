"""The paper's Tables 1-17 in their printed layout, from any source's scores, written as CSV and LaTeX.

A table is a study view (mlmclm.analysis.results) of one task group, one row per model in the paper's order, with the
paper's row labels and "91.10 (±0.39)" cells. From ``source="paper"`` they reproduce the printed tables exactly.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from . import results as R

STUDIES = {
    "scaling": (R.scaling_view, ["Size", "Obj", "Mask"]),
    "data_efficiency": (R.data_efficiency_view, ["Obj", "Step"]),
    "biphasic": (R.biphasic_view, ["Budget", "Mix"]),
    "cpt": (R.cpt_view, ["Base", "CPT"]),
}
# Table number -> (study, task group), as in the paper.
TABLES = {2 + i: (study, group) for i, (study, group) in enumerate(
    (s, g) for s in STUDIES for g in R.GROUPS)}
TITLES = {
    "scaling": "MLM vs. CLM downstream performance on {group} datasets",
    "data_efficiency": "MLM vs. CLM downstream performance on {group} datasets at various pretraining checkpoints",
    "biphasic": "Impact of the CLM-to-MLM pretraining steps ratio on {group} datasets (PFS)",
    "cpt": "Impact of continued MLM pretraining on MLM- and CLM-pretrained models on {group} datasets",
}


def _labels(r, study: str) -> list[str]:
    obj = "CLM" if r.objective == "clm" else "MLM"
    if study == "scaling":
        return [r.size, obj, "–" if pd.isna(r.mask_ratio) else f"{r.mask_ratio}%"]
    if study == "data_efficiency":
        return [obj, R.step_label(r.steps)]
    if study == "biphasic":
        return [R.step_label(r.steps), f"{R.step_label(r.clm_steps)}+{R.step_label(r.mlm_steps)}"]
    return [r.base, "–" if r.cpt_steps == 0 else R.step_label(r.cpt_steps)]


def _order(view: pd.DataFrame, study: str) -> pd.DataFrame:
    """The paper's row order: by size, MLM before CLM, then masking ratio, step, budget, CLM share or CPT length."""
    clm = (view["objective"] == "clm").astype(int)
    if study == "scaling":
        keys = [clm, view["mask_ratio"].fillna(0)]
    elif study == "data_efficiency":
        keys = [clm, view["steps"]]
    elif study == "biphasic":
        keys = [view["steps"], view["clm_steps"]]
    else:
        keys = [(view["base"] == "CLM").astype(int), view["cpt_steps"]]
    order = pd.DataFrame({f"k{i}": k.to_numpy() for i, k in enumerate([view["size"].map(R.size_key), *keys])},
                         index=view.index)
    return view.loc[order.sort_values(list(order.columns), kind="stable").index]


def cell(score: float, ci: float) -> str:
    return f"{score:.2f}" if pd.isna(ci) else f"{score:.2f} (±{ci:.2f})"


def study_table(scores: pd.DataFrame, number: int, source: str = "paper") -> pd.DataFrame:
    """Table ``number`` (2-17) of ``source``'s scores, in the paper's layout; empty if the source lacks the study."""
    study, group = TABLES[number]
    view_fn, label_cols = STUDIES[study]
    view = view_fn(scores[(scores["source"] == source) & (scores["task_group"] == group)])
    if view.empty:
        return pd.DataFrame(columns=label_cols)
    datasets = R.dataset_order(view["dataset"])
    models = _order(view.drop_duplicates("model"), study)
    cells = view.set_index(["model", "dataset"])
    rows = []
    for r in models.itertuples():
        row = dict(zip(label_cols, _labels(r, study)))
        for d in [*datasets, R.AVG]:
            row[d] = cell(*cells.loc[(r.model, d), ["score", "ci"]]) if (r.model, d) in cells.index else ""
        rows.append(row)
    table = pd.DataFrame(rows)
    return table.loc[:, (table != "").any()]  # no all-empty column (a source without group averages)


def architecture_table(paper_dir: str | Path) -> pd.DataFrame:
    """Table 1: one row per setting, one column per size (shared settings repeated in each)."""
    t1 = R.load_architecture(paper_dir)
    sizes = [s for s in t1["size"].unique() if s != "all"]
    rows = []
    for setting, part in t1.groupby("setting", sort=False):
        values = dict(zip(part["size"], part["value"]))
        rows.append({"Setting": setting, **{s: _thousands(values.get(s, values.get("all"))) for s in sizes}})
    return pd.DataFrame(rows)


def _thousands(value: str) -> str:
    return f"{int(value):,}" if value.isdigit() and int(value) >= 1000 else value


def write(table: pd.DataFrame, out_dir: str | Path, name: str, caption: str = "") -> list[Path]:
    """Write ``<name>.csv`` and ``<name>.tex`` (a booktabs tabular, with the caption as a comment)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    csv, tex = out / f"{name}.csv", out / f"{name}.tex"
    table.to_csv(csv, index=False, lineterminator="\n")
    latex = table.to_latex(index=False, escape=True, column_format="l" * table.shape[1])
    tex.write_text((f"% {caption}\n" if caption else "") + latex)
    return [csv, tex]


def show(scores: pd.DataFrame, numbers, tables_dir: str | Path) -> None:
    """Write tables ``numbers`` of every source that has them (CSV + LaTeX) and display them in a notebook."""
    from IPython.display import Markdown, display

    for (source, scale), part in scores.groupby(["source", "scale"], sort=False):
        for number in numbers:
            table = study_table(part, number, source)
            if table.empty:
                continue
            study, group = TABLES[number]
            where = "paper" if source == "paper" else R.output_subdir(source, scale)
            caption = f"Table {number}: {TITLES[study].format(group=group)} ({where})"
            write(table, Path(tables_dir) / R.output_subdir(source, scale), f"table{number:02d}", caption)
            display(Markdown(f"**{caption}**"))
            display(table.set_index(STUDIES[study][1]))


def show_architecture(paper_dir: str | Path, tables_dir: str | Path) -> None:
    """Write and display Table 1."""
    from IPython.display import Markdown, display

    caption = "Table 1: Architecture and training settings for the 3 model sizes"
    table = architecture_table(paper_dir)
    write(table, tables_dir, "table01", caption)
    display(Markdown(f"**{caption}**"))
    display(table.set_index("Setting"))
