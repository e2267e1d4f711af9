"""Fixtures for the fine-tuning tests: a tiny byte-level BPE tokenizer and checkpoint, and package folders with the
schema of the offline suite's real sources (BIG-bench task files, the Brown corpus, BBC News folders)."""

import json
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

from mlmclm import MlmClmConfig, MlmClmForMaskedLM

SPECIALS = ["<pad>", "<s>", "</s>", "<mask>"]


def make_tokenizer(texts, vocab_size: int = 512) -> PreTrainedTokenizerFast:
    """Byte-level BPE with pad/bos/eos/mask; `<s> A </s>` and `<s> A </s> B </s>` templates."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS,
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                       show_progress=False))
    bos, eos = tok.token_to_id("<s>"), tok.token_to_id("</s>")
    tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>", pair="<s> $A </s> $B:1 </s>:1",
                                                       special_tokens=[("<s>", bos), ("</s>", eos)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                                   mask_token="<mask>")


def make_checkpoint(path: Path, texts, vocab_size: int = 512, seed: int = 0, size: str = "tiny", **config) -> Path:
    """A randomly initialised MlmClmForMaskedLM of `size` and its tokenizer, saved as a pretraining run would."""
    import torch

    tok = make_tokenizer(texts, vocab_size)
    torch.manual_seed(seed)
    cfg = MlmClmConfig.from_size(size, vocab_size=len(tok), pad_token_id=tok.pad_token_id,
                                 bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                                 mask_token_id=tok.mask_token_id, **config)
    MlmClmForMaskedLM(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return path


WORDS = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda river mountain city market music film "
         "team player election minister").split()


def _sentence(i: int, n: int = 8) -> str:
    return " ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(n)).capitalize() + "."


def write_offline_sources(root: Path, n: int = 60) -> dict[str, Path]:
    """Package folders with the real files' layout and schema, `n` examples each; returns `roots` for
    `build_offline`."""
    bb = root / "bigbench"
    labels = ["negative", "neutral", "positive", "ambivalent"]
    _json(bb / "multiemo/all_sentence_en/task.json", {"examples": [
        {"input": f"{_sentence(i)} {labels[i % 4]} review {i}.",
         "target_scores": {k: int(k == labels[i % 4]) for k in labels}} for i in range(n)]})
    verdicts = ["True", "False", "Neither"]
    _json(bb / "vitaminc_fact_verification/task.json", {"examples": [
        {"input": f"Page {i % 12}: {_sentence(i)} number {i}.\nClaim: {_sentence(i + 1)} {verdicts[i % 3].lower()}",
         "target_scores": {v: int(v == verdicts[i % 3]) for v in verdicts}} for i in range(n)]})
    _json(bb / "contextual_parametric_knowledge_conflicts/task.json", {"examples": [
        {"input": f"\nQuestion: who is person {i}?\nContext: {_sentence(i)} Person {i} is Name{i} Surname.",
         "target": f"Name{i} Surname", "target_scores": {f"Name{i} Surname": 1, "Other": 0}} for i in range(n)]})
    for file, articles in (("squaddev_v1.1.json", 12), ("nyt_v1.0.json", 12), ("reddit_v1.0.json", 1)):
        data = []
        for a in range(articles):
            paragraphs = []
            for p in range(max(1, n // 5 // articles)):
                k = a * 100 + p
                ctx = f"{_sentence(k, 12)} The answer {k} is Value{k} today. {_sentence(k + 1, 40)}"
                start = ctx.index(f"Value{k}")
                paragraphs.append({"context": ctx, "qas": [
                    {"id": f"{file}-{k}-{q}", "question": f"What is answer {k} number {q}?",
                     "answers": [{"text": f"Value{k}", "answer_start": start}] * 2} for q in range(5)]})
            data.append({"title": f"Article_{a}", "paragraphs": paragraphs})
        _json(bb / "squad_shifts" / file, {"version": "1.1", "data": data})
    brown = root / "brown"
    brown.mkdir(parents=True)
    for f in range(10):
        lines = [f"\tThe/at Fulton/np-tl County/nn-tl jury/nn said/vbd {f}/cd ,/, ``/`` it's/pps+bez fine/jj ''/'' ./."]
        lines += ["\tMr./np Smith/np of/in Atlanta's/np$ court/nn did/dod n't/* go/vb ./." for _ in range(n // 10)]
        (brown / f"c{'abcdefghjk'[f]}0{f}").write_text("\n\n".join(lines) + "\n", encoding="latin-1")
    bbc = root / "bbc"
    for c, topic in enumerate(("business", "entertainment", "politics", "sports", "tech")):
        (bbc / topic).mkdir(parents=True)
        for i in range(n // 5):
            (bbc / topic / f"{i:03d}.txt").write_text(f"{topic.title()} headline {i}\n\n{_sentence(i + c)} {topic}.")
    return {"bigbench": bb, "brown": brown, "bbc": bbc}


def _json(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))
