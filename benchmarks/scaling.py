"""How each pipeline stage's cost grows with the collection (issue "Running at scale").

    nice -n 19 env OMP_NUM_THREADS=1 python benchmarks/scaling.py --sizes 2000 10000 --out benchmarks/scaling

For every size N: generate a synthetic collection shaped like MS MARCO documents (``generate_collection``), write
a workflow config for it (``workflow_config``: the collection, the bm25 and pisa first stages, one KNRM, and TREC DL's
collection-wide CPU stages: ``collection_stages_config``), take each job's shell command from the workflow's own
plan (``plan``: ``snakemake -n -p --forceall`` in the work directory, so the commands are the rules' in
workflow/rules/*.smk), and run the real stages ``data``, ``candidates`` (BM25 through bm25s, in memory),
``pisa_index`` and ``pisa_candidates`` (BM25 through PISA: its on-disk index, then the candidates stage reading it),
``word2vec``, ``pseudo_queries`` (BM25 over the PISA index), MIR's ``annotate`` (spaCy) and ``graphs``, ``train``
(KNRM), ``rerank`` (KNRM) and ``evaluate`` with those commands, each as
Snakemake runs it (through the shell, in the work directory) in its own fresh process under a small wrapper that
reads the stage's peak RSS (``RUSAGE_CHILDREN``), one after the other in one run (so both engines see the same
machine), then write

- ``<out>/scaling.tsv``: size, stage, seconds (wall), peak_rss_mb, steps_per_second (train), cpu_seconds, ndcg10
  (KNRM) and bm25_ndcg10 (for context) on the evaluate row, the first stages' nDCG@10 / R@100 over every query,
  query latency (ms per query) and index size (PISA's on disk) on their rows, the collection's words / word types,
  generation seconds
- ``<out>/scaling.png``: peak RSS and CPU time against N per stage, log-log
- ``<out>/extrapolation.md``: per stage a least-squares fit a + b*N of memory and time, extrapolated to
  3,200,000 documents (MS MARCO documents), beside the SLURM profile's mem_mb / runtime for the same rule, and
  the two BM25 engines side by side (index time, peak memory, index size, query latency, nDCG@10, R@100).

``--stages`` runs a subset (``--stages data candidates pisa_index pisa_candidates``: the first stages only;
``--stages data pisa_index word2vec pseudo_queries annotate graphs``: the collection-wide CPU stages).

The collections, the configs and the stages' outputs (``n<N>/results/synthetic/``, the rules' logs in its
``logs/``) go to ``--work-dir`` (a temporary directory, removed at the end unless ``--keep-work``). Nothing here is
imported by the package; the test imports this file by path.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
TARGET_DOCS = 3_200_000  # MS MARCO documents (3.2M; the TREC DL 2019/2020 document collection)
STAGES = (
    "data",
    "candidates",
    "pisa_index",
    "pisa_candidates",
    "word2vec",
    "pseudo_queries",
    "annotate",
    "graphs",
    "train",
    "rerank",
    "evaluate",
)
# each stage's Snakemake rule has the stage's name (cli.py); pisa_candidates is the candidates rule with a pisa stage
RULE_OF_STAGE = {stage: stage for stage in STAGES} | {"pisa_candidates": "candidates"}
#: the two BM25 first stages: (their run's name, the stages that build and query them)
ENGINES = {"bm25s": ("bm25", ("candidates",)), "pisa": ("pisa", ("pisa_index", "pisa_candidates"))}

# --- the synthetic collection -------------------------------------------------------------------------------
# Document lengths (words): log-normal with median 580 and mean 1,100 words, the MS MARCO document collection's
# shape as the issue states it (body + title, whitespace words; a long right tail of documents of tens of
# thousands of words). These two numbers are the assumption; the parameters follow from them:
#   median = exp(mu)              -> mu    = ln(580)                 = 6.363
#   mean   = exp(mu + sigma^2/2)  -> sigma = sqrt(2 ln(1100 / 580))  = 1.131
# Clipped to [10, 100,000] words (P(L > 100k) ~ 3e-6 under this law: ~9 documents of 3.2M). Not fitted here to
# the real length file: the benchmark must run offline, and MS MARCO is not on this machine.
LENGTH_MEDIAN, LENGTH_MEAN = 580.0, 1100.0
LOGNORMAL_MU = math.log(LENGTH_MEDIAN)
LOGNORMAL_SIGMA = math.sqrt(2.0 * math.log(LENGTH_MEAN / LENGTH_MEDIAN))
MIN_DOC_WORDS, MAX_DOC_WORDS = 10, 100_000
# Words: a finite Zipf law, P(rank r) ~ r^-s over VOCAB_SIZE synthetic word types (English text: s ~ 1.0-1.1).
# 2M types so that the vocabulary keeps growing with the collection as real text does (Heaps' law) over the first
# sizes: 0.97M types seen at 10k documents, 1.96M at 100k; the words of 5+ documents, which the word models keep
# (MIN_DOC_FREQ), keep growing beyond that.
VOCAB_SIZE = 2_000_000
ZIPF_EXPONENT = 1.05
# Queries: 3-8 words of middle frequency (ranks 100..20,000: rare enough to discriminate, common enough that
# other documents contain them too), each with 1-3 relevant documents (grade 1, as MS MARCO's binary document
# qrels) that contain every query word 1-3 times. So that ranking is not trivial, 3-8 unjudged "distractor"
# documents per query contain all its words but one, 1-3 times each.
QUERY_WORDS = (3, 8)
QUERY_RANKS = (100, 20_000)
RELEVANT_PER_QUERY = (1, 3)
DISTRACTORS_PER_QUERY = (3, 8)
OCCURRENCES = (1, 3)

# The word models' vocabulary caps of the TREC DL configs (config/trec-dl.yaml, models.knrm), which the
# benchmark's KNRM uses so that its train and rerank memory is the full-scale setting's (a test checks they agree).
MIN_DOC_FREQ, MAX_VOCABULARY = 5, 1_000_000

_CONSONANTS = "bcdfghjklmnprstvwz"
_VOWELS = "aeiou"
_SYLLABLES = [c + v for c in _CONSONANTS for v in _VOWELS]  # 90 syllables


def synthetic_word(rank: int) -> str:
    """The word type of Zipf rank ``rank`` (0 = most frequent): consonant-vowel syllables in bijective base 90, so
    every rank has its own word and frequent words are short (2 letters up to rank 89, 4 up to 8,189, then 6)."""
    n, syllables = rank + 1, []
    while n > 0:
        n -= 1
        syllables.append(_SYLLABLES[n % len(_SYLLABLES)])
        n //= len(_SYLLABLES)
    return "".join(reversed(syllables))


def vocabulary(size: int = VOCAB_SIZE) -> np.ndarray:
    """The word types by rank, as an object array (indexing it with a rank array gives the words)."""
    return np.array([synthetic_word(r) for r in range(size)], dtype=object)


def zipf_cdf(size: int = VOCAB_SIZE, exponent: float = ZIPF_EXPONENT) -> np.ndarray:
    weights = np.arange(1, size + 1, dtype=np.float64) ** -exponent
    cdf = np.cumsum(weights)
    return cdf / cdf[-1]


def sample_ranks(rng: np.random.Generator, cdf: np.ndarray, n: int) -> np.ndarray:
    """``n`` word ranks drawn from the Zipf law ``cdf`` (inverse transform)."""
    return np.minimum(np.searchsorted(cdf, rng.random(n), side="right"), len(cdf) - 1)


def sample_doc_lengths(rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` document lengths in words from the MS MARCO-shaped log-normal (see LOGNORMAL_MU / _SIGMA)."""
    lengths = rng.lognormal(LOGNORMAL_MU, LOGNORMAL_SIGMA, size=n)
    return np.clip(np.rint(lengths), MIN_DOC_WORDS, MAX_DOC_WORDS).astype(np.int64)


