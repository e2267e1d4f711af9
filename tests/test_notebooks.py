"""The five notebooks: committed executed and clean, parameterised for papermill, and runnable elsewhere."""

from __future__ import annotations

import ast
import json
import os
import re

import pytest
from helpers import REPO, write_run, write_synthetic_study

from mlmclm import notebooks
from mlmclm.io import working_root

PARAMETERS = {"results_dir", "sources", "scales", "figures_dir", "tables_dir", "encodeval_dir", "run_study"}
# Plotting or aggregation in a notebook would bypass mlmclm: none of these may appear in a code cell.
FORBIDDEN = ("plt.", "sns.", "matplotlib", ".groupby(", ".mean(", ".plot(", "savefig", "pd.")


def _load(name: str) -> dict:
    return json.loads((REPO / "notebooks" / f"{name}.ipynb").read_text())


def _outputs_text(cell: dict) -> str:
    parts = []
    for out in cell.get("outputs", []):
        parts.append("".join(out.get("text", "")))
        for mime, value in out.get("data", {}).items():
            if not mime.startswith("image/"):
                parts.append("".join(value) if isinstance(value, list) else str(value))
    return "\n".join(parts)


@pytest.mark.parametrize("name", notebooks.NOTEBOOKS)
def test_notebook_is_committed_executed_and_clean(name):
    nb = _load(name)
    assert nb["metadata"]["kernelspec"]["name"] == "python3" and "papermill" not in nb["metadata"]
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    params = [c for c in code if "parameters" in c["metadata"].get("tags", [])]
    assert len(params) == 1 and code[0] is params[0]
    names = {t.id for node in ast.parse("".join(params[0]["source"])).body for t in node.targets}
    assert PARAMETERS <= names
    for cell in code:
        source = "".join(cell["source"])
        assert cell["execution_count"] is not None, source
        assert not any(bad in source for bad in FORBIDDEN), source
        assert all(o["output_type"] != "error" and o.get("name") != "stderr" for o in cell["outputs"]), source
        text = _outputs_text(cell)
        assert str(REPO) not in text and "<Figure size" not in text and " at 0x" not in text, source
    assert nb["cells"][0]["cell_type"] == "markdown"
    assert "verdicts" in "".join(code[-1]["source"])


def test_main_rejects_unknown_notebooks(capsys):
    with pytest.raises(SystemExit):
        notebooks.main(["06_nothing"], working_root())
    assert "unknown notebook" in capsys.readouterr().err


@pytest.mark.slow  # trains the biphasic study at the tiny scale inside the kernel, then runs the notebook
def test_papermill_run_with_parameters(tmp_path):
    """A user's run: another output file, other folders, run_study=True: the notebook first runs its study (here the
    biphasic study at the tiny scale, with the study runner) and then shows it beside the paper."""
    import papermill as pm

    out, results = tmp_path / "out.ipynb", tmp_path / "results"
    results.mkdir()
    (results / "paper").symlink_to(REPO / "results" / "paper")
    pm.execute_notebook(str(REPO / "notebooks" / "04_biphasic.ipynb"), str(out), cwd=str(REPO),
                        parameters={"figures_dir": str(tmp_path / "figs"), "tables_dir": str(tmp_path / "tables"),
                                    "results_dir": str(results), "run_study": True, "scales": ["tiny"]},
                        kernel_name="python3", progress_bar=False)
    text = "\n".join(_outputs_text(c) for c in json.loads(out.read_text())["cells"])
    assert "study biphasic at scale tiny: 24 pretraining runs (24 to train)" in text
    assert len(list((results / "runs" / "tiny").rglob("results.json"))) == 23 * 4 * 2
    assert (tmp_path / "checkpoints" / "tiny").is_dir()  # beside the results folder, not in the checkout
    assert (tmp_path / "figs" / "fig06_biphasic.png").is_file()
    assert (tmp_path / "figs" / "ours-tiny" / "fig07_masking_robustness.png").is_file()
    committed = REPO / "results" / "tables" / "table10.csv"
    assert (tmp_path / "tables" / "table10.csv").read_bytes() == committed.read_bytes()


