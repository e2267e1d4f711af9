"""The paper suite's adapters on small local copies of the 12 datasets, written with the features the hub's parquet
conversions carry (ClassLabel names included) in the conversion's layout, `<repo>/<config>/<split>/0000.parquet`;
and the `hub` check (`pytest -m hub`), which resolves every pinned revision where a hub is reachable."""

import json
import os
import random
import subprocess
import sys
import urllib.request

import datasets
import pytest
from datasets import ClassLabel, Features, Sequence, Value

from mlmclm.io import working_root
from mlmclm.errors import TaskError
from mlmclm.evaluation import metrics, paper_suite
from mlmclm.evaluation.paper_suite import PARQUET, SOURCES, check_sources, seeded_halves
from mlmclm.evaluation.tasks import SUITES, load_task

PAPER = SUITES["paper"]
S = Value("string")
GLUE = {"sst2": ["negative", "positive"], "mnli": ["entailment", "neutral", "contradiction"],
        "qqp": ["not_duplicate", "duplicate"]}
CONLL = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]
CONLL_POS = ['"', "''", "#", "$", "(", ")", ",", ".", ":", "``", "CC", "CD", "DT", "EX", "FW", "IN", "JJ", "JJR",
             "JJS", "LS", "MD", "NN", "NNP", "NNPS", "NNS", "NN|SYM", "PDT", "POS", "PRP", "PRP$", "RB", "RBR", "RBS",
             "RP", "SYM", "TO", "UH", "VB", "VBD", "VBG", "VBN", "VBP", "VBZ", "WDT", "WP", "WP$", "WRB"]
CONLL_CHUNK = ["O", "B-ADJP", "I-ADJP", "B-ADVP", "I-ADVP", "B-CONJP", "I-CONJP", "B-INTJ", "I-INTJ", "B-LST", "I-LST",
               "B-NP", "I-NP", "B-PP", "I-PP", "B-PRT", "I-PRT", "B-SBAR", "I-SBAR", "B-UCP", "I-UCP", "B-VP", "I-VP"]
BEIR_DOC = Features({"_id": S, "title": S, "text": S})
N = 40


def write(root, repo, config, split, rows, features):
    """One split as the hub's parquet conversion holds it (features in the schema metadata)."""
    folder = root / repo / config / split
    folder.mkdir(parents=True, exist_ok=True)
    columns = {k: [r[k] for r in rows] for k in features}
    datasets.Dataset.from_dict(columns, features=features).to_parquet(str(folder / "0000.parquet"))


def write_suite(root, conll_names=CONLL):
    for config, names in GLUE.items():
        cols = {"sst2": ("sentence",), "mnli": ("premise", "hypothesis"), "qqp": ("question1", "question2")}[config]
        f = Features({**{c: S for c in cols}, "label": ClassLabel(names=names), "idx": Value("int32")})
        test = "validation_matched" if config == "mnli" else "validation"
        for split, n in (("train", N), (test, 3)):
            write(root, "nyu-mll/glue", config, split,
                  [{**{c: f"{c} {split} {i}" for c in cols}, "label": i % len(names), "idx": i} for i in range(n)], f)
    conll = Features({"id": S, "tokens": Sequence(S), "pos_tags": Sequence(ClassLabel(names=CONLL_POS)),
                      "chunk_tags": Sequence(ClassLabel(names=CONLL_CHUNK)),
                      "ner_tags": Sequence(ClassLabel(names=conll_names))})
    onto = Features({"tokens": Sequence(S), "tags": Sequence(Value("int32"))})
    uner = Features({"idx": S, "text": S, "tokens": Sequence(S), "ner_tags": Sequence(ClassLabel(names=CONLL[:7])),
                     "annotator": Sequence(S)})
    for split in ("train", "validation", "test"):
        write(root, "eriktks/conll2003", "conll2003", split, [
            {"id": "0", "tokens": ["EU", "rejects", "German"], "pos_tags": [22, 42, 16], "chunk_tags": [11, 21, 11],
             "ner_tags": [3, 0, 7]}], conll)
        write(root, "tner/ontonotes5", "ontonotes5", split, [{"tokens": ["Paris", "."], "tags": [7, 0]}], onto)
        write(root, "universalner/universal_ner", "en_ewt", split, [
            {"idx": "0", "text": "Bob ran", "tokens": ["Bob", "ran"], "ner_tags": [1, 0], "annotator": ["a"]}], uner)
    squad = Features({"id": S, "title": S, "context": S, "question": S,
                      "answers": Sequence({"text": S, "answer_start": Value("int32")})})
    rows = [{"id": f"q{i}", "title": "T", "context": "Paris is in France.", "question": "Where is Paris?",
             "answers": {"text": ["France"], "answer_start": [12]}} for i in range(N)]
    for repo, config in (("rajpurkar/squad", "plain_text"), ("rajpurkar/squad_v2", "squad_v2")):
        write(root, repo, config, "train", rows, squad)
    write(root, "rajpurkar/squad", "plain_text", "validation", rows[:2], squad)
    write(root, "rajpurkar/squad_v2", "squad_v2", "validation",
          [dict(rows[0], answers={"text": [], "answer_start": []})], squad)
    record = Features({"passage": S, "query": S, "entities": Sequence(S),
                       "entity_spans": Sequence({"text": S, "start": Value("int32"), "end": Value("int32")}),
                       "answers": Sequence(S), "idx": {"passage": Value("int32"), "query": Value("int32")}})
    rec = {"passage": "@highlight Obama visited Paris. Then Obama left.", "query": "@placeholder visited Paris",
           "entities": ["Obama", "Paris"], "entity_spans": {"text": ["Obama", "Paris", "Obama"],
                                                           "start": [11, 25, 37], "end": [16, 30, 42]},
           "answers": ["Obama", "Obama"], "idx": {"passage": 0, "query": 0}}
    for split in ("train", "validation"):
        write(root, "aps/super_glue", "record", split, [rec] * 4, record)
    write_msmarco(root)
    write_nq(root)
    write_mldr(root)
    return root


