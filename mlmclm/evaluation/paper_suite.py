"""The paper's 12 datasets as the hub serves them to `datasets` >= 4, in the splits of the authors' code (EncodEval).

`datasets` >= 4 refuses a repository that holds a loading script, as CoNLL-2003, OntoNotes, UNER and the BEIR
datasets do on `main`. Every dataset is therefore read from its automatic parquet conversion, a pinned revision
(`SOURCES`: repository, revision, config folder), whose layout is `<config>/<split>/NNNN.parquet`: through
`datasets`' parquet builder from `hf://datasets/<repo>@<revision>/...`, or from a local mirror of the same layout,
`<data_dir>/<repo>/<config>/<split>/*.parquet` (what a hub download of the repository at that revision writes).
The conversion has used other layouts too, each read where the first finds no file (`Source.patterns`): large
splits under `<config>/partial-<split>/`, the older flat `<config>/<name>-<split>.parquet` (sharded:
`<name>-<split>-NNNNN-of-NNNNN.parquet`), and a `default/` folder for some single-config repositories.
The revision `refs/convert/parquet` is a branch that the hub may rewrite; `check_sources` (the `hub` test, or
`python -m mlmclm.evaluation.paper_suite`) resolves it to the commit it points at, so a user learns at once whether
a dataset moved and can pin that commit in `SOURCES`.

Label names come from the dataset's features where it has them (ClassLabel): the task's names must equal them,
else the load fails in one line. OntoNotes has plain integer tags, so tner's map in `tasks` is the only source.

Splits (EncodEval's `encodeval/datasets.py`):
- SC, QA: 5% of train held out as validation (`catalog.holdout`), the official validation split as test.
- TC: the official train / validation / test.
- MS MARCO: trains on the train qrels' (query, positive) pairs, validates on the dev qrels (`validation`), tests on
  TREC-DL 2019 (the qrels' `test`, 43 queries, graded 0-3).
- NQ (test qrels only): the test queries, sorted, split 50/50 into validation and test by Python's `random` seeded
  with the run seed (`tasks.load_task(..., seed=)`).
- MLDR (English): dev as validation, test as test; only its positive passages are judged, as the authors' copy.
Relevance is binary (score >= 1). A query without a relevant document is dropped. Each dataset has one corpus, the
documents judged in validation and test together (`share_corpus`). Document text as the authors wrote it: MS MARCO
and MLDR the text alone, NQ "title. text" (the "Document: " prefix is the fine-tuning template's).
"""

from __future__ import annotations

import glob
import random
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable
from urllib.parse import quote

from ..errors import TaskError
from .catalog import SPLITS, SUITES, Task, holdout

PARQUET = "refs/convert/parquet"  # the hub's automatic parquet conversion: no loading script, any datasets version
# the conversion's layouts, the current one first (`Source.patterns`)
LAYOUTS = ("{config}/{split}/*.parquet", "{config}/partial-{split}/*.parquet", "{config}/*-{split}.parquet",
           "{config}/*-{split}-*-of-*.parquet")


@dataclass(frozen=True)
class Source:
    """One config of a hub dataset, read at a pinned revision from its parquet conversion."""

    repo: str
    config: str                     # the conversion's folder (the config name)
    splits: tuple[str, ...]
    columns: tuple[str, ...]        # what the adapter reads, checked against the features ("a|b": either one)
    labels: str | None = None       # the column whose ClassLabel names must equal the task's labels
    optional: tuple[str, ...] = ()  # read where the copy has them
    revision: str = PARQUET

    def pattern(self, split: str, data_dir: str | Path | None = None, layout: str = LAYOUTS[0]) -> str:
        """Where `split` lies in `layout` (one of `LAYOUTS`): in the local mirror `data_dir`, else on the hub."""
        path = layout.format(config=self.config, split=split)
        if data_dir is not None:
            return str(Path(data_dir) / self.repo / path)
        return f"hf://datasets/{self.repo}@{quote(self.revision, safe='')}/{path}"

    def patterns(self, split: str, data_dir: str | Path | None = None) -> list[str]:
        """Every layout's pattern for `split`, the current layout first; then the same in a `default/` folder."""
        configs = [self.config] + (["default"] if self.config != "default" else [])
        return [replace(self, config=c).pattern(split, data_dir, layout) for c in configs for layout in LAYOUTS]

    def files(self, split: str, data_dir: str | Path | None = None) -> list[str]:
        """The parquet files of `split`: those of the first layout that has any (`patterns`); [] when none has."""
        for pattern in self.patterns(split, data_dir):
            if data_dir is not None:
                found = sorted(glob.glob(pattern))
            else:
                import fsspec

                fs, path = fsspec.core.url_to_fs(pattern)
                found = [f"hf://{f}" for f in sorted(fs.glob(path))]
            if found:
                return found
        return []