def test_setup_loads_every_scale_with_results(tmp_path, capsys):
    """scales=None: each scale under results/runs/ (not the stability tree), smallest first, beside the paper's, with
    the metric each scale's results.json names, its controls, and verdicts judged per scale."""
    results = tmp_path / "results"
    (results / "runs").mkdir(parents=True)
    (results / "paper").symlink_to(REPO / "results" / "paper")
    write_synthetic_study(results / "runs" / "small", size="small-m")
    write_synthetic_study(results / "runs" / "mini", size="mini-m", seed=1)
    write_synthetic_study(results / "runs" / "stability" / "mini", size="mini-m", seed=2)
    (results / "runs" / "tiny").mkdir()  # no results yet
    for model in ("mini-m-clm-400", "mini-m-mlm40-400"):
        write_run(results / "runs" / "mini", model, "TC", "toy_pos", 1e-5, 0, 0.5, 0.5, meta={"metric": "tag_accuracy"})
    assert notebooks.scales_with_results(results / "runs") == ["mini", "small"]
    assert notebooks.read_metrics(results / "runs" / "mini") == {("TC", "toy_pos"): "tag_accuracy"}
    ctx = notebooks.setup(REPO, results_dir=str(results), sources=["paper", "ours"], scales=None,
                          figures_dir=str(tmp_path / "figs"), tables_dir=str(tmp_path / "tables"))
    assert ctx.scales == ["mini", "small"]
    assert list(dict.fromkeys(ctx.data.scores["scale"])) == ["paper", "mini", "small"]
    tc = ctx.data.scores[ctx.data.scores["task_group"] == "TC"].fillna({"metric": "-"})
    assert tc.groupby(["scale", "dataset"])["metric"].agg(set).to_dict() == {
        **{("paper", d): {"-"} for d in ("OntoNotes", "CoNLL", "UNER", "Avg")}, ("mini", "toy_ner"): {"-"},
        ("mini", "toy_pos"): {"tag accuracy"}, ("mini", "Avg"): {"tag accuracy"}, ("small", "toy_ner"): {"-"},
        ("small", "Avg"): {"-"}}
    assert set(ctx.controls["scale"]) == {"mini", "small"}
    assert set(ctx.architecture()) >= {"210M", "610M", "1B"}
    verdicts = ctx.verdicts(["1"], n_boot=20)
    assert list(dict.fromkeys(verdicts["scale"])) == ["paper", "mini", "small"]
    assert "scale mini, small" in capsys.readouterr().out


def test_a_failed_notebook_is_named_with_its_cell_and_error_and_left_as_it_was(tmp_path):
    """`mlmclm notebooks` executes into memory and replaces a notebook only when it ran clean."""
    repo = tmp_path / "repo"  # a checkout: pyproject.toml, this package, a notebook
    (repo / "notebooks").mkdir(parents=True)
    (repo / "pyproject.toml").write_text("")
    (repo / "mlmclm").symlink_to(REPO / "mlmclm")
    source = repo / "notebooks" / "01_scaling.ipynb"
    source.write_bytes((REPO / "notebooks" / "01_scaling.ipynb").read_bytes())
    results = tmp_path / "results"
    (results / "runs").mkdir(parents=True)
    (results / "paper").symlink_to(REPO / "results" / "paper")
    bad = write_run(results / "runs" / "tiny", "tiny-m-clm-42", "SC", "multiemo_sentiment", 1e-3, 0, 0.5, 0.5)
    bad.write_text('{"validation": {"score": 0.5}, "test": ')  # truncated
    with pytest.raises(notebooks.NotebookError) as err:
        notebooks.execute(["01_scaling"], notebooks_dir=repo / "notebooks", jobs=1,
                          parameters={"results_dir": str(results), "scales": ["tiny"], "sources": ["paper", "ours"],
                                      "figures_dir": str(tmp_path / "figs"), "tables_dir": str(tmp_path / "tables")},
                          root=REPO)
    message = str(err.value)
    assert message.startswith(f"{source}: cell ") and "failed: ResultFileError: " in message
    assert f"{bad}: not valid JSON" in message and message.endswith("the notebook is left as it was")
    assert source.read_bytes() == (REPO / "notebooks" / "01_scaling.ipynb").read_bytes()
    assert sorted(p.name for p in (repo / "notebooks").iterdir()) == ["01_scaling.ipynb"]  # no temporary file left


