"""Task suites: the offline build (on package folders with the real sources' schema, never the 358 MB BIG-bench
download) and the paper suite's adapters (on local files with the hub datasets' schema)."""

import json

import pytest

from helpers import write_offline_sources
from mlmclm import offline_suite, tasks
from mlmclm.evaluation.offline_suite import build_offline
from mlmclm.errors import TaskError
from mlmclm.evaluation.tasks import SUITES, load_task, select_tasks


@pytest.fixture(scope="module")
def offline(tmp_path_factory):
    root = tmp_path_factory.mktemp("offline")
    roots = write_offline_sources(root / "src")
    manifest = build_offline(None, data_dir=root / "tasks", roots=roots, progress=False)
    return root / "tasks", roots, manifest


def test_offline_build_writes_every_dataset_with_a_manifest(offline):
    data_dir, _, manifest = offline
    assert set(manifest["datasets"]) == set(SUITES["offline"])
    assert manifest["build_version"] == offline_suite.BUILD_VERSION
    on_disk = json.loads((data_dir / "offline" / "manifest.json").read_text())
    assert on_disk == manifest
    for name, entry in manifest["datasets"].items():
        task = SUITES["offline"][name]
        splits = load_task(task, data_dir)
        assert set(splits) == ({"validation", "test"} if task.train_on else {"train", "validation", "test"})
        for split, info in entry["splits"].items():
            assert info["examples"] == len(splits[split]) > 0
            assert info["sha256"] == offline_suite.sha256(data_dir / "offline" / name / f"{split}.jsonl")


def test_offline_build_is_cached_and_force_rebuilds(offline):
    data_dir, roots, _ = offline
    f = data_dir / "offline" / "squad11" / "train.jsonl"
    stamp = f.stat().st_mtime_ns
    killed = data_dir / "offline" / ".squad11.999999999.k1.tmp"  # what a build killed before its rename left
    (killed / "part").mkdir(parents=True)
    build_offline(["squad11"], data_dir, roots=roots, progress=False)
    assert f.stat().st_mtime_ns == stamp and not killed.exists()  # nothing to build, the leftover cleared
    build_offline(["squad11"], data_dir, roots=roots, force=True, progress=False)
    assert f.stat().st_mtime_ns != stamp and tasks.read_jsonl(f)


def test_offline_splits_keep_articles_and_pages_apart(offline):
    data_dir, _, _ = offline
    for name in ("squad11", "squad_shifts_nyt"):
        s = load_task(SUITES["offline"][name], data_dir)
        contexts = {split: {r["context"] for r in rows} for split, rows in s.items()}
        assert not contexts["train"] & contexts["test"] and not contexts["train"] & contexts["validation"]
        assert all(r["context"][a["start"]:a["start"] + len(a["text"])] == a["text"]
                   for rows in s.values() for r in rows for a in r["answers"])
    s = load_task(SUITES["offline"]["vitaminc_nli"], data_dir)
    pages = {split: {r["text"].split(":", 1)[1].split(":")[0] for r in rows} for split, rows in s.items()}
    assert not pages["train"] & pages["test"]
    ir = load_task(SUITES["offline"]["squad_retrieval"], data_dir)
    qa = load_task(SUITES["offline"]["squad11"], data_dir)
    assert [r["id"] for r in ir["test"]] == [r["id"] for r in qa["test"]]  # the same article split
    assert ir["test"][0]["docs"][0]["relevance"] == 1


def test_offline_labels_and_brown_mapping(offline):
    data_dir, _, _ = offline
    sc = load_task(SUITES["offline"]["multiemo_sentiment"], data_dir)
    labels = SUITES["offline"]["multiemo_sentiment"].labels
    assert all(labels[r["label"]] in r["text"] for r in sc["train"])  # the fixture writes the label in the text
    upos = load_task(SUITES["offline"]["brown_upos"], data_dir)["train"]
    names = SUITES["offline"]["brown_upos"].labels
    first = next(r for r in upos if r["tokens"][0] == "The")
    assert [names[t] for t in first["tags"]] == [
        "DET", "NOUN", "NOUN", "NOUN", "VERB", "NUM", ".", ".", "PRON", "ADJ", ".", "."]
    spans = load_task(SUITES["offline"]["brown_propn_spans"], data_dir)["train"]
    second = next(r for r in spans if r["tokens"][0] == "Mr.")
    # Mr./np Smith/np of/in Atlanta's/np$ court/nn did/dod n't/* go/vb ./.
    assert second["tags"] == [1, 2, 0, 1, 0, 0, 0, 0, 0]
    assert [offline_suite.brown_upos(t) for t in ("np-tl", "pps+bez", "*", "bedz*", "fw-nn", "nil", "ppss+md")] == [
        "NOUN", "PRON", "ADV", "VERB", "X", "X", "PRON"]