_BEIR = ("_id", "title", "text")
_QRELS = ("query-id", "corpus-id", "score")
_GLUE = "nyu-mll/glue"
_QA = ("id", "question", "context", "answers")

SOURCES: dict[str, dict[str, Source]] = {
    "sst2": {"data": Source(_GLUE, "sst2", ("train", "validation"), ("sentence", "label"), "label")},
    "mnli_m": {"data": Source(_GLUE, "mnli", ("train", "validation_matched"), ("premise", "hypothesis", "label"),
                              "label")},
    "qqp": {"data": Source(_GLUE, "qqp", ("train", "validation"), ("question1", "question2", "label"), "label")},
    "conll2003_en": {"data": Source("eriktks/conll2003", "conll2003", SPLITS, ("tokens", "ner_tags"), "ner_tags")},
    "ontonotes": {"data": Source("tner/ontonotes5", "ontonotes5", SPLITS, ("tokens", "tags"))},
    "uner_en": {"data": Source("universalner/universal_ner", "en_ewt", SPLITS, ("tokens", "ner_tags"), "ner_tags")},
    "squad": {"data": Source("rajpurkar/squad", "plain_text", ("train", "validation"), _QA)},
    "squad_v2": {"data": Source("rajpurkar/squad_v2", "squad_v2", ("train", "validation"), _QA)},
    "record": {"data": Source("aps/super_glue", "record", ("train", "validation"),
                              ("passage", "query", "answers", "idx"), optional=("entity_spans",))},
    "msmarco": {"corpus": Source("BeIR/msmarco", "corpus", ("corpus",), _BEIR),
                "queries": Source("BeIR/msmarco", "queries", ("queries",), ("_id", "text")),
                "qrels": Source("BeIR/msmarco-qrels", "default", SPLITS, _QRELS)},
    "nq": {"corpus": Source("BeIR/nq", "corpus", ("corpus",), _BEIR),
           "queries": Source("BeIR/nq", "queries", ("queries",), ("_id", "text")),
           "qrels": Source("BeIR/nq-qrels", "default", ("test",), _QRELS)},
    "mldr_en": {"corpus": Source("mteb/MultiLongDocRetrieval", "en-corpus", ("dev", "test"), ("_id|id", "text")),
                "queries": Source("mteb/MultiLongDocRetrieval", "en-queries", ("dev", "test"), ("_id|id", "text")),
                "qrels": Source("mteb/MultiLongDocRetrieval", "en-qrels", ("dev", "test"), _QRELS)},
}


# ----------------------------------------------------------------------------------------------- reading