def test_reference_models_load_apart_and_show_beside_ours(tmp_path):
    """Models pretrained elsewhere (results/runs/reference/<scale>/, their own grid) are no scale of ours, enter no
    control and no verdict, and are tabled beside the scale's best model with the rates their seeds chose."""
    from mlmclm.analysis.drawing import tables

    results = tmp_path / "results"
    (results / "runs").mkdir(parents=True)
    (results / "paper").symlink_to(REPO / "results" / "paper")
    write_synthetic_study(results / "runs" / "mini", size="mini-m")
    for lr, val in ((1e-4, 0.80), (3e-4, 0.90), (1e-3, 0.85)):
        for sd in range(3):
            write_run(results / "runs" / "reference" / "mini", "all-minilm-l6-v2", "TC", "toy_ner", lr, sd, val,
                      0.95 + sd / 1000)
    write_run(results / "runs" / "reference" / "mini", "smollm2", "TC", "toy_ner", 1e-4, 0, 0.9, 0.96)  # one run
    assert notebooks.scales_with_results(results / "runs") == ["mini"]
    ctx = notebooks.setup(REPO, results_dir=str(results), sources=["paper", "ours"], scales=None,
                          figures_dir=str(tmp_path / "figs"), tables_dir=str(tmp_path / "tables"))
    assert "reference" not in set(ctx.data.scores["source"]) and set(ctx.reference.runs["source"]) == {"reference"}
    assert "all-minilm-l6-v2" not in set(ctx.controls["best_pretrained"])
    assert "reference" not in set(ctx.verdicts(["1"], n_boot=20)["source"])
    table = tables.reference_table(ctx.reference, ctx.data, ctx.controls)
    ref = table[table["Model"] == "all-minilm-l6-v2 (reference)"].iloc[0]
    assert (ref["Dataset"], ref["Score"], ref["Grid"], ref["Chosen lr"]) == (
        "toy_ner", "95.10 (±0.25)", "0.0001, 0.0003, 0.001", "3e-04 x3")
    one = table[table["Model"] == "smollm2 (reference)"].iloc[0]
    assert (one["Score"], one["Chosen lr"]) == ("96.00", "1e-04 x1") and one["Minus our best"].endswith(
        "(one seed: no interval)")
    best = table[(table["Dataset"] == "toy_ner") & table["Model"].str.endswith("(ours: best)")].iloc[0]
    ours = ctx.controls.query("dataset == 'toy_ner'").iloc[0]
    assert best["Model"] == f"{ours['best_pretrained']} (ours: best)" and best["Score"].startswith(
        f"{ours['best_score']:.2f}") and ref["Minus our best"].startswith(f"{95.1 - ours['best_score']:+.2f}")


def test_list_parameters_given_as_strings_are_parsed_or_refused():
    """papermill's `-p scales '["long"]'` passes a string: it is read as the list it spells, or refused in one line,
    never taken as a scale named '["long"]'."""
    assert notebooks.names('["long"]', "scales") == ["long"]
    assert notebooks.names("long", "scales") == ["long"]
    assert notebooks.names("long, mini", "scales") == ["long", "mini"]
    assert notebooks.names("[long, mini]", "scales") == ["long", "mini"]
    assert notebooks.names(("paper",), "sources") == ["paper"] and notebooks.names(None, "scales") is None
    for bad in ('["long"', "[1, 2]", 3, [None], "{a: b}", '""'):
        with pytest.raises(notebooks.ConfigError) as err:
            notebooks.names(bad, "scales")
        assert "\n" not in str(err.value) and "-p scales" in str(err.value)


