"""The set-up: environment.yml agrees with pyproject.toml; the README's two commands are what CI and make run."""

import re
import tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]


def _pyproject_requirements():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = project["dependencies"] + [r for extra in project["optional-dependencies"].values() for r in extra]
    return {Requirement(r).name.lower(): Requirement(r) for r in reqs}


def _environment_pins():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    pins = {}
    for line in pip:
        name, _, version = line.partition("==")
        assert version, f"environment.yml pip entry {line!r} must pin an exact version (name==version)"
        pins[name.strip().lower()] = version.strip()
    return env, pins


def test_environment_yml_pins_satisfy_pyproject():
    reqs = _pyproject_requirements()
    env, pins = _environment_pins()
    assert set(pins) == set(reqs), f"packages only in one file: {sorted(set(pins) ^ set(reqs))}"
    for name, version in pins.items():
        assert reqs[name].specifier.contains(version, prereleases=True), \
            f"environment.yml pins {name}=={version}, outside pyproject's {reqs[name].specifier}"
    assert any(str(d).startswith("python=3.11") for d in env["dependencies"] if isinstance(d, str))


def test_design_card_packages_are_declared():
    reqs = _pyproject_requirements()
    for name in ("torch", "transformers", "datasets", "accelerate", "jupyterlab", "papermill", "seaborn", "pandas",
                 "nbval", "kernels", "tokenizers", "pytest"):
        assert name in reqs, f"pyproject.toml must declare {name}"
    assert reqs["torch"].specifier.contains("2.11.0") and reqs["torch"].specifier.contains("2.13.0")


def test_make_installs_torch_before_the_package():
    """torch==2.13.0 first, from pip's own indexes unless TORCH_INDEX adds one for it (by default none: no address in
    the Makefile, the CPU wheel at hand on CI is taken as before)."""
    make = (ROOT / "Makefile").read_text()
    torch_at = make.index("pip install --quiet $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX)) torch==2.13.0")
    assert torch_at < make.index('pip install --quiet -e ".[dev]"')
    assert re.search(r"^TORCH_INDEX \?=$", make, re.M) and "://" not in make
    assert re.search(r"^test: \$\(STAMP\)", make, re.M) and re.search(r"^reproduce: \$\(STAMP\)", make, re.M)


def test_readme_commands_and_ci():
    readme = (ROOT / "README.md").read_text()
    assert "make reproduce" in readme and "make test" in readme
    assert "make test" in (ROOT / ".ci" / "run").read_text()