def read(source: Source, split: str, data_dir: str | Path | None = None, task: Task | None = None):
    """One split of `source` as a `datasets.Dataset` (features as the parquet files carry them), its columns and
    ClassLabel names checked."""
    import datasets

    pattern = source.pattern(split, data_dir)
    where = f"{source.repo} {source.config} {split} at {source.revision}"
    if data_dir is not None:  # the same files, read as datasets' parquet builder reads them, without its cache
        import pyarrow.parquet as pq

        files = source.files(split, data_dir)
        if not files:
            raise TaskError(f"{Path(pattern).parent} has no parquet files in any layout of the conversion (the "
                            f"local mirror of {where})")
        ds = datasets.Dataset(datasets.table.InMemoryTable(pq.read_table(files)))
    else:
        try:
            files = source.files(split) or pattern  # none in any layout: datasets names the pattern it missed
            ds = datasets.load_dataset("parquet", data_files={split: files}, split=split)
        except Exception as e:  # no hub, a moved dataset: one line, not a traceback
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise TaskError(f"cannot load {where} with datasets: {first}") from None
    check_features(source, ds.features, task)
    return ds


def check_features(source: Source, features, task: Task | None = None) -> None:
    """The adapter's columns exist, and ClassLabel names equal the task's labels."""
    missing = [c for c in source.columns if not set(c.split("|")) & set(features)]
    if missing:
        raise TaskError(f"{source.repo} {source.config} lacks column(s) {', '.join(missing)} "
                        f"(has {', '.join(features)}); the dataset changed: see mlmclm/evaluation/paper_suite.py")
    if task is None or source.labels is None:
        return
    names = label_names(features[source.labels])
    if names is not None and tuple(names) != task.labels:
        raise TaskError(f"{task.name}: {source.repo} {source.config} labels its {source.labels} "
                        f"[{', '.join(names)}], not [{', '.join(task.labels)}] as mlmclm expects")


def label_names(feature) -> list[str] | None:
    """The ClassLabel names of a feature, or of the items of a list feature; None for plain integers."""
    import datasets

    feature = getattr(feature, "feature", feature)  # List / Sequence of ClassLabel
    return list(feature.names) if isinstance(feature, datasets.ClassLabel) else None


def _records(ds, source: Source) -> list[dict]:
    return ds.select_columns([c for c in source.columns + source.optional if c in ds.column_names]).to_list()


# ----------------------------------------------------------------------------------------------- SC, TC, QA

def _sc(render):
    def load(task, sources, data_dir, seed):
        src = sources["data"]
        train_split, test_split = src.splits
        rows = {s: [render(r) for r in _records(read(src, s, data_dir, task), src)] for s in src.splits}
        train, validation = holdout(rows[train_split])
        return {"train": train, "validation": validation, "test": rows[test_split]}
    return load


def _tc(task, sources, data_dir, seed):
    src = sources["data"]
    tokens, tags = src.columns
    return {s: [{"tokens": list(r[tokens]), "tags": list(r[tags])}
                for r in _records(read(src, s, data_dir, task), src)] for s in SPLITS}


def _squad_row(r):
    a = r["answers"]
    return {"id": str(r["id"]), "question": r["question"], "context": r["context"],
            "answers": [{"text": t, "start": s} for t, s in zip(a["text"], a["answer_start"])]}


def _record_row(r):
    """ReCoRD as extraction: the query (with its @placeholder) is the question; each answer entity is located in
    the passage by its entity span (a dict of lists or a list of dicts, as the copy stores it), else by its first
    occurrence; an answer not in the passage is dropped."""
    spans = r.get("entity_spans") or {}
    if isinstance(spans, dict):
        spans = [{"text": t, "start": s} for t, s in zip(spans.get("text", ()), spans.get("start", ()))]
    starts = {}
    for span in spans:
        starts.setdefault(span["text"], span["start"])
    answers = []
    for t in dict.fromkeys(r["answers"]):
        s = starts.get(t, r["passage"].find(t))
        if s >= 0:
            answers.append({"text": t, "start": s})
    idx = r["idx"]
    return {"id": f"{idx['passage']}-{idx['query']}", "question": r["query"], "context": r["passage"],
            "answers": answers}


def _qa(row):
    def load(task, sources, data_dir, seed):
        src = sources["data"]
        rows = {s: [row(r) for r in _records(read(src, s, data_dir, task), src)] for s in src.splits}
        train, validation = holdout(rows["train"])
        return {"train": train, "validation": validation, "test": rows["validation"]}
    return load


