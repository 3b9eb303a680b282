"""MIR's chain gives the same bytes from fresh processes: the graphs stage and MIR's training (its weights and its dev
scores) at the default config's shapes, each run twice in a fresh interpreter with another hash seed, as Snakemake
runs them (one thread a job, as the workflow's model jobs)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import REPO, TOPICS, write_local_collection

pytestmark = pytest.mark.stage  # runs the graphs and train stages in two processes

DEFAULT_CONFIG = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
# the default config's MIR and its graph set; two steps, then one evaluation on the dev queries
MIR_ENTRY = {
    **DEFAULT_CONFIG["models"]["mir"],
    "train": {**DEFAULT_CONFIG["models"]["mir"]["train"], "steps": 2, "eval_every": 2, "warmup_steps": 1},
}
GRAPH_SET = {k: v for k, v in DEFAULT_CONFIG["mir_graphs"]["mir"].items() if k != "prf_queries"}


def long_collection(n_queries: int = 6, docs_per_query: int = 4, seed: int = 0):
    """Documents of about 200 words in sentences, named places and topic words in them: two of MIR's 128-token
    windows each, sentence, entity and PRF-word pivots."""
    rnd = random.Random(seed)
    filler = "the of and a study results method data analysis model experimental theoretical".split()
    places = ["Langley", "Cambridge", "Ohio", "Toulouse", "Bristol", "Moffett Field"]
    docs, queries, qrels = {}, {}, []
    for q in range(n_queries):
        topic = TOPICS[q % len(TOPICS)].split()
        queries[f"q{q}"] = " ".join(topic)
        for j in range(docs_per_query):
            sentences = []
            for s in range(12):
                words = [rnd.choice(filler) for _ in range(14)]
                if j < 2 or s == 0:  # the relevant documents name the topic in every sentence, the others once
                    words.insert(rnd.randrange(len(words)), rnd.choice(topic))
                sentences.append(" ".join(words).capitalize() + f" at {rnd.choice(places)}.")
            docs[f"d{q}_{j}"] = " ".join(sentences)
            qrels.append((f"q{q}", f"d{q}_{j}", int(j < 2)))
    return docs, queries, qrels


@pytest.fixture(scope="module")
def mir_inputs(tmp_path_factory) -> Path:
    """A prepared collection, its BM25 candidates, its annotations and a PRF set (its own queries' BM25 run)."""
    from longrank.data.corpus import Corpus
    from longrank.data.data import prepare
    from longrank.io.atomic import write_text
    from longrank.io.trec_files import write_run
    from longrank.mir_graphs.annotate import annotate, settings
    from longrank.retrieval.bm25 import bm25_run

    root = tmp_path_factory.mktemp("mir_inputs")
    dataset = write_local_collection(root / "src", *long_collection())
    prepare(dataset, {"method": "full"}, {"method": "holdout", "dev": 0.34, "test": 0.17}, root / "data")
    corpus = Corpus(root / "data")
    run = bm25_run(corpus.docs, corpus.queries, top_k=30)
    write_run(root / "bm25.run", run, "bm25")
    write_run(root / "prf" / "candidates.run", run, "bm25")
    write_text(
        root / "prf" / "queries.tsv", "query_id\ttext\n" + "".join(f"{q}\t{t}\n" for q, t in corpus.queries.items())
    )
    annotate(corpus.docs.items(), len(corpus.docs), settings({}), root / "annotations")
    return root


def longrank(args: list[str], hash_seed: str) -> None:
    """``python -m longrank ARGS`` in a fresh interpreter with ``hash_seed``, on one thread."""
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "longrank", *args], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]


def test_the_graphs_stage_and_mir_training_are_byte_identical_across_processes(mir_inputs):
    root, outputs = mir_inputs, []
    for hash_seed in ("1", "2"):
        out = root / f"seed{hash_seed}"
        graphs = ["--data", str(root / "data"), "--annotations", str(root / "annotations")]
        graphs += ["--prf-queries", str(root / "prf"), "--config", json.dumps(GRAPH_SET), "--out", str(out / "graphs")]
        longrank(["graphs", *graphs], hash_seed)
        train = ["--model", "mir", "--model-config", json.dumps(MIR_ENTRY), "--data", str(root / "data")]
        train += ["--candidates", str(root / "bm25.run"), "--collection-artifacts", str(root / "seed1" / "graphs")]
        train += ["--fold", "0", "--rerank-depth", str(MIR_ENTRY["rerank_depth"]), "--device", "cpu"]
        longrank(["train", *train, "--out", str(out / "model" / "model.safetensors")], hash_seed)
        files = ["graphs/graphs.sqlite", "graphs/settings.json", "model/model.safetensors", "model/dev.run"]
        outputs.append({name: (out / name).read_bytes() for name in files})
    stats = json.loads((root / "seed1" / "graphs" / "stats.json").read_text())
    assert stats["nodes"]["passages"]["mean"] >= 2 and stats["nodes"]["tokens"]["mean"] > 0  # two windows, T nodes
    dev_run = [line.split() for line in (root / "seed1" / "model" / "dev.run").read_text().splitlines()]
    assert len({q for q, *_ in dev_run}) >= 2 and len(dev_run) >= 8  # the dev queries' candidates were scored
    for name in outputs[0]:
        assert outputs[0][name] == outputs[1][name], f"{name} differs between two processes with other hash seeds"
