"""README.md and docs/*.md: every number in a result table comes from a table the notebooks write, so prose and
results cannot drift apart. A table is marked by a comment naming where its numbers live,
``<!-- numbers: ours-long, paper -->`` (``paper``: results/tables/; another name: results/tables/<name>/).

A row that starts with a claim ("| 7. ...", or one of ours beyond the paper, "| B1. ...") is read against the verdicts
tables (``verdicts.csv``): a column headed "paper ..." against the paper's, the others against the named folder's,
and only that claim's rows: an "estimate [low, high]" must be one verdict row's three numbers, any other number one
of them, and in a column headed "share ..." a percentage one row's ``effect_share``. Any other row is read against the
folder's tables of models (``controls.csv``, ``models.csv``, ``seeds.csv``): a "score ± half-width" must be one
cell's pair, any other number one of theirs. The committed files
are read, as the notebooks last wrote them. The README's answer (its first marked table) comes from the `twin` scale
and leaves none of that scale's verdicts out.

The README is the front door: at most ``README_BYTES``, every page of docs/ linked from it, and every relative link
of the README and docs/ (files and #anchors) resolving."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pandas as pd
from helpers import REPO

NUMBER = re.compile(r"[-+]?\d+\.\d+")
TRIPLE = re.compile(r"([-+]?\d+\.\d+) \[([-+]?\d+\.\d+), ([-+]?\d+\.\d+)\]")  # estimate [low, high]
PAIR = re.compile(r"([-+]?\d+\.\d+) ± (\d+\.\d+)")  # score ± half-width, as the README writes it
SHARE = re.compile(r"([-+]?\d+)%")  # in a column headed "share ...": a claim row's effect_share, in percent
CELL_PAIR = re.compile(r"(\d+\.\d+) \(±(\d+\.\d+)\)")  # as the tables write it
MARKER = re.compile(r"<!-- numbers: (?P<dirs>[^>]+?) -->\n(?P<table>(?:\|.*\n)+)")
CLAIM_ROW = re.compile(r"^(B?\d+[bs]?)\.\s")  # the paper's claims (1, 3b), our stricter 5s and ours beyond it (B1)
MODEL_TABLES = ("controls.csv", "models.csv", "seeds.csv")
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]  # the front door, then the reference
MIN_TABLES = 8  # marked result tables across PAGES: mini 2, long 3, longer 2 (docs/), the answer (README)
README_BYTES = 16_000
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")  # [text](target) and ![alt](target)
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
CODE = re.compile(r"`[^`\n]*`")


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
    matched (estimate, low, high), the pretraining effect and the smallest difference its test detects."""
    v = pd.read_csv(_folder(name) / "verdicts.csv", dtype={"claim": str})
    v = v[v["claim"].str.split(".").str[0] == claim].dropna(subset=["estimate"])
    out = list(zip(v["estimate"], v["low"], v["high"]))
    if "paper_estimate" in v:
        matched = v.dropna(subset=["paper_estimate"])
        out += list(zip(matched["paper_estimate"], matched["paper_low"], matched["paper_high"]))
        out += [(x,) for x in v["pretraining_effect"].dropna()]
        out += [(x,) for x in v["detectable"].dropna()] if "detectable" in v else []
    return out


def _verdict_shares(name: str, claim: str) -> list[float]:
    """The ``effect_share`` of each row of ``claim`` in ``name``'s verdicts table (none for the paper's)."""
    v = pd.read_csv(_folder(name) / "verdicts.csv", dtype={"claim": str})
    v = v[v["claim"].str.split(".").str[0] == claim]
    return list(v["effect_share"].dropna()) if "effect_share" in v else []


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
    """The numbers of a page's marked tables that the tables they name do not hold, with where they are."""
    misses = []
    for m in MARKER.finditer(readme):
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
                    shares = SHARE.findall(cell) if head.lower().startswith("share") else []
                    bad = _missing(SHARE.sub("", cell) if shares else cell, _verdict_numbers(source, claim[1]), TRIPLE)
                    bad += [f"{x}%" for x in shares
                            if not any(round(100 * v) == int(x) for v in _verdict_shares(source, claim[1]))]
                else:
                    bad = _missing(cell, models, PAIR)
                misses += [f"{row[0][:30]!r} / {head!r}: {x}" for x in bad]
    return misses


