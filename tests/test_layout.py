"""The package's layout: imports flow one way between the four rooms, `analysis` never starts torch, no module-level
import cycle, and a wheel ships every file of the package (configs, scale files, kernels)."""

from __future__ import annotations

import ast
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from mlmclm.io import ROOT

PKG = ROOT / "mlmclm"
# what each room may import from the package (besides itself): lower rooms and the torch-free top-level helpers
ALLOWED = {
    "models": {"errors", "flops", "sizes"},
    "training": {"models", "config", "errors", "flops", "sizes", "io", "fetch", "locks"},
    "evaluation": {"models", "training", "config", "errors", "flops", "sizes", "io", "fetch", "locks"},
    "analysis": {"config", "errors", "flops", "io", "locks"},
}


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, module_level_only: bool = False) -> set[str]:
    """Absolute names of the modules `path` imports (relative imports resolved; `from . import x` gives pkg.x)."""
    tree = ast.parse(path.read_text())
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


def test_analysis_never_imports_torch():
    for path in sorted((PKG / "analysis").glob("*.py")):
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
