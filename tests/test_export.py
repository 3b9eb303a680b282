"""Exported models: ``longrank export`` writes a directory that ``longrank.load_ranker`` reads with no
results tree and no config, and it scores every (query, document) pair as the workflow's rerank stage does. Tiny
models of every exportable type are trained by the project's own training loop on a synthetic collection."""

from __future__ import annotations

import hashlib

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml
import torch

from conftest import synthetic_collection, write_local_collection
from docs_snippets import blocks, documented
from longrank.cli import main
from longrank.data.corpus import Corpus
from longrank.errors import InputError
from longrank.io.json_yaml import write_json
from longrank.io.trec_files import read_run, write_run
from longrank.results.run_metadata import schema_errors
from longrank.results.run_metadata_data import GLOVE

pytestmark = pytest.mark.stage  # a model, a stage or the workflow runs: not a unit test

DEPTH = 30
TRAIN = {"steps": 2, "batch_size": 2, "eval_every": 2, "eval_batch_size": 16}
WORD = {"max_query_len": 8, "max_doc_len": 60}
MODELS = {
    # IDF query-term weights and a cut vocabulary: the collection statistics an export has to carry
    "knrm": {"type": "knrm", **WORD, "query_term_weights": "idf", "max_vocabulary": 25, "train": TRAIN},
    "tk": {"type": "tk", **WORD, "n_layers": 1, "train": TRAIN},
    "tkl": {"type": "tkl", **WORD, "n_layers": 1, "window": 20, "overlap": 4, "region_size": 10, "train": TRAIN},
    "ndrm3": {
        "type": "ndrm",
        "variant": "ndrm3",
        "hidden_dim": 16,
        "n_heads": 4,
        "conv_groups": 4,
        "conv_window": 5,
        "n_layers": 1,
        "max_doc_len": 60,
        "pool_window": 16,
        "pool_stride": 8,
        "max_query_len": 8,
        "min_doc_freq": 2,
        "train": TRAIN,
    },
    "bert_maxp": {
        "type": "bert_ranker",
        "mode": "maxp",
        "passage_len": 24,
        "passage_stride": 16,
        "max_passages": 3,
        "max_query_len": 12,
        "train": TRAIN,
    },
    "mores": {"type": "mores", "interaction_blocks": 2, "max_query_len": 12, "max_doc_len": 40, "train": TRAIN},
    "bi_encoder": {"type": "bi_encoder", "max_query_len": 12, "max_doc_len": 40, "train": {"steps": 0}},
}
#: the workflow reranks NDRM through its fold's impact index (precomputed s_{t,d}, summed in float64); the export
#: computes the same terms from its weights, so the two agree to float32 rounding
TOLERANCE = {"ndrm3": 1e-5}
#: the models whose {model}+first run the interpolate stage writes here (as the workflow's interpolate: true)
INTERPOLATED = ("knrm", "tk")