def _occurrences(rng: np.random.Generator, terms: list[int]) -> list[int]:
    """Each of ``terms`` repeated 1-3 times (OCCURRENCES)."""
    return [t for t in terms for _ in range(int(rng.integers(OCCURRENCES[0], OCCURRENCES[1] + 1)))]


def generate_collection(
    out_dir: str | os.PathLike,
    n_docs: int,
    n_queries: int = 1000,
    seed: int = 0,
    vocab_size: int = VOCAB_SIZE,
    zipf_exponent: float = ZIPF_EXPONENT,
) -> dict:
    """Write ``docs.jsonl`` ({"doc_id", "text"} per line), ``queries.tsv`` (id<TAB>text, no header) and
    ``qrels.txt`` (TREC: qid 0 docid grade) under ``out_dir``. Documents are written one at a time: memory is
    the vocabulary, the queries and their relevant documents (O(queries)), never the collection.
    Deterministic for a given (n_docs, n_queries, seed, vocab_size, zipf_exponent). Returns the paths and counts."""
    if n_docs < RELEVANT_PER_QUERY[1]:
        raise ValueError(f"n_docs must be at least {RELEVANT_PER_QUERY[1]}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    words = vocabulary(vocab_size)
    cdf = zipf_cdf(vocab_size, zipf_exponent)
    low, high = QUERY_RANKS[0], min(QUERY_RANKS[1], vocab_size)

    inserts_of_doc: dict[int, list[int]] = {}  # doc index -> the ranks of the query words it must contain (O(queries))
    judgments = 0
    with open(out / "queries.tsv", "w", encoding="utf-8") as qf, open(out / "qrels.txt", "w", encoding="utf-8") as rf:
        for q in range(n_queries):
            k = int(rng.integers(QUERY_WORDS[0], QUERY_WORDS[1] + 1))
            terms = rng.choice(np.arange(low, high), size=k, replace=False).tolist()
            qf.write(f"q{q}\t{' '.join(words[terms].tolist())}\n")
            n_rel = int(rng.integers(RELEVANT_PER_QUERY[0], RELEVANT_PER_QUERY[1] + 1))
            rel: set[int] = set()
            while len(rel) < n_rel:
                rel.add(int(rng.integers(n_docs)))
            for d in sorted(rel):
                inserts_of_doc.setdefault(d, []).extend(_occurrences(rng, terms))
                rf.write(f"q{q} 0 D{d} 1\n")
                judgments += 1
            n_distractors = int(rng.integers(DISTRACTORS_PER_QUERY[0], DISTRACTORS_PER_QUERY[1] + 1))
            for d in rng.integers(n_docs, size=n_distractors).tolist():
                if d not in rel:
                    left_out = int(rng.integers(k))
                    inserts_of_doc.setdefault(d, []).extend(_occurrences(rng, terms[:left_out] + terms[left_out + 1 :]))

    total_words, seen = 0, np.zeros(vocab_size, dtype=bool)  # seen: the word types that occur (O(vocabulary))
    with open(out / "docs.jsonl", "w", encoding="utf-8") as df:
        chunk = 4096  # lengths drawn a block at a time: bounded memory at any collection size
        for start in range(0, n_docs, chunk):
            lengths = sample_doc_lengths(rng, min(chunk, n_docs - start))
            for offset, length in enumerate(lengths):
                d = start + offset
                inserts = inserts_of_doc.pop(d, [])
                length = max(int(length), 2 * len(inserts))
                ranks = sample_ranks(rng, cdf, length)
                if inserts:  # the query's words replace words at random positions (the length stays drawn)
                    ranks[rng.choice(length, size=len(inserts), replace=False)] = inserts
                seen[ranks] = True
                total_words += length
                df.write(json.dumps({"doc_id": f"D{d}", "text": " ".join(words[ranks].tolist())}) + "\n")
    return {
        "docs": str(out / "docs.jsonl"),
        "queries": str(out / "queries.tsv"),
        "qrels": str(out / "qrels.txt"),
        "n_docs": n_docs,
        "n_queries": n_queries,
        "judgments": judgments,
        "words": total_words,
        "word_types": int(seen.sum()),
    }


# --- running the stages -------------------------------------------------------------------------------------
# The stages' commands are the workflow's own: a config for the synthetic collection (workflow_config), a dry run
# of the Snakefile that prints each job's shell command (plan), and each command run as Snakemake runs it, by the
# shell in the work directory, so a rule's changed command line is the benchmark's too.
RESULTS = "results/synthetic"  # the workflow's results folder: results/<dataset.name> of workflow_config
PSEUDO_SET, GRAPH_SET = "pseudo", "mir"  # workflow_config's pseudo-query set and MIR graph set
#: each stage's job in the plan, by one of its outputs (under RESULTS); its rule is RULE_OF_STAGE's
STAGE_OUTPUTS = {
    "data": "data/stats.json",
    "candidates": "candidates/bm25.run",
    "pisa_index": "pisa/pisa",
    "pisa_candidates": "candidates/pisa.run",
    "word2vec": "data/word2vec.txt",
    "pseudo_queries": f"pseudo_queries/{PSEUDO_SET}",
    "annotate": "annotations",
    "graphs": f"graphs/{GRAPH_SET}",
    "train": "models/knrm/fold0/model.safetensors",
    "rerank": "runs/knrm.run",
    "evaluate": "eval/knrm.tsv",
}
#: the first stage whose run a stage writes (ENGINES): rule evaluate scores it after the stage, unmeasured
RUN_OF_STAGE = {stages[-1]: run for run, stages in ENGINES.values()}
#: what rule evaluate measures (evaluation.measures): nDCG@10 of KNRM's run, both of the first stages'
MEASURES = ["nDCG@10", "R@100"]

# The wrapper: a fresh process whose only child is the stage's shell, so RUSAGE_CHILDREN's ru_maxrss (KiB on Linux)
# is the stage's own peak (the largest of the shell, the stage and any process they waited for), not an earlier
# stage's.
_WRAPPER = """
import json, resource, subprocess, sys, time
started = time.perf_counter()
rc = subprocess.call(sys.argv[1:], stdout=sys.stderr)
seconds = time.perf_counter() - started
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"rc": rc, "seconds": seconds, "maxrss_kib": usage.ru_maxrss, "cpu_seconds": usage.ru_utime + usage.ru_stime}))
"""


def measure(argv: list[str], log_path: Path, env: dict, cwd: Path, stage_log: Path | None = None) -> dict:
    """Run ``argv`` in a fresh process under the wrapper; its stdout and stderr go to ``log_path``. A stage that
    fails is reported with the last lines of ``stage_log`` (where its rule sends its errors), else ``log_path``."""
    with open(log_path, "w", encoding="utf-8") as log:
        done = subprocess.run(
            [sys.executable, "-c", _WRAPPER, *argv],
            stdout=subprocess.PIPE,
            stderr=log,
            env=env,
            cwd=cwd,
            text=True,
            check=False,
        )
    if done.returncode != 0 or not done.stdout.strip():
        raise RuntimeError(f"wrapper failed ({done.returncode}) for {argv[:4]}; see {log_path}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if result["rc"] != 0:
        shown = stage_log if stage_log is not None and stage_log.exists() else log_path
        tail = "".join(shown.read_text(encoding="utf-8", errors="replace").splitlines(True)[-20:])
        raise RuntimeError(f"{' '.join(argv)[:200]} exited {result['rc']}; last lines of {shown}:\n{tail}")
    return result


def knrm_config(steps: int) -> dict:
    """The KNRM entry the benchmark trains: CPU-sized, one dev evaluation at the end (eval_every = steps)."""
    return {
        "type": "knrm",
        "max_doc_len": 200,
        "min_doc_freq": MIN_DOC_FREQ,
        "max_vocabulary": MAX_VOCABULARY,
        "train": {"steps": steps, "batch_size": 8, "eval_every": steps, "patience": 1},
    }


def workflow_config(collection: dict, steps: int, device: str = "cpu") -> dict:
    """The benchmark's run as a workflow config: the synthetic collection (source local), the two BM25 first stages
    (bm25s and PISA), the benchmark's KNRM, and the measures it reads. Every other setting is the workflow's default
    as it validates the config (workflow/schemas/config.schema.yaml: query formulation full, holdout splits 0.15 /
    0.35 with seed 0, rerank depth 100; each first stage's k1, b, stemmer, stop words and top 100): the work
    directory holds no config/config.yaml, so none of the default run's keys (its Cranfield models) is merged in."""
    return {
        "dataset": {
            "name": RESULTS.split("/")[-1],
            "source": "local",
            **{key: collection[key] for key in ("docs", "queries", "qrels")},
        },
        "first_stages": [{"name": "bm25", "method": "bm25"}, {"name": "pisa", "method": "pisa"}],
        "device": device,
        "evaluation": {"measures": MEASURES},
        "models": {"knrm": knrm_config(steps)},
        **collection_stages_config(collection["n_docs"]),
    }


def collection_stages_config(n_docs: int) -> dict:
    """The collection-wide CPU stages of the TREC DL run (config/trec-dl.yaml), with its settings where the synthetic
    collection allows them, and no model that reads them: the stages' targets are asked for by name (plan).

    - word2vec: TREC DL's, without its url / title fields and training queries, which the synthetic documents and
      queries lack.
    - pseudo-queries: ICT spans (source ict) where TREC DL takes titles, which the synthetic documents lack: the same
      work per query (a query and its BM25 top ``depth`` from the pisa first stage's index). TREC DL's 100,000 queries
      of 3.2M documents, as the same share of N, so that the fit at 3.2M is its set.
    - MIR: TREC DL's graph set (2,048 tokens, PRF over the pseudo-queries) and annotation, unsharded (one job over
      N; a shard of the full run is 1/shards of the collection) and one spaCy process (annotations.n_process: the
      measured time is one process's; a TREC DL shard runs 8)."""
    return {
        "word2vec": {
            "dim": 128,
            "window": 10,
            "epochs": 5,
            "min_count": 100,
            "architecture": "skipgram",
            "processing": "ck",
            "sample": 0.0001,
            "alpha": 0.05,
        },
        "pseudo_queries": {
            PSEUDO_SET: {"source": "ict", "count": max(1, n_docs * 100_000 // TARGET_DOCS), "first_stage": "pisa"}
        },
        "mir_graphs": {
            GRAPH_SET: {
                "encoder": "minilm",
                "window": 128,
                "overlap": 0.25,
                "max_doc_tokens": 2048,
                "prf_queries": PSEUDO_SET,
            }
        },
        "annotations": {"max_words": 2048, "batch_size": 256, "n_process": 1},
    }


def dry_run_jobs(text: str) -> list[dict]:
    """The jobs ``snakemake -n -p`` prints: each ``rule <name>:`` block's rule, outputs, logs and shell command."""
    jobs = []
    for line in text.splitlines():
        if match := re.fullmatch(r"(?:local)?rule (\w+):", line):
            jobs.append({"rule": match[1], "output": [], "log": [], "command": None})
        elif jobs and (match := re.fullmatch(r"\s+(output|log): (.*)", line)):
            jobs[-1][match[1]] = match[2].split(", ")
        elif jobs and line.startswith("Shell command: "):
            jobs[-1]["command"] = line.removeprefix("Shell command: ")
    return jobs


def plan(work: Path, config: dict, cores: int, env: dict) -> dict[str, dict]:
    """The jobs the benchmark runs, from the workflow: ``config`` written to ``work``/config.yaml, then a dry run in
    ``work`` (``snakemake -n -p --forceall``) of every stage's output and the first stages' evaluations, with
    ``cores`` cores (a rule's ``{threads}`` is at most that). Returns each job (dry_run_jobs) by the output it is
    asked for: STAGE_OUTPUTS' and ``eval/<run>.tsv`` for RUN_OF_STAGE's runs, relative to RESULTS. Raises naming
    a stage whose job is missing from the plan or is not its rule's."""
    import yaml

    (work / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    wanted = list(STAGE_OUTPUTS.values()) + [f"eval/{run}.tsv" for run in RUN_OF_STAGE.values()]
    done = subprocess.run(
        [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-d", str(work), "--cores", str(cores)]
        + ["-n", "-p", "--forceall", *(f"{RESULTS}/{path}" for path in wanted), "--configfile", "config.yaml"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"snakemake's dry run failed in {work}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    by_output = {path: job for job in dry_run_jobs(done.stdout) for path in job["output"] if job["command"]}
    jobs = {path: by_output.get(f"{RESULTS}/{path}") for path in wanted}
    for stage, path in STAGE_OUTPUTS.items():
        job = jobs[path]
        if job is None or job["rule"] != RULE_OF_STAGE[stage]:
            raise RuntimeError(f"the workflow plans no rule {RULE_OF_STAGE[stage]} job for stage {stage} ({path})")
    if None in jobs.values():
        raise RuntimeError(f"the workflow plans no job for {[path for path, job in jobs.items() if job is None]}")
    return jobs


def shell(job: dict, work: Path) -> list[str]:
    """The command that runs ``job`` as Snakemake does: its outputs' and logs' folders made, then its shell command
    through bash with Snakemake's prefix, in the work directory (the caller's ``cwd``)."""
    for path in job["output"] + job["log"]:
        (work / path).parent.mkdir(parents=True, exist_ok=True)
    return ["bash", "-c", "set -euo pipefail; " + job["command"]]


def model_words(doc_freq_path: Path, min_doc_freq: int = MIN_DOC_FREQ, max_words: int = MAX_VOCABULARY) -> int:
    """How many document words the benchmark's KNRM keeps (Vocabulary.from_doc_freq's filters; queries' words aside)."""
    with open(doc_freq_path, encoding="utf-8") as f:
        next(f)
        frequent = sum(1 for line in f if int(line.rsplit("\t", 1)[1]) >= min_doc_freq)
    return min(frequent, max_words)


def run_size(size: int, args, work_root: Path, log=print) -> list[dict]:
    work = (work_root / f"n{size}").resolve()
    shutil.rmtree(work, ignore_errors=True)
    started = time.perf_counter()
    collection = generate_collection(work / "collection", size, args.queries, args.seed)
    generate_seconds = time.perf_counter() - started
    log(
        f"[n={size}] generated {collection['n_docs']} documents ({collection['words']} words, {collection['word_types']} word types), "
        f"{collection['n_queries']} queries in {generate_seconds:.1f}s"
    )
    # the rules call `python`: this interpreter's
    env = {
        **os.environ,
        "OMP_NUM_THREADS": str(args.threads),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    jobs = plan(work, workflow_config(collection, args.steps, args.device), args.threads, env)
    results = work / RESULTS
    (work / "logs").mkdir(exist_ok=True)
    rows = []
    for stage in STAGES:
        if stage not in args.stages:
            continue
        job = jobs[STAGE_OUTPUTS[stage]]
        result = measure(shell(job, work), work / "logs" / f"{stage}.log", env, work, work / job["log"][0])
        row = {
            "size": size,
            "stage": stage,
            "seconds": result["seconds"],
            "peak_rss_mb": result["maxrss_kib"] / 1024.0,
            "steps_per_second": "",
            "cpu_seconds": result["cpu_seconds"],
            "ndcg10": "",
            "words": collection["words"],
            "word_types": collection["word_types"],
            "generate_seconds": generate_seconds,
            "model_words": "",
        }
        if stage in ("train", "rerank"):
            row["model_words"] = model_words(results / "data" / "word_doc_freq.tsv")
        if stage == "train":
            summary = json.loads((results / "models" / "knrm" / "fold0" / "train_summary.json").read_text())
            row["steps_per_second"] = (
                summary["steps_run"] / summary["seconds"] if summary["seconds"] > 0 else float("nan")
            )
        if stage == "evaluate":
            row["ndcg10"] = mean_column(results / STAGE_OUTPUTS["evaluate"], "nDCG@10")
        if stage in RUN_OF_STAGE:  # the first stage's latency and effectiveness
            run = RUN_OF_STAGE[stage]
            stats = json.loads((results / "candidates" / f"{run}.stats.json").read_text())
            row["query_ms"] = stats["query_ms_per_query"]
            if stage == "candidates":  # bm25s indexes in the candidates stage, in memory
                row["index_s"] = stats["index_seconds"]
            evaluation = f"eval/{run}.tsv"
            subprocess.run(shell(jobs[evaluation], work), cwd=work, env=env, check=True)
            row["ndcg10"], row["recall100"] = (mean_column(results / evaluation, m) for m in MEASURES)
        if stage == "pisa_index":
            manifest = json.loads((results / STAGE_OUTPUTS["pisa_index"] / "longrank_pisa.json").read_text())
            row["index_mb"], row["index_s"] = manifest["index_bytes"] / 1e6, manifest["index_seconds"]
        log(f"[n={size}] {stage:<15} {row['seconds']:8.1f}s  {row['peak_rss_mb']:8.1f} MB")
        rows.append(row)
    if "evaluate" in args.stages:  # for context: BM25's own nDCG@10 over the queries KNRM reranked
        rows[-1]["bm25_ndcg10"] = next(r["ndcg10"] for r in rows if r["stage"] == "candidates")
    return rows


def mean_column(path: Path, column: str) -> float:
    with open(path, encoding="utf-8") as f:
        values = [float(r[column]) for r in csv.DictReader(f, delimiter="\t")]
    return sum(values) / len(values) if values else float("nan")


# --- fits, the profile, the outputs -------------------------------------------------------------------------
def fit_linear(sizes, values) -> tuple[float, float]:
    """Least-squares a + b*N through (sizes, values). With two sizes the line passes through both points exactly."""
    x, y = np.asarray(sizes, dtype=float), np.asarray(values, dtype=float)
    if len(set(x.tolist())) < 2:
        raise ValueError("a fit against N needs at least two different sizes")
    b, a = np.polyfit(x, y, 1)
    return float(a), float(b)


def extrapolate(fit: tuple[float, float], n: float = TARGET_DOCS) -> float:
    a, b = fit
    return a + b * n


# The rules that compute their time and memory per job from the GPU bill (workflow/rules/train.smk, rerank.smk): a
# profile without a value of its own for them leaves the rule's
PER_JOB_RULES = ("train", "train_pretrain", "rerank")


def profile_resources(path: str | os.PathLike, rule: str, attempt: int = 1) -> dict:
    """The SLURM profile's ``mem_mb`` and ``runtime`` (minutes) for ``rule`` on its first submission: the rule's
    ``set-resources`` entry, else ``default-resources`` (annotate's and graphs' runtime: the rule's own, one whole
    job's); values that are Python expressions of ``attempt`` are evaluated. A value that needs more than ``attempt`` (``input``, ``wildcards``) is left as its text."""
    import yaml
    from longrank.plan.job_resources import WHOLE_COLLECTION_MINUTES

    profile = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    default = _resource_dict(profile.get("default-resources"))
    own = (profile.get("set-resources") or {}).get(rule) or {}
    out = {}
    for key in ("mem_mb", "runtime"):
        if key not in own and rule in PER_JOB_RULES:  # the rule's own value, not the profile's default
            out[key] = "per job: longrank.plan.job_resources"
            continue
        if key == "runtime" and key not in own and rule in WHOLE_COLLECTION_MINUTES:
            # annotate's and graphs' own bound (collection_stage_minutes) for one job over the whole collection, as
            # the benchmark runs them (unsharded)
            out[key] = WHOLE_COLLECTION_MINUTES[rule] * attempt
            continue
        value = own.get(key, default.get(key))
        out[key] = _evaluate(value, attempt)
    return out


def _resource_dict(value) -> dict:
    if isinstance(value, dict):
        return value
    if isinstance(value, list):  # the command-line form: ["mem_mb=4000", ...]
        return dict(item.split("=", 1) for item in value if "=" in item)
    return {}


def _evaluate(value, attempt: int):
    if value is None or isinstance(value, (int, float)):
        return value
    try:
        return eval(str(value), {"__builtins__": {}}, {"attempt": attempt})  # noqa: S307 - the repository's own profile
    except Exception:  # noqa: BLE001
        return str(value)


def write_tsv(path: Path, rows: list[dict]) -> None:
    columns = [
        "size",
        "stage",
        "seconds",
        "peak_rss_mb",
        "steps_per_second",
        "cpu_seconds",
        "ndcg10",
        "bm25_ndcg10",
        "words",
        "word_types",
        "generate_seconds",
        "model_words",
        "recall100",
        "query_ms",
        "index_mb",
        "index_s",
    ]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\t".join(columns) + "\n")
        for r in rows:
            f.write("\t".join(_fmt(r.get(c, "")) for c in columns) + "\n")


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 1000 else f"{value:.1f}"
    return str(value)


def plot(path: Path, rows: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_mem, ax_time) = plt.subplots(1, 2, figsize=(11, 4.2))
    for stage in STAGES:
        points = sorted((r["size"], r["peak_rss_mb"], r["cpu_seconds"]) for r in rows if r["stage"] == stage)
        if not points:
            continue
        n, mem, sec = zip(*points)
        ax_mem.plot(n, mem, marker="o", label=stage)
        ax_time.plot(n, sec, marker="o", label=stage)
    for ax, label in ((ax_mem, "peak RSS (MB)"), (ax_time, "CPU time (s)")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("documents N")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
    ax_mem.legend()
    ax_mem.set_title("Peak RSS of each stage's process")
    ax_time.set_title("CPU time of each stage (one thread)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def extrapolation_report(
    rows: list[dict],
    profile_path: Path,
    target: int = TARGET_DOCS,
    steps: int | None = None,
    threads: int = 1,
    queries: int | None = None,
) -> str:
    sizes = sorted({r["size"] for r in rows})
    exact = len(sizes) == 2
    try:
        shown_profile = profile_path.resolve().relative_to(REPO)
    except ValueError:
        shown_profile = profile_path
    lines = [
        f"# Extrapolation to {target:,} documents",
        "",
        f"Measured at N = {', '.join(f'{s:,}' for s in sizes)} synthetic MS MARCO-shaped documents "
        f"(benchmarks/scaling.py; {queries if queries is not None else '?'} queries at every size; KNRM, {steps} training steps "
        f"at batch 8; CPU, OMP_NUM_THREADS={threads}; nice 19 on a shared 2-core machine, so wall times are upper bounds).",
        "",
        "Fit per stage: least squares `a + b*N` of peak RSS (MB) and of CPU time (s; the stages run one thread, so on a "
        "quiet machine this is their wall time, while on a shared one the wall time also counts waiting for the CPU)"
        + (
            ". **With only two sizes the line passes exactly through both points: a weak fit** that cannot tell linear "
            "growth from any other curve through the same two points"
            if exact
            else ""
        )
        + ". A negative slope (noise) is taken as flat at the largest measured value.",
        f"Profile: `{shown_profile}`, `set-resources.<rule>` else `default-resources`, evaluated at attempt = 1 "
        "(the first submission; retries get more).",
        "",
        f"| stage (rule) | peak RSS {sizes[0]:,} -> {sizes[-1]:,} | mem fit a + b·N | mem at {target:,} (MB) | profile mem_mb "
        f"| CPU s {sizes[0]:,} -> {sizes[-1]:,} | time fit a + b·N | time at {target:,} (min) | profile runtime (min) | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for stage in STAGES:
        points = sorted((r["size"], r["peak_rss_mb"], r["cpu_seconds"]) for r in rows if r["stage"] == stage)
        if len({p[0] for p in points}) < 2:
            continue
        n, mem, sec = zip(*points)
        mem_fit, time_fit = fit_linear(n, mem), fit_linear(n, sec)
        mem_at = extrapolate(mem_fit, target) if mem_fit[1] > 0 else max(mem)
        mem_fit_text = f"{mem_fit[0]:,.0f} MB + {mem_fit[1] * 1e6:,.0f} MB per 1M docs"
        by_words = vocabulary_memory(rows, stage) or batch_memory(rows, stage, target)
        if by_words is not None:
            mem_at, mem_fit_text = by_words
        seconds_at = extrapolate(time_fit, target) if time_fit[1] > 0 else max(sec)
        resources = profile_resources(profile_path, RULE_OF_STAGE[stage])
        verdict = _verdict(mem_at, seconds_at / 60.0, resources)
        lines.append(
            f"| {stage} | {mem[0]:,.0f} -> {mem[-1]:,.0f} MB | {mem_fit_text} | "
            f"{mem_at:,.0f} | {_num(resources['mem_mb'])} | {sec[0]:,.1f} -> {sec[-1]:,.1f} s | "
            f"{time_fit[0]:,.1f} s + {time_fit[1] * 1e6 / 60:,.1f} min per 1M docs | {seconds_at / 60:,.1f} | "
            f"{_num(resources['runtime'])} | {verdict} |"
        )
    lines += ["", "Measured points (size: peak RSS MB / wall s / CPU s):", ""]
    for stage in STAGES:
        points = sorted(
            (r["size"], r["peak_rss_mb"], r["seconds"], r["cpu_seconds"]) for r in rows if r["stage"] == stage
        )
        if not points:  # a stage left out (--stages)
            continue
        lines.append(
            f"- {stage}: " + "; ".join(f"{n:,}: {m:,.0f} MB / {s:,.1f} s / {c:,.1f} s" for n, m, s, c in points)
        )
    steps_rate = [
        (r["size"], r["steps_per_second"])
        for r in rows
        if r["stage"] == "train" and r.get("steps_per_second", "") != ""
    ]
    if steps_rate:
        lines.append(
            "- train steps per second (train_summary.json steps_run / seconds, which includes the one dev evaluation at "
            "the end): " + "; ".join(f"{n:,}: {v:.2f}" for n, v in sorted(steps_rate))
        )
    types = sorted({(r["size"], r.get("word_types"), r.get("words")) for r in rows if r.get("word_types") is not None})
    lines += [
        "",
        "Collections: "
        + "; ".join(f"{n:,} docs = {w:,} words, {t:,} word types" for n, t, w in types)
        + f" (of a {VOCAB_SIZE:,}-type synthetic vocabulary).",
    ]
    kept = sorted(
        {(r["size"], r["model_words"]) for r in rows if r["stage"] == "train" and r.get("model_words", "") != ""}
    )
    if kept:
        lines.append(
            f"KNRM's vocabulary (document words in {MIN_DOC_FREQ}+ documents, at most {MAX_VOCABULARY:,}: the TREC DL "
            "configs' `min_doc_freq` / `max_vocabulary`): "
            + "; ".join(f"{n:,} docs: {w:,} words" for n, w in kept)
            + ". `train` and `rerank` memory is fitted against it rather than N, and taken at the cap for "
            f"{target:,} documents (MS MARCO has millions of word types in {MIN_DOC_FREQ}+ documents)."
        )
    lines += ["", engines_report(rows, target)]
    lines += ["", _run_estimates(rows, (10_000, 100_000, 300_000)), "", *NOTES, ""]
    return "\n".join(lines)


def engines_report(rows: list[dict], target: int = TARGET_DOCS) -> str:
    """bm25s and PISA side by side at each measured size and extrapolated to ``target`` documents (linear fits of
    memory, index time and index size in N; query latency and effectiveness as measured)."""
    lines = [
        f"## The two BM25 engines side by side (extrapolated to {target:,} documents)",
        "",
        "bm25s: the `candidates` stage (index in memory, then every query). PISA: `pisa_index` (the on-disk index, "
        "streamed from docs.jsonl) then `pisa_candidates` (the candidates stage reading it); peak RSS is the larger "
        "of the two. Build: the CPU seconds of bm25s's `candidates` process (tokenising, indexing and the queries: one "
        "process) and of PISA's `pisa_index` (analysing, parsing, inverting, compressing); CPU time, not wall time, as "
        "a shared machine stretches wall time several-fold. Query latency: wall ms per query as the stage times it "
        "(noisy on a shared machine). nDCG@10 and R@100 over every query of the synthetic collection (top 100).",
        "",
        "| engine | N | build CPU (s) | peak RSS (MB) | index on disk (MB) | query latency (ms/query) | nDCG@10 | R@100 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    fitted = {}
    for engine, (_, stages) in ENGINES.items():
        sizes = sorted({r["size"] for r in rows if r["stage"] == stages[-1]})
        points = []
        for n in sizes:
            mine = {r["stage"]: r for r in rows if r["size"] == n and r["stage"] in stages}
            if set(mine) != set(stages):
                continue
            last, first = mine[stages[-1]], mine[stages[0]]
            point = {
                "n": n,
                "build_cpu_s": _float(first.get("cpu_seconds")),
                "rss": max(r["peak_rss_mb"] for r in mine.values()),
                "rss_query": last["peak_rss_mb"],
                "disk": _float(first.get("index_mb")),
                "query_ms": _float(last.get("query_ms")),
                "ndcg10": _float(last.get("ndcg10")),
                "recall100": _float(last.get("recall100")),
            }
            points.append(point)
            lines.append(
                f"| {engine} | {n:,} | {point['build_cpu_s']:,.1f} | {point['rss']:,.0f} | "
                f"{_cell(point['disk'], ',.0f', 'in memory')} | {point['query_ms']:,.2f} | {point['ndcg10']:.4f} | "
                f"{point['recall100']:.4f} |"
            )
        fitted[engine] = points
    for engine, points in fitted.items():
        if len({p["n"] for p in points}) < 2:
            continue
        n = [p["n"] for p in points]
        keys = ("build_cpu_s", "rss", "disk", "query_ms")
        at = {key: _at_target(n, [p[key] for p in points], target) for key in keys}
        bounded = batch_memory(rows, "pisa_index", target) if engine == "pisa" else None
        if bounded is not None:  # the build's batches bound it; the candidates stage reads an mmapped index
            at["rss"] = max(bounded[0], _at_target(n, [p["rss_query"] for p in points], target))
        lines.append(
            f"| **{engine}, extrapolated** | **{target:,}** | {_cell(at['build_cpu_s'], ',.0f')} | "
            f"{_cell(at['rss'], ',.0f')} | "
            f"{_cell(at['disk'], ',.0f', 'in memory')} | {_cell(at['query_ms'], ',.2f')} | | |"
        )
    return "\n".join(lines)


def _float(value) -> float:
    return float(value) if value not in ("", None) else float("nan")


def _at_target(sizes, values, target: int) -> float:
    """A least-squares line through the measured points, at ``target``; a negative slope (noise) keeps the largest."""
    if any(math.isnan(v) for v in values):
        return float("nan")
    a, b = fit_linear(sizes, values)
    return a + b * target if b > 0 else max(values)


def _cell(value: float, spec: str, missing: str = "") -> str:
    return missing if math.isnan(value) else format(value, spec)


def vocabulary_memory(rows: list[dict], stage: str) -> tuple[float, str] | None:
    """Peak RSS of a word-model stage at the vocabulary cap, fitted against the words it kept (``model_words``):
    measured if a size reached the cap, else the least-squares line a + b·words at the cap. None for other stages."""
    points = sorted(
        (r["model_words"], r["peak_rss_mb"]) for r in rows if r["stage"] == stage and r.get("model_words", "") != ""
    )
    if not points:
        return None
    at_cap = [mem for words, mem in points if words >= MAX_VOCABULARY]
    if at_cap:
        return max(at_cap), f"at the {MAX_VOCABULARY:,}-word cap (measured)"
    if len({w for w, _ in points}) < 2:
        return None
    a, b = fit_linear(*zip(*points))
    return a + b * MAX_VOCABULARY, f"{a:,.0f} MB + {b * 1e3:,.2f} MB per 1k vocabulary words (to the cap)"


def batch_memory(rows: list[dict], stage: str, target: int = TARGET_DOCS) -> tuple[float, str] | None:
    """Peak RSS of PISA's index build, which parses and inverts BATCH_DOCUMENTS documents at a time: fitted through
    the sizes of one full batch or more only (the line through smaller sizes is the growth of the one batch they
    fill), or the largest such peak when only one size fills a batch. None for other stages, or before a size fills
    a batch."""
    if stage != "pisa_index":
        return None
    from longrank.retrieval.pisa_index import BATCH_DOCUMENTS

    full = sorted((r["size"], r["peak_rss_mb"]) for r in rows if r["stage"] == stage and r["size"] >= BATCH_DOCUMENTS)
    if len({n for n, _ in full}) < 2:
        return (max(m for _, m in full), "one size fills a batch: its peak") if full else None
    a, b = fit_linear(*zip(*full))
    at = a + b * target if b > 0 else max(m for _, m in full)
    return at, f"{a:,.0f} MB + {b * 1e6:,.0f} MB per 1M docs, fitted at {BATCH_DOCUMENTS:,}+ documents (full batches)"


NOTES = [
    "Notes:",
    "",
    "- `train` and `rerank` do fixed work at every N (the training steps and one dev evaluation; the test queries' candidates) "
    "plus what the collection costs them: they read the vocabulary from the data stage's `word_doc_freq.tsv` (one line per "
    "word type of the collection; its filters keep memory at the words kept) and the documents they score by id. "
    "Their time at 3.2M is that setup plus this benchmark's few steps; a configured training run adds its own steps "
    "(steps / steps per second, on its own device and batch size).",
    "- `data` counts every word's document frequency (the one pass over the collection the word models need): its memory "
    "grows with the collection's word types, not its documents, which it streams.",
    "- The number of queries is fixed here. Costs in the number of queries (BM25 retrieval of every query, the candidate "
    "run that train and rerank read whole) are not varied; a config with `dataset.train_id` (TREC DL: MS MARCO's training "
    "queries) has hundreds of thousands.",
    "- Wall times come from a shared machine at nice 19 and vary between repeated runs by several seconds; peak RSS of "
    "the torch stages varies by some tens of MB. Differences of that size are noise, not growth.",
]


def _run_estimates(rows: list[dict], sizes) -> str:
    """What this benchmark would take at other sizes, from the same fits (generation included)."""
    out = [
        "Estimated cost of this benchmark at other sizes (same fits; CPU time, one thread):",
        "",
        "| N | generate (s) | stages (s) | total (min) | largest peak RSS (MB) |",
        "|---|---|---|---|---|",
    ]
    gen = sorted({(r["size"], r["generate_seconds"]) for r in rows if r.get("generate_seconds") is not None})
    gen_fit = fit_linear(*zip(*gen)) if len({n for n, _ in gen}) >= 2 else None
    fits = {}
    for stage in STAGES:
        points = sorted((r["size"], r["peak_rss_mb"], r["cpu_seconds"]) for r in rows if r["stage"] == stage)
        if len({p[0] for p in points}) >= 2:
            n, mem, sec = zip(*points)
            fits[stage] = (fit_linear(n, mem), fit_linear(n, sec), max(mem), max(sec))
    for n in sizes:
        generate = max(0.0, extrapolate(gen_fit, n)) if gen_fit else 0.0
        seconds = sum(extrapolate(t, n) if t[1] > 0 else top_s for _, t, _, top_s in fits.values())
        memory = max((extrapolate(m, n) if m[1] > 0 else top_m for m, _, top_m, _ in fits.values()), default=0.0)
        out.append(f"| {n:,} | {generate:,.0f} | {seconds:,.0f} | {(generate + seconds) / 60:,.1f} | {memory:,.0f} |")
    return "\n".join(out)


def _num(value) -> str:
    return f"{value:,.0f}" if isinstance(value, (int, float)) else f"`{value}`"


def _verdict(mem_mb: float, minutes: float, resources: dict) -> str:
    problems = []
    if isinstance(resources["mem_mb"], (int, float)) and mem_mb > resources["mem_mb"]:
        problems.append(f"memory {mem_mb / resources['mem_mb']:.1f}x the profile")
    if isinstance(resources["runtime"], (int, float)) and minutes > resources["runtime"]:
        problems.append(f"time {minutes / resources['runtime']:.1f}x the profile")
    if problems:
        return "**does not fit** (" + ", ".join(problems) + ")"
    return "fits"


def print_table(rows: list[dict], out=sys.stdout) -> None:
    header = f"{'size':>8} {'stage':<14} {'seconds':>9} {'peak_rss_mb':>12} {'cpu_s':>8} {'steps/s':>8} {'nDCG@10':>8} {'BM25':>7}"
    print(header, file=out)
    print("-" * len(header), file=out)
    for r in rows:
        sps = f"{r['steps_per_second']:.2f}" if r["steps_per_second"] != "" else ""
        ndcg = f"{r['ndcg10']:.4f}" if r["ndcg10"] != "" else ""
        bm25 = f"{r['bm25_ndcg10']:.4f}" if r.get("bm25_ndcg10", "") != "" else ""
        print(
            f"{r['size']:>8} {r['stage']:<14} {r['seconds']:>9.1f} {r['peak_rss_mb']:>12.1f} {r['cpu_seconds']:>8.1f} {sps:>8} {ndcg:>8} "
            f"{bm25:>7}",
            file=out,
        )


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 10000], help="collection sizes (documents)")
    parser.add_argument(
        "--out", default=str(REPO / "benchmarks" / "scaling"), help="folder for scaling.tsv / .png / extrapolation.md"
    )
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=30, help="KNRM training steps (one dev evaluation, at the end)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--threads",
        type=int,
        default=int(os.environ.get("OMP_NUM_THREADS", "1")),
        help="OMP_NUM_THREADS of the stages and the --cores of the workflow's dry run, which caps a rule's threads (train, "
        "rerank and pisa_index ask for 2); default: this shell's OMP_NUM_THREADS, else 1",
    )
    parser.add_argument("--profile", default=str(REPO / "profiles" / "slurm" / "config.yaml"))
    parser.add_argument("--target", type=int, default=TARGET_DOCS, help="extrapolate to this many documents")
    parser.add_argument("--work-dir", help="collections and stage outputs (default: a temporary directory)")
    parser.add_argument("--keep-work", action="store_true", help="keep the work directory")
    parser.add_argument("--from-tsv", help="run nothing: redo the plot, extrapolation and table from this scaling.tsv")
    parser.add_argument(
        "--stages",
        nargs="+",
        choices=STAGES,
        default=list(STAGES),
        help="the stages to run (train needs candidates; rerank train; evaluate rerank; pseudo_queries pisa_index; graphs "
        "annotate and pseudo_queries; every stage but data needs data)",
    )
    return parser.parse_args(argv)


def read_tsv(path: str | os.PathLike) -> list[dict]:
    """Rows as ``write_tsv`` wrote them (numbers back to numbers, empty cells to "")."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for record in csv.DictReader(f, delimiter="\t"):
            row = {}
            for key, value in record.items():
                if key == "stage" or value == "":
                    row[key] = value
                elif key in ("size", "words", "word_types", "model_words"):
                    row[key] = int(value)
                else:
                    row[key] = float(value)
            rows.append(row)
    return rows


def measure_sizes(args, out: Path) -> list[dict]:
    work_root = Path(args.work_dir) if args.work_dir else Path(tempfile.mkdtemp(prefix="longrank_scaling_"))
    work_root.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    try:
        for size in sorted(args.sizes):
            rows += run_size(size, args, work_root)
            write_tsv(out / "scaling.tsv", rows)  # after every size: a run stopped later keeps what it measured
    finally:
        if args.keep_work or args.work_dir:
            print(f"stage outputs and logs kept in {work_root}")
        else:
            shutil.rmtree(work_root, ignore_errors=True)
    return rows


def main(argv=None) -> list[dict]:
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.from_tsv:
        rows = read_tsv(args.from_tsv)
    else:
        rows = measure_sizes(args, out)
    plot(out / "scaling.png", rows)
    if len({r["size"] for r in rows}) >= 2:
        (out / "extrapolation.md").write_text(
            extrapolation_report(rows, Path(args.profile), args.target, args.steps, args.threads, args.queries),
            encoding="utf-8",
        )
    print_table(rows)
    return rows


if __name__ == "__main__":
    main()