def test_caps_are_a_fixed_subset(offline):
    data_dir, _, _ = offline
    task = SUITES["offline"]["squad11"]
    a, b = (load_task(task, data_dir, max_train=7, max_eval=3) for _ in range(2))
    assert len(a["train"]) == 7 and len(a["test"]) == 3 and a == b


def test_split_by_is_deterministic_and_fills_small_parts_first():
    items = [{"g": g, "i": i} for g in range(10) for i in range(g + 1)]
    fractions = {"train": 0.8, "validation": 0.1, "test": 0.1}
    parts = offline_suite.split_by(items, key=lambda r: r["g"], fractions=fractions)
    assert parts == offline_suite.split_by(items, key=lambda r: r["g"], fractions=fractions)
    groups = {name: {r["g"] for r in rows} for name, rows in parts.items()}
    assert all(groups.values()) and sum(len(g) for g in groups.values()) == 10
    assert not groups["train"] & groups["test"] and not groups["validation"] & groups["test"]


def test_bad_names_and_unbuilt_datasets_fail_in_one_line(tmp_path):
    with pytest.raises(TaskError, match=r"unknown dataset 'conll' in the offline suite; choose from"):
        select_tasks("offline", ["TC"], ["conll"])
    with pytest.raises(TaskError, match=r"did you mean squad11\?"):
        select_tasks("offline", ["QA"], ["squad1"])
    with pytest.raises(TaskError, match=r"'squad11' is in group QA, which --groups leaves out"):
        select_tasks("offline", ["SC"], ["squad11"])
    with pytest.raises(TaskError, match=r"unknown task group 'NER'"):
        select_tasks("offline", ["NER"])
    with pytest.raises(TaskError, match=r"offline dataset squad11 is not built .*mlmclm tasks build --datasets"):
        load_task(SUITES["offline"]["squad11"], tmp_path)
    with pytest.raises(TaskError, match=r"offline dataset squad11 needs the folder of the built suite: pass data_dir"):
        load_task(SUITES["offline"]["squad11"])


def test_labels_outside_the_label_set_are_refused(tmp_path):
    folder = tmp_path / "offline" / "bbc_news_topic"
    folder.mkdir(parents=True)
    for split in ("train", "validation", "test"):
        (folder / f"{split}.jsonl").write_text(json.dumps({"text": "x", "label": 7 if split == "test" else 0}) + "\n")
    with pytest.raises(TaskError, match=r"bbc_news_topic: test has label 7, outside its 5 labels \(business,"):
        load_task(SUITES["offline"]["bbc_news_topic"], tmp_path)


# ----------------------------------------------------------------------------------------------- the paper suite
# (its adapters on local copies of the hub's parquet conversions: tests/test_paper_suite.py)

def test_holdout_is_the_rows_of_datasets_train_test_split():
    import datasets

    rows = [{"i": i} for i in range(103)]
    split = datasets.Dataset.from_list(rows).train_test_split(train_size=0.95, seed=42)
    train, validation = tasks.holdout(rows)
    assert train == list(split["train"]) and validation == list(split["test"])


def test_tasks_list_shows_the_built_sizes(offline, capsys):
    from mlmclm.cli import main

    data_dir, _, manifest = offline
    assert main(["tasks", "list", "--data-dir", str(data_dir)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(SUITES["offline"])
    n = manifest["datasets"]["squad11"]["splits"]["train"]["examples"]
    assert any(line.startswith("QA  squad11") and f"train {n}" in line for line in out)
    assert main(["tasks", "list", "--suite", "paper"]) == 0
    assert "conll2003_en" in capsys.readouterr().out