def build_results(root: Path, models: dict, dataset: dict | None = None) -> Path:
    """A results/<dataset> tree as the workflow writes it: data, candidates, trained models, runs, eval, config.json
    (``dataset``: a collection's config block; default: the synthetic collection)."""
    import argparse

    from longrank import artifacts, interpolate
    from longrank.data.data import prepare
    from longrank.evaluate.metrics import per_query, write_eval_tsv
    from longrank.config.model_entries import effective_settings
    from longrank.config.model_types import artifact_scopes
    from longrank.rerank import RerankJob, rerank
    from longrank.resolved_config import resolved_models
    from longrank.retrieval.bm25 import bm25_run
    from longrank.train import train as train_stage

    if dataset is None:
        dataset = write_local_collection(root / "src", *synthetic_collection())
    results = root / "results" / dataset["name"]
    prepare(dataset, {"method": "full"}, {"method": "holdout", "dev": 0.25, "test": 0.25}, results / "data")
    corpus = Corpus(results / "data")
    candidates_path = results / "candidates" / "first.run"
    write_run(candidates_path, bm25_run(corpus.docs, corpus.queries, top_k=DEPTH), "first")
    candidates = read_run(candidates_path)
    for name, cfg in models.items():
        torch.manual_seed(0)
        checkpoint = results / "models" / name / "fold0" / "model.safetensors"
        train_stage.train(name, cfg, corpus, candidates, 0, DEPTH, torch.device("cpu"), checkpoint)
        fold_artifacts = []
        if "fold" in artifact_scopes(cfg):
            fold_artifacts = [results / "artifacts" / name / "fold0"]
            artifacts.build(cfg, corpus, "fold", fold_artifacts[0], checkpoint, candidates_path)
        rerank(
            RerankJob(
                name,
                cfg,
                corpus,
                candidates,
                [str(checkpoint)],
                DEPTH,
                32,
                torch.device("cpu"),
                results / "runs",
                fold_artifacts=fold_artifacts,
            )
        )
        write_eval_tsv(
            results / "eval" / f"{name}.tsv",
            per_query(read_run(results / "runs" / f"{name}.run"), corpus.qrels, corpus.test_queries(), ["nDCG@10"]),
        )
        if name in INTERPOLATED:  # the interpolate stage, as the workflow runs it
            system = f"{name}+first"
            interpolate.run(
                argparse.Namespace(
                    model_run=str(results / "runs" / f"{name}.run"),
                    dev_runs=[str(checkpoint.with_name("dev.run"))],
                    candidates=str(candidates_path),
                    rerank_depth=DEPTH,
                    data=str(results / "data"),
                    out=str(results / "runs" / f"{system}.run"),
                )
            )
            mixed = read_run(results / "runs" / f"{system}.run")
            write_eval_tsv(
                results / "eval" / f"{system}.tsv",
                per_query(mixed, corpus.qrels, corpus.test_queries(), ["nDCG@10"]),
            )
    config = {
        "dataset": dataset,
        "rerank_depth": DEPTH,
        "first_stages": {"first": {"method": "bm25"}},
        "models": models,
    }
    config["resolved_models"] = resolved_models(models, effective_settings(config))  # as stage resolved_config
    write_json(results / "config.json", config)
    return results


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    return build_results(tmp_path_factory.mktemp("export"), MODELS)


@pytest.fixture(scope="module")
def exported(results, tmp_path_factory):
    """Every model exported, then the results tree moved away: loading must not need it."""
    from longrank.api.export import export

    out = tmp_path_factory.mktemp("exported")
    dirs = {name: export(results, name, 0, out / name) for name in MODELS}
    return dirs


def workflow_scores(results: Path, name: str) -> dict[str, dict[str, str]]:
    """The rerank stage's scores as its run file holds them (8 significant digits), for the reranked head only."""
    out: dict[str, dict[str, str]] = {}
    for line in (results / "runs" / f"{name}.run").read_text().splitlines():
        qid, _, doc, _, score, _ = line.split()
        out.setdefault(qid, {})[doc] = score
    return out


@pytest.mark.parametrize("name", list(MODELS))
def test_an_exported_model_scores_as_the_workflows_rerank_stage(results, exported, name, tmp_path):
    import pandas as pd

    import longrank

    corpus = Corpus(results / "data")
    candidates = read_run(results / "candidates" / "first.run")
    test = corpus.folds[0]["test"]
    # the run in the rerank stage's query order (fold["test"]), so the batches of pairs are the same
    frame = pd.DataFrame([(q, d, s) for q in test for d, s in candidates[q].items()], columns=["qid", "docno", "score"])
    # the exported directory alone: a copy somewhere else, with results/ out of reach
    alone = shutil.copytree(exported[name], tmp_path / "ranker")
    ranker = longrank.load_ranker(alone, device="cpu")
    assert ranker.type == MODELS[name]["type"]
    reranked = ranker.rerank(frame, corpus.queries, corpus.docs)
    expected = workflow_scores(results, name)
    assert set(reranked["qid"]) == set(test)
    diffs = []
    for qid, doc, score in zip(reranked["qid"], reranked["docno"], reranked["score"]):
        if name in TOLERANCE:
            diffs.append(abs(score - float(expected[qid][doc])))
        else:
            assert f"{score:.8g}" == expected[qid][doc], (name, qid, doc, score, expected[qid][doc])
            diffs.append(abs(score - float(expected[qid][doc])))
    assert max(diffs) <= TOLERANCE.get(name, 1e-6 * max(1.0, *(abs(s) for s in reranked["score"])))
    # and bit for bit against the rerank stage's own scoring (load_model over the results tree, score_candidates),
    # which the run file rounds to 8 digits
    from longrank.models.checkpoint import load_model
    from longrank.scoring import score_candidates

    model = load_model(
        results / "models" / name / "fold0" / "model.safetensors", MODELS[name], corpus, "cpu", require_manifest=True
    )
    raw = score_candidates(model, corpus, candidates, test, DEPTH, 32)
    exact = [abs(s - raw[q][d]) for q, d, s in zip(reranked["qid"], reranked["docno"], reranked["score"])]
    print(
        f"{name}: {len(diffs)} pairs, max |exported - workflow run file| = {max(diffs):.3g}, "
        f"max |exported - workflow scoring| = {max(exact):.3g}"
    )
    assert max(exact) == 0.0
    # score() on one query's documents gives the same numbers (its own batches: equal to float rounding)
    qid = test[0]
    docs = list(candidates[qid])[:5]
    scores = ranker.score(corpus.queries[qid], [corpus.docs[d] for d in docs])
    head = reranked[reranked["qid"] == qid].set_index("docno")["score"]
    assert scores == pytest.approx([head[d] for d in docs], rel=1e-5, abs=1e-5)