def write_msmarco(root):
    """Train: q0-q39 -> d0-d39. Dev (validation): q100-q104 -> d100-d104. TREC-DL 2019 (test): q200-q202, graded
    0-3 over d100 and d200-d205; q202 has no relevant document. Ids are integers in the qrels, as the TSVs give."""
    qrels = Features({"query-id": Value("int64"), "corpus-id": Value("int64"), "score": Value("int64")})
    write(root, "BeIR/msmarco-qrels", "default", "train",
          [{"query-id": i, "corpus-id": i, "score": 1} for i in range(N)], qrels)
    write(root, "BeIR/msmarco-qrels", "default", "validation",
          [{"query-id": 100 + i, "corpus-id": 100 + i, "score": 1} for i in range(5)], qrels)
    write(root, "BeIR/msmarco-qrels", "default", "test", [
        {"query-id": 200, "corpus-id": 200, "score": 3}, {"query-id": 200, "corpus-id": 201, "score": 0},
        {"query-id": 200, "corpus-id": 202, "score": 1}, {"query-id": 201, "corpus-id": 203, "score": 2},
        {"query-id": 201, "corpus-id": 100, "score": 0}, {"query-id": 202, "corpus-id": 205, "score": 0}], qrels)
    docs = [*range(N), *range(100, 105), *range(200, 206), 999]
    write(root, "BeIR/msmarco", "corpus", "corpus", [{"_id": str(d), "title": "", "text": f"doc {d}"} for d in docs],
          BEIR_DOC)
    write(root, "BeIR/msmarco", "queries", "queries",
          [{"_id": str(q), "title": "", "text": f"query {q}"} for q in [*range(N), *range(100, 105), 200, 201, 202]],
          BEIR_DOC)


def write_nq(root):
    qrels = Features({"query-id": S, "corpus-id": S, "score": Value("int64")})
    write(root, "BeIR/nq-qrels", "default", "test",
          [{"query-id": f"test{i}", "corpus-id": f"doc{i}", "score": 1} for i in range(N)], qrels)
    write(root, "BeIR/nq", "corpus", "corpus",
          [{"_id": f"doc{i}", "title": f"Title {i}", "text": f"text {i}"} for i in range(N + 5)], BEIR_DOC)
    write(root, "BeIR/nq", "queries", "queries",
          [{"_id": f"test{i}", "title": "", "text": f"question {i}"} for i in range(N)], BEIR_DOC)


