"""The package's layout: imports flow one way between the rooms and the top-level modules, and between analysis's
rooms (loading <- judging <- drawing), `analysis` never starts torch, no module-level import cycle, imports inside functions only where listed with their reason, and a wheel
ships every file of the package (configs, scale files, kernels)."""

from __future__ import annotations

import ast
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]  # the checkout

PKG = ROOT / "mlmclm"
# what each room may import from the package (besides itself): lower rooms and the torch-free top-level helpers
ALLOWED = {
    "models": {"errors", "flops", "sizes"},
    "training": {"models", "config", "errors", "flops", "sizes", "schedule", "io", "fetch", "locks", "paths", "runs",
                 "runlog", "store"},
    "evaluation": {"models", "training", "config", "errors", "flops", "sizes", "schedule", "io", "fetch", "locks",
                   "paths", "runs", "store"},
    "analysis": {"config", "errors", "flops", "io", "locks", "paths", "runs", "schedule"},
    "studies": {"evaluation", "training", "analysis", "commands", "config", "errors", "flops", "sizes", "schedule",
                "io", "fetch", "locks", "paths", "runs", "runlog", "store", "workspace"},
}
# analysis's rooms by job, and which of them each may import: loading <- judging <- drawing (result files -> a tidy
# table; claims -> verdicts; tables, figures and notebooks); every analysis module lives in one of them
ANALYSIS_ROOMS = {
    "loading": set(),
    "judging": {"loading"},
    "drawing": {"loading", "judging"},
}

# the torch-free helpers at the top of the package, and what each may import from it (a helper only imports helpers
# listed before it: `config` imports no room, so every room may import it)
HELPERS = {
    "errors": set(),
    "flops": set(),
    "sizes": {"errors", "flops"},
    "schedule": {"errors"},
    "io": {"errors"},
    "fetch": {"errors", "io"},
    "locks": {"errors", "io"},
    "workspace": {"errors", "io"},
    "config_loader": {"errors"},
    "config": {"errors", "config_loader", "schedule", "sizes"},
    "paths": {"errors", "io", "config"},
    "runs": {"errors", "io", "config", "paths", "schedule", "sizes"},
    "runlog": {"errors", "io", "paths"},
    "store": {"errors", "io", "fetch", "locks", "paths", "runs"},
}
# the entry points above the rooms, and what each may import from the package besides the helpers
ENTRY_POINTS = {
    "commands": {"training", "evaluation", "bench", "gpu_check"},
    "export": {"models"},
    "bench": {"models", "training", "evaluation"},
    "gpu_check": {"models", "training", "bench"},
    "cli": {"commands", "models", "training", "evaluation", "analysis", "studies", "export", "bench", "gpu_check"},
    "__main__": {"cli"},
    "__init__": set(),  # its public names load their room on first use (importlib), nothing at import
}

# Imports of package modules inside functions, each with its reason; any other one fails: import at module level
# (a cycle that a function-level import would hide is a layering fault to fix). Third-party imports inside functions
# (transformers, datasets, pandas, ...: heavy or optional) are not listed. {importer: {imported module: why}}
FUNCTION_LEVEL = {
    "mlmclm.cli": {m: "as little as possible before `main` catches Ctrl-C; `mlmclm --help` without torch or pandas"
                   for m in ("mlmclm.analysis.judging.coverage", "mlmclm.analysis.drawing.notebooks",
                             "mlmclm.config", "mlmclm.evaluation.offline_suite", "mlmclm.export", "mlmclm.io",
                             "mlmclm.models.attention", "mlmclm.models.configuration", "mlmclm.studies",
                             "mlmclm.workspace")},
    "mlmclm.commands": {m: "torch only when a verb that trains, fine-tunes or benchmarks runs: no --help imports it"
                        for m in ("mlmclm.bench", "mlmclm.evaluation.finetune", "mlmclm.gpu_check",
                                  "mlmclm.training.pretrain")},
    "mlmclm.studies": {m: "pandas only when `reproduce` prints the verdicts: `mlmclm study plan` stays light"
                       for m in ("mlmclm.analysis.judging.claims", "mlmclm.analysis.loading.results")},
    "mlmclm.studies.runner": {m: "torch only to run a study: `mlmclm study plan` stays torch-free"
                              for m in ("mlmclm.evaluation.finetune", "mlmclm.training.pretrain")},
    "mlmclm.export": {m: "torch only when exporting: the module is read for `mlmclm export --help`"
                      for m in ("mlmclm.models.convert", "mlmclm.models.modeling")},
    "mlmclm.analysis.drawing.notebooks": {m: "pandas and matplotlib only for the verbs that read results or draw"
                                          for m in ("mlmclm.analysis.judging.claims",
                                                    "mlmclm.analysis.judging.evidence",
                                                    "mlmclm.analysis.drawing.figures",
                                                    "mlmclm.analysis.loading.published",
                                                    "mlmclm.analysis.loading.results")},
}
# Function-level imports of light modules that have no reason to be there, in files this test's author did not edit;
# move each to module level (and off this list) when its file is next changed
TO_MOVE_UP = {}


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, module_level_only: bool = False) -> set[str]:
    """Absolute names of the modules `path` imports (relative imports resolved; `from . import x` gives pkg.x)."""
    return _imports_of(ast.parse(path.read_text()), path, module_level_only)