def test_the_export_directory_is_self_describing(results, exported):
    from transformers import AutoModel, AutoTokenizer

    knrm = json.loads((exported["knrm"] / "ranker.json").read_text())
    assert knrm["type"] == "knrm" and knrm["class"] == "longrank.models.knrm:KNRM" and knrm["config"] == MODELS["knrm"]
    assert knrm["vocabulary"]["num_docs"] == Corpus(results / "data").stats["num_docs"]
    assert re.fullmatch(r"[0-9a-f]{40}(-dirty)?|unknown", knrm["longrank_commit"])
    vocab = (exported["knrm"] / "vocabulary.tsv").read_text().splitlines()
    assert vocab[0] == "word\tdoc_freq" and len(vocab) - 1 == knrm["vocabulary"]["words"]
    for name in ("bert_maxp", "mores", "bi_encoder"):
        encoder = exported[name] / "encoder"
        assert AutoModel.from_pretrained(encoder).config.hidden_size == 384  # Hugging Face tools open it
        assert AutoTokenizer.from_pretrained(encoder)("wing lift")["input_ids"]
    card = (exported["tk"] / "README.md").read_text()
    summary = json.loads((results / "models" / "tk" / "fold0" / "train_summary.json").read_text())
    assert f"dev nDCG@10 (best): {summary['best_dev_ndcg10']:.4f}" in card and "test nDCG@10 (tk" in card
    assert "steps: 2 of 2" in card and knrm["longrank_commit"] in (exported["knrm"] / "README.md").read_text()


def test_mir_and_a_changed_or_missing_export_are_refused_by_name(results, exported, tmp_path):
    import longrank
    from longrank.api.export import export

    config = json.loads((results / "config.json").read_text())
    mir_results = tmp_path / "r"
    mir_results.mkdir()
    (mir_results / "config.json").write_text(json.dumps({**config, "models": {"mir": {"type": "mir"}}}))
    with pytest.raises(InputError, match="MIR reads graphs built from the whole collection.*out of scope"):
        export(mir_results, "mir", 0, tmp_path / "mir")
    with pytest.raises(InputError, match="no model 'nope'; the config has"):
        export(results, "nope", 0, tmp_path / "nope")
    with pytest.raises(InputError, match="--fold 3: the data has 1 folds"):
        export(results, "knrm", 3, tmp_path / "k")
    with pytest.raises(InputError, match="is not an exported ranker"):
        longrank.load_ranker(tmp_path)
    changed = shutil.copytree(exported["knrm"], tmp_path / "changed")
    data = bytearray((changed / "model.safetensors").read_bytes())
    data[-1] ^= 1
    (changed / "model.safetensors").write_bytes(bytes(data))
    with pytest.raises(InputError, match="corrupt"):
        longrank.load_ranker(changed, device="cpu")


