"""``longrank export``: one trained model of a results tree as a self-contained directory, which
``longrank.load_ranker`` (:mod:`longrank.api`), ``longrank rerank --ranker`` and ``longrank.api.pyterrier.Reranker``
read without the ``results/`` tree or ``config/``:

- ``model.safetensors`` and ``model.manifest.json``: the fold's weights, as the train stage wrote them (checked);
- ``train_summary.json``: what trained them (steps, best dev nDCG@10, seed, the recipe), where the train stage wrote one;
- ``ranker.json``: the format, the model's name, type and class, its resolved config entry, where it came from,
  the LongRank version and commit, and what of the collection it reads (below);
- word models (KNRM, TK, TKL, NDRM): ``vocabulary.tsv``, the words the model indexes and their document
  frequencies exactly as it reads them (after ``min_doc_freq`` / ``max_vocabulary``, with the collection's query
  words); with ``num_docs`` (in ``ranker.json``) these give the IDF query-term weights (``query_term_weights: idf``)
  and NDRM2/3's IDF, the only collection statistics the models read;
- encoder models (BERT ranker, MORES, bi-encoder): ``encoder/``, the fine-tuned encoder and its tokenizer in
  Hugging Face's ``save_pretrained`` layout (``AutoModel.from_pretrained(DIR / "encoder")`` opens it; MORES: its
  document module, all layers);
- ``README.md``: a model card (training data, steps, dev / test nDCG@10, version).

Scoring needs only (query, document) texts. A MORES Reuse-S1/S2 store and NDRM's impact index are caches of
what the weights compute from the text (the exported model computes it: the same scores, NDRM's to float
rounding), so they are not exported; fullrank with NDRM's impact index stays the workflow's. MIR is refused:
it reads graphs built from the whole collection (annotate and graphs stages), which a ranker directory does not hold.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
from pathlib import Path

from longrank.api.export_card import card
from longrank.errors import InputError
from longrank.io.atomic import names_full_disk, replace_directory, umask_mode, write_text
from longrank.io.json_yaml import read_json, write_json
from longrank.config.train_settings import seeds_of
from longrank.plan.seeds import job_entry, seed_model

FORMAT = "longrank-ranker/1"
RANKER_FILE = "ranker.json"
WEIGHTS = "model.safetensors"
VOCABULARY = "vocabulary.tsv"
#: a word model's pre-trained words beyond its training vocabulary (one a line) and their vectors (safetensors)
PRETRAINED_WORDS = "pretrained_words.txt"
PRETRAINED_VECTORS = "pretrained_vectors.safetensors"
PRETRAINED_DTYPE = "float16"
ENCODER_DIR = "encoder"
#: why an export cannot carry a model that reads a graph set (its class declares ``reads_graph_set``)
GRAPH_SET_READERS = (
    "MIR reads graphs built from the whole collection (passages, pivot tokens and p2p / s2s / t2t edges per "
    "document: the annotate and graphs stages); a ranker directory scores (query, document) texts alone, so "
    "MIR is out of scope for export: rerank with it inside the workflow"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--results", required=True, help="results/{dataset}: the workflow's results of one collection")
    parser.add_argument("--model", required=True, help="the model's name in the config (models.<name>)")
    parser.add_argument("--fold", type=int, default=0, help="which fold's weights (default: 0)")
    parser.add_argument(
        "--seed",
        type=int,
        default=None,
        help="a model with train.seeds: which seed's weights (default: the seed with the best dev nDCG@10 on --fold)",
    )
    parser.add_argument("--out", required=True, help="the directory to write (replaced whole if it exists)")
    parser.add_argument(
        "--collection-words-only",
        action="store_true",
        help="a word model: export only the training collection's words, not the rest of its pre-trained embedding "
        "(smaller; every other word of new text is then unknown to it)",
    )


def run(args) -> None:
    out = export(Path(args.results), args.model, args.fold, Path(args.out), not args.collection_words_only, args.seed)
    print(f"exported {args.model} fold {args.fold} to {out}")


def longrank_version() -> str:
    """The installed package's version (``pip install -e .`` included)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("longrank")
    except PackageNotFoundError:
        return "unknown"


def longrank_commit() -> str:
    """The commit of the LongRank checkout this code runs from (``<sha>-dirty`` when its tree has changes),
    ``unknown`` outside a git checkout (an installed wheel)."""
    here = Path(__file__).resolve().parent
    try:
        top = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"], cwd=here, capture_output=True, text=True, timeout=30
        )
        if top.returncode != 0 or not (Path(top.stdout.strip()) / "src" / "longrank").is_dir():
            return "unknown"
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=30
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=here,
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (sha + ("-dirty" if dirty else "")) if sha else "unknown"


