"""The command line: model introspection and clear one-line errors."""

import subprocess
import sys

import pytest

from mlmclm.cli import attention_check, main


@pytest.mark.parametrize("size,params", [("210m", "211.8M"), ("610m", "607.9M"), ("1b", "1,187.9M")])
def test_model_info_counts_the_papers_sizes(size, params, capsys):
    assert main(["model", "info", size]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("params: embeddings + body"))
    assert line.endswith(f"({params})")
    assert "FLOPs/token training" in out


def test_model_info_in_a_fresh_process_and_bad_size():
    ok = subprocess.run([sys.executable, "-m", "mlmclm.cli", "model", "info", "tiny"], capture_output=True, text=True)
    assert ok.returncode == 0 and "params: total" in ok.stdout
    bad = subprocess.run([sys.executable, "-m", "mlmclm.cli", "model", "info", "3b"], capture_output=True, text=True)
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        "mlmclm: error: unknown model size '3b'; choose one of 210m, 610m, 1b, tiny, tiny-s, tiny-m, tiny-l, mini-xs, "
        "mini-s, mini-m, mini-l, small-s, small-m, small-l, smollm2-135m"]


def test_attention_check_reports_every_cpu_backend():
    rows = attention_check("cpu")
    assert {r[0] for r in rows} == {"sdpa", "kernels"} and len(rows) == 4
    assert all(fwd <= 1e-5 and grad <= 1e-4 for _, _, fwd, grad in rows)