@pytest.mark.parametrize(
    "model, key, value, message",
    [
        (
            "knrm",
            ("vocabulary", "file"),
            "/etc/passwd",
            r"vocabulary.file: '/etc/passwd' is not inside the export's folder",
        ),
        (
            "knrm",
            ("vocabulary", "file"),
            "../elsewhere/vocabulary.tsv",  # the folder beside the export
            r"vocabulary.file: '\.\./elsewhere/vocabulary.tsv' is not inside the export's folder",
        ),
        (
            "knrm",
            ("vocabulary", "embedding_dim"),
            10**12,
            r"vocabulary.embedding_dim 1000000000000 do not match the embedding matrix .* nothing was built",
        ),
        (
            "knrm",
            ("vocabulary", "embedding_dim"),
            "50",
            r"vocabulary.embedding_dim: expected a whole number >= 1, got '50'",
        ),
        (
            "knrm",
            ("vocabulary", "words"),
            3,
            r"vocabulary.words 3 and vocabulary.embedding_dim 50 do not match the embedding matrix",
        ),
        (
            "knrm",
            ("vocabulary", "pretrained_vectors"),
            "/etc/passwd",
            r"vocabulary.pretrained_vectors: '/etc/passwd' is not inside the export's folder",
        ),
        (
            "knrm",
            ("vocabulary", "pretrained_count"),
            10**9,
            r"vocabulary.pretrained_count 1000000000 and vocabulary.embedding_dim 50 do not match .* nothing was built",
        ),
        ("bert_maxp", ("encoder", "dir"), "/tmp", r"encoder.dir: '/tmp' is not inside the export's folder"),
    ],
)
def test_an_export_is_data_its_paths_stay_inside_and_its_sizes_are_checked_first(
    exported, tmp_path, model, key, value, message
):
    """A ranker.json naming a file outside its folder is refused before anything is read (its
    lines used to appear in the error), and a size it gives is checked against its files before it is allocated."""
    import longrank

    changed = shutil.copytree(exported[model], tmp_path / model)
    meta = json.loads((changed / "ranker.json").read_text())
    meta[key[0]][key[1]] = value
    (changed / "ranker.json").write_text(json.dumps(meta))
    with pytest.raises(InputError, match=message) as refused:
        longrank.load_ranker(changed, device="cpu")
    assert "root:" not in str(refused.value)  # nothing of /etc/passwd