def test_papermill_cli_to_another_path_writes_beside_it_and_leaves_the_committed_files(tmp_path):
    """`papermill NOTEBOOK OUT -p scales '["long"]'`, as a user types it: the figures and tables go beside OUT, the
    committed ones stay as they are, our long runs are shown, and no kernel shutdown error is printed."""
    import subprocess
    import sys

    def snapshot():
        return {p: p.stat().st_mtime_ns for d in (REPO / "figures", REPO / "results" / "tables") for p in d.rglob("*")}

    before = snapshot()
    out = tmp_path / "out.ipynb"
    proc = subprocess.run([sys.executable, "-m", "papermill", "notebooks/04_biphasic.ipynb", str(out), "-p", "scales",
                           '["long"]', "--no-progress-bar"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = "\n".join(_outputs_text(c) for c in json.loads(out.read_text())["cells"])
    assert "This repository's runs: scale long." in text and "none at" not in text
    assert (out.parent / "figures" / "fig06_biphasic.png").is_file()
    assert (out.parent / "figures" / "ours-long").is_dir() and (out.parent / "tables" / "table10.csv").is_file()
    assert snapshot() == before
    assert "KeyboardInterrupt" not in proc.stderr, proc.stderr


def test_parallel_notebooks_leave_the_callers_folder_alone(tmp_path, capfd):
    """Kernels start in the notebooks' folder without the calling process changing its own: papermill's `cwd=`
    chdirs the process, and two threads restoring each other's folder used to leave it in notebooks/. Their shutdown
    prints no "KeyboardInterrupt caught in kernel" line."""
    import nbformat

    folder = tmp_path / "nbs"
    folder.mkdir()
    for name in ("01_scaling", "05_cpt"):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import os\nprint(os.getcwd())")])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.write(nb, str(folder / f"{name}.ipynb"))
    before = os.getcwd()
    notebooks.execute(["01_scaling", "05_cpt"], notebooks_dir=folder, jobs=2, output_dir=tmp_path / "out",
                      root=REPO)
    assert os.getcwd() == before
    for name in ("01_scaling", "05_cpt"):
        out = nbformat.read(str(tmp_path / "out" / f"{name}.ipynb"), as_version=4)
        assert out.cells[0].outputs[0]["text"].strip() == str(folder)
    assert "KeyboardInterrupt" not in capfd.readouterr().err


def test_verdicts_tables_are_written_per_source_and_keep_the_other_claims(tmp_path):
    """Each notebook writes its claims' rows of ``<tables>/<source>/verdicts.csv``; the other claims' rows stay."""
    import pandas as pd
    from helpers import scores_frame

    from mlmclm import claims, results

    cells = [("m-clm-400", "TC", 70, 0.4), ("m-clm-dec400-mlm40-500", "TC", 80, 0.4), ("m-mlm40-400", "TC", 75, 0.4),
             ("m-mlm40-dec400-mlm40-500", "TC", 77, 0.4), ("m-clm-400", "SC", 70, 0.4), ("m-mlm40-400", "SC", 75, 0.4)]
    no_runs = pd.DataFrame(columns=results.RUN_COLUMNS)

    def judged(keys):
        v = claims.verdicts(scores_frame(cells, source="ours", scale="x"), no_runs, keys, full=True)
        v.insert(2, "scale", "x")
        return v

    notebooks.write_verdicts(judged(["7"]), tmp_path, ["7"])
    (path,) = notebooks.write_verdicts(judged(["1"]), tmp_path, ["1"])
    assert path == tmp_path / "ours-x" / "verdicts.csv"
    table = pd.read_csv(path)
    assert list(table.columns) == claims.TABLE_COLUMNS
    assert [c.split(".")[0] for c in table["claim"]] == ["1", "1", "7"] and list(table["group"]) == ["SC", "TC", "TC"]
    assert table.set_index(table["claim"].str[0]).loc["7", "estimate"] == 3.0


def test_committed_verdicts_tables_hold_every_claim():
    import pandas as pd

    from mlmclm import claims

    tables = REPO / "results" / "tables"
    paths = [tables / "verdicts.csv", *sorted(tables.glob("ours-*/verdicts.csv"))]
    assert len(paths) >= 3
    for path in paths:
        table = pd.read_csv(path, dtype=str)
        assert list(table.columns) == claims.TABLE_COLUMNS, path
        assert set(table["claim"].str.split(".").str[0]) == set(claims.CLAIMS), path


@pytest.mark.parametrize("argv, says", [
    (["-p", "scales", "[lnoger]"], "no runs of 'lnoger'"),
    (["-p", "scale", "[longer]"], "notebook parameter(s) scale unknown"),
    (["-p", "sources", "[papr]"], "sources: unknown papr"),
    (["-p", "results_dir", "nowhere"], "has no paper/ folder"),
    (["-p", "scales", "[lnoger]", "-p", "run_study", "true"], "cannot train unknown scale(s) lnoger"),
])
def test_a_parameter_that_names_nothing_is_refused_before_any_notebook_is_written(argv, says, tmp_path):
    """Before any kernel starts: the committed notebooks, figures and tables are left as they were."""
    before = {p: p.stat().st_mtime_ns for p in (REPO / "notebooks").glob("*.ipynb")}
    with pytest.raises(notebooks.ConfigError, match=re.escape(says)):
        notebooks.main(["01_scaling", *argv], working_root())
    assert {p: p.stat().st_mtime_ns for p in (REPO / "notebooks").glob("*.ipynb")} == before


def test_setup_refuses_a_named_scale_without_runs(tmp_path):
    results = tmp_path / "results"
    (results / "runs").mkdir(parents=True)
    (results / "paper").symlink_to(REPO / "results" / "paper")
    with pytest.raises(notebooks.ConfigError, match="no runs of 'tiny'"):
        notebooks.setup(REPO, results_dir=str(results), sources=["paper", "ours"], scales=["tiny"],
                        figures_dir=str(tmp_path / "f"), tables_dir=str(tmp_path / "t"))


def test_scales_without_committed_results_show_in_their_own_folder_not_in_the_committed_notebooks(tmp_path, capsys,
                                                                                                  monkeypatch):
    """In a git checkout, the notebooks run in place show the committed scales only; `reproduce` of another scale
    (tiny, a user's own) writes its notebooks, figures and tables to results/local/<scale>/, which git ignores."""
    import subprocess

    from mlmclm import cli, studies

    results = tmp_path / "results"
    (results / "runs").mkdir(parents=True)
    (results / "paper").symlink_to(REPO / "results" / "paper")
    write_synthetic_study(results / "runs" / "mini", size="mini-m")
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "results/runs/mini"], check=True)
    subprocess.run([*git, "commit", "-qm", "mini"], check=True)
    write_synthetic_study(results / "runs" / "tiny", size="tiny-m", seed=1)  # run, not committed
    assert notebooks.committed_scales(results / "runs") == {"mini"}
    assert notebooks.shows_in_place(results / "runs", "mini") and not notebooks.shows_in_place(results / "runs", "tiny")
    assert notebooks.committed_scales(tmp_path / "elsewhere") is None  # outside git every scale counts
    ctx = notebooks.setup(REPO, results_dir=str(results), sources=["paper", "ours"], scales=None,
                          figures_dir=str(tmp_path / "figs"), tables_dir=str(tmp_path / "tables"))
    assert ctx.scales == ["mini"] and "tiny" not in capsys.readouterr().out

    calls = {}
    monkeypatch.setattr(studies, "run", lambda *a, **k: None)
    monkeypatch.setattr(notebooks, "execute", lambda **k: calls.update(k) or {})
    monkeypatch.setattr(studies, "print_verdicts", lambda *a: None)
    monkeypatch.setenv("MLMCLM_ROOT", str(tmp_path))  # the working root, read once by the command and passed down
    assert cli.main(["reproduce", "--scale", "tiny"]) == 0
    assert calls["root"] == tmp_path
    assert calls["output_dir"] == results / "local" / "tiny" / "notebooks"
    assert calls["parameters"]["scales"] == ["tiny"]
    assert calls["parameters"]["figures_dir"] == "results/local/tiny/figures"  # no machine path in the notebooks
    assert "results/local/" in (REPO / ".gitignore").read_text().splitlines()


