"""results/paper (the paper's tables as CSV), the results loader, aggregation, views, tables and claims."""

from __future__ import annotations

import json
import math
import re
import shutil

import numpy as np
import pandas as pd
import pytest
from mlmclm.errors import ResultFileError
from helpers import REPO, write_run, write_sample_tree, write_synthetic_study

from mlmclm import results, tables

PAPER = REPO / "results" / "paper"
PAPER_MD = REPO / "tests" / "data" / "paper_tables.md"  # the paper's Tables 2-17 as printed
# Models per table as printed: 3 sizes x 5 (Tables 2-5), 2 objectives x 6 steps (6-9), 3 budgets x 5 splits
# (10-13), 2 bases x 4 CPT lengths (14-17); each row has 3 datasets and the group average.
MODELS_PER_TABLE = {**dict.fromkeys(range(2, 6), 15), **dict.fromkeys(range(6, 10), 12),
                    **dict.fromkeys(range(10, 14), 15), **dict.fromkeys(range(14, 18), 8)}
CSV_COLUMNS = ["table", "model", "size", "objective", "mask_ratio", "steps", "clm_steps", "mlm_steps", "cpt_steps",
               "task_group", "dataset", "score", "ci"]


@pytest.fixture(scope="module")
def paper() -> pd.DataFrame:
    return results.load_paper(PAPER)


# ----------------------------------------------------------------------------------------------- results/paper


@pytest.mark.parametrize("number", range(2, 18))
def test_paper_table_shape(number):
    df = pd.read_csv(PAPER / f"table{number:02d}.csv")
    assert list(df.columns) == CSV_COLUMNS
    assert df["model"].nunique() == MODELS_PER_TABLE[number]
    assert len(df) == 4 * MODELS_PER_TABLE[number]
    assert (df["table"] == number).all() and df["task_group"].nunique() == 1
    assert (df.groupby("model")["dataset"].nunique() == 4).all() and (df["dataset"] == "Avg").sum() == len(df) // 4


def test_table1_shape():
    t1 = results.load_architecture(PAPER)
    assert list(t1.columns) == ["table", "setting", "size", "value"]
    assert (t1[t1["size"] != "all"].groupby("setting")["size"].nunique() == 3).all()
    assert set(results.architecture(PAPER)) == {"210M", "610M", "1B"}


def test_printed_averages_are_means_of_their_datasets(paper):
    # Every printed average is within rounding (0.01) of the mean of its three datasets: no exception is needed.
    datasets = paper[paper["dataset"] != "Avg"].groupby(["table", "model"])["score"].mean()
    printed = paper[paper["dataset"] == "Avg"].set_index(["table", "model"])["score"]
    off = (datasets - printed).abs()
    assert len(off) == sum(MODELS_PER_TABLE.values())
    assert off.max() <= 0.01 + 1e-9, off[off > 0.01]


def test_csv_columns_agree_with_model_ids():
    df = pd.concat([pd.read_csv(f) for f in sorted(PAPER.glob("table[0-9][0-9].csv")) if f.name != "table01.csv"])
    for model, row in df.drop_duplicates("model").set_index("model").iterrows():
        parsed = results.parse_model_id(model)
        for col in ("size", "objective", "steps", "clm_steps", "mlm_steps", "cpt_steps"):
            assert parsed[col] == row[col], (model, col)
        ratio = parsed["mask_ratio"]
        assert (pd.isna(ratio) and pd.isna(row["mask_ratio"])) or ratio == row["mask_ratio"], model


def test_models_printed_in_several_tables_agree(paper):
    per_cell = paper.groupby(["model", "task_group", "dataset"])[["score", "ci"]].nunique()
    assert (per_cell == 1).all().all()
    assert paper["model"].nunique() == 46


def _printed_tables() -> dict[int, list[str]]:
    lines, out = PAPER_MD.read_text().splitlines(), {}
    for i, line in enumerate(lines):
        m = re.match(r"^(?:### )?Table (\d+)\b.*(\(|columns)", line)
        if m and 2 <= int(m[1]) <= 17 and int(m[1]) not in out:
            j = next(k for k in range(i + 1, len(lines)) if lines[k].startswith("|"))
            rows = []
            while j < len(lines) and lines[j].startswith("|"):
                rows.append(lines[j])
                j += 1
            out[int(m[1])] = [rows[0], *rows[2:]]  # header, then the rows (no separator)
    return out


def test_tables_reproduce_paper_md_exactly(paper):
    printed = _printed_tables()
    assert sorted(printed) == list(range(2, 18))
    scores = results.dedupe(paper)
    for number, lines in printed.items():
        t = tables.study_table(scores, number)
        mine = ["| " + " | ".join(t.columns) + " |", *("| " + " | ".join(r) + " |" for r in t.values.tolist())]
        assert mine == lines, f"Table {number}"


