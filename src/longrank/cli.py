"""``python -m longrank <stage> ...``: the one entry point every Snakemake rule calls.

Each stage lives in its own module that exposes ``add_arguments(parser)`` and ``run(args)``; modules are
imported lazily so that ``longrank evaluate`` never pays for importing torch or transformers.

A stage is found by its name: stage ``X``'s module is ``longrank.X`` or ``longrank.<package>.X``, the package of its
kind (``interpolate`` -> ``longrank.interpolate``, ``pisa_index`` -> ``longrank.retrieval.pisa_index``, ``train`` ->
``longrank.train.train``), so ``src/longrank/**/X.py`` holds its ``run``; ``tests/test_stage_names.py`` checks every
entry of :data:`STAGES`. The Snakemake rule that runs it has the same name (a stage's other rules are
``<stage>_<what>``, as ``compare_floors`` and ``train_pretrain``), in ``workflow/rules/<stage>.smk`` or beside related
rules; the test checks every rule, and ``all`` alone runs no stage.

One alias, for the command users learnt first: ``longrank rerank --ranker DIR ...`` is ``longrank rerank_run
--ranker DIR ...`` (:data:`ALIASES`), with the same arguments, output and messages (which name the stage as typed).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import logging
import sys
import warnings
from collections.abc import Iterator

from longrank import invocation
from longrank.errors import InputError

STAGES = {
    "resolved_config": ("longrank.resolved_config", "write the resolved config beside the results"),
    "data": ("longrank.data.data", "load a collection, formulate queries, split them, write results/{dataset}/data"),
    "word2vec": (
        "longrank.data.word2vec",
        "word2vec on the collection (IN and OUT vectors concatenated) for `embeddings: word2vec`",
    ),
    "doc_field": (
        "longrank.data.doc_field",
        "one document field a model's doc_fields reads beyond the collection's text, as its own document store",
    ),
    "candidates": (
        "longrank.retrieval.candidates",
        "one first stage's candidates (bm25, pisa, the collection's scoreddocs, a run file, ...) as a TREC run",
    ),
    "sanity": (
        "longrank.retrieval.sanity",
        "untrained lexical reranker: candidates by distinct query terms matched (a sanity baseline)",
    ),
    "pseudo_queries": (
        "longrank.train.pseudo_queries",
        "training queries made from the documents (titles, ICT, formulated passages) for train.pretrain",
    ),
    "pisa_index": (
        "longrank.retrieval.pisa_index",
        "PISA's BM25 index of the collection, streamed from docs.jsonl, for a first stage of method pisa",
    ),
    "hdct": (
        "longrank.train.hdct",
        "HDCT: train the term-weight encoder on titles or pseudo-queries and index the collection (first stage method hdct)",
    ),
    "annotate": (
        "longrank.mir_graphs.annotate",
        "MIR: sentences and entities of every document with spaCy, once per collection",
    ),
    "graphs": (
        "longrank.mir_graphs.graphs",
        "MIR: passages, pivot tokens and the p2p / s2s / t2t graphs of every document, once per graph set",
    ),
    "train": ("longrank.train.train", "train one model on the training queries, early-stopping on dev nDCG@10"),
    "artifacts": (
        "longrank.artifacts",
        "what a model needs precomputed per document, per collection or per fold (MORES Reuse stores)",
    ),
    "rerank": ("longrank.rerank", "rerank the test queries' candidates with each fold's trained model"),
    "rerank_run": (
        "longrank.api.rerank_run",
        "rerank any TREC run with an exported model, outside the workflow (also `rerank --ranker DIR ...`)",
    ),
    "annotate_run": (
        "longrank.results.annotate_run",
        "a copy of a run with its ir_metadata record as a '# ir_metadata.start' comment header (repro_eval's form)",
    ),
    "interpolate": (
        "longrank.interpolate",
        "mix a reranked run with its first stage, the weight chosen on dev queries",
    ),
    "satisfiable": (
        "longrank.evaluate.satisfiable",
        "refuse a measure no judgment can satisfy, right after the data stage and before any training",
    ),
    "evaluate": ("longrank.evaluate.evaluate", "per-query measures of a run through ir-measures"),
    "history": (
        "longrank.history",
        "keep a model's results of its current setting (settings, runs, evaluations, weights) in its history",
    ),
    "compare": (
        "longrank.evaluate.compare",
        "significance tests, confidence intervals and non-inferiority across systems",
    ),
    "report": (
        "longrank.report.report",
        "HTML / Markdown / CSV / LaTeX report from everything under results/{dataset}",
    ),
    "paper_tables": (
        "longrank.report.paper_tables",
        "each paper's main table in its own layout from every run under results/: measured beside published, "
        "ER / ΔRI per cell (HTML, LaTeX, CSV)",
    ),
    "bench": (
        "longrank.bench.bench",
        "efficiency of a trained model: docs/ms and peak memory at given document lengths",
    ),
    "mir_speed": (
        "longrank.bench.mir_speed",
        "MIR Fig. 5: MIR and BERT-MaxP over the same windows, docs/ms and peak memory by length, and graph construction time",
    ),
    "attention_scaling": (
        "longrank.bench.attention_scaling",
        "peak memory and time of materialised, fused and separable attention by sequence length",
    ),
    "mores_speed": (
        "longrank.bench.mores_speed",
        "MORES Table 4: time to rank 1,000 candidates, BERT ranker vs MORES with no reuse / Reuse-S1 / Reuse-S2",
    ),
    "export": (
        "longrank.api.export",
        "one trained model as a self-contained directory (weights, vocabulary or encoder, config, "
        "model card) for longrank.load_ranker, rerank --ranker and PyTerrier",
    ),
}
# ``longrank rerank --ranker DIR ...`` runs stage rerank_run: an alias names the stage it stands for when one of its
# arguments is the flag (without --ranker, ``rerank`` is the workflow's stage, its arguments unchanged)
ALIASES = {"rerank": ("--ranker", "rerank_run")}


def stage_of(stage: str, argv: list[str]) -> str:
    """The stage that runs for ``longrank <stage> <argv>``: ``stage`` itself, or the one an alias stands for."""
    alias = ALIASES.get(stage)
    if alias is not None:
        flag, target = alias
        if any(a == flag or a.startswith(flag + "=") for a in argv):
            return target
    return stage


def stage_module(stage: str) -> str:
    """The module of ``stage``: ``longrank[.<package>].<stage>``."""
    return STAGES[stage][0]


def one_line(message, category, filename, lineno, line=None) -> str:
    """A warning as a person reads it on the console: its kind and message, not the source line that raised it."""
    return f"{category.__name__}: {message}\n"


@contextlib.contextmanager
def one_line_warnings() -> Iterator[None]:
    """Warnings printed as ``one_line`` while a stage runs (and Python's format again after: main can be called in a
    process that goes on, a test or a notebook)."""
    before = warnings.formatwarning
    warnings.formatwarning = one_line
    try:
        yield
    finally:
        warnings.formatwarning = before


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="longrank", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="stage", required=True, metavar="STAGE")
    argv = sys.argv[1:] if argv is None else argv
    wanted = argv[0] if argv and argv[0] in STAGES else None
    for name, (_module_name, help_text) in STAGES.items():
        stage_parser = sub.add_parser(name, help=help_text)
        if name == wanted:  # only import the module of the stage that runs
            importlib.import_module(stage_module(stage_of(name, argv[1:]))).add_arguments(stage_parser)
    args, _ = parser.parse_known_args(argv) if wanted is None else (parser.parse_args(argv), None)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        module = importlib.import_module(stage_module(stage_of(args.stage, argv[1:])))
        if hasattr(module, "fresh_preload"):  # it measures in fresh processes: forked now, before it computes
            from longrank.bench import fresh

            fresh.start_here(module.__name__, module.fresh_preload(args))
        invocation.argv = list(argv)
        try:
            with one_line_warnings():
                module.run(args)
        finally:  # a later stage called in the same process without main() is no longer this command
            invocation.argv = None
    except InputError as err:
        print(f"longrank {args.stage}: error: {err}", file=sys.stderr)
        sys.exit(2)
    except OSError as err:
        if err.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        # a full disk is the machine's state, not a bug: say so in one line (every output is written under a
        # temporary name and renamed, so nothing already written was touched)
        # a write() names no file: then the stage's output (every write through io.atomic_path names its own)
        target = err.filename or getattr(args, "out", None) or getattr(args, "out_dir", None)
        where = f" writing {target}" if target else ""
        print(
            f"longrank {args.stage}: error: no space left on the device{where} ({err.strerror}); free some space "
            "and run again: the earlier outputs are as they were",
            file=sys.stderr,
        )
        sys.exit(2)