def test_readme_result_tables_come_from_the_written_tables():
    found = sum(len(MARKER.findall(page.read_text())) for page in PAGES)
    assert found >= MIN_TABLES, (f"{found} marked result tables in README.md and docs/, expected {MIN_TABLES}: a "
                                 "table lost its <!-- numbers: ... --> marker")
    misses = [f"{page.relative_to(REPO)}: {miss}" for page in PAGES for miss in readme_misses(page.read_text())]
    assert not misses, "numbers that the tables the notebooks write do not hold:\n" + "\n".join(misses)


ANSWER = "ours-twin"  # the scale the README's answer comes from (issue 45)


def answer_gaps(readme: str, verdicts: pd.DataFrame) -> list[str]:
    """What the README's answer (its first marked table) leaves out of the verdicts it names: every claim judged there
    (a row with an estimate) has a row of its own, holding each group's estimate and verdict."""
    m = MARKER.search(readme)
    rows = {}
    for line in m["table"].splitlines()[2:]:
        claim = CLAIM_ROW.match(_cells(line)[0])
        if claim:
            rows[claim[1]] = line
    gaps = []
    for r in verdicts.dropna(subset=["estimate"]).itertuples():
        claim, words = r.claim.split(".")[0], [f"{r.estimate:+.2f}", r.verdict]
        line = rows.get(claim, "")
        words += [r.group] if r.group != "all" else []
        gaps += [f"claim {claim} {r.group}: {w!r} not in its row" for w in words if w not in line]
    return gaps


def test_the_answer_comes_from_the_twin_and_leaves_no_verdict_out():
    readme = (REPO / "README.md").read_text()
    assert MARKER.search(readme)["dirs"].strip() == ANSWER, f"the README's answer table names no {ANSWER!r}"
    verdicts = pd.read_csv(_folder(ANSWER) / "verdicts.csv", dtype={"claim": str})
    gaps = answer_gaps(readme, verdicts)
    assert not gaps, "the README's answer leaves out verdicts of " + ANSWER + ":\n" + "\n".join(gaps)
    table = ("<!-- numbers: x -->\n| claim | paper | ours |\n|---|---|---|\n"
             "| 1. MLM | SC +3.42 | SC +0.87 reproduced |\n")
    one = pd.DataFrame({"claim": ["1. MLM", "1. MLM", "3. CLM"], "group": ["SC", "TC", "IR"],
                        "estimate": [0.87, -0.4, 1.0], "verdict": ["reproduced", "not reproduced", "inconclusive"]})
    assert answer_gaps(table, one) == [f"claim {c}: {w!r} not in its row" for c, w in [
        ("1 TC", "-0.40"), ("1 TC", "not reproduced"), ("1 TC", "TC"),
        ("3 IR", "+1.00"), ("3 IR", "inconclusive"), ("3 IR", "IR")]]


PLAIN = {"What holds": {"reproduced"}, "What does not": {"not reproduced"},
         "What cannot be told": {"inconclusive", "no signal"}}  # the plain-words answer's bullets, by verdict
TAG = re.compile(r"(?:\(|;\s)claim\s(\w+)(?::\s+([A-Z]{2}(?:,\s+[A-Z]{2})*))?(?=[;)])")  # "(claim 5: SC, TC)", "; claim 5b)"