# ----------------------------------------------------------------------------------------------- IR

def _ir(task, sources, data_dir, qrels_splits: dict[str, str], doc_text: Callable[[dict], str],
        judged_non_relevant: bool = True) -> dict[str, list[dict]]:
    """Rows of a corpus/queries/qrels dataset: `qrels_splits` maps a qrels split to ours; every query with a
    relevant document (score >= 1) becomes {"id", "query", "docs"}, its docs every judged document (relevance 0/1;
    with `judged_non_relevant` False, only the relevant ones)."""
    qrels = {ours: {} for ours in qrels_splits.values()}
    src = sources["qrels"]
    for split, ours in qrels_splits.items():
        for r in _records(read(src, split, data_dir, task), src):
            relevance = int(int(r["score"]) >= 1)
            if relevance or judged_non_relevant:
                qrels[ours].setdefault(str(r["query-id"]), {})[str(r["corpus-id"])] = relevance
        qrels[ours] = {q: docs for q, docs in qrels[ours].items() if any(docs.values())}
    needed_q = {q for rel in qrels.values() for q in rel}
    needed_d = {d for rel in qrels.values() for docs in rel.values() for d in docs}
    queries = _subset(sources["queries"], data_dir, task, needed_q, lambda r: r["text"])
    corpus = _subset(sources["corpus"], data_dir, task, needed_d, doc_text)
    for kind, have, need in (("queries", queries, needed_q), ("documents", corpus, needed_d)):
        if len(have) < len(need):
            example = next(iter(sorted(need - set(have))))
            raise TaskError(f"{task.name}: {len(need) - len(have)} judged {kind} (e.g. {example!r}) are missing "
                            f"from {sources['corpus' if kind == 'documents' else 'queries'].repo} (a partial "
                            f"parquet conversion or mirror?)")
    return {ours: [{"id": q, "query": queries[q],
                    "docs": [{"id": d, "text": corpus[d], "relevance": s} for d, s in docs.items()]}
                   for q, docs in rel.items()] for ours, rel in qrels.items()}