def write_mldr(root):
    """MTEB layout: corpus with `_id`, queries with `id` (the loader takes either); the qrels judge one positive a
    query and one negative, which the authors' copy does not hold."""
    repo = "mteb/MultiLongDocRetrieval"
    qrels = Features({"query-id": S, "corpus-id": S, "score": Value("int64")})
    for split, qs in (("dev", range(3)), ("test", range(3, 7))):
        write(root, repo, "en-qrels", split, [r for q in qs for r in (
            {"query-id": f"q-{q}", "corpus-id": f"doc-{q}", "score": 1},
            {"query-id": f"q-{q}", "corpus-id": "doc-neg", "score": 0})], qrels)
        write(root, repo, "en-queries", split, [{"id": f"q-{q}", "text": f"long question {q}"} for q in qs],
              Features({"id": S, "text": S}))
        write(root, repo, "en-corpus", split, [{"_id": f"doc-{q}", "text": f"long doc {q}"} for q in qs] +
              [{"_id": "doc-neg", "text": "never judged relevant"}], Features({"_id": S, "text": S}))


@pytest.fixture(scope="module", autouse=True)
def cache(tmp_path_factory):
    """`datasets`' cache in a temporary folder, not the user's."""
    before = datasets.config.HF_DATASETS_CACHE
    datasets.config.HF_DATASETS_CACHE = str(tmp_path_factory.mktemp("cache"))
    yield
    datasets.config.HF_DATASETS_CACHE = before


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    return write_suite(tmp_path_factory.mktemp("hub"))


def test_every_dataset_has_a_pinned_parquet_revision_and_sources_on_disk(mirror):
    assert set(SOURCES) == set(PAPER) and len(SOURCES) == 12
    assert all(src.revision == PARQUET for sources in SOURCES.values() for src in sources.values())
    src = SOURCES["conll2003_en"]["data"]
    assert src.pattern("train") == ("hf://datasets/eriktks/conll2003@refs%2Fconvert%2Fparquet/"
                                    "conll2003/train/*.parquet")
    assert src.pattern("train", mirror) == str(mirror / "eriktks/conll2003/conll2003/train/*.parquet")
    assert set(check_sources(mirror).values()) == {"local"}


def test_sc_tc_qa_adapters_read_the_hub_schemas(mirror):
    sst2 = load_task(PAPER["sst2"], mirror)
    assert len(sst2["train"]) == 38 and len(sst2["validation"]) == 2
    assert sst2["test"][1] == {"text": "sentence validation 1", "label": 1}
    mnli = load_task(PAPER["mnli_m"], mirror)
    assert mnli["test"][2] == {"text": "Premise: premise validation_matched 2\nHypothesis: hypothesis "
                                       "validation_matched 2", "label": 2}
    assert load_task(PAPER["qqp"], mirror)["test"][0]["text"] == ("Question 1: question1 validation 0\n"
                                                                 "Question 2: question2 validation 0")
    conll = load_task(PAPER["conll2003_en"], mirror)
    assert conll["test"] == [{"tokens": ["EU", "rejects", "German"], "tags": [3, 0, 7]}]
    assert [PAPER["conll2003_en"].labels[t] for t in conll["test"][0]["tags"]] == ["B-ORG", "O", "B-MISC"]
    onto = load_task(PAPER["ontonotes"], mirror)
    assert onto["train"] == [{"tokens": ["Paris", "."], "tags": [7, 0]}] and PAPER["ontonotes"].labels[7] == "B-GPE"
    assert load_task(PAPER["uner_en"], mirror)["validation"] == [{"tokens": ["Bob", "ran"], "tags": [1, 0]}]
    squad = load_task(PAPER["squad"], mirror)
    assert len(squad["train"]) == 38 and squad["test"][0]["answers"] == [{"text": "France", "start": 12}]
    assert load_task(PAPER["squad_v2"], mirror)["test"][0]["answers"] == []
    assert load_task(PAPER["record"], mirror)["test"][0] == {
        "id": "0-0", "question": "@placeholder visited Paris",
        "context": "@highlight Obama visited Paris. Then Obama left.", "answers": [{"text": "Obama", "start": 11}]}


def test_record_without_entity_spans_finds_answers_in_the_passage(tmp_path, mirror):
    f = Features({"passage": S, "query": S, "answers": Sequence(S),
                  "idx": {"passage": Value("int32"), "query": Value("int32")}})
    row = {"passage": "Ann met Bob. Bob left.", "query": "@placeholder left", "answers": ["Bob", "Eve"],
           "idx": {"passage": 3, "query": 1}}
    for split in ("train", "validation"):
        write(tmp_path, "aps/super_glue", "record", split, [row] * 3, f)
    assert load_task(PAPER["record"], tmp_path)["test"][0]["answers"] == [{"text": "Bob", "start": 8}]