def plain_gaps(readme: str, verdicts: pd.DataFrame) -> list[str]:
    """Where the README's answer in plain words (its bullets "**What holds:**", "**What does not:**", "**What cannot
    be told:**") and the verdicts disagree: each verdict of a claim judged at the twin names its claim and group in its
    bullet ("(claim 5: SC, TC)"; a claim judged on all groups at once, "(claim 5b)"), and in no other."""
    said = {}
    for head in PLAIN:
        m = re.search(rf"^- \*\*{head}:\*\*(.*?)(?=^- \*\*|^$)", readme, re.M | re.S)
        for claim, groups in TAG.findall(m[1] if m else ""):
            for group in re.split(r",\s+", groups) if groups else ["all"]:
                said.setdefault((claim, group), []).append(head)
    gaps = []
    for r in verdicts.dropna(subset=["estimate"]).itertuples():
        key, want = (r.claim.split(".")[0], r.group), next(h for h, v in PLAIN.items() if r.verdict in v)
        if said.pop(key, None) != [want]:
            gaps.append(f"claim {key[0]} {key[1]} ({r.verdict}) is not said under {want!r} alone")
    return gaps + [f"claim {c} {g} is said under {h} but has no verdict there" for (c, g), h in said.items()]


def test_the_plain_words_say_each_verdict_where_it_belongs():
    readme = (REPO / "README.md").read_text()
    verdicts = pd.read_csv(_folder(ANSWER) / "verdicts.csv", dtype={"claim": str})
    gaps = plain_gaps(readme, verdicts)
    assert not gaps, "the README's answer in plain words and the verdicts of " + ANSWER + " differ:\n" + "\n".join(gaps)
    text = ("- **What holds:** the split wins (claim 5: SC, TC).\n- **What does not:** none.\n"
            "- **What cannot be told:** the rest (claim 1: SC; claim 5b).\n\n")
    one = pd.DataFrame({"claim": ["5. x", "5. x", "1. y", "5b. z", "3. w"], "group": ["SC", "TC", "SC", "all", "IR"],
                        "estimate": [1.0] * 5,
                        "verdict": ["reproduced", "inconclusive", "inconclusive", "no signal", "not reproduced"]})
    assert plain_gaps(text, one) == ["claim 5 TC (inconclusive) is not said under 'What cannot be told' alone",
                                     "claim 3 IR (not reproduced) is not said under 'What does not' alone"]


def _slug(heading: str) -> str:
    """A heading's #anchor as GitHub writes it: lower case, code marks and punctuation dropped, spaces to hyphens."""
    text = unicodedata.normalize("NFC", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(text: str) -> set[str]:
    seen, out = {}, set()
    for heading in re.findall(r"^#{1,6} (.+)$", FENCE.sub("", text), re.M):
        slug = _slug(heading)
        out.add(slug if slug not in seen else f"{slug}-{seen[slug]}")
        seen[slug] = seen.get(slug, 0) + 1
    return out


def _links(text: str) -> list[str]:
    """The link targets of a page, outside code blocks and code spans."""
    return LINK.findall(CODE.sub("", FENCE.sub("", text)))


def test_the_readme_is_a_front_door():
    size = len((REPO / "README.md").read_bytes())
    assert size <= README_BYTES, f"README.md is {size:,} bytes (at most {README_BYTES:,}): move detail to docs/"


def test_every_docs_page_is_linked_from_the_readme():
    linked = {(REPO / target.split("#")[0]).resolve() for target in _links((REPO / "README.md").read_text())
              if not target.startswith(("http://", "https://", "#"))}
    unlinked = [page.name for page in PAGES[1:] if page.resolve() not in linked]
    assert not unlinked, f"docs pages the README does not link: {unlinked}"


def test_relative_links_resolve():
    broken = []
    for page in PAGES:
        for target in _links(page.read_text()):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"{page.relative_to(REPO)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest.read_text()):
                broken.append(f"{page.relative_to(REPO)}: {target} (no such heading)")
    assert not broken, "links that do not resolve:\n" + "\n".join(broken)


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
    assert _slug("Figures: which code draws them") == "figures-which-code-draws-them"
    assert _slug("`make bench`") == "make-bench" and _slug("Does MLM overtake CLM?") == "does-mlm-overtake-clm"
    page = "[a](docs/x.md#y) `[b](c)` ![f](figures/f.png)\n```\n[d](e)\n```\n"  # not in code spans or blocks
    assert _links(page) == ["docs/x.md#y", "figures/f.png"]
