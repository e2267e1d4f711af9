"""The five notebooks: what they share at start-up, and running them all with papermill in one process.

``python -m mlmclm.analysis.drawing.notebooks`` (and ``mlmclm notebooks``) executes notebooks/01_scaling ... 05_cpt in
place, which rewrites every figure under figures/ and every table under results/tables/ (notebooks that show a scale
whose runs are not committed go to results/local/<scale>/ instead: `local_folder`). Volatile metadata (timings,
absolute paths) is stripped afterwards, so a re-run on unchanged results leaves the notebooks byte-identical. A notebook
is replaced only when it ran clean; a failure leaves it as it was and names the notebook, the cell and the error.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from ...config import NOTEBOOK_STUDY, REFERENCE, check_value, scale_names
from ...errors import ConfigError, NotebookError
from ...io import atomic_path, read_json, repo_relative, shown, typed_path, working_root

if TYPE_CHECKING:
    import pandas as pd

    from ..loading.results import Results

NOTEBOOKS = tuple(NOTEBOOK_STUDY)  # one a study of the paper's (`mlmclm.config.STUDIES`)
KINDS = {"results_dir": str, "figures_dir": str | None, "tables_dir": str | None, "encodeval_dir": str | None,
         "sample_csv": str | None, "run_study": bool}  # the parameters' kinds; `sources` and `scales`: `names`
FOLDERS = ("results_dir", "figures_dir", "tables_dir", "encodeval_dir", "sample_csv")  # parameters naming a path
SCALE_ORDER = ("tiny", "mini", "long", "longer", "small", "paper")  # smallest first; another scale after them, by name


@dataclass
class Context:
    """What a notebook works with: resolved folders, our scales, the loaded results (the paper's, ours at each scale,
    with ``metric`` names) and the controls of our models (``evidence.controls``)."""

    root: Path
    results: Path
    figures: Path
    tables: Path
    scales: list[str]
    data: Results
    controls: pd.DataFrame
    reference: Results | None = None  # models pretrained elsewhere, under each scale's protocol (results.REFERENCE)

    def architecture(self) -> dict:
        """Per size, what Fig. 10 counts FLOPs from: Table 1's shapes for the paper's sizes, else our runs' parameter
        counts (``results.run_parameters``)."""
        from ..loading import results

        ours = {k: v for scale in self.scales for k, v in results.run_parameters(self.results / "runs" / scale).items()}
        return {**ours, **results.architecture(self.results / "paper")}

    def verdicts(self, claim_keys, **kwargs) -> pd.DataFrame:
        """``claims.verdicts`` of the claims ``claim_keys`` at each scale apart (the paper's scale: the paper and
        EncodEval; then each of ours), one table with a ``scale`` column; each source's rows of these claims replace
        theirs in its verdicts table, ``<tables>/<source>/verdicts.csv`` (`write_verdicts`)."""
        import pandas as pd

        from ..judging import claims

        runs, parts = self.data.runs, []
        paper = self.data.scores[self.data.scores["source"] == "paper"]  # beside each scale's rows of ours
        for scale, scores in self.data.scores.groupby("scale", sort=False):
            part = claims.verdicts(scores, runs[runs["scale"] == scale], claim_keys, full=True, paper=paper,
                                   **kwargs)
            part.insert(2, "scale", scale)
            parts.append(part)
        if not parts:
            return claims.verdicts(self.data.scores, runs, claim_keys, **kwargs)
        judged = pd.concat(parts, ignore_index=True)
        write_verdicts(judged, self.tables, [str(c) for c in claim_keys])
        return judged[["claim", "scale", "source", "scope", "evidence", "verdict"]]


def read_verdicts(path: Path):
    """A verdicts table the notebooks wrote (its claims and groups at least); an empty or damaged one is refused in
    one line naming it (`published.read_table`)."""
    from ..loading.published import read_table

    return read_table(path, ["claim", "group"], "delete it: the notebooks write it again whole (mlmclm notebooks)",
                      rows=False, dtype=str, keep_default_na=False)


def check_tables(results_dir: Path, tables_dir: Path, sources: list[str]) -> None:
    """Before a notebook writes anything: the paper's Table 1 (the other tables are read by `results.load`) and every
    verdicts table it would add its rows to, readable (each refused in one line naming the file otherwise)."""
    from ..loading.published import load_architecture

    if "paper" in sources:
        load_architecture(results_dir / "paper")
    for path in [*Path(tables_dir).glob("verdicts.csv"), *sorted(Path(tables_dir).glob("*/verdicts.csv"))]:
        read_verdicts(path)


def write_verdicts(judged: pd.DataFrame, tables_dir: Path, claim_keys: list[str]) -> list[Path]:
    """Per source and scale, the verdicts table ``<tables_dir>/<source>/verdicts.csv`` (`claims.TABLE_COLUMNS`): the
    rows of ``claim_keys`` replaced by ``judged``'s (``claims.verdicts(..., full=True)`` with a ``scale`` column), the
    others kept (each notebook judges its own claims), in the order of the claims, then of the groups."""
    import pandas as pd

    from ..judging import claims
    from ..loading.results import GROUPS, output_subdir

    table = claims.verdict_table(judged[judged["source"] != "none loaded"])
    paths = []
    for (source, scale), part in table.groupby([table["source"], table["scale"]], sort=False):
        path = Path(tables_dir) / output_subdir(source, scale) / "verdicts.csv"
        old = (read_verdicts(path) if path.is_file() else pd.DataFrame(columns=part.columns)).reindex(
            columns=part.columns)
        old = old[~old["claim"].str.split(".").str[0].isin(claim_keys)]
        both = pd.concat([old.astype(str), part.astype(str).replace({"nan": "", "<NA>": ""})], ignore_index=True)
        order = pd.DataFrame({"c": both["claim"].str.split(".").str[0].map(list(claims.CLAIMS).index),
                              "g": both["group"].map(lambda g: GROUPS.index(g) if g in GROUPS else len(GROUPS))})
        both = both.loc[order.sort_values(["c", "g"], kind="stable").index]
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp:
            both.to_csv(tmp, index=False)
        paths.append(path)
    return paths


def scales_with_results(runs_dir: Path) -> list[str]:
    """The scales with fine-tuning results under ``runs_dir`` (``results/runs/<scale>/``), smallest first."""

    found = [d.name for d in Path(runs_dir).glob("*") if d.is_dir() and d.name not in ("stability", REFERENCE)
             and next(d.glob("*/*/*/*/results.json"), None) is not None]
    return sorted(found, key=lambda s: (SCALE_ORDER.index(s) if s in SCALE_ORDER else len(SCALE_ORDER), s))


def committed_scales(runs_dir: Path) -> set[str] | None:
    """The scales whose runs git tracks under ``runs_dir``; None where git does not track the folder (a working folder
    `mlmclm init` wrote, a temporary tree: then every scale with results counts)."""
    import subprocess

    try:
        proc = subprocess.run(["git", "-C", str(runs_dir), "ls-files", "-z", "--", "."], capture_output=True,
                              text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    files = [f for f in proc.stdout.split("\0") if f]
    return {f.split("/")[0] for f in files if "/" in f} if proc.returncode == 0 and files else None


def shows_in_place(runs_dir: Path, scale: str) -> bool:
    """Whether the notebooks run in place show ``scale``: its runs are committed (or git does not track the folder).
    Another scale (tiny, a user's own) shows in its own notebooks, figures and tables (`mlmclm reproduce`)."""
    committed = committed_scales(runs_dir)
    return committed is None or scale in committed


def local_folder(results_dir: Path, scales, own: bool = False) -> Path | None:
    """Where the notebooks showing `scales` go when one of them is not committed (tiny, a user's own scale), or when
    they read a results folder of one's `own` (not the working root's `results/`), so that the committed notebooks,
    figures and tables never show it: ``<results_dir>/local/<scale>/`` (several scales: joined by "+"; none named:
    "all"), which git ignores under results/; None where every one shows in place (`shows_in_place`) or none is
    named, in the working root's results."""
    if own:
        return results_dir / "local" / ("+".join(scales) if scales else "all")
    if not scales or all(shows_in_place(results_dir / "runs", s) for s in scales):
        return None
    return results_dir / "local" / "+".join(scales)


def read_metrics(runs_dir: Path) -> dict:
    """{(task group, dataset): metric} as a run tree's results.json files name it (``test.metric``, else
    ``meta.metric``), one file read per dataset; datasets whose files name none are left out."""
    from ..loading.results import DATASETS

    out, seen = {}, set()
    for folder in sorted(Path(runs_dir).glob("*/*/*")):  # <model>/<group>/<dataset>
        key = (folder.parent.name, DATASETS.get(folder.name, folder.name))
        if key in seen or not folder.is_dir() or (path := next(folder.glob("*/results.json"), None)) is None:
            continue
        seen.add(key)
        doc = read_json(path)
        doc = doc if isinstance(doc, dict) else {}
        metric = (doc.get("test") or {}).get("metric") or (doc.get("meta") or {}).get("metric")
        if metric:
            out[key] = metric
    return out


def _resolve(root: Path, path: str | Path | None) -> Path | None:
    return None if path is None else (Path(path) if Path(path).is_absolute() else root / path)


def _shown(root: Path, path: Path) -> str:
    """A path as printed in notebook output: relative to the repository root when inside it (no machine paths)."""
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def names(value, what: str) -> list[str] | None:
    """A list parameter as papermill passes it: a list, None, or a string (`-p scales '["long"]'`, `-p scales long`,
    `-p scales long,mini`) parsed into a list of names; anything else is a `ConfigError` in one line, never an
    empty or mangled list."""
    if value is None or (isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)):
        return None if value is None else list(value)
    if isinstance(value, str):
        import yaml

        try:
            parsed = yaml.safe_load(value)
        except yaml.YAMLError:
            parsed = value if all(c not in value for c in "[]{}\"'") else None
        if isinstance(parsed, str):  # a bare name or names with commas; an empty string names nothing
            parsed = [part.strip() for part in parsed.split(",") if part.strip()] or None
        if isinstance(parsed, list) and all(isinstance(v, str) and v for v in parsed):
            return parsed
    raise ConfigError(f"{what}={value!r}: expected a list of names, e.g. -p {what} '[\"long\"]' or -p {what} long")