def _imports_of(tree: ast.Module, path: Path, module_level_only: bool = False) -> set[str]:
    package = _module(path) if path.name == "__init__.py" else _module(path).rpartition(".")[0]
    nodes = tree.body if module_level_only else ast.walk(tree)
    out = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(base + ([node.module] if node.module else []))
            else:
                base = node.module
            out.add(base)
            out |= {f"{base}.{a.name}" for a in node.names}
    return out


def _function_level_imports(path: Path) -> set[str]:
    """The package modules that `path` imports inside its functions (`from .x import name`: the module x)."""
    tree = ast.parse(path.read_text())
    nested = {n for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
              for n in ast.walk(f) if isinstance(n, (ast.Import, ast.ImportFrom))}
    out = set()
    for node in nested:
        names = _imports_of(ast.Module(body=[node], type_ignores=[]), path)
        if isinstance(node, ast.ImportFrom):  # `from a import b`: the module b, or a when b is a name in it
            names = {n for n in names if not any(m.startswith(n + ".") for m in names)}
        for name in names:
            parts = name.split(".")
            while parts and not _is_module(parts):
                parts = parts[:-1]
            if len(parts) > 1 and parts[0] == "mlmclm":
                out.add(".".join(parts))
    return out


def _is_module(parts: list[str]) -> bool:
    path = ROOT.joinpath(*parts)
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _sources() -> list[Path]:
    return sorted(p for p in PKG.rglob("*.py") if "kernels" not in p.parts)


@pytest.mark.parametrize("room", sorted(ALLOWED))
def test_rooms_import_only_downwards(room):
    bad = []
    for path in sorted((PKG / room).rglob("*.py")):
        if "kernels" in path.parts:
            continue
        for name in _imports(path):
            parts = name.split(".")
            if parts[0] == "mlmclm" and len(parts) > 1 and parts[1] not in {room, *ALLOWED[room]}:
                bad.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("room", sorted(ANALYSIS_ROOMS))
def test_analysis_rooms_import_only_downwards(room):
    bad = []
    for path in sorted((PKG / "analysis" / room).rglob("*.py")):
        for name in _imports(path):
            parts = name.split(".")
            if parts[:2] == ["mlmclm", "analysis"] and (len(parts) < 3 or parts[2] not in {room, *ANALYSIS_ROOMS[room]}):
                bad.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not bad, "\n".join(bad)


def test_every_analysis_module_has_its_room():
    analysis = PKG / "analysis"
    assert {p.name for p in analysis.glob("*.py")} == {"__init__.py"}, "put an analysis module in one of its rooms"
    assert {p.name for p in analysis.iterdir() if (p / "__init__.py").is_file()} == set(ANALYSIS_ROOMS)


@pytest.mark.parametrize("name", sorted([*HELPERS, *ENTRY_POINTS]))
def test_top_level_modules_import_only_what_they_may(name):
    """A helper imports only the helpers below it, never a room; an entry point the rooms and modules it may use."""
    path = PKG / f"{name}.py"
    allowed = HELPERS[name] if name in HELPERS else {*HELPERS, *ENTRY_POINTS[name]}
    bad = sorted(n for n in _imports(path) if n.startswith("mlmclm.") and n.split(".")[1] not in {name, *allowed})
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}"