def test_written_tables(tmp_path, paper):
    t = tables.study_table(results.dedupe(paper), 2)
    csv, tex = tables.write(t, tmp_path, "table02", "Table 2")
    assert pd.read_csv(csv, dtype=str, keep_default_na=False).equals(t)
    assert tex.read_text().startswith("% Table 2\n\\begin{tabular}") and "91.10 (±0.39)" in tex.read_text()
    arch = tables.architecture_table(PAPER)
    assert arch.set_index("Setting").loc["Embedding dim", "610M"] == "1,152"


# ----------------------------------------------------------------------------------------------- model ids


@pytest.mark.parametrize("model, expected", [
    ("610m-clm-42k", ("610M", "clm", None, 42000, 42000, 0, 0, False)),
    ("1b-mlm50-42k", ("1B", "mlm", 50, 42000, 0, 42000, 0, False)),
    ("610m-mlm40-42k-1000", ("610M", "mlm", 40, 1000, 0, 1000, 0, True)),
    ("610m-clm-10k-mlm40-42k", ("610M", "clm+mlm", 40, 42000, 10000, 32000, 0, False)),
    ("610m-clm-dec42k-mlm40-64k", ("610M", "clm+mlm", 40, 64000, 42000, 22000, 22000, False)),
    ("610m-mlm40-dec42k-mlm40-54k", ("610M", "mlm", 40, 54000, 0, 54000, 12000, False)),
    ("mini-s-clm-100-mlm30-400", ("mini-s", "clm+mlm", 30, 400, 100, 300, 0, False)),
    ("mini-l-clm-400-200", ("mini-l", "clm", None, 200, 200, 0, 0, True)),
    ("mini-m-clm-840-p1", ("mini-m", "clm", None, 840, 840, 0, 0, False, 1)),  # pretraining seed 1
    ("mini-m-mlm40-840-p1-420", ("mini-m", "mlm", 40, 420, 0, 420, 0, True, 1)),
    ("mini-m-mlm40-840-0", ("mini-m", "random", None, 0, 0, 0, 0, False)),  # step 0: the random-init control
    ("mini-m-clm-840-p2-0", ("mini-m", "random", None, 0, 0, 0, 0, False, 2)),
    ("610m-clm-10k-mlm40-42k-0", ("610M", "random", None, 0, 0, 0, 0, False)),
])
def test_parse_model_id(model, expected):
    got = results.parse_model_id(model)
    keys = ["size", "objective", "mask_ratio", "steps", "clm_steps", "mlm_steps", "cpt_steps", "intermediate",
            "pretrain_seed"]
    expected = expected if len(expected) == len(keys) else (*expected, 0)
    assert tuple(None if pd.isna(got[k]) else got[k] for k in keys) == expected


@pytest.mark.parametrize("model", ["610m", "610m-bert-42k", "610m-mlm40-10k-mlm40-42k", "610m-clm-dec42k",
                                   "610m-clm-42k-mlm40-10k", "610m-clm-42k-p", "610m-clm-42k-1-p1"])
def test_parse_model_id_rejects(model):
    with pytest.raises(ValueError, match=re.escape(repr(model))):
        results.parse_model_id(model)


# ----------------------------------------------------------------------------------------------- per-run results


def test_encodeval_sample_reproduces_table2(tmp_path):
    write_sample_tree(tmp_path)
    runs = results.load_run_tree(tmp_path, "encodeval", "paper", paper_datasets_only=True)
    assert set(runs["dataset"]) == {"SST-2"} and runs["path"].str.startswith("610m-").all()
    cells = results.aggregate(runs).set_index(["model", "dataset"])
    table2 = cells.xs("SST-2", level="dataset")[["score", "ci"]].round(2)
    assert table2.loc["610m-clm-42k"].tolist() == [91.10, 0.39]  # Table 2, 610M CLM, SST-2
    assert table2.loc["610m-mlm40-42k"].tolist() == [91.42, 0.62]  # Table 2, 610M MLM-40%, SST-2
    assert cells.loc[("610m-clm-42k", "SST-2"), "n"] == 5
    assert ("610m-clm-42k", "Avg") not in cells.index  # one SC dataset of three: no group average
    # The rejected alternative (encodeval-sample.md, rule a): one learning rate on the seed-averaged validation score.
    alt = results.aggregate(runs, rule="seed_average").set_index("model")["score"].round(2)
    assert (alt["610m-clm-42k"], alt["610m-mlm40-42k"]) == (91.08, 91.74)


def test_sample_csv_loads_with_unread_scores_missing():
    runs = results.load_run_csv(REPO / "results" / "samples" / "encodeval-610m-sst2.csv", "encodeval-sample")
    assert len(runs) == 50 and runs["test"].isna().sum() > 0 and runs["validation"].notna().all()
    cells = results.aggregate(runs).set_index("model")
    assert cells.loc["610m-mlm40-42k", "score"].round(2) == 91.42


