"""README.md: every number in a result table of the README comes from a table the notebooks write, so prose and
results cannot drift apart. A table is marked by a comment naming where its numbers live,
``<!-- numbers: ours-long, paper -->`` (``paper``: results/tables/*.csv; another name: results/tables/<name>/*.csv)."""

from __future__ import annotations

import re

import pandas as pd
from mlmclm.io import ROOT as REPO

NUMBER = re.compile(r"[-+]?\d+\.\d+")
MARKER = re.compile(r"<!-- numbers: (?P<dirs>[^>]+?) -->\n(?P<table>(?:\|.*\n)+)")


def _pool(dirs: list[str]) -> set[float]:
    """Every number in every cell of the CSV tables in ``dirs``."""
    values = set()
    for name in dirs:
        folder = REPO / "results" / "tables" / ("" if name == "paper" else name)
        for path in sorted(folder.glob("*.csv")):
            for cell in pd.read_csv(path, dtype=str, keep_default_na=False).to_numpy().ravel():
                values.update(float(x) for x in NUMBER.findall(str(cell)))
    return values


def _found(text: str, pool: set[float]) -> bool:
    decimals = len(text.split(".")[1])
    return any(f"{v:.{decimals}f}" == f"{float(text):.{decimals}f}" for v in pool)


def test_readme_result_tables_come_from_the_written_tables():
    readme = (REPO / "README.md").read_text()
    tables = list(MARKER.finditer(readme))
    assert len(tables) >= 4, "the README's result tables lost their <!-- numbers: ... --> markers"
    for m in tables:
        dirs = [d.strip() for d in m["dirs"].split(",")]
        pool = _pool(dirs)
        assert pool, f"no tables in {dirs}"
        body = "\n".join(m["table"].splitlines()[2:])  # the header row names no numbers
        missing = [x for x in NUMBER.findall(body) if not _found(x, pool)]
        assert not missing, f"README numbers not in results/tables/{dirs}: {missing}"


def test_the_check_fails_on_a_number_no_table_holds():
    pool = {87.16, 0.44, -2.96}
    assert _found("87.16", pool) and _found("87.2", pool) and _found("-2.96", pool)
    assert not _found("87.3", pool) and not _found("+2.96", pool)
