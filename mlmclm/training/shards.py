"""Pretraining data, its third step: packed uint32 token shards, and the blocks a run reads from them.

- `build_shards`: documents shuffled with a seed (the recorded data order), each `[bos] tokens [eos]`, concatenated
  into one uint32 stream per split (memory-mapped when read); blocks of any length are cut at read time
  (`TokenBlocks`). A second build with the same inputs does nothing.
- `prepare_shards`: a pretraining run's shards, built once under a lock in a folder named by its corpus's and its
  tokenizer's cache keys (`corpus.corpus_key`, `tokenizer.tokenizer_key`) and found built by every later run that
  shares them; they are checked whole (`shards_fault`) and against their record and the run's tokenizer, whose
  vocabulary is the model's (`shards_mismatch`: the tokenizer's key and vocabulary size in meta.json, no token id past
  it) every time they are found. With `build=False` (a multi-process launch, which never builds data: `mlmclm data`
  prepares it beforehand) what is missing, partial or another tokenizer's is refused in one line.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import random
from pathlib import Path
from typing import Iterator

import numpy as np
from tqdm.auto import tqdm

from .. import locks
from ..config import PretrainConfig
from ..errors import ConfigError
from ..io import atomic_path, quoted, write_json
from .corpus import corpus_key, iter_texts, not_prepared, prepare_command
from .tokenizer import tokenizer_key


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
# A run's shards, cached
# ---------------------------------------------------------------------------------------------------------------
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
        return f"its tokens field is {quoted(tokens)}, not the token count of each of {' and '.join(SPLITS)}"
    for split in SPLITS:
        if split not in tokens:
            return f"its tokens field lists no {split} count"
        count = tokens[split]
        if type(count) is not int or count < 0:
            return f"its tokens.{split} is {quoted(count)}, not a count of tokens"
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