def test_select_lr_per_seed_takes_each_seeds_best_validation(tmp_path):
    for seed, (v1, v2) in enumerate([(0.9, 0.8), (0.7, 0.95)]):
        write_run(tmp_path, "s-clm-10", "SC", "a", 1e-5, seed, v1, 0.1 + seed * 0.1)
        write_run(tmp_path, "s-clm-10", "SC", "a", 1e-4, seed, v2, 0.5 + seed * 0.1)
    sel = results.select_lr(results.load_run_tree(tmp_path, "ours", "tiny"))
    assert sel.sort_values("seed")["lr"].tolist() == [1e-5, 1e-4]
    score, ci, n = results.mean_ci(sel["test"])
    assert (round(score, 6), n) == (35.0, 2)
    assert math.isclose(ci, 12.7062 * np.std([10.0, 60.0], ddof=1) / math.sqrt(2))  # Student's t, 1 dof


def test_ir_run_folders_with_a_training_set_prefix(tmp_path):
    write_run(tmp_path, "610m-clm-42k", "IR", "mldr_en", 1e-4, 0, 0.5, 0.4, prefix="msmarco_pairs_")
    runs = results.load_run_tree(tmp_path, "encodeval", "paper", paper_datasets_only=True)
    assert runs[["dataset", "lr", "seed", "test"]].values.tolist() == [["MLDR", 1e-4, 0, 40.0]]


@pytest.mark.parametrize("content, fault", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "expected a JSON object"),
    (json.dumps({"validation": {"score": 0.5}}), "no 'test' object"),
    (json.dumps({"validation": {"score": 0.5}, "test": {"scores_i": []}}), "'test' has no 'score'"),
    (json.dumps({"validation": {"score": "0.5"}, "test": {"score": 0.5}}), "validation.score is '0.5'"),
    (json.dumps({"validation": {"score": 0.5}, "test": {"score": 91.1}}),
     r"test.score is 91.1, expected a number in \[0, 1\]"),
    (json.dumps({"validation": {"score": 0.5}, "test": {"score": 0.5}, "meta": []}), "'meta' must be an object"),
])
def test_malformed_result_file_names_path_and_fault(tmp_path, content, fault):
    path = tmp_path / "m-clm-10" / "SC" / "sst2" / "lr1e-04_sd0" / "results.json"
    path.parent.mkdir(parents=True)
    path.write_text(content)
    with pytest.raises(ResultFileError, match=fault) as err:
        results.load_run_tree(tmp_path, "ours", "tiny")
    assert str(err.value).startswith(f"{path}: ")


def test_badly_named_run_folder_and_group(tmp_path):
    write_run(tmp_path, "m-clm-10", "SC", "sst2", 1e-4, 0, 0.5, 0.5)
    (tmp_path / "m-clm-10" / "SC" / "sst2" / "lr1e-04_sd0").rename(tmp_path / "m-clm-10" / "SC" / "sst2" / "run0")
    with pytest.raises(ResultFileError, match="run folder 'run0' is not named"):
        results.load_run_tree(tmp_path, "ours", "tiny")
    other = tmp_path / "b"
    write_run(other, "m-clm-10", "XX", "sst2", 1e-4, 0, 0.5, 0.5)
    with pytest.raises(ResultFileError, match="task group 'XX'"):
        results.load_run_tree(other, "ours", "tiny")


def test_learning_rates_keep_their_digits_in_run_folders(tmp_path):
    """1e-2 and 1.5e-2 get folders of their own (one significant digit would name both lr1e-02) and load back as
    themselves; a one-digit learning rate keeps its short name."""
    for lr in (1e-2, 1.5e-2, 1.5e-3):
        write_run(tmp_path, "m-clm-10", "SC", "sst2", lr, 0, 0.5, 0.5)
    names = sorted(p.name for p in (tmp_path / "m-clm-10" / "SC" / "sst2").iterdir())
    assert names == ["lr1.5e-02_sd0", "lr1.5e-03_sd0", "lr1e-02_sd0"]
    assert sorted(results.load_run_tree(tmp_path, "ours", "tiny")["lr"]) == [1.5e-3, 1e-2, 1.5e-2]