def model_entry(results: Path, model: str) -> tuple[dict, dict]:
    """(the resolved config, the model's entry) from ``results/config.json`` (the workflow's resolved_config rule)."""
    path = results / "config.json"
    if not path.is_file():
        raise InputError(
            f"{path} not found: --results must be a results/<dataset> directory of a workflow run (its "
            "resolved config, config.json, is written by the report's resolved_config rule)"
        )
    config = read_json(path)
    models = config.get("models") or {}
    if model not in models:
        raise InputError(f"{path}: no model {model!r}; the config has {sorted(models)}")
    return config, models[model]


def resolved_depth(config: dict, model: str) -> int:
    """The model's rerank depth as the workflow resolved it (config.json's ``resolved_models``, written by stage
    ``resolved_config`` from :func:`longrank.config.model_entries.effective_settings`)."""
    try:
        return int(config["resolved_models"][model]["effective"]["rerank_depth"])
    except (KeyError, TypeError):
        raise InputError(
            f"config.json has no resolved rerank depth of {model!r} (resolved_models.{model}.effective): it was not "
            "written by this LongRank's resolved_config rule; rerun the workflow to write it"
        ) from None


def _test_ndcg(results: Path, model: str, test_qids: list[str]) -> dict[str, float]:
    """Mean nDCG@10 over the fold's test queries of each evaluated system of this model (eval/<model>*.tsv)."""
    from longrank.tables import read_table

    out = {}
    for path in sorted((results / "eval").glob(f"{model}*.tsv")):
        system = path.stem
        if system != model and not system.startswith(model + "+"):
            continue
        frame = read_table(path, sep="\t").set_index("query_id")
        if "nDCG@10" in frame:
            kept = frame.loc[frame.index.intersection(test_qids), "nDCG@10"]
            if len(kept):
                out[system] = float(kept.mean())
    return out