def test_msmarco_validates_on_dev_and_tests_on_trec_dl_with_binary_relevance(mirror):
    ms = load_task(PAPER["msmarco"], mirror)
    assert len(ms["train"]) == N and ms["train"][3]["docs"] == [{"id": "3", "text": "doc 3", "relevance": 1}]
    assert [r["id"] for r in ms["validation"]] == ["100", "101", "102", "103", "104"]
    assert [r["id"] for r in ms["test"]] == ["200", "201"]  # 202 has no relevant document
    test = {r["id"]: {d["id"]: d["relevance"] for d in r["docs"]} for r in ms["test"]}
    assert test["201"] == {"203": 1, "100": 0}  # graded 2 -> 1; judged 0 stays, at no gain
    # one corpus: the documents judged in validation and test (not d205, judged only for the dropped q202)
    corpus = {s: {d["id"] for r in ms[s] for d in r["docs"]} for s in ("validation", "test")}
    assert corpus["validation"] == corpus["test"] == {"100", "101", "102", "103", "104", "200", "201", "202", "203"}
    assert test["200"] == {"200": 1, "201": 0, "202": 1, **{d: 0 for d in ("101", "102", "103", "104")}}
    assert {d["id"]: d["text"] for d in ms["test"][0]["docs"]}["101"] == "doc 101"  # text alone, no title


def test_the_shared_corpus_changes_no_score():
    row = [0.9, 0.1, 0.5, 0.3]
    judged = metrics.ndcg_at_k(row[:2], [1, 0], k=10, ideal_gains=[1, 0])
    shared = metrics.ndcg_at_k(row, [1, 0, 0, 0], k=10, ideal_gains=[1, 0, 0, 0])
    assert judged == shared == 1.0
    assert metrics.ndcg_at_k([0.1, 0.9], [1, 0], k=10, ideal_gains=[1]) < 1.0


def test_nq_halves_its_test_queries_by_the_run_seed(mirror):
    a, b, a2 = (load_task(PAPER["nq"], mirror, seed=s) for s in (0, 1, 0))
    assert "train" not in a and len(a["validation"]) == len(a["test"]) == N // 2 and a == a2
    assert {r["id"] for r in a["validation"]} != {r["id"] for r in b["validation"]}
    ids = sorted(f"test{i}" for i in range(N))
    random.seed(0)  # EncodEval: transformers.set_seed(seed), then random.sample over the sorted query ids
    assert {r["id"] for r in a["validation"]} == set(random.sample(ids, round(0.5 * len(ids))))
    docs = {d["id"]: d for r in a["test"] for d in r["docs"]}
    assert len(docs) == N and docs["doc7"]["text"] == "Title 7. text 7"  # one corpus; "title. text"
    assert PAPER["nq"].seeded_split and not PAPER["msmarco"].seeded_split
    halves = seeded_halves([{"id": str(i)} for i in range(5)], 3)
    assert len(halves["validation"]) == 2 and len(halves["test"]) == 3  # round(2.5) == 2


def test_mldr_judges_positives_only_over_one_corpus(mirror):
    mldr = load_task(PAPER["mldr_en"], mirror)
    assert [r["id"] for r in mldr["validation"]] == ["q-0", "q-1", "q-2"] and len(mldr["test"]) == 4
    assert mldr["test"][1] == {"id": "q-4", "query": "long question 4",
                               "docs": [{"id": "doc-4", "text": "long doc 4", "relevance": 1}]}
    corpus = {s: {d["id"] for r in mldr[s] for d in r["docs"]} for s in ("validation", "test")}
    assert corpus["validation"] == corpus["test"] == {f"doc-{q}" for q in range(7)}  # never doc-neg


def test_caps_keep_one_corpus_over_the_capped_queries(mirror):
    ms = load_task(PAPER["msmarco"], mirror, max_eval=1)
    assert len(ms["validation"]) == len(ms["test"]) == 1
    corpus = {s: {d["id"] for r in ms[s] for d in r["docs"]} for s in ("validation", "test")}
    assert corpus["validation"] == corpus["test"]