def test_load_combines_paper_and_our_runs(tmp_path):
    (tmp_path / "paper").symlink_to(PAPER)
    write_synthetic_study(tmp_path / "runs" / "mini")
    res = results.load(tmp_path, scale="mini")
    summary = res.summary().set_index("source")
    assert summary.loc["paper", "models"] == 46 and summary.loc["ours", "runs"] == len(res.runs) == 18 * 5 * 9
    assert res.runs["path"].str.startswith(f"{tmp_path.name}/runs/mini/").all()  # relative to results/'s parent
    ours = res.scores[res.scores["source"] == "ours"]
    assert (ours["n"] == 3).all() and set(ours["scale"]) == {"mini"}
    sc = ours[(ours["model"] == "mini-m-clm-400") & (ours["task_group"] == "SC")].set_index("dataset")["score"]
    assert math.isclose(sc["Avg"], (sc["SST-2"] + sc["toy_sc"]) / 2)
    # Every study view finds our runs, and the paper-layout tables render for them.
    assert set(results.biphasic_view(ours)["clm_share"]) == {0, 25, 50, 75, 100}
    assert set(results.cpt_view(ours)["base"]) == {"CLM", "MLM"}
    assert len(tables.study_table(res.scores, 10, source="ours")) == 5


def test_centered_scores_and_masking_spread(tmp_path):
    write_synthetic_study(tmp_path)
    runs = results.load_run_tree(tmp_path, "ours", "mini")
    c = results.centered_scores(runs)  # a scale of ours spreads over its whole grid ...
    assert set(c["lr"]) == {1e-5, 1e-4, 1e-3} and set(c["model"]) == {"mini-m-clm-400", "mini-m-mlm40-400"}
    c = results.centered_scores(runs.assign(scale="paper"))  # ... the paper's grid over 1e-5 .. 1e-4 (Fig. 5)
    assert set(c["lr"]) == {1e-5, 1e-4}
    assert results.centered_scores(runs[runs["lr"] == 1e-3]).empty  # one learning rate: no spread over them
    assert c.groupby(["model", "dataset"])["centered"].mean().abs().max() < 1e-9
    m = results.masking_ratio_spread(runs)
    assert set(m["family"]) == {"MLM", "CLM+MLM"} and set(m["mask_ratio"]) == {20, 30, 40, 50}
    assert set(m[m["family"] == "CLM+MLM"]["clm_steps"]) == {380}


def test_flops_mlm_step_is_cheaper_than_clm():
    arch = results.architecture(PAPER)["610M"]
    clm, mlm = results.flops_per_step(arch, 1.0), results.flops_per_step(arch, 0.4)
    assert mlm < clm < 8 * 0.8e9 * arch["tokens_per_step"]


# ----------------------------------------------------------------------------------------------- intervals, grids


@pytest.mark.parametrize("dof", [1, 2, 3, 5, 10, 30, 31, 50, 200])
def test_t95_is_students_quantile(dof):
    # P(T <= t95) = 0.975, by integrating Student's density numerically (no scipy here)
    t = results.t95(dof)
    x = np.linspace(0, t, 200_001)
    logc = math.lgamma((dof + 1) / 2) - math.lgamma(dof / 2) - 0.5 * math.log(dof * math.pi)
    density = np.exp(logc - (dof + 1) / 2 * np.log1p(x ** 2 / dof))
    assert abs(0.5 + np.trapezoid(density, x) - 0.975) < 2e-5
    assert results.t95(10 ** 6) == pytest.approx(1.96, abs=1e-4) and math.isnan(results.t95(0))


def test_half_width_is_students_for_our_runs_and_196_for_the_papers():
    values = [60.0, 62.0, 67.0]
    s = np.std(values, ddof=1) / math.sqrt(3)
    assert results.mean_ci(values)[1] == pytest.approx(4.3027 * s)  # t with 2 dof, not 1.96
    assert results.mean_ci(values, student=False)[1] == pytest.approx(1.96 * s)
    assert math.isnan(results.mean_ci([60.0])[1])


def test_flag_marks_cells_with_fewer_seeds(tmp_path):
    for model, seeds in (("s-clm-10", range(4)), ("s-mlm40-10", range(2))):
        for sd in seeds:
            write_run(tmp_path, model, "SC", "a", 1e-3, sd, 0.5, 0.5 + sd / 100)
    scores = results.aggregate(results.load_run_tree(tmp_path, "ours", "tiny")).set_index(["model", "dataset"])
    assert scores.loc[("s-mlm40-10", "a"), "flag"] == "n=2 of 4 seeds"
    assert scores.loc[("s-mlm40-10", "Avg"), "flag"] == "n=2 of 4 seeds"
    assert scores.loc[("s-clm-10", "a"), "flag"] == "" and scores.loc[("s-clm-10", "a"), "n"] == 4