def check_kinds(parameters: dict) -> None:
    """A `ConfigError` naming the first of `parameters` that is not of its kind (`KINDS`: `-p run_study maybe` is not
    true, `-p results_dir 5` not a folder's name) and what it must be; a `Path` is a folder's name too."""
    for name, value in parameters.items():
        if name in KINDS and not isinstance(value, Path):
            check_value(KINDS[name], value, name)


def papermill_output() -> Path | None:
    """The notebook the `papermill` command that started this kernel is writing, when it writes another file than
    the one it reads (read from the parent process's command line: Linux); else None."""
    try:
        parent = Path(f"/proc/{os.getppid()}")
        argv = (parent / "cmdline").read_bytes().decode().split("\0")[:-1]
        cwd = (parent / "cwd").resolve()
    except OSError:
        return None
    start = next((i + 1 for i, a in enumerate(argv) if Path(a).name == "papermill"), None)  # bin/papermill, -m
    if start is None:
        return None
    try:
        from papermill.cli import papermill

        params = papermill.make_context("papermill", argv[start:], resilient_parsing=True).params
    except Exception:  # not papermill's own command line after all
        return None
    source, output = params.get("notebook_path"), params.get("output_path")
    if not source or not output or output == "-" or "://" in output:
        return None
    output = cwd / output
    return None if output.resolve() == (cwd / source).resolve() else output