@pytest.mark.parametrize("argv, says", [
    (["-p", "run_study", "maybe"], "run_study must be true or false, got 'maybe'"),
    (["-p", "results_dir", "5"], "results_dir must be a string, got 5"),
    (["-p", "figures_dir", "7"], "figures_dir must be a string, got 7"),
    (["-p", "tables_dir", "[a]"], "tables_dir must be a string, got ['a']"),
])
def test_a_parameter_of_the_wrong_kind_is_refused_naming_it_before_any_kernel_starts(argv, says, monkeypatch):
    """`-p run_study maybe` is not true (it would train a study), `-p results_dir 5` not a folder's name: one line
    naming the parameter and what it must be, before any notebook runs; papermill's own command line (which calls
    `setup` in the kernel) is told the same."""
    monkeypatch.setattr(notebooks, "_execute_one", lambda *a, **k: pytest.fail("a notebook ran"))
    with pytest.raises(notebooks.ConfigError, match=re.escape(says)) as err:
        notebooks.main(["01_scaling", *argv], working_root())
    assert "\n" not in str(err.value)
    name, value = argv[1], notebooks._value(argv[2])
    kwargs = dict(results_dir="results", sources=["paper"], scales=None, figures_dir=None, tables_dir=None)
    with pytest.raises(notebooks.ConfigError, match=re.escape(says)):
        notebooks.setup(REPO, **{**kwargs, name: value})