def test_load_reads_the_stability_grid_and_baselines_apart(tmp_path):
    (tmp_path / "paper").symlink_to(PAPER)
    for model in ("mini-m-clm-840", "mini-m-clm-840-p1", "mini-m-mlm40-840", "mini-m-mlm40-840-0"):
        for sd in range(2):
            path = write_run(tmp_path / "runs" / "mini", model, "SC", "toy_sc", 1e-3, sd, 0.6, 0.6)
            doc = json.loads(path.read_text())
            path.write_text(json.dumps({**doc, "baselines": {"majority": {"validation": 0.3, "test": 0.25}}}))
    for lr in (1e-4, 1e-2):  # a stability grid of its own: other learning rates, a much better validation score
        write_run(tmp_path / "runs" / "stability" / "mini", "mini-m-clm-840", "SC", "toy_sc", lr, 0, 0.99, 0.1)
    res = results.load(tmp_path, sources=["ours"], scale="mini")
    runs = res.runs
    assert runs.groupby("grid").size().to_dict() == {"default": 8, "stability": 2}
    assert runs.loc[runs["grid"] == "default", "majority"].eq(25.0).all()
    assert runs.loc[runs["grid"] == "stability", "majority"].isna().all()
    assert runs["path"].str.contains("runs/stability/mini/").sum() == 2
    clm = res.scores[(res.scores["model"] == "mini-m-clm-840") & (res.scores["dataset"] == "toy_sc")]
    assert clm["score"].tolist() == [60.0]  # the stability grid never leaks into the default grid's scores
    assert set(results.stability_grid(runs)["grid"]) == {"stability"}
    # The study views keep pretraining seed 0 and leave the random-init control out.
    assert set(results.scaling_view(res.scores)["model"]) == {"mini-m-clm-840", "mini-m-mlm40-840"}
    attrs = res.scores.drop_duplicates("model").set_index("model")
    assert attrs.loc["mini-m-clm-840-p1", "pretrain_seed"] == 1 and attrs.loc["mini-m-mlm40-840-0", "objective"] == \
        "random"


def test_malformed_majority_baseline_names_the_file(tmp_path):
    path = write_run(tmp_path, "m-clm-10", "SC", "sst2", 1e-4, 0, 0.5, 0.5)
    path.write_text(json.dumps({**json.loads(path.read_text()), "baselines": {"majority": {"test": 31.3}}}))
    with pytest.raises(ResultFileError, match=r"baselines.majority.test is 31.3"):
        results.load_run_tree(tmp_path, "ours", "tiny")


@pytest.mark.parametrize("line, fault", [
    ("garbage", r"line 3: step 'garbage' is not a number"),
    ("2,1.5,0.1,extra,fields", "line 3 has 5 fields, the header 3"),
    ("2,lots,0.1", r"line 3: loss 'lots' is not a number"),
    ("", "line 3: no step"),
])
def test_a_garbage_line_in_pretrain_csv_names_the_file_and_the_line(tmp_path, line, fault):
    path = tmp_path / "m-clm-10" / "pretrain.csv"
    path.parent.mkdir()
    path.write_text(f"step,loss,lr\n1,2.0,0.1\n{line}\n3,1.0,0.1\n")
    with pytest.raises(ResultFileError, match=fault) as err:
        results.load_pretrain_logs(tmp_path)
    assert str(err.value).startswith(f"{path}: ") and "\n" not in str(err.value)
    path.write_text("step,loss,lr\n1,2.0,0.1\n3,1.0,0.1\n")
    assert results.load_pretrain_logs(tmp_path)["step"].tolist() == [1, 3]


def test_a_result_in_a_folder_its_meta_does_not_name_is_not_counted(tmp_path, capsys):
    """A stray copy (another seed's, another learning rate's, another model's result) never enters an average; a
    result whose meta names no folder (EncodEval's) is read as before."""
    def meta(model, lr, seed):
        return {"scale": "tiny", "model_id": model, "group": "SC", "dataset": "a", "lr": lr, "seed": seed}

    tree = tmp_path / "tiny"
    write_run(tree, "m-clm-10", "SC", "a", 1e-3, 0, 0.5, 0.5, meta=meta("m-clm-10", 1e-3, 0))
    write_run(tree, "m-clm-10", "SC", "a", 1e-3, 1, 0.9, 0.9, meta=meta("m-clm-10", 1e-3, 0))  # seed 0's, again
    write_run(tree, "m-clm-10", "SC", "a", 3e-3, 0, 0.9, 0.9, meta=meta("m-clm-10", 1e-3, 0))  # another lr's
    write_run(tree, "m-mlm40-10", "SC", "a", 1e-3, 0, 0.9, 0.9, meta=meta("m-clm-10", 1e-3, 0))  # another model's
    write_run(tree, "m-mlm40-10", "SC", "a", 1e-3, 1, 0.7, 0.7)  # no meta: not judged
    capsys.readouterr()
    runs = results.load_run_tree(tree, "ours", "tiny")
    assert sorted(zip(runs["model"], runs["lr"], runs["seed"])) == [("m-clm-10", 1e-3, 0), ("m-mlm40-10", 1e-3, 1)]
    said = capsys.readouterr().out
    assert said.startswith("3 results.json not counted, not in the folder their meta names: ") and \
        "its meta names tiny/m-clm-10/SC/a/lr1e-03_sd0/, not the folder it lies in (and more)" in said