def test_the_export_command_and_the_standalone_rerank_command(results, exported, tmp_path, capsys):
    """``longrank export`` then ``longrank rerank --ranker`` on a run file, a queries TSV without header and a gzipped
    docs.jsonl, outside any results tree; bad input is named by file, line or id; the workflow's rerank arguments
    still parse as before."""
    import gzip

    corpus = Corpus(results / "data")
    main(["export", "--results", str(results), "--model", "tk", "--fold", "0", "--out", str(tmp_path / "tk")])
    assert (tmp_path / "tk" / "ranker.json").is_file()
    test = corpus.folds[0]["test"]
    candidates = read_run(results / "candidates" / "first.run")
    write_run(tmp_path / "any.trec", {q: candidates[q] for q in test}, "first")
    (tmp_path / "q.tsv").write_text("".join(f"{q}\t{corpus.queries[q]}\n" for q in test))
    with gzip.open(tmp_path / "docs.jsonl.gz", "wt") as f:
        f.writelines(json.dumps({"doc_id": d, "text": corpus.docs[d]}) + "\n" for d in sorted(corpus.docs))
    files = {
        "--ranker": tmp_path / "tk",
        "--run": tmp_path / "any.trec",
        "--queries": tmp_path / "q.tsv",
        "--docs": tmp_path / "docs.jsonl.gz",
        "--device": "cpu",
        "--out": tmp_path / "new.trec",
    }

    def rerank_command(**changed):
        given = {**files, **{f"--{k}": v for k, v in changed.items()}}
        return ["rerank", *(str(x) for kv in given.items() for x in kv)]

    main(rerank_command())
    new = read_run(tmp_path / "new.trec")
    expected = read_run(results / "runs" / "tk.run")
    assert new == {q: expected[q] for q in test}  # the workflow's scores, tail included, to the file's 8 digits
    # provenance beside the run (ir_metadata): what reranked what, with which weights and what trained them
    meta = yaml.safe_load((tmp_path / "new.trec.meta.yaml").read_text())
    assert meta["schema-version"] == "0.1" and meta["tag"] == "tk"
    assert schema_errors(meta) == []
    given, model = meta["method"]["retrieval"]  # any.trec has no record: named by its file
    assert given == {"name": "any.trec", "method": "a given run", "params": {"file": str(tmp_path / "any.trec")}}
    assert model["name"] == "tk" and model["reranks"] == "any.trec" and model["method"] == "tk"
    assert meta["implementation"]["executable"]["cmd"].startswith("python -m longrank rerank --ranker ")
    manifest = json.loads((tmp_path / "tk" / "model.manifest.json").read_text())
    [trained] = meta["longrank"]["method"]["training"]
    assert trained["weights_sha256"] == manifest["files"]["model.safetensors"]["sha256"]
    assert trained["steps_run"] > 0 and trained["best_dev_ndcg10"] is not None
    hashed = meta["longrank"]["data"]["files"]
    assert hashed["collection"]["sha256"] == hashlib.sha256((tmp_path / "docs.jsonl.gz").read_bytes()).hexdigest()
    # what the model trained on is the export's own record (ranker.json), not the collection it reranks now
    ranker = json.loads((tmp_path / "tk" / "ranker.json").read_text())
    [training] = meta["data"]["training data"]
    assert training["name"] == ranker["source"]["dataset"] and training["fold"] == ranker["source"]["fold"]
    assert meta["data"]["test collection"]["source"] == str(tmp_path / "docs.jsonl.gz")
    assert meta["data"]["other"] == [GLOVE]  # TK starts from GloVe (its type's default)

    (tmp_path / "q_missing.tsv").write_text("".join(f"{q}\t{corpus.queries[q]}\n" for q in test[1:]))
    with pytest.raises(SystemExit):
        main(rerank_command(queries=tmp_path / "q_missing.tsv", out=tmp_path / "x.trec"))
    assert (
        f"longrank rerank: error: {tmp_path / 'any.trec'}: query {test[0]!r} is not in {tmp_path / 'q_missing.tsv'}"
        in capsys.readouterr().err
    )
    (tmp_path / "bad.trec").write_text(f"{test[0]} Q0 d1 1 high first\n")
    with pytest.raises(SystemExit):
        main(rerank_command(run=tmp_path / "bad.trec", out=tmp_path / "x.trec"))
    assert f"{tmp_path / 'bad.trec'}:1: the score (5th column) must be a number" in capsys.readouterr().err
    (tmp_path / "few.jsonl").write_text(json.dumps({"doc_id": "other", "text": "x"}) + "\n")
    with pytest.raises(SystemExit):
        main(rerank_command(docs=tmp_path / "few.jsonl", out=tmp_path / "x.trec"))
    assert f"is not in {tmp_path / 'few.jsonl'}" in capsys.readouterr().err
    assert not (tmp_path / "x.trec").exists()

    import argparse

    from longrank.cli import stage_of
    from longrank.rerank import add_arguments

    assert stage_of("rerank", ["--model", "tk"]) == "rerank" and stage_of("rerank", ["--ranker=x"]) == "rerank_run"
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert (
        parser.parse_args(
            [
                "--model",
                "m",
                "--model-config",
                "{}",
                "--data",
                "d",
                "--candidates",
                "c",
                "--checkpoints",
                "a",
                "--out-dir",
                "o",
                "--rerank-depth",
                "30",
            ]
        ).model
        == "m"
    )


def test_the_api_pages_examples_run(results, tmp_path, monkeypatch):
    """docs/api.md's commands and its ```python block, read from it and run as written, against a tiny model's results
    and files in the formats and under the names they give."""
    import gzip

    corpus = Corpus(results / "data")
    test = corpus.folds[0]["test"]
    candidates = read_run(results / "candidates" / "first.run")
    write_run(tmp_path / "bm25.run", {q: candidates[q] for q in test}, "first")
    (tmp_path / "queries.tsv").write_text("".join(f"{q}\t{corpus.queries[q]}\n" for q in test))
    (tmp_path / "docs.jsonl").write_text(
        "".join(json.dumps({"doc_id": d, "text": corpus.docs[d]}) + "\n" for d in sorted(corpus.docs))
    )
    shutil.copy(tmp_path / "bm25.run", tmp_path / "any.trec")
    shutil.copy(tmp_path / "queries.tsv", tmp_path / "q.tsv")
    (tmp_path / "docs.jsonl.gz").write_bytes(gzip.compress((tmp_path / "docs.jsonl").read_bytes()))
    export, rerank = [words for where, words in documented("longrank") if where.startswith("docs/api.md")]
    (tmp_path / export[export.index("--results") + 1]).parent.mkdir(parents=True)
    (tmp_path / export[export.index("--results") + 1]).symlink_to(results)  # results/cranfield: this tiny run's
    monkeypatch.chdir(tmp_path)
    main(export[1:])
    main(rerank[1:])
    assert set(read_run(tmp_path / rerank[rerank.index("--out") + 1])) == set(test)
    [python] = [b.text for b in blocks("docs/api.md", "python")]
    namespace: dict = {}
    exec(compile(python, "docs/api.md", "exec"), namespace)
    assert len(namespace["scores"]) == 2 and set(namespace["reranked"]["qid"]) == set(test)


