"""Pretraining data, its second step: the tokenizer, and a run's tokenizer found or made once.

- `train_tokenizer`: byte-level BPE with the special tokens the objectives need, saved in transformers format with its
  record (`MADE`); `load_tokenizer`: any transformers tokenizer, given a mask token when it has none.
- `prepare_tokenizer`: a pretraining run's tokenizer, trained once under a lock in a folder named by its corpus's cache
  key (`tokenizer_dir`, `corpus.corpus_key`) and found trained by every later run that shares it (read without taking
  the lock, so that the processes of a launch never wait on one another); a trained tokenizer is checked against its
  folder's vocabulary size and its record (`tokenizer_fault`). With `build=False` (a multi-process launch, which never
  builds data: `mlmclm data` prepares it beforehand) one not trained yet is refused in one line.
- `tokenizer_key`: the cache key of a tokenizer, which names its shards' folder (`mlmclm.training.shards`).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Iterator

from .. import locks
from ..config import DataSpec, PretrainConfig
from ..errors import ConfigError
from ..io import atomic_path, quoted, write_json
from .corpus import corpus_key, iter_texts, not_prepared, prepare_command

SPECIAL_TOKENS = {"pad_token": "<|pad|>", "bos_token": "<|begin_of_text|>", "eos_token": "<|end_of_text|>",
                  "mask_token": "<|mask|>"}
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
# A run's tokenizer, cached
# ---------------------------------------------------------------------------------------------------------------
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
        return f"its {MADE} says it was made for vocab_size {quoted(made.get('vocab_size'))}, the folder names " \
            f"{vocab_size:,}"
    key = tokenizer_key(tokenizer)
    if (made.get("tokens"), made.get("tokenizer")) != (len(tokenizer), key):
        return (f"its tokenizer.json ({len(tokenizer):,} tokens, key {key}) is not the one {MADE} records as made "
                f"({quoted(made.get('tokens'))} tokens, key {quoted(made.get('tokenizer'))})")
    return None