def test_two_scales_of_one_size_keep_their_own_full_budget(tmp_path):
    # long and longer both train mini-xs, to 4,620 and 9,240 steps: each scale's final models are its own, not only
    # those of the scale that trained longest (a full budget is per source, scale and size)
    for scale, steps in (("long", 4620), ("longer", 9240)):
        for model in (f"mini-xs-clm-{steps}", f"mini-xs-mlm40-{steps}"):
            write_run(tmp_path / "runs" / scale, model, "SC", "toy_sc", 1e-3, 0, 0.6, 0.6)
    scores = pd.concat([results.load(tmp_path, sources=["ours"], scale=s).scores for s in ("long", "longer")])
    final = results.scaling_view(scores).drop_duplicates("model")
    assert sorted(zip(final["scale"], final["steps"])) == [("long", 4620)] * 2 + [("longer", 9240)] * 2


def test_crossover_table_puts_the_paper_at_our_tokens_per_parameter_on_every_axis():
    # the paper's 610M checkpoints at 1,000 and 10,000 steps (gaps -4 and +2): 10 and 100 tokens per body parameter,
    # 2 and 20 per body+embedding parameter, 1 and 10 per parameter. Ours at 316,228 steps: 31.6 per body parameter
    # (half-way in log tokens: -1.00), 15.8 per body+embedding parameter (0.898 of the way: +1.39), 3.16 per
    # parameter (half-way: -1.00); ours at 3M steps lies past the paper's last checkpoint on every axis: blank
    lead = pd.DataFrame({
        "source": ["paper", "paper", "ours", "ours"], "scale": ["paper", "paper", "longer", "longer"],
        "size": ["610M", "610M", "mini-xs", "mini-xs"], "task_group": "SC", "steps": [1000, 10000, 316228, 3000000],
        "final": [False, False, False, True], "gap": [-4.0, 2.0, 0.5, 1.5], "gap_ci": [0.3, 0.3, 0.4, float("nan")],
        "pretrain_seeds": [1, 1, 1, 3]})
    per_axis = {"body": {"610M": 0.01, "mini-xs": 1e-4}, "body+embedding": {"610M": 0.002, "mini-xs": 5e-5},
                "all": {"610M": 0.001, "mini-xs": 1e-5}}
    table = tables.crossover_table(lead, per_axis)
    assert table["Tokens per body parameter"].tolist() == [31.6, 300.0]
    assert table["paper 610M (body)"].tolist() == ["-1.00", ""]
    assert table["Tokens per body+embedding parameter"].tolist() == [15.8, 150.0]
    assert table["paper 610M (body+embedding)"].tolist() == ["+1.39", ""]
    assert table["Tokens per parameter (all)"].tolist() == [3.2, 30.0]
    assert table["paper 610M (all)"].tolist() == ["-1.00", ""]
    assert table[tables.LEAD_COLUMN].tolist() == ["+0.50 ± 0.40", "+1.50"]
    assert "± 95%" in tables.LEAD_COLUMN
    assert table["Model"].tolist() == ["316,228 steps (the paper's 1,437.4K)",  # longer: 220 steps for 1K of the paper's
                                       "3,000,000 steps (decayed final; the paper's 13,636.4K)"]
    assert tables._steps_label("twin", 2500, False) == "2,500 steps (the paper's 5K)"
    assert tables._steps_label("nowhere", 2500, True) == "2,500 steps (decayed final)"
    body_only = tables.crossover_table(lead, {"body": per_axis["body"]})  # one axis: its two columns only
    assert list(body_only.columns)[-2:] == ["Tokens per body parameter", "paper 610M (body)"]