# An export reads new text. A collection the training collection shares no word with (its
# words: the aeronautics topics and the filler of conftest.synthetic_collection), every word of it in GloVe 6B.
UNSEEN_DOCS = {
    "z9": "lava poured from the volcano for days after the eruption and the magma cooled into rock",
    "m5": "knead the bread dough with yeast and bake it in a hot oven",
    "a1": "the violin needs new strings and a good bow before the concert",
    "k3": "a volcano can sleep for centuries before lava and ash bury the valley",
}
UNSEEN_QUERIES = {"u1": "volcano eruption lava", "u2": "qzxvj wqptk"}  # u2: no word GloVe or the collection has
#: the first stage's order: z9, m5, a1, k3 (a tie broken by doc id would give a1, k3, m5, z9)
UNSEEN_RUN = {q: {"z9": 4.0, "m5": 3.0, "a1": 2.0, "k3": 1.0} for q in UNSEEN_QUERIES}


@pytest.mark.parametrize("name", INTERPOLATED)
def test_an_exported_word_model_scores_a_collection_it_never_saw(results, exported, name, tmp_path):
    """The export carries its pre-trained embedding's other words, so new text's words have vectors; a query with
    none it knows warns (with the share) and keeps the first stage's order; without them (--collection-words-only)
    every word of the new collection is unknown, as the issue's example was."""
    import numpy as np
    import pandas as pd

    import longrank
    from longrank.api import UnknownQueryWarning
    from longrank.api.export import export

    corpus = Corpus(results / "data")
    training_words = set(corpus.word_vocabulary().index)
    unseen_words = {w for t in [*UNSEEN_DOCS.values(), *UNSEEN_QUERIES.values()] for w in t.split()}
    assert not {"volcano", "eruption", "lava", "bread", "violin"} & training_words
    frame = pd.DataFrame(
        [(q, d, s) for q, r in UNSEEN_RUN.items() for d, s in r.items()], columns=["qid", "docno", "score"]
    )
    meta = json.loads((exported[name] / "ranker.json").read_text())["vocabulary"]
    assert meta["pretrained_source"] == "glove-6b-50d" and meta["pretrained_dtype"] == "float16"
    assert (
        300_000 < meta["pretrained_count"] < 400_000
    )  # GloVe's words the tokenizer can produce, less the collection's
    pretrained = set((exported[name] / meta["pretrained_words"]).read_text().split())
    assert not pretrained & training_words and {"volcano", "eruption", "lava"} <= pretrained

    ranker = longrank.load_ranker(exported[name], device="cpu")
    assert ranker.unknown_words(UNSEEN_QUERIES["u1"]) == (0, 3)
    with pytest.warns(UnknownQueryWarning) as warned:
        reranked = ranker.rerank(frame, UNSEEN_QUERIES, UNSEEN_DOCS)
    assert [str(w.message) for w in warned] == [
        f"{name}: query 'u2' has no word its vocabulary knows (2 of 2 query words unknown, 100%): the model matches "
        "it against no document, so documents it scores alike keep the first stage's order"
    ]
    u1 = reranked[reranked["qid"] == "u1"].set_index("docno")["score"]
    u2 = reranked[reranked["qid"] == "u2"]
    print(f"{name} on a collection it never saw, query u1 {UNSEEN_QUERIES['u1']!r}: {u1.round(4).to_dict()}")
    assert u1.nunique() == len(UNSEEN_DOCS) and np.std(u1.to_numpy()) > 0  # the documents are told apart
    assert u2["score"].nunique() == 1 and list(u2["docno"]) == ["z9", "m5", "a1", "k3"]  # ties: first stage's order
    assert ranker.score(UNSEEN_QUERIES["u1"], [UNSEEN_DOCS[d] for d in u1.index]) == pytest.approx(list(u1), abs=1e-5)

    # the collection's words alone: every word of the new collection is unknown (the export)
    small = export(results, name, 0, tmp_path / "small", pretrained_words=False)
    assert not (small / meta["pretrained_words"]).exists()
    alone = longrank.load_ranker(small, device="cpu")
    assert alone.unknown_words(UNSEEN_QUERIES["u1"]) == (3, 3)
    with pytest.warns(UnknownQueryWarning) as warned:
        blind = alone.rerank(frame, UNSEEN_QUERIES, UNSEEN_DOCS)
    assert [
        re.search(r"query '(\w+)' .*\((\d of \d) query words unknown, 100%\)", str(w.message)).groups() for w in warned
    ] == [
        ("u1", "3 of 3"),
        ("u2", "2 of 2"),
    ]
    for qid in UNSEEN_QUERIES:
        assert list(blind[blind["qid"] == qid]["docno"]) == ["z9", "m5", "a1", "k3"]
    sizes = {d.name: sum(p.stat().st_size for p in d.iterdir() if p.is_file()) for d in (exported[name], small)}
    print(f"{name} export sizes (bytes): {sizes}; the unseen words: {sorted(unseen_words - training_words)[:6]}...")