def test_label_names_are_checked_against_the_features(tmp_path):
    write_suite(tmp_path, conll_names=["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-MISC", "I-MISC"])
    with pytest.raises(TaskError, match=r"^conll2003_en: eriktks/conll2003 conll2003 labels its ner_tags "
                                        r"\[O, B-PER, I-PER, B-LOC, .*\], not \[O, B-PER, I-PER, B-ORG, .*\] as mlmclm "
                                        r"expects$"):
        load_task(PAPER["conll2003_en"], tmp_path)
    with pytest.raises(TaskError, match=r"^conll2003_en: eriktks/conll2003 conll2003 labels its ner_tags"):
        check_sources(tmp_path)
    glue = Features({"sentence": S, "label": ClassLabel(names=["positive", "negative"]), "idx": Value("int32")})
    write(tmp_path, "nyu-mll/glue", "sst2", "train", [{"sentence": "s", "label": 0, "idx": 0}], glue)
    with pytest.raises(TaskError, match=r"^sst2: nyu-mll/glue sst2 labels its label \[positive, negative\], not "
                                        r"\[negative, positive\]"):
        load_task(PAPER["sst2"], tmp_path)


def test_a_moved_column_and_a_missing_mirror_are_one_line(tmp_path):
    write(tmp_path, "rajpurkar/squad", "plain_text", "train", [{"id": "a", "ctx": "x"}], Features({"id": S, "ctx": S}))
    with pytest.raises(TaskError, match=r"^rajpurkar/squad plain_text lacks column\(s\) question, context, answers "
                                        r"\(has id, ctx\)"):
        load_task(PAPER["squad"], tmp_path)
    with pytest.raises(TaskError, match=r"nyu-mll/glue/sst2/train has no parquet files in any layout of the "
                                        r"conversion \(the local mirror of "
                                        r"nyu-mll/glue sst2 train at refs/convert/parquet\)$"):
        load_task(PAPER["sst2"], tmp_path)


def test_a_partial_corpus_is_refused(tmp_path):
    write_nq(tmp_path)
    write(tmp_path, "BeIR/nq", "corpus", "corpus", [{"_id": "doc1", "title": "", "text": "x"}], BEIR_DOC)
    with pytest.raises(TaskError, match=r"^nq: 39 judged documents \(e.g. 'doc0'\) are missing from BeIR/nq"):
        load_task(PAPER["nq"], tmp_path)


def test_without_a_hub_the_paper_suite_is_one_line():
    with pytest.raises(TaskError, match=r"^cannot load nyu-mll/glue sst2 train at refs/convert/parquet with "
                                        r"datasets: .*offline"):
        load_task(PAPER["sst2"])


def _hub_reachable() -> bool:
    from huggingface_hub import constants

    try:
        urllib.request.urlopen(constants.ENDPOINT, timeout=5)
        return True
    except Exception:
        return False


@pytest.mark.hub
def test_the_pinned_revisions_resolve_on_the_hub():
    """Every source of the 12 datasets at its pinned revision: `load_dataset_builder` finds its files, and its
    features hold the columns and ClassLabel names the adapters expect. Run in a child process with the hub on (the
    test session runs offline); prints the commit each revision resolves to."""
    if not _hub_reachable():
        pytest.skip("the hub cannot be reached")
    env = {**os.environ, "HF_HUB_OFFLINE": "0", "HF_DATASETS_OFFLINE": "0"}
    run = subprocess.run([sys.executable, "-m", "mlmclm.evaluation.paper_suite"], env=env, capture_output=True,
                         text=True, timeout=600)
    print(run.stdout)
    assert run.returncode == 0, (run.stderr.strip().splitlines() or ["no output"])[-1]
    assert len(run.stdout.splitlines()) == sum(len(s) for s in paper_suite.SOURCES.values())