def test_every_top_level_module_has_its_place():
    top = {p.stem for p in PKG.glob("*.py")}
    assert top == {*HELPERS, *ENTRY_POINTS}, "list a new top-level module in HELPERS or ENTRY_POINTS"
    rooms = {p.name for p in PKG.iterdir() if (p / "__init__.py").is_file()}
    assert rooms == set(ALLOWED)


def test_imports_inside_functions_are_the_listed_ones():
    bad = []
    for path in _sources():
        module = _module(path)
        listed = {*FUNCTION_LEVEL.get(module, {}), *TO_MOVE_UP.get(module, set())}
        bad += [f"{path.relative_to(ROOT)} imports {n} inside a function" for n in
                sorted(_function_level_imports(path) - listed)]
    assert not bad, "\n".join(bad) + "\n(import at module level, or list it in FUNCTION_LEVEL with its reason)"


def test_the_config_and_the_helpers_stay_torch_free():
    code = ("import sys\n"
            "import mlmclm.config, mlmclm.schedule, mlmclm.sizes, mlmclm.evaluation.tasks, mlmclm.evaluation.grid\n"
            "print(sorted(m for m in ('torch', 'transformers', 'accelerate') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_analysis_never_imports_torch():
    for path in sorted((PKG / "analysis").rglob("*.py")):
        heavy = {n for n in _imports(path) if n.split(".")[0] in {"torch", "transformers", "accelerate"}}
        assert not heavy, f"{path.relative_to(ROOT)} imports {heavy}"
    code = ("import sys, mlmclm\n"
            "from mlmclm import claims, figures, notebooks, results, tables\n"
            "results.flops_per_step\n"
            "print(sorted(m for m in ('torch', 'transformers', 'accelerate') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_no_module_level_import_cycle():
    graph = {_module(p): {n for n in _imports(p, module_level_only=True) if n.startswith("mlmclm")}
             for p in _sources()}
    graph = {m: {n for n in deps if n in graph and n != m} for m, deps in graph.items()}

    def visit(m, stack):
        if m in stack:
            raise AssertionError("import cycle: " + " -> ".join([*stack[stack.index(m):], m]))
        for n in graph[m]:
            visit(n, stack + [m])

    for m in graph:
        visit(m, [])


def test_public_names_stay_importable():
    import mlmclm

    for name in mlmclm.__all__:
        assert getattr(mlmclm, name) is not None
    from mlmclm import claims, figures, from_hf, results, tables, to_hf  # noqa: F401  (what notebooks import)
    assert mlmclm.MlmClmConfig.__module__ == "mlmclm.models.configuration"


def test_wheel_ships_every_package_file(tmp_path):
    """A wheel built from pyproject holds every file of the package: code, recipes, scale files and kernels."""
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
                    "-w", str(tmp_path), str(ROOT)], check=True, capture_output=True, cwd=tmp_path)
    wheel = next(tmp_path.glob("mlmclm-*.whl"))
    shipped = {n for n in zipfile.ZipFile(wheel).namelist() if n.startswith("mlmclm/")}
    tracked = subprocess.run(["git", "ls-files", "mlmclm"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    expected = {f for f in tracked if (ROOT / f).is_file()}
    assert expected, "git ls-files found no package files"
    assert sorted(expected - shipped) == []
    for needed in ("mlmclm/scales/mini.yaml", "mlmclm/recipes/tiny.yaml",
                   "mlmclm/models/kernels/varlen_attention/build/torch-cpu/varlen_attention/__init__.py"):
        assert needed in shipped


def test_the_kernels_build_folders_are_not_ignored():
    """.gitignore drops build/ folders but keeps the kernels' (`mlmclm/models/kernels/*/build/`): a new file there
    is seen by git, so it is committed and shipped."""
    for path in ("mlmclm/models/kernels/varlen_attention/build/torch-cpu/new.py",
                 "mlmclm/models/kernels/another_kernel/build/torch-cuda/new.py"):
        out = subprocess.run(["git", "check-ignore", "--no-index", "-q", path], cwd=ROOT)
        assert out.returncode == 1, f"{path} is ignored"
    assert subprocess.run(["git", "check-ignore", "--no-index", "-q", "build/x.py"], cwd=ROOT).returncode == 0


LONGEST = 60  # lines of a function in mlmclm/, its decorators and docstring included


def test_functions_are_short_or_say_why():
    """No function in mlmclm/ runs over `LONGEST` lines unless a comment on its `def` line or the line above says why
    it stays long (an argparse table, say): a longer one does several jobs, each of which can be named."""
    long = []
    for path in _sources():
        lines = path.read_text().splitlines()
        for node in ast.walk(ast.parse("\n".join(lines))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                size = node.end_lineno - first + 1
                said = "#" in lines[node.lineno - 1] or lines[first - 2].lstrip().startswith("#")
                if size > LONGEST and not said:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({size} lines)")
    assert not long, "\n".join(long) + "\n(split it into named parts, or say on or above its def why it stays long)"


def test_one_working_root_passed_down():
    """The working root (`io.working_root`) is read by the entrances and passed down: no module keeps it in a global
    (a `ROOT` fixed at import time, from whatever folder imported it first), and none changes the working directory
    (`os.chdir`, `contextlib.chdir`): a config's relative folders resolve against the root explicitly."""
    bad = []
    for path in _sources():
        tree = ast.parse(path.read_text())
        for node in tree.body:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
                node, (ast.AnnAssign, ast.AugAssign)) else []
            bad += [f"{path.relative_to(ROOT)}:{node.lineno} sets a module-level ROOT" for t in targets
                    if isinstance(t, ast.Name) and t.id == "ROOT"]
        bad += [f"{path.relative_to(ROOT)}:{node.lineno} calls {node.func.value.id}.chdir" for node in ast.walk(tree)
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "chdir"
                and isinstance(node.func.value, ast.Name)]
        bad += [f"{path.relative_to(ROOT)}:{node.lineno} imports chdir" for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and any(a.name == "chdir" for a in node.names)]
    assert not bad, "\n".join(bad)


ENTRANCES = ("cli.py", "bench.py")  # where the working root is read (and the notebooks' own `__main__` block)


def test_only_the_entrances_read_the_working_root():
    """Below the entrances (the CLI, which hands every job `args.root`; bench; `python -m mlmclm.analysis.drawing.notebooks`)
    every function is given the working root (`root`, `working`, `args.root`): none calls `io.working_root()`."""
    bad = []
    for path in _sources():
        if path.relative_to(PKG).as_posix() in ENTRANCES:
            continue
        tree = ast.parse(path.read_text())
        main = [n for n in tree.body if isinstance(n, ast.If) and "__main__" in ast.unparse(n.test)]
        inside = {id(n) for block in main for n in ast.walk(block)}
        bad += [f"{path.relative_to(ROOT)}:{node.lineno} calls working_root()" for node in ast.walk(tree)
                if isinstance(node, ast.Call) and id(node) not in inside and (
                    getattr(node.func, "id", None) == "working_root" or getattr(node.func, "attr", None) ==
                    "working_root")]
    assert not bad, "\n".join(bad) + "\n(take the working root as an argument from the caller)"


def test_the_schedule_is_built_in_one_place():
    """A run's `Schedule` is built by its config (`PretrainConfig.schedule`) only: every reader gets the same one,
    its final learning-rate ratio included."""
    built = [f"{path.relative_to(ROOT)}:{node.lineno}" for path in _sources()
             for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Call)
             and isinstance(node.func, ast.Name) and node.func.id == "Schedule"]
    assert len(built) == 1 and built[0].startswith("mlmclm/config.py:"), built


def test_no_private_name_is_imported_across_modules():
    """A name of ours with a leading underscore stays in its module: a verb's job is imported by a public name
    (`commands._pretrain` calls `pretrain.pretrain_command`, not `_run_cli`)."""
    found = []
    for path in sorted(PKG.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            ours = isinstance(node, ast.ImportFrom) and (node.level > 0 or (node.module or "").startswith("mlmclm"))
            if ours:  # torch's own private helpers are torch's business
                found += [f"{path.relative_to(ROOT)}: {a.name} from {node.module}" for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__")]
    assert not found, "private names imported across modules:\n" + "\n".join(found)
