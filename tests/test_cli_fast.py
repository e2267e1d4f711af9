"""A fast, consistent command line (issue 25, item 4): no verb's --help imports torch, every argument has help, and
the scale and recipe lists come from the shipped files."""

import argparse
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import verbs as _verbs
from mlmclm import cli
from mlmclm.commands import recipe_names
from mlmclm.config import RECIPES_DIR, scale_names

ROOT = Path(__file__).resolve().parents[1]

WALK = """
import sys
from mlmclm.cli import main
paths = %r
for path in paths:
    try:
        main([*path, "--help"])
    except SystemExit as e:
        assert e.code in (0, None), (path, e.code)
for name in ("torch", "transformers", "accelerate"):
    assert name not in sys.modules, name + " imported by --help"
print("ok", len(paths))
"""


def _parser() -> argparse.ArgumentParser:
    return cli.build_parser()


def test_no_help_imports_torch():
    paths = [list(p) for p, _ in _verbs(_parser()) if p[0] != "notebooks"] + [[]]  # notebooks: its own line
    proc = subprocess.run([sys.executable, "-c", WALK % paths], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0 and proc.stdout.splitlines()[-1] == f"ok {len(paths)}", proc.stderr[-2000:]
    subprocess.run([sys.executable, "-m", "mlmclm.cli", "--help"], check=True, capture_output=True, cwd=ROOT)


def test_every_argument_has_help():
    missing = [f"{' '.join(path)} {a.dest}" for path, p in _verbs(_parser()) for a in p._actions
               if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)) and not a.help]
    assert missing == []


def test_scale_and_recipe_lists_come_from_the_shipped_files():
    assert recipe_names() == sorted(p.stem for p in RECIPES_DIR.glob("*.yaml")) and "long" in recipe_names()
    verbs = dict(_verbs(_parser()))
    pretrain = verbs[("pretrain",)].format_help()
    finetune = verbs[("finetune",)].format_help()
    assert all(name in pretrain for name in recipe_names())
    assert all(name in finetune for name in scale_names()) and "long" in scale_names()


def test_data_dir_moves_the_task_suite_too(tmp_path, monkeypatch):
    """--data-dir of `study run` and `reproduce` holds the task suite as well (<data-dir>/tasks), not only corpora."""
    from mlmclm import studies

    seen = []

    def fake_run(plan, paths=None, data_dir=None, **kwargs):
        seen.append((paths.data, data_dir))
        raise SystemExit(0)

    monkeypatch.setattr(studies, "run", fake_run)
    for argv in (["study", "run", "scaling", "--scale", "tiny"], ["reproduce", "--scale", "tiny",
                                                                   "--results-dir", str(tmp_path / "r")]):
        try:
            cli.main([*argv, "--data-dir", str(tmp_path / "d")])
        except SystemExit:
            pass
    assert seen == [(tmp_path / "d", tmp_path / "d" / "tasks")] * 2


def test_an_option_is_never_taken_by_a_prefix_of_its_name():
    """argparse's prefix matching would read `finetune ... --model x` as `--model-id x`, silently: every parser of
    the command line takes an option by its whole name only, and a prefix is refused."""
    parser = _parser()
    assert parser.parse_args(["finetune", "ckpt", "--scale", "tiny", "--model-id", "x"]).model_id == "x"
    with pytest.raises(SystemExit):
        parser.parse_args(["finetune", "ckpt", "--scale", "tiny", "--model", "x"])
    with pytest.raises(SystemExit):
        parser.parse_args(["study", "run", "all", "--scale", "tiny", "--pretrain"])


def test_study_plan_and_run_name_every_study_by_default():
    """`mlmclm study plan --scale twin` plans every study, as `study plan all` does (it failed for want of a name)."""
    parser = _parser()
    assert parser.parse_args(["study", "plan", "--scale", "twin"]).name == "all"
    assert parser.parse_args(["study", "run", "scaling"]).name == "scaling"


@pytest.mark.parametrize("argv, says", [
    (["reproduce", "--runs-dir", "x"], "mlmclm reproduce: error: unrecognized arguments: --runs-dir x (did you mean "
                                       "--results-dir?; --runs-dir is an option of mlmclm finetune, mlmclm study plan"),
    (["pretrain", "tiny", "--scale", "tiny"], "mlmclm pretrain: error: unrecognized arguments: --scale tiny (--scale "
                                              "is an option of mlmclm coverage"),
    (["study", "run", "--runs-dirr", "x"], "mlmclm study run: error: unrecognized arguments: --runs-dirr (did you "
                                           "mean --runs-dir?; see mlmclm study run --help)"),
    (["finetune", "--scal", "tiny", "x"], "mlmclm finetune: error: the following arguments are required: --scale "
                                          "(--scal: did you mean --scale?)"),
    (["coverage", "--scal", "tiny"], "mlmclm coverage: error: the following arguments are required: --scale (--scal: "
                                     "did you mean --scale?)")])
def test_an_option_a_verb_does_not_take_is_named_under_its_own_usage_with_what_to_use(argv, says, capsys):
    """An option the verb does not have: the verb's own usage (not the top level's) and, in the same line, its close
    option or the verbs that take it (they were a bare "unrecognized arguments" under `mlmclm`'s usage)."""
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith(f"usage: mlmclm {argv[0]}") and err[-1].startswith(says), err