def setup(root: Path, *, results_dir: str, sources, scales, figures_dir: str | None, tables_dir: str | None,
          encodeval_dir: str | None = None, run_study: bool = False, study: str | None = None,
          sample_csv: str | None = None) -> Context:
    """Quiet warnings, set display options, say what is (and is not) there, and load the results: the paper's and
    other sources', and ours at each of `scales` (None: every scale with results under `results_dir`/runs/). Figures
    and tables go to `figures_dir` and `tables_dir`; where one is None, beside the notebook papermill writes when it
    writes another one (`papermill_output`), else to figures/ and results/tables/ (in place). With
    `run_study`, first train and fine-tune what the notebook's `study` still misses at each of `scales`
    (`mlmclm study run`)."""
    import pandas as pd

    from ..judging import evidence
    from ..loading import results
    from . import figures

    check_kinds(dict(results_dir=results_dir, figures_dir=figures_dir, tables_dir=tables_dir,
                     encodeval_dir=encodeval_dir, run_study=run_study, sample_csv=sample_csv))
    _quiet_kernel()
    warnings.filterwarnings("ignore")
    pd.set_option("display.max_colwidth", None)
    pd.set_option("display.max_columns", None)
    pd.set_option("display.width", 200)
    res_dir = _resolve(root, results_dir)
    scales, sources = names(scales, "scales"), names(sources, "sources")
    if figures_dir is None or tables_dir is None:  # run to another notebook by papermill: beside it, else in place
        out = papermill_output()
        figures_dir = figures_dir or (out.parent / "figures" if out else "figures")
        tables_dir = tables_dir or (out.parent / "tables" if out else "results/tables")
    check_tables(res_dir, _resolve(root, tables_dir), sources)
    if run_study:
        _run_study(study, scales, res_dir)
    ours = _our_scales(root, res_dir, scales, sources)
    encodeval = _resolve(root, encodeval_dir)
    if "encodeval" in sources and encodeval is None:
        print("EncodEval per-run results: not given "
              "(set encodeval_dir to a folder of the authors' results.json files).")
    first = results.load(res_dir, sources=[s for s in sources if s != "ours" or ours], scale=ours[0] if ours else "",
                         encodeval_dir=encodeval, sample_csv=_resolve(root, sample_csv))
    parts = [first, *(results.load(res_dir, sources=["ours"], scale=s) for s in ours[1:])]
    metrics = {(scale, *key): m for scale in ours for key, m in read_metrics(res_dir / "runs" / scale).items()}
    data = dataclasses.replace(
        first, scores=figures.with_metrics(pd.concat([p.scores for p in parts], ignore_index=True), metrics),
        runs=figures.with_metrics(pd.concat([p.runs for p in parts], ignore_index=True), metrics))
    return Context(root=root, results=res_dir, figures=_resolve(root, figures_dir), tables=_resolve(root, tables_dir),
                   scales=ours, data=data, controls=evidence.controls(data.scores, data.runs),
                   reference=_reference(res_dir, ours))


