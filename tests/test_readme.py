"""README.md: every number in a result table of the README comes from a table the notebooks write, so prose and
results cannot drift apart. A table is marked by a comment naming where its numbers live,
``<!-- numbers: ours-long, paper -->`` (``paper``: results/tables/; another name: results/tables/<name>/).

A row that starts with a claim ("| 7. ...", or one of ours beyond the paper, "| B1. ...") is read against the verdicts
tables (``verdicts.csv``): a column headed "paper ..." against the paper's, the others against the named folder's,
and only that claim's rows: an "estimate [low, high]" must be one verdict row's three numbers, any other number one
of them. Any other row is read against the folder's tables of models (``controls.csv``, ``models.csv``,
``seeds.csv``): a "score ± half-width" must be one cell's pair, any other number one of theirs. The committed files
are read, as the notebooks last wrote them."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
from mlmclm.io import ROOT as REPO

NUMBER = re.compile(r"[-+]?\d+\.\d+")
TRIPLE = re.compile(r"([-+]?\d+\.\d+) \[([-+]?\d+\.\d+), ([-+]?\d+\.\d+)\]")  # estimate [low, high]
PAIR = re.compile(r"([-+]?\d+\.\d+) ± (\d+\.\d+)")  # score ± half-width, as the README writes it
CELL_PAIR = re.compile(r"(\d+\.\d+) \(±(\d+\.\d+)\)")  # as the tables write it
MARKER = re.compile(r"<!-- numbers: (?P<dirs>[^>]+?) -->\n(?P<table>(?:\|.*\n)+)")
CLAIM_ROW = re.compile(r"^(B?\d+[bs]?)\.\s")  # the paper's claims (1, 3b), our stricter 5s and ours beyond it (B1)
MODEL_TABLES = ("controls.csv", "models.csv", "seeds.csv")


def _folder(name: str) -> Path:
    return REPO / "results" / "tables" / ("" if name == "paper" else name)


def _same(text: str, value: float) -> bool:
    """Whether ``value`` prints as ``text`` at ``text``'s decimals ("+0.30" and 0.3 are the same)."""
    decimals = len(text.split(".")[1])
    return f"{float(text):.{decimals}f}" == f"{value:.{decimals}f}"


def _missing(cell: str, tuples: list[tuple], pattern: re.Pattern) -> list[str]:
    """The numbers of ``cell`` no table holds: a ``pattern`` match must be one of ``tuples``, any other number one of
    the numbers in them."""
    missing = [m[0] for m in pattern.finditer(cell)
               if not any(len(t) == len(m.groups()) and all(_same(x, v) for x, v in zip(m.groups(), t))
                          for t in tuples)]
    singles = {v for t in tuples for v in t}
    return missing + [x for x in NUMBER.findall(pattern.sub("", cell)) if not any(_same(x, v) for v in singles)]


def _verdict_numbers(name: str, claim: str) -> list[tuple]:
    """(estimate, low, high) of each row of ``claim`` in ``name``'s verdicts table; for a row of ours also the paper's
    matched (estimate, low, high) and the pretraining effect."""
    v = pd.read_csv(_folder(name) / "verdicts.csv", dtype={"claim": str})
    v = v[v["claim"].str.split(".").str[0] == claim].dropna(subset=["estimate"])
    out = list(zip(v["estimate"], v["low"], v["high"]))
    if "paper_estimate" in v:
        matched = v.dropna(subset=["paper_estimate"])
        out += list(zip(matched["paper_estimate"], matched["paper_low"], matched["paper_high"]))
        out += [(x,) for x in v["pretraining_effect"].dropna()]
    return out


def _model_numbers(names: list[str]) -> list[tuple]:
    """Every (score, half-width) pair and every other number in the tables of models of ``names``."""
    out = []
    for name in names:
        for table in MODEL_TABLES:
            path = _folder(name) / table
            if path.is_file():
                for cell in pd.read_csv(path, dtype=str, keep_default_na=False).to_numpy().ravel():
                    out += [(float(a), float(b)) for a, b in CELL_PAIR.findall(cell)]
                    out += [(float(x),) for x in NUMBER.findall(CELL_PAIR.sub("", cell))]
    return out


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def readme_misses(readme: str) -> list[str]:
    """The numbers of the README's marked tables that the tables they name do not hold, with where they are."""
    found, misses = list(MARKER.finditer(readme)), []
    assert len(found) >= 4, "the README's result tables lost their <!-- numbers: ... --> markers"
    for m in found:
        dirs = [d.strip() for d in m["dirs"].split(",")]
        ours = [d for d in dirs if d != "paper"]
        lines = m["table"].splitlines()
        header = _cells(lines[0])
        models = _model_numbers(ours)
        for line in lines[2:]:
            row = _cells(line)
            claim = CLAIM_ROW.match(row[0])
            for head, cell in zip(header[1:], row[1:]):
                if claim:
                    source = "paper" if head.lower().startswith("paper") else ours[0]
                    bad = _missing(cell, _verdict_numbers(source, claim[1]), TRIPLE)
                else:
                    bad = _missing(cell, models, PAIR)
                misses += [f"{row[0][:30]!r} / {head!r}: {x}" for x in bad]
    return misses


def test_readme_result_tables_come_from_the_written_tables():
    misses = readme_misses((REPO / "README.md").read_text())
    assert not misses, "README numbers that the tables the notebooks write do not hold:\n" + "\n".join(misses)


def test_the_check_fails_on_a_number_no_table_holds():
    assert [CLAIM_ROW.match(c)[1] for c in ("3b. MLM catches up", "B1. Mixed", "5s. (ours")] == ["3b", "B1", "5s"]
    assert _same("87.2", 87.16) and _same("+0.30", 0.3) and _same("-2.96", -2.96)
    assert not _same("87.3", 87.16) and not _same("+2.96", -2.96)
    verdicts = [(1.04, 0.61, 1.45), (-0.13, -0.49, 0.3)]
    assert _missing("+1.04 [+0.61, +1.45]: reproduced", verdicts, TRIPLE) == []
    assert _missing("+1.04 [+0.61, +1.40]", verdicts, TRIPLE) == ["+1.04 [+0.61, +1.40]"]  # one bound off
    assert _missing("+1.04 [-0.49, +0.30]", verdicts, TRIPLE) == ["+1.04 [-0.49, +0.30]"]  # bounds of another row
    assert _missing("QA +1.45, SC +0.70", verdicts, TRIPLE) == ["+0.70"]
    models = [(87.16, 0.44), (23.36,)]
    assert _missing("87.16 ± 0.44 / 23.36", models, PAIR) == []
    assert _missing("87.16 ± 0.71", models, PAIR) == ["87.16 ± 0.71"]