def test_crossover_axes_table_says_where_the_answer_depends_on_the_axis():
    # the paper's SC turns positive at 2,000 steps, back below at 4,000, and positive for good between 4,000 (-1) and
    # 8,000 (+3): a quarter of the way in log steps, 4,757 steps = 47.6 tokens per body parameter, 23.8 per
    # body+embedding parameter. Our final model at 600,000 steps: 60 per body parameter (passed), 18 per
    # body+embedding parameter (not yet): the answer depends on the axis. The paper's TC never turns positive: no
    # crossover on any axis, so not. No output-layer count of ours: the "all" axis has no answer.
    paper_steps, sc, tc = [1000, 2000, 4000, 8000], [-1.0, 1.0, -1.0, 3.0], [-3.0, -2.0, -1.0, -0.5]
    lead = pd.DataFrame({
        "source": ["paper"] * 8 + ["ours"] * 2, "scale": ["paper"] * 8 + ["longer"] * 2,
        "size": ["610M"] * 8 + ["mini-xs"] * 2, "task_group": ["SC"] * 4 + ["TC"] * 4 + ["SC", "TC"],
        "steps": paper_steps * 2 + [600000] * 2, "final": [False] * 8 + [True] * 2,
        "gap": sc + tc + [-0.5, 0.3], "gap_ci": 0.2, "pretrain_seeds": [1] * 8 + [3] * 2})
    per_axis = {"body": {"610M": 0.01, "mini-xs": 1e-4}, "body+embedding": {"610M": 0.005, "mini-xs": 3e-5},
                "all": {"610M": 0.004}}
    found = tables.crossover_axes_table(lead, per_axis).set_index("Group")
    assert found.loc["SC", "paper 610M crossover (body)"] == "47.6"
    assert found.loc["SC", "paper 610M crossover (body+embedding)"] == "23.8"
    assert (found.loc["SC", "ours (body)"], found.loc["SC", "ours (body+embedding)"]) == (60.0, 18.0)
    assert [found.loc["SC", f"passed ({a})"] for a in per_axis] == ["yes", "no", ""]
    assert found.loc["SC", "Depends on the axis"] == "yes"
    assert [found.loc["TC", f"passed ({a})"] for a in per_axis] == ["no crossover", "no crossover", ""]
    assert found.loc["TC", "paper 610M crossover (body)"] == "none by 80.0"
    assert found.loc["TC", "Depends on the axis"] == "no"
    assert found.loc["SC", tables.LEAD_COLUMN] == "-0.50 ± 0.20"


def test_show_crossover_writes_both_tables_and_says_which_interval_its_plus_minus_is(tmp_path):
    # the crossover table's ± is the verdicts table's interval of the same difference: its caption says so
    lead = pd.DataFrame({
        "source": ["paper", "paper", "ours"], "scale": ["paper", "paper", "longer"],
        "size": ["610M", "610M", "mini-xs"], "task_group": "SC", "steps": [1000, 10000, 600000], "final": [False, False, True], "gap": [-4.0, 2.0, 0.5],
        "gap_ci": 0.3, "pretrain_seeds": [1, 1, 3]})
    per_axis = {"body": {"610M": 0.01, "mini-xs": 1e-4}, "body+embedding": {"610M": 0.005, "mini-xs": 5e-5},
                "all": {"610M": 0.004, "mini-xs": 1e-5}}
    tables.show_crossover(lead, per_axis, tmp_path)
    caption = (tmp_path / "crossover.tex").read_text().splitlines()[0]
    assert "the verdicts table's interval of the same difference" in caption and "pretraining-seed means" in caption
    written = pd.read_csv(tmp_path / "crossover.csv")
    assert written[tables.LEAD_COLUMN].tolist() == ["+0.50 ± 0.30"]
    found = pd.read_csv(tmp_path / "crossover-axes.csv", keep_default_na=False)
    # the paper crosses at 10^(3 + 4/6) = 4,642 steps: 46.4, 23.2 and 18.6 tokens per parameter on the three axes;
    # ours at 600,000 steps: 60, 30 and 6, passed on every axis but "all"
    assert found[["passed (body)", "passed (body+embedding)", "passed (all)"]].values.tolist() == [["yes", "yes", "no"]]
    assert found["Depends on the axis"].tolist() == ["yes"]
    assert (tmp_path / "crossover-axes.tex").read_text().startswith("% Has ours passed the paper's crossover?")


def test_a_run_whose_config_trains_another_model_than_its_folder_names_is_refused(tmp_path):
    """A folder named as a model id must hold that model: a record whose config trains another model (an MLM run in
    a CLM-named folder) is refused, not read under the name it does not train."""
    from mlmclm.analysis.loading.run_tree import load_run_tree
    from mlmclm.errors import ResultFileError

    write_run(tmp_path, "tiny-m-clm-42", "TC", "toy_pos", 1e-3, 0, 0.5, 0.5)
    (tmp_path / "tiny-m-clm-42" / "config.yaml").write_text(
        "run_id: tiny-m-clm-42\nscale: tiny\nphases: [[clm, 42]]\nmodel: {size: tiny-m}\noptim: {warmup_steps: 2, decay_steps: 2}\n")
    assert set(load_run_tree(tmp_path, "ours", "tiny")["model"]) == {"tiny-m-clm-42"}
    (tmp_path / "tiny-m-clm-42" / "config.yaml").write_text(
        "run_id: tiny-m-clm-42\nscale: tiny\nphases: [[mlm40, 42]]\nmodel: {size: tiny-m}\noptim: {warmup_steps: 2, decay_steps: 2}\n")
    with pytest.raises(ResultFileError, match="trains tiny-m-mlm40-42, not the tiny-m-clm-42 its folder names"):
        load_run_tree(tmp_path, "ours", "tiny")