def _quiet_kernel() -> None:
    """Only critical lines from the log of the kernel that runs this notebook (none where no kernel runs it):
    jupyter_client interrupts a kernel before it shuts it down, and a kernel still in a message handler then (a
    loaded machine) logs "KeyboardInterrupt caught in kernel." onto the terminal of whoever ran papermill."""
    import logging

    ipython = sys.modules.get("IPython")
    kernel = getattr(ipython.get_ipython(), "kernel", None) if ipython else None
    if kernel is not None:
        kernel.log.setLevel(logging.CRITICAL)


def _run_study(study: str | None, scales, res_dir: Path) -> None:
    """Train and fine-tune what `study` still misses at each of `scales` (`mlmclm study run`), in its own process
    (the study runner trains models: analysis never imports torch), its report printed into the notebook."""
    import subprocess

    if study is None or not scales:
        raise ConfigError("run_study=True needs the notebook's study (setup(..., study='scaling')) and scales")
    for scale in scales:
        cmd = [sys.executable, "-m", "mlmclm", "study", "run", study, "--scale", scale, "--runs-dir",
               str(res_dir / "runs"), "--checkpoints-dir", str(res_dir.parent / "checkpoints")]  # beside results
        with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              env={**os.environ, "TQDM_DISABLE": "1"}) as proc:
            for line in proc.stdout:  # the runner's report, into the notebook as it comes
                print(line, end="", flush=True)
        if proc.returncode:
            raise RuntimeError(f"`{' '.join(cmd[1:])}` failed with exit status {proc.returncode} "
                               "(its output is above)")


def _our_scales(root: Path, res_dir: Path, scales, sources) -> list[str]:
    """The scales of ours to show (`scales`, None: every one with results), saying which; a named scale without
    runs is a `ConfigError` (a typo would otherwise show the paper alone and pass)."""
    if "ours" not in sources:
        return []
    ours = list(scales) if scales is not None else scales_with_results(res_dir / "runs")
    _check_scales(ours, res_dir)
    committed = committed_scales(res_dir / "runs") if scales is None else None  # one `git ls-files` for all
    if committed is not None:  # the committed notebooks and shared figures show the committed scales only (silently:
        ours = [s for s in ours if s in committed]  # what they print must not depend on what else this machine ran)
    print(f"This repository's runs: scale {', '.join(ours)}." if ours else
          f"This repository's runs: none under {_shown(root, res_dir / 'runs')}/ yet, so only other sources are "
          "shown.")
    return ours


def _check_scales(scales: list[str], res_dir: Path) -> None:
    missing = [s for s in scales if not (res_dir / "runs" / s).is_dir()]
    if missing:
        have = scales_with_results(res_dir / "runs")
        raise ConfigError(f"scales: no runs of {', '.join(map(repr, missing))} under {res_dir / 'runs'} (scales with "
                          f"results: {', '.join(have) or 'none'}); name one of those, or add -p run_study true to "
                          "train it first")


def parameter_names(paths) -> set[str]:
    """The names the parameters cells of the notebooks at ``paths`` assign."""
    import ast

    found = set()
    for path in paths:
        cells = json.loads(Path(path).read_text())["cells"]
        cell = next((c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])), None)
        if cell is not None:
            body = ast.parse("".join(cell["source"])).body
            found |= {t.id for node in body if isinstance(node, ast.Assign) for t in node.targets
                      if isinstance(t, ast.Name)}
    return found