def test_notebooks_of_a_scale_not_committed_are_never_written_in_place(tmp_path, monkeypatch, capsys):
    """`mlmclm notebooks -p scales '[tiny]'` where tiny's runs are not committed: the notebooks, figures and tables go
    to results/local/tiny/ (as `reproduce --scale tiny` writes them), never over the committed notebooks."""
    import shutil
    import subprocess

    results = tmp_path / "results"
    (results / "runs").mkdir(parents=True)
    (results / "paper").symlink_to(REPO / "results" / "paper")
    write_synthetic_study(results / "runs" / "mini", size="mini-m")
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "results/runs/mini"], check=True)
    subprocess.run([*git, "commit", "-qm", "mini"], check=True)
    write_synthetic_study(results / "runs" / "tiny", size="tiny-m", seed=1)  # run, not committed
    (tmp_path / "notebooks").mkdir()
    shutil.copy(REPO / "notebooks" / "01_scaling.ipynb", tmp_path / "notebooks")
    monkeypatch.setenv("MLMCLM_ROOT", str(tmp_path))
    ran = []
    monkeypatch.setattr(notebooks, "_execute_one", lambda paths, parameters, progress=None: ran.append(
        (paths, parameters)) or 0.0)
    local = results / "local" / "tiny"
    assert notebooks.main(["01_scaling", "-p", "scales", "[tiny]"], working_root()) == 0
    [((source, target), parameters)] = ran
    assert source == tmp_path / "notebooks" / "01_scaling.ipynb" and target == local / "notebooks" / source.name
    assert (parameters["figures_dir"], parameters["tables_dir"]) == ("results/local/tiny/figures",
                                                                      "results/local/tiny/tables")
    assert f"wrote the executed notebooks in {local / 'notebooks'}" in capsys.readouterr().out
    ran.clear()
    assert notebooks.main(["01_scaling", "-p", "scales", "[mini]"], working_root()) == 0  # a committed scale: in place
    assert ran[0][0][1] == source and "figures_dir" not in ran[0][1]
    ran.clear()  # a results folder of one's own (a re-run of a committed scale into results/local/runs): never in place
    mine = results / "local" / "mine"
    (mine / "runs").mkdir(parents=True)
    (mine / "paper").symlink_to(REPO / "results" / "paper")
    write_synthetic_study(mine / "runs" / "mini", size="mini-m", seed=2)
    assert notebooks.main(["01_scaling", "-p", "results_dir", str(mine), "-p", "scales", "[mini]"],
                          working_root()) == 0
    assert ran[0][0][1] == mine / "local" / "mini" / "notebooks" / source.name
    assert ran[0][1]["figures_dir"] == "results/local/mine/local/mini/figures"


def test_the_kernel_of_a_notebook_prints_no_shutdown_interrupt(tmp_path):
    """jupyter_client interrupts a kernel before it shuts it down; a kernel still busy in a message handler (a loaded
    machine) then logs "KeyboardInterrupt caught in kernel." onto the terminal of whoever runs papermill. `setup`
    quiets the kernel's log, so that line never comes, however late the interrupt lands (here logged by hand, as
    ipykernel logs it)."""
    import subprocess
    import sys

    import nbformat

    code = (f"import sys\nfrom pathlib import Path\nsys.path.insert(0, {str(REPO)!r})\nfrom mlmclm import notebooks\n"
            f"ctx = notebooks.setup(Path({str(REPO)!r}), results_dir='results', sources=['paper'], scales=None, "
            f"figures_dir={str(tmp_path / 'f')!r}, tables_dir={str(tmp_path / 't')!r})\n"
            "get_ipython().kernel.log.error('KeyboardInterrupt caught in kernel.')")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(tmp_path / "in.ipynb"))
    proc = subprocess.run([sys.executable, "-m", "papermill", str(tmp_path / "in.ipynb"), str(tmp_path / "out.ipynb"),
                           "--no-progress-bar"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "KeyboardInterrupt" not in proc.stderr, proc.stderr


def test_a_rerun_with_parameters_writes_the_same_bytes(tmp_path):
    """papermill adds the parameters given under a random cell id; the executed notebook names that cell by a fixed
    id, so that a second `reproduce` of a scale writes byte for byte what the first wrote (issue 46)."""
    import nbformat

    folder = tmp_path / "nbs"
    folder.mkdir()
    defaults = nbformat.v4.new_code_cell("x = 1")
    defaults.metadata["tags"] = ["parameters"]
    nb = nbformat.v4.new_notebook(cells=[defaults, nbformat.v4.new_code_cell("print(x)")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(folder / "01_scaling.ipynb"))
    written = []
    for out in ("first", "second"):
        notebooks.execute(["01_scaling"], {"x": 2}, notebooks_dir=folder, jobs=1, output_dir=tmp_path / out,
                          root=REPO)
        written.append((tmp_path / out / "01_scaling.ipynb").read_bytes())
    assert written[0] == written[1]
    assert [c.get("id") for c in json.loads(written[0])["cells"]][1] == notebooks.INJECTED