@pytest.mark.parametrize("name", INTERPOLATED)
def test_the_cards_interpolated_figure_reproduces_from_the_export(results, exported, name, tmp_path):
    """The export holds the interpolation weight and the first stage it was chosen with; reranking that first
    stage's run with ``interpolate=`` gives the workflow's {model}+{first stage} run and the card's figure."""
    import pandas as pd

    import longrank
    from longrank.evaluate.metrics import per_query

    corpus = Corpus(results / "data")
    test = corpus.folds[0]["test"]
    chosen = json.loads((results / "runs" / f"{name}+first.interpolation.json").read_text())["folds"][0]["weight"]
    meta = json.loads((exported[name] / "ranker.json").read_text())
    assert meta["interpolation"]["first"]["weight"] == chosen
    ranker = longrank.load_ranker(exported[name], device="cpu")
    assert ranker.interpolation_weight() == ranker.interpolation_weight("first") == chosen
    candidates = read_run(results / "candidates" / "first.run")
    frame = pd.DataFrame([(q, d, s) for q in test for d, s in candidates[q].items()], columns=["qid", "docno", "score"])
    mixed = ranker.rerank(frame, corpus.queries, corpus.docs, interpolate="first")
    workflow = read_run(results / "runs" / f"{name}+first.run")
    got = {(q, d): s for q, d, s in zip(mixed["qid"], mixed["docno"], mixed["score"])}
    assert set(got) == {(q, d) for q in test for d in workflow[q]}
    assert max(abs(s - workflow[q][d]) for (q, d), s in got.items()) <= 1e-6
    run = {q: {d: s for (qq, d), s in got.items() if qq == q} for q in test}
    ndcg = per_query(run, corpus.qrels, test, ["nDCG@10"])
    figure = float(ndcg["nDCG@10"].mean())
    card = (exported[name] / "README.md").read_text()
    assert f"test nDCG@10 ({name}+first, this fold's test queries): {figure:.4f}" in card
    assert f"`{name}+first`: weight {chosen} on the model's" in card
    print(f"{name}+first from the export: weight {chosen}, test nDCG@10 {figure:.4f} (the card's)")
    # and from the command line, with the weight in the run's provenance
    write_run(tmp_path / "first.trec", {q: candidates[q] for q in test}, "first")
    (tmp_path / "q.tsv").write_text("".join(f"{q}\t{corpus.queries[q]}\n" for q in test))
    (tmp_path / "docs.jsonl").write_text(
        "".join(json.dumps({"doc_id": d, "text": corpus.docs[d]}) + "\n" for d in sorted(corpus.docs))
    )
    main(
        ["rerank", "--ranker", str(exported[name]), "--run", str(tmp_path / "first.trec"), "--queries"]
        + [str(tmp_path / "q.tsv"), "--docs", str(tmp_path / "docs.jsonl"), "--out", str(tmp_path / "mixed.trec")]
        + ["--device", "cpu", "--interpolate", "first"]
    )
    written = read_run(tmp_path / "mixed.trec")
    assert set(written) == set(test)
    assert max(abs(s - workflow[q][d]) for q in test for d, s in written[q].items()) <= 1e-6
    provenance = yaml.safe_load((tmp_path / "mixed.trec.meta.yaml").read_text())
    *_, model, mixed = provenance["method"]["retrieval"]
    assert mixed["weight"] == chosen and mixed["interpolates"] == [model["name"], "first.trec"]
    assert schema_errors(provenance) == []