def check_parameters(parameters: dict, paths, root: Path) -> None:
    """Refuse, before any kernel starts and any notebook is written, what would run to a wrong notebook: a name the
    notebooks' parameters cells do not have, a source that is not one, a scale without runs (unless ``run_study``
    trains it), a results folder without the paper's tables (a relative one: under the working root ``root``)."""
    from ..loading.results import SOURCES

    known = parameter_names(paths)
    unknown = sorted(set(parameters) - known)
    if unknown:
        raise ConfigError(f"notebook parameter(s) {', '.join(unknown)} unknown: the notebooks take "
                          f"{', '.join(sorted(known))}")
    check_kinds(parameters)
    res_dir = _resolve(root, parameters.get("results_dir", "results"))
    if not (res_dir / "paper").is_dir():
        raise ConfigError(f"results_dir={parameters.get('results_dir')!r}: {res_dir} has no paper/ folder (the "
                          "paper's tables); give a results folder, e.g. -p results_dir results")
    sources = names(parameters.get("sources"), "sources") or []
    if set(sources) - set(SOURCES):
        raise ConfigError(f"sources: unknown {', '.join(sorted(set(sources) - set(SOURCES)))}; use "
                          f"{', '.join(SOURCES)}")
    scales = names(parameters.get("scales"), "scales")
    if scales is not None and not parameters.get("run_study"):
        _check_scales(scales, res_dir)
    elif scales is not None and set(scales) - set(scale_names()):
        raise ConfigError(f"scales: run_study cannot train unknown scale(s) "
                          f"{', '.join(sorted(set(scales) - set(scale_names())))}; use {', '.join(scale_names())}")


def _reference(res_dir: Path, ours: list[str]):
    """The models pretrained elsewhere at `ours` scales (`results.REFERENCE`), None where there are none."""
    import pandas as pd

    from ..loading import results

    refs = [results.load(res_dir, sources=[results.REFERENCE], scale=s) for s in ours
            if (res_dir / "runs" / results.REFERENCE / s).is_dir()]
    return None if not refs else results.Results(scores=pd.concat([r.scores for r in refs], ignore_index=True),
                                                 runs=pd.concat([r.runs for r in refs], ignore_index=True))


INJECTED = "injected-parameters"  # papermill's tag (and, here, the id) of the cell it adds with the parameters given


def _strip_volatile(path: Path) -> None:
    """Drop papermill's timings and absolute paths and the execution timestamps from an executed notebook, and give
    the parameters cell papermill adds (under a random id) a fixed id: a re-run writes the same bytes."""
    nb = json.loads(path.read_text())
    nb.get("metadata", {}).pop("papermill", None)
    for cell in nb.get("cells", []):
        cell.get("metadata", {}).pop("papermill", None)
        cell.get("metadata", {}).pop("execution", None)
        if INJECTED in cell.get("metadata", {}).get("tags", []) and "id" in cell:
            cell["id"] = INJECTED
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")


def _execute_one(paths: tuple[Path, Path], parameters: dict, progress=None) -> float:
    """Execute `source` into memory; write it to `target` only when every cell ran clean. `progress(text)` is told
    when it starts."""
    import nbformat
    import papermill as pm

    source, target = paths
    if progress:
        progress(f"  {source.stem}: running")
    start = time.perf_counter()
    try:
        # The kernel starts in the notebook's folder (nbclient's resources path), not through papermill's `cwd=`,
        # which chdirs the whole process: two threads restoring each other's folder left it in notebooks/. Its log
        # level hides transport warnings and the "KeyboardInterrupt caught in kernel" line of its shutdown.
        nb = pm.execute_notebook(str(source), None, parameters=parameters,
                                 resources={"metadata": {"path": str(source.parent)}},
                                 kernel_name="python3", progress_bar=False, log_output=False,
                                 extra_arguments=["--IPKernelApp.log_level=CRITICAL"])
    except pm.PapermillExecutionError as e:
        first = next((ln.strip() for ln in e.source.splitlines() if ln.strip() and not ln.startswith("#")), "")
        raise NotebookError(f"{source}: cell {e.exec_count} ({first[:60]!r}) failed: {e.ename}: "
                            f"{str(e.evalue).splitlines()[0] if e.evalue else ''}; the notebook is left as it "
                            f"was") from None
    with atomic_path(target) as tmp:
        nbformat.write(nb, str(tmp))
        _strip_volatile(tmp)
    return time.perf_counter() - start