def _subset(source: Source, data_dir, task, ids: set[str], text: Callable[[dict], str]) -> dict[str, str]:
    """{id: text} of the rows of `source` whose id is in `ids`, filtered in Arrow, not Python: its splits in turn,
    until every id is found (MLDR's corpus, the same in both splits, is read once)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    out = {}
    for split in source.splits:
        if ids <= out.keys():
            break
        ds = read(source, split, data_dir, task)
        key = "_id" if "_id" in ds.column_names else "id"
        table = ds.data.table
        wanted = pc.is_in(pc.cast(table[key], pa.string()), value_set=pa.array(sorted(ids), pa.string()))
        for r in table.filter(wanted).to_pylist():
            out.setdefault(str(r[key]), text(r))
    return out


def _msmarco(task, sources, data_dir, seed):
    return _ir(task, sources, data_dir, {"train": "train", "validation": "validation", "test": "test"},
               lambda r: r["text"])


def _nq(task, sources, data_dir, seed):
    return seeded_halves(_ir(task, sources, data_dir, {"test": "test"}, _nq_text)["test"], seed)


def _nq_text(r):
    return f"{r['title']}. {r['text']}"


def seeded_halves(rows: list[dict], seed: int) -> dict[str, list[dict]]:
    """NQ's validation and test: `random.seed(seed); random.sample(sorted(query ids), round(n / 2))` is validation,
    the rest test (EncodEval's `nq()`, after `transformers.set_seed(seed)`), in the qrels' order."""
    ids = sorted(r["id"] for r in rows)
    validation = set(random.Random(seed).sample(ids, round(0.5 * len(ids))))
    return {"validation": [r for r in rows if r["id"] in validation],
            "test": [r for r in rows if r["id"] not in validation]}


def _mldr(task, sources, data_dir, seed):
    return _ir(task, sources, data_dir, {"dev": "validation", "test": "test"}, lambda r: r["text"],
               judged_non_relevant=False)


def share_corpus(splits: dict[str, list[dict]]) -> dict[str, list[dict]]:
    """One corpus for validation and test: the documents judged in either. Fine-tuning's corpus is the union of a
    split's listed documents, so the first query of each split also lists the dataset's other documents at
    relevance 0 (unjudged for it, which NDCG reads as not relevant: no gain, no change to the ideal ranking)."""
    evaluated = [s for s in ("validation", "test") if splits.get(s)]
    corpus = {}
    for s in evaluated:
        for r in splits[s]:
            for d in r["docs"]:
                corpus.setdefault(d["id"], d["text"])
    out = dict(splits)
    for s in evaluated:
        listed = {d["id"] for r in splits[s] for d in r["docs"]}
        first = splits[s][0]
        extra = [{"id": i, "text": t, "relevance": 0} for i, t in corpus.items() if i not in listed]
        out[s] = [{**first, "docs": first["docs"] + extra}, *splits[s][1:]]
    return out


_LOADERS: dict[str, Callable] = {
    "sst2": _sc(lambda r: {"text": r["sentence"], "label": r["label"]}),
    "mnli_m": _sc(lambda r: {"text": f"Premise: {r['premise']}\nHypothesis: {r['hypothesis']}", "label": r["label"]}),
    "qqp": _sc(lambda r: {"text": f"Question 1: {r['question1']}\nQuestion 2: {r['question2']}",
                          "label": r["label"]}),
    "conll2003_en": _tc,
    "ontonotes": _tc,
    "uner_en": _tc,
    "squad": _qa(_squad_row),
    "squad_v2": _qa(_squad_row),
    "record": _qa(_record_row),
    "msmarco": _msmarco,
    "nq": _nq,
    "mldr_en": _mldr,
}


def load_paper(task: Task, data_dir: str | Path | None = None, seed: int = 0) -> dict[str, list[dict]]:
    """The splits of a paper-suite task (uncapped): from the hub at the pinned revisions, or from `data_dir`."""
    return _LOADERS[task.name](task, SOURCES[task.name], data_dir, seed)


# ----------------------------------------------------------------------------------------------- the hub check

def check_sources(data_dir: str | Path | None = None) -> dict[str, str]:
    """Resolve every source of the 12 datasets at its pinned revision with `datasets.load_dataset_builder` (the
    files exist) and check the first file's features (columns, ClassLabel names) without downloading data.
    Returns {"<repo> <config>": the commit the revision resolves to (or "local")}; raises TaskError on the first
    source that moved."""
    import datasets
    import fsspec
    import pyarrow.parquet as pq

    resolved = {}
    for name, sources in SOURCES.items():
        task = SUITES["paper"][name]
        for src in sources.values():
            where = f"{src.repo} {src.config} at {src.revision}"
            try:
                files = {s: src.files(s, data_dir) or src.pattern(s, data_dir) for s in src.splits}
                builder = datasets.load_dataset_builder("parquet", data_files=files)
                first = builder.config.data_files[src.splits[0]][0]
                with fsspec.open(first, "rb") as f:
                    features = datasets.Features.from_arrow_schema(pq.read_schema(f))
            except Exception as e:
                line = (str(e).strip().splitlines() or [type(e).__name__])[0]
                raise TaskError(f"{name}: cannot resolve {where}: {line}") from None
            check_features(src, features, task)
            resolved[f"{src.repo} {src.config}"] = _commit(src) if data_dir is None else "local"
    return resolved


def _commit(src: Source) -> str:
    from huggingface_hub import HfApi

    return HfApi().dataset_info(src.repo, revision=src.revision).sha


if __name__ == "__main__":  # python -m mlmclm.evaluation.paper_suite: the hub check, one line a source
    import sys

    try:
        for source, sha in check_sources().items():
            print(f"{source:45s} {sha}")
    except TaskError as e:
        sys.exit(f"paper_suite: error: {e}")