def export(
    results: Path, model: str, fold_index: int, out: Path, pretrained_words: bool = True, seed: int | None = None
) -> Path:
    from longrank.data.corpus import Corpus
    from longrank.models.checkpoint import load_model, verify_weights
    from longrank.config.model_types import architecture_params
    from longrank.models.registry import entry_class

    config, entry = model_entry(results, model)
    _check_exportable(model, entry)
    entry, trained_as, seed = trained_seed(results, model, entry, fold_index, seed)
    weights_of = entry.get("checkpoint_of") or trained_as
    checkpoint = results / "models" / weights_of / f"fold{fold_index}" / WEIGHTS
    corpus = Corpus(results / "data")
    if not (corpus.dir / "folds.json").is_file():
        raise InputError(f"{corpus.dir / 'folds.json'} not found: --results must hold the data stage's output (data/)")
    if not 0 <= fold_index < len(corpus.folds):
        raise InputError(f"--fold {fold_index}: the data has {len(corpus.folds)} folds (0..{len(corpus.folds) - 1})")
    verify_weights(checkpoint, require_manifest=True)
    ranker = load_model(checkpoint, entry, corpus, require_manifest=True)
    summary_path = checkpoint.parent / "train_summary.json"
    summary = read_json(summary_path) if summary_path.is_file() else None
    meta = _ranker_meta(model, entry, config, corpus, fold_index, weights_of)
    meta["source"]["seed"] = seed
    out = out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        with names_full_disk(out, tmp):  # a full disk names the output, not the staging name
            shutil.copyfile(checkpoint, tmp / WEIGHTS)
            shutil.copyfile(checkpoint.with_name("model.manifest.json"), tmp / "model.manifest.json")
            if summary is not None:  # what trained the weights: a run reranked with the export records it
                write_json(tmp / "train_summary.json", summary)
            meta.update(_write_text_side(tmp, model, entry, ranker, corpus if pretrained_words else None))
            meta["interpolation"] = _interpolations(results, trained_as, fold_index)
            meta["notes"] += entry_class(entry).export_notes(architecture_params(entry))
            write_json(tmp / RANKER_FILE, meta)
            folds = corpus.folds[fold_index]
            evaluated_as = model if seed is None else seed_model(model, seed)  # eval/<model>.tsv: the seeds' mean
            test_ndcg = _test_ndcg(results, evaluated_as, folds.get("test", []))
            write_text(tmp / "README.md", card(meta, summary, test_ndcg, folds))
            for path in [tmp, *tmp.rglob("*")]:
                path.chmod(umask_mode(0o777 if path.is_dir() else 0o666))
            replace_directory(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def trained_seed(results: Path, model: str, entry: dict, fold: int, seed: int | None) -> tuple[dict, str, int | None]:
    """(the entry as the chosen seed's jobs read it, the model its weights and runs are under, the seed; None for an
    entry with one seed): ``seed`` if given, else the seed whose training on ``fold`` scored best on its dev queries."""
    seeds = seeds_of(entry)
    if len(seeds) == 1:
        if seed is not None and seed != seeds[0]:
            raise InputError(f"--seed {seed}: {model} trained seed {seeds[0]} alone")
        return entry, model, None
    names = {s: model if s == seeds[0] else seed_model(model, s) for s in seeds}
    if seed is None:
        dev = {s: read_json(results / "models" / name / f"fold{fold}" / "train_summary.json")["best_dev_ndcg10"]
               for s, name in names.items()}  # fmt: skip
        seed = max(seeds, key=lambda s: dev[s])  # the first of equal ones
    elif seed not in names:
        raise InputError(f"--seed {seed}: {model} trained the seeds {seeds} (its train.seeds)")
    return job_entry(entry, seed), names[seed], seed


def _check_exportable(model: str, entry: dict) -> None:
    """An export scores (query, document) texts alone: no graph set, no collection artifacts."""
    from longrank.config.model_types import artifact_scopes, capabilities
    from longrank.config.user_models import kind_of

    kind = kind_of(entry)
    if capabilities(entry).reads_graph_set:
        raise InputError(f"models.{model}: type {kind!r} cannot be exported: {GRAPH_SET_READERS}")
    if "collection" in artifact_scopes(entry):
        raise InputError(
            f"models.{model}: a {kind!r} model configured so reads collection artifacts built from the whole "
            "collection; an export scores (query, document) texts alone"
        )


def _ranker_meta(model: str, entry: dict, config: dict, corpus, fold_index: int, weights_of: str) -> dict:
    """``ranker.json`` without its text side (vocabulary or encoder) and the model's notes."""
    from longrank.config.user_models import is_user, kind_of
    from longrank.models.registry import entry_class

    cls = entry_class(entry)
    dataset = config.get("dataset") or {}
    return {
        "format": FORMAT,
        "name": model,
        "type": kind_of(entry),
        # a user's class by the spec its entry gives (the export holds no code: loading it needs trust_code)
        "class": entry["class"] if is_user(entry) else f"{cls.__module__}:{cls.__qualname__}",
        "config": entry,
        "longrank_version": longrank_version(),
        "longrank_commit": longrank_commit(),
        "source": {
            "dataset": dataset.get("name") if isinstance(dataset, dict) else str(dataset),
            "dataset_id": dataset.get("id") if isinstance(dataset, dict) else None,
            "fold": fold_index,
            "weights_of": weights_of,
            "num_docs": corpus.stats.get("num_docs"),
            "first_stage": entry.get("first_stage"),
        },
        "rerank_depth": resolved_depth(config, model),
        "notes": [],
    }


def _interpolations(results: Path, model: str, fold_index: int) -> dict:
    """First stage -> the weight the interpolate stage chose on this fold's dev queries
    (``runs/{model}+{first_stage}.interpolation.json``): what the card's ``{model}+{first_stage}`` figure used."""
    from longrank.results.stage_outputs import Interpolation

    out = {}
    for path in sorted((results / "runs").glob(f"{model}+*.interpolation.json")):
        first_stage = path.name.removeprefix(f"{model}+").removesuffix(".interpolation.json")
        record = Interpolation.from_json(read_json(path), path.name)
        fold = next((f for f in record.folds if f.fold == fold_index), None)
        if fold is not None:
            out[first_stage] = {
                "weight": fold.weight,
                "chosen_on": f"fold {fold_index}'s dev queries (nDCG@10)",
                "dev_ndcg10_by_weight": fold.dev_ndcg10_by_weight,
                "formula": "weight * minmax(model) + (1 - weight) * minmax(first stage), per query over the "
                "reranked documents; the rest keep the first stage's order below",
            }
    return out


def _write_text_side(tmp: Path, model: str, entry: dict, ranker, corpus=None) -> dict:
    """Write what turns text into the model's inputs into ``tmp`` and return its ``ranker.json`` entry: a word
    model's vocabulary as it reads it (and the count its IDF divides by) and, given the training ``corpus``, the
    rest of its pre-trained embedding (``_pretrained_words``), or an encoder model's encoder and tokenizer."""
    embedder = getattr(ranker, "embedder", None)
    if embedder is not None:
        vocab = embedder.vocab
        write_text(
            tmp / VOCABULARY,
            "word\tdoc_freq\n" + "".join(f"{w}\t{df}\n" for w, df in zip(vocab.words[2:], vocab.doc_freq[2:])),
        )
        entry_out = {
            "file": VOCABULARY,
            "words": len(vocab) - 2,
            "num_docs": vocab.num_docs,
            "embedding_dim": embedder.dim,
            "idf": "log((num_docs - doc_freq + 0.5) / (doc_freq + 0.5) + 1) of vocabulary.tsv",
        }
        if corpus is not None:
            entry_out.update(_write_pretrained(tmp, model, entry, embedder, corpus))
        return {"vocabulary": entry_out}
    encoder = getattr(ranker, "document_module", None) or getattr(ranker, "encoder", None)
    if encoder is None or not hasattr(encoder, "save_pretrained"):
        raise InputError(
            f"models.{model}: a {type(ranker).__name__} has neither a word vocabulary nor a Hugging Face encoder to export"
        )
    encoder.save_pretrained(tmp / ENCODER_DIR)
    ranker.tokenizer.save_pretrained(tmp / ENCODER_DIR)
    from longrank.config.model_types import DEFAULT_ENCODER

    return {"encoder": {"dir": ENCODER_DIR, "trained_from": entry.get("encoder", DEFAULT_ENCODER)}}


def _write_pretrained(tmp: Path, model: str, entry: dict, embedder, corpus) -> dict:
    """The pre-trained embedding's words beyond the training vocabulary (``pretrained_words.txt``) and their vectors
    (``pretrained_vectors.safetensors``, float16), so that new text's words have their vectors: in the pre-trained
    table's order, only words the model's tokenisation can produce (``tokenize(w) == [w]``: no punctuation tokens),
    and none the training collection had: a word its filters cut (``min_doc_freq``, ``max_vocabulary``) stays
    unknown, as it was at training. The trained rows stay in ``model.safetensors`` and win. Returns the
    ``ranker.json`` keys (under ``vocabulary``), or a note of why there are none."""
    import inspect

    import numpy as np
    from safetensors.numpy import save_file

    from longrank.data.words import _glove_table, tokenize
    from longrank.io.text_files import numbered_lines
    from longrank.models.modules.word_embedder import WORD2VEC, WordEmbedder

    source = entry.get("embeddings", inspect.signature(WordEmbedder.__init__).parameters["embeddings"].default)
    if source == WORD2VEC or embedder.vocab.analyze is not None:
        why = "its initial vectors are the collection's own word2vec" if source == WORD2VEC else "its terms are stems"
        return {"pretrained_note": f"no pre-trained words beyond the training collection's: {why}"}
    try:
        index, vectors = _glove_table(None if source == "glove-6b-50d" else source)
    except FileNotFoundError:
        raise InputError(
            f"models.{model}: embeddings: {source!r} not found; the export carries the pre-trained vectors of every "
            "word the collection lacks: run it where that file is, or pass --collection-words-only"
        ) from None
    if vectors.shape[1] != embedder.dim:
        raise InputError(
            f"models.{model}: embeddings: {source!r} has {vectors.shape[1]} dimensions, the trained model {embedder.dim}"
        )
    collection = set(embedder.vocab.index)
    for lineno, line in numbered_lines(corpus.dir / "word_doc_freq.tsv"):
        if lineno > 1:
            collection.add(line.partition("\t")[0])
    words = [w for w, _ in sorted(index.items(), key=lambda kv: kv[1]) if w not in collection and tokenize(w) == [w]]
    rows = np.ascontiguousarray(np.asarray(vectors)[[index[w] for w in words]], dtype=np.float16)
    write_text(tmp / PRETRAINED_WORDS, "".join(w + "\n" for w in words))
    save_file({"vectors": rows}, str(tmp / PRETRAINED_VECTORS))
    return {
        "pretrained_words": PRETRAINED_WORDS,
        "pretrained_vectors": PRETRAINED_VECTORS,
        "pretrained_count": len(words),
        "pretrained_dtype": PRETRAINED_DTYPE,
        "pretrained_source": source,
        "pretrained_doc_freq": 0,
    }