def execute(names=NOTEBOOKS, parameters: dict | None = None, notebooks_dir: str | Path | None = None,
            jobs: int = 2, output_dir: str | Path | None = None, progress=None, *, root: Path) -> dict:
    """Execute notebooks with papermill (one kernel each, ``jobs`` at a time), in place or into ``output_dir``;
    return seconds each. ``progress(text)`` (e.g. ``print``) is told as each starts. ``root``: the working root
    (`io.working_root`, read by the entrance), where the notebooks are unless ``notebooks_dir`` says."""
    folder = Path(notebooks_dir) if notebooks_dir else root / "notebooks"
    if not folder.is_dir():
        raise ConfigError(f"no notebooks at {folder}: run `mlmclm init` there first (it writes the notebooks and the "
                          "paper's tables), or work in a clone of the repository")
    paths = [folder / f"{name}.ipynb" for name in names]
    for path in paths:
        if not path.is_file():
            raise ConfigError(f"{path}: no such notebook (known: {', '.join(NOTEBOOKS)})")
    check_parameters(parameters or {}, paths, root)
    if output_dir:
        Path(output_dir).mkdir(parents=True, exist_ok=True)
    pairs = [(p, Path(output_dir) / p.name if output_dir else p) for p in paths]
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return dict(zip(names, pool.map(partial(_execute_one, parameters=parameters or {}, progress=progress),
                                        pairs)))


def _value(text: str):
    """A -p value as YAML would read it (numbers, true/false, null, lists), else the string."""
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def main(argv: list[str] | None, root: Path) -> int:
    """`mlmclm notebooks` (`python -m mlmclm.analysis.notebooks`): `argv` its command line, `root` the working root."""
    parser = argparse.ArgumentParser(prog="mlmclm notebooks", description=(
        "Execute the five notebooks in place: regenerates figures/ and results/tables/; notebooks showing a scale "
        "whose runs are not committed (-p scales '[tiny]') go to results/local/<scale>/ instead."),
        epilog="paths: a folder parameter given here (-p results_dir, figures_dir, tables_dir, encodeval_dir, "
               "sample_csv) is read from the folder you are in, as any command reads a path, and passed to the "
               "notebooks relative to the working root; in a notebook's own parameters cell it is read from the "
               "working root. Paths printed are relative to the folder you are in when inside it, else absolute.")
    parser.add_argument("notebooks", nargs="*", metavar="NOTEBOOK",
                        help=f"which to run (default: all of {', '.join(NOTEBOOKS)})")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="notebooks run at a time (default: 2)")
    parser.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                        help="override a parameter of the notebooks' parameters cell, e.g. -p scales '[small]'")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.notebooks) - set(NOTEBOOKS))
    if unknown:
        parser.error(f"unknown notebook(s) {', '.join(unknown)}: choose from {', '.join(NOTEBOOKS)}")
    parameters = {name: _value(value) for name, value in args.parameter}
    check_kinds(parameters)
    parameters.update({name: typed_path(value, root) for name, value in parameters.items()  # from where one stands
                       if name in FOLDERS and value is not None})
    results = _resolve(root, parameters.get("results_dir", "results"))
    own = results.resolve() != (root / "results").resolve()  # a results folder of one's own: never in place
    out = local_folder(results, names(parameters.get("scales"), "scales"), own=own)
    if out:  # a scale not committed: its own notebooks, figures and tables, never over the committed ones
        parameters = {"figures_dir": repo_relative(out / "figures", root),
                      "tables_dir": repo_relative(out / "tables", root), **parameters}
    total = time.perf_counter()
    for name, seconds in execute(args.notebooks or NOTEBOOKS, parameters, jobs=args.jobs,
                                 output_dir=out / "notebooks" if out else None, root=root).items():
        print(f"{name:<20} {seconds:5.1f} s")
    print(f"{'all':<20} {time.perf_counter() - total:5.1f} s")
    wrote = [out / "notebooks" if out else root / "notebooks",
             *(_resolve(root, parameters.get(name) or default) for name, default in (
                 ("figures_dir", "figures"), ("tables_dir", "results/tables")))]
    print("wrote the executed notebooks in {}/, their figures in {}/ and their tables in {}/".format(
        *map(shown, wrote)))
    return 0


if __name__ == "__main__":  # an entrance: the working root read here and passed down
    sys.exit(main(None, working_root()))