def test_a_grid_evaluates_nq_on_the_halves_of_each_run_seed(mirror, tmp_path, monkeypatch):
    """Fine-tuning on MS MARCO and evaluating NQ zero-shot: NQ is loaded once a run seed and each seed's run is
    scored on the splits its own seed drew (MS MARCO, not seeded, is loaded once)."""
    from mlmclm.config import finetune_config, scale_config
    from mlmclm.evaluation import finetune
    from mlmclm.bench import random_checkpoint

    loaded, scored = [], []
    real_load, real_evaluate = finetune.load_task, finetune.evaluate

    def load(task, *args, seed=0, **kw):
        out = real_load(task, *args, seed=seed, **kw)
        loaded.append((task.name, seed, {r["id"] for r in out.get("test", [])}))
        return out

    def evaluate(model, task, enc, *args):
        scored.append((task.name, len(enc["queries"]) if "queries" in enc else None, id(enc)))
        return real_evaluate(model, task, enc, *args)

    monkeypatch.setattr(finetune, "load_task", load)
    monkeypatch.setattr(finetune, "evaluate", evaluate)
    ckpt = random_checkpoint(tmp_path / "ckpt" / "tiny-mlm40-100", [f"question {i} doc text Title" for i in range(50)])
    cfg = finetune_config(scale_config("tiny"), [f"data_dir={mirror}", f"results_dir={tmp_path / 'out'}",
                                                 "suite=paper", "groups=[IR]", "datasets=[nq]", "lrs=[1e-3]",
                                                 "seeds=[0,1]", "grid_workers=1"])
    assert finetune.run_grid(ckpt, cfg, progress=False, root=working_root())["runs"] == 2
    assert sorted((name, seed) for name, seed, _ in loaded) == [("msmarco", 0), ("nq", 0), ("nq", 1)]
    halves = {seed: ids for name, seed, ids in loaded if name == "nq"}
    assert halves[0] != halves[1] and len(halves[0]) == len(halves[1]) == N // 2
    nq = [e for name, _, e in scored if name == "nq"]  # seed 0's validation and test, then seed 1's
    assert len(nq) == 4 and len(set(nq)) == 4  # four different encoded splits: each seed its own halves
    for seed in (0, 1):
        doc = json.loads(next((tmp_path / "out").rglob(f"*lr1e-03_sd{seed}/results.json")).read_text())
        assert doc["meta"]["dataset"] == "nq" and doc["meta"]["n_test"] == N // 2


@pytest.mark.parametrize("layout", ["{config}/partial-{split}/0000.parquet", "{config}/glue-{split}.parquet",
                                    "{config}/glue-{split}-00000-of-00001.parquet", "default/{split}/0000.parquet",
                                    "default/partial-{split}/0000.parquet"])
def test_the_layouts_the_conversion_has_used_are_read(tmp_path, layout):
    """`partial-<split>` folders (large splits), the older flat `<config>/<name>-<split>.parquet` (sharded too), and a
    `default/` folder for a single-config repository: each read where the current layout has no file."""
    f = Features({"sentence": S, "label": ClassLabel(names=GLUE["sst2"]), "idx": Value("int32")})
    for split, n in (("train", N), ("validation", 3)):
        path = tmp_path / "nyu-mll/glue" / layout.format(config="sst2", split=split)
        path.parent.mkdir(parents=True, exist_ok=True)
        rows = {"sentence": [f"sentence {split} {i}" for i in range(n)], "label": [i % 2 for i in range(n)],
                "idx": list(range(n))}
        datasets.Dataset.from_dict(rows, features=f).to_parquet(str(path))
    sst2 = load_task(PAPER["sst2"], tmp_path)
    assert len(sst2["train"]) == 38 and sst2["test"][1] == {"text": "sentence validation 1", "label": 1}
    src = SOURCES["sst2"]["data"]
    assert src.files("train", tmp_path) == [str(tmp_path / "nyu-mll/glue" / layout.format(config="sst2",
                                                                                           split="train"))]
    assert src.patterns("train")[1] == ("hf://datasets/nyu-mll/glue@refs%2Fconvert%2Fparquet/sst2/partial-train/"
                                        "*.parquet")


def test_the_current_layout_wins_and_mldr_reads_a_corpus_that_holds_every_document_once(tmp_path, monkeypatch):
    write_suite(tmp_path)
    stale = tmp_path / "nyu-mll/glue/sst2/partial-train"
    stale.mkdir()
    (stale / "0000.parquet").write_text("not read")
    assert load_task(PAPER["sst2"], tmp_path)["train"]
    repo = tmp_path / "mteb/MultiLongDocRetrieval/en-corpus"
    both = datasets.concatenate_datasets([datasets.Dataset.from_parquet(str(repo / s / "0000.parquet"))
                                          for s in ("dev", "test")])
    for s in ("dev", "test"):
        both.to_parquet(str(repo / s / "0000.parquet"))  # the same corpus in both splits, as MLDR's
    reads = []
    real = paper_suite.read
    monkeypatch.setattr(paper_suite, "read", lambda source, split, *a, **k: reads.append((source.config, split))
                        or real(source, split, *a, **k))
    mldr = load_task(PAPER["mldr_en"], tmp_path)
    assert len(mldr["test"]) == 4 and reads.count(("en-corpus", "dev")) == 1 and ("en-corpus", "test") not in reads