def test_the_crossover_plus_minus_is_the_verdicts_interval_of_the_same_difference(tmp_path):
    """One interval a statistic (issue 45): at a one-size scale, MLM-40% minus CLM of the final models has the same
    95% interval in claim 1's verdict row and in `points.mlm_lead` (the crossover tables, Fig. 4 across scales)."""
    from helpers import write_planted

    from mlmclm import claims
    from mlmclm.analysis.drawing import points

    rates = {"mini-m-clm-400": 0.5, "mini-m-mlm40-400": 0.6, "mini-m-mlm40-400-0": 0.2, "mini-m-clm-400-p1": 0.52,
             "mini-m-mlm40-400-p1": 0.57, "mini-m-clm-400-200": 0.45, "mini-m-mlm40-400-200": 0.5}
    write_planted(tmp_path, rates, majority=0.25, lrs=(1e-3, 3e-3, 1e-2), n=2000)
    runs = results.load_run_tree(tmp_path, "ours", "mini")
    scores = results.aggregate(runs)
    v = claims.verdicts(scores, runs, ["1"], full=True).set_index("scope")
    lead = points.mlm_lead(scores)
    final = lead[lead["final"].astype(bool)].set_index("task_group")
    for group in ("SC", "TC"):
        assert abs(final.at[group, "gap"] - v.at[group, "value"]) < 0.006
        assert abs(final.at[group, "gap_ci"] - (v.at[group, "ci_high"] - v.at[group, "ci_low"]) / 2) < 0.006


@pytest.mark.parametrize("table, text, says", [("table05.csv", "", "empty (no header)"),
                                               ("table05.csv", "table,model,task_group,dataset,score,ci\n",
                                                "a header and no rows"),
                                               ("table01.csv", "setting,value\nLayers,28\n", "missing column(s) size"),
                                               ("table07.csv", "a,b\n1,2\n1,2,3,4\n", "not a readable CSV"),
                                               ("table05.csv", "score abc", "score 'abc' in row 3 is not a number"),
                                               ("table05.csv", None, "not a readable CSV (Is a directory)"),
                                               ("table05.csv", "", "missing")])
def test_an_empty_or_damaged_paper_table_is_refused_naming_it_before_a_notebook_writes(table, text, says, tmp_path):
    """An empty, header-only, damaged or missing table of the paper's, a word in a score's cell, a folder in a
    table's place: one line naming the file and how to restore it, from the notebooks' setup, before any figure or
    table is written (it was a pandas error naming no file, or the table's rows silently gone)."""
    from mlmclm import notebooks

    shutil.copytree(PAPER, tmp_path / "results" / "paper")
    path = tmp_path / "results" / "paper" / table
    if says == "missing":
        path.unlink()
    elif text is None:
        path.unlink()
        path.mkdir()
    elif text == "score abc":
        lines = path.read_text().splitlines()
        cells = lines[2].split(",")
        cells[lines[0].split(",").index("score")] = "abc"
        path.write_text("\n".join([*lines[:2], ",".join(cells), *lines[3:]]) + "\n")
    else:
        path.write_text(text)
    with pytest.raises(ResultFileError, match=re.escape(f"{table}: {says}")) as e:
        notebooks.setup(tmp_path, results_dir="results", sources=["paper"], scales=None,
                        figures_dir=str(tmp_path / "figures"), tables_dir=str(tmp_path / "tables"))
    assert "git checkout -- results/paper" in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "figures").exists() and not (tmp_path / "tables").exists()


@pytest.mark.parametrize("text, says", [("", "empty (no header)"), ("x,y\n1,2\n", "missing column(s) claim, group"),
                                        (None, "not a readable CSV (Is a directory)")])
def test_an_empty_verdicts_table_is_refused_naming_it_before_a_notebook_writes(text, says, tmp_path):
    """A verdicts table the notebooks would add their rows to, empty or without its columns: one line naming it
    and what to do, before anything is written (a header-only one is read as holding no rows)."""
    from mlmclm import notebooks

    shutil.copytree(PAPER, tmp_path / "results" / "paper")
    (tmp_path / "tables" / "ours-mini").mkdir(parents=True)
    if text is None:
        (tmp_path / "tables" / "ours-mini" / "verdicts.csv").mkdir()
    else:
        (tmp_path / "tables" / "ours-mini" / "verdicts.csv").write_text(text)
    with pytest.raises(ResultFileError, match=re.escape(f"verdicts.csv: {says}")) as e:
        notebooks.setup(tmp_path, results_dir="results", sources=["paper"], scales=None,
                        figures_dir=str(tmp_path / "figures"), tables_dir=str(tmp_path / "tables"))
    assert "delete it" in str(e.value)
    if text is None:
        (tmp_path / "tables" / "ours-mini" / "verdicts.csv").rmdir()
    (tmp_path / "tables" / "ours-mini" / "verdicts.csv").write_text("claim,group\n")
    assert notebooks.read_verdicts(tmp_path / "tables" / "ours-mini" / "verdicts.csv").empty
