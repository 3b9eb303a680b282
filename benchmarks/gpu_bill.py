"""The GPU bill of the full-scale recipe: per model of ``config/trec-dl-2019.yaml`` (resolved as the
workflow resolves it), seconds per training step at the recipe's batch, seconds per 1,000 reranked candidates at the
rerank stage's batch and precision, peak GPU memory of each, and the hours on one GPU that the recipe takes.

    python benchmarks/gpu_bill.py --device cuda --out bill.json            # the papers' dimensions
    python benchmarks/gpu_bill.py --device cpu --tiny --out /tmp/bill.json  # a smoke run at tiny dimensions

What is replaced, and only that (as tests/test_full_scale.py does): ``bert-base-uncased`` by ``random-bert-base``
(BERT-base's shape, random weights); GloVe 300d by random 300d vectors, and the embedding matrix then resized to
``--vocabulary`` rows (the config caps MS MARCO's vocabulary at 1M words; the matrix and its Adam state are what a
real vocabulary costs); NDRM on ``text_processing: words`` (the same time as ``ck``; the Krovetz stemmer need not
be installed); MIR's graph set built from synthetic documents by the graphs stage's own functions (spaCy here, or
``--mir-records`` prepared elsewhere). Speed and memory do not depend on the weights.

Every document is longer than every model's budget (5,000 words), so each model reads its full length: the bill is
an upper bound for MS MARCO, whose documents are shorter on average. The training step is the trainer's (the
model's loss over [positive, negatives] groups, backward, clipping, AdamW; ``train.precision`` under autocast with
a gradient scaler for fp16); tokenisation is excluded (the trainer prepares batches in DataLoader workers), as is
NDRM's extra pairs between negatives (a few more terms of the loss).

Hours of one year's run (``--test-queries``: 43 for 2019, 45 for 2020): ``steps`` training steps (patience may stop
earlier: an upper bound), a dev evaluation every ``eval_every`` steps over 100 dev queries x the rerank depth, and
the test queries x the depth. Models are measured largest first, and the JSON is rewritten after each one, so a run
stopped by a time limit keeps what it finished.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import pickle
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
ORDER = [  # largest first: a run cut short still has the models that dominate the bill
    "mir",
    "bert_maxp128",
    "bert_maxp",
    "mores",
    "mores_1ib",
    "bert_firstp",
    "tkl_4k",
    "ndrm1",
    "ndrm3",
    "tkl",
    "tk",
    "knrm",
    "ndrm2",
]
DEV_QUERIES = 100  # config/trec-dl.yaml: 100 of MS MARCO's dev queries choose the stopping point
TEST_QUERIES = {"trec-dl-2019": 43, "trec-dl-2020": 45}
DOC_WORDS = 5000  # past every model's budget (TKL-4k and NDRM read 4,000 terms, MIR 2,048 WordPieces)
QUERY_WORDS = 8
WORD_TYPES = ("knrm", "tk", "tkl", "ndrm")


def resolved_entries(config: str) -> tuple[dict, dict]:
    """The enabled model entries of ``config`` and its top-level rerank settings, as the workflow resolves them."""
    from longrank.validation.validate import validate_config
    from longrank.config.files import configfiles, merged
    from longrank.config.model_entries import is_enabled

    config = validate_config(merged(configfiles(config)))  # every default filled in
    models = {n: e for n, e in config["models"].items() if is_enabled(e)}
    return models, {"rerank_depth": config["rerank_depth"], "rerank": config["rerank"]}


def synthetic_collection(directory: Path, n_docs: int = 8, seed: int = 0):
    """A corpus directory of ``n_docs`` documents of DOC_WORDS words (sentences of 20 words over a vocabulary of
    3,000 made-up words) and the files the data stage writes beside them; returns the Corpus."""
    from longrank.data.corpus import Corpus
    from longrank.data.words import count_doc_freq, write_doc_freq

    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocab = sorted({"".join(rng.choice(letters) for _ in range(rng.randint(4, 9))) for _ in range(3000)})
    sentence = lambda: " ".join(rng.choice(vocab) for _ in range(20)) + "."  # noqa: E731
    docs = {f"d{i}": " ".join(sentence() for _ in range(DOC_WORDS // 20)) for i in range(n_docs)}
    queries = {f"q{i}": " ".join(rng.choice(vocab) for _ in range(QUERY_WORDS)) for i in range(4)}
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "docs.jsonl", "w") as f:
        f.writelines(json.dumps({"doc_id": d, "text": t}) + "\n" for d, t in docs.items())
    (directory / "queries.tsv").write_text("query_id\ttext\n" + "".join(f"{q}\t{t}\n" for q, t in queries.items()))
    (directory / "qrels.txt").write_text("".join(f"{q} 0 d{i} 1\n" for i, q in enumerate(queries)))
    folds = [{"train": ["q0", "q1"], "dev": ["q2"], "test": ["q3"]}]
    (directory / "folds.json").write_text(json.dumps(folds))
    (directory / "doc_lengths.tsv").write_text(
        "doc_id\twords\n" + "".join(f"{d}\t{len(t.split())}\n" for d, t in docs.items())
    )
    df = count_doc_freq(docs.values())
    write_doc_freq(directory / "word_doc_freq.tsv", df)
    write_doc_freq(directory / "word2vec_doc_freq.tsv", df)
    (directory / "word2vec.json").write_text(json.dumps({"processing": "words"}))
    (directory / "stats.json").write_text(json.dumps({"num_docs": len(docs)}))
    words = sorted(w for w in df if "\0" not in w)
    write_vectors(directory / "glove.300d.txt", words, 300, 0)
    write_vectors(directory / "word2vec.txt", words, 256, 1)
    return Corpus(directory)


def write_vectors(path: Path, words: list[str], dim: int, seed: int) -> None:
    vectors = np.random.default_rng(seed).normal(0, 0.3, size=(len(words), dim))
    lines = [f"{len(words)} {dim}\n"] + [
        w + " " + " ".join(f"{v:.4f}" for v in r) + "\n" for w, r in zip(words, vectors)
    ]
    path.write_text("".join(lines))


def runnable_entry(entry: dict, data: Path) -> dict:
    """The entry with what cannot run here replaced (module docstring)."""
    from longrank.models.modules.encoders import RANDOM_BERT_BASE

    entry = json.loads(json.dumps(entry))
    if entry.get("encoder") == "bert-base-uncased":
        entry["encoder"] = RANDOM_BERT_BASE
    if entry["type"] in WORD_TYPES and str(entry.get("embeddings", "")).endswith(".txt"):
        entry["embeddings"] = str(data / "glove.300d.txt")
    if entry["type"] == "ndrm":
        entry.update(text_processing="words", min_doc_freq=1)
    return entry


def mir_records(model, corpus, entry_settings: dict, path: Path | None) -> dict:
    """MIR's graph set of the synthetic documents: read from ``path`` (prepared by --write-mir-records), or built
    with the graphs stage's functions (spaCy)."""
    if path is not None and path.exists():
        return pickle.loads(path.read_bytes())
    from longrank.mir_graphs import annotate, graphs

    settings = graphs.graph_settings(entry_settings)
    texts = dict(corpus.docs.items())
    cut = {d: annotate.cut_text(t, settings.max_doc_tokens) for d, t in texts.items()}
    annotations = annotate.annotate_texts(cut, annotate.settings({}))
    vectorizer = graphs.fit_tfidf(cut.values())
    tok = model.tokenizer
    records = {d: graphs.build_record(cut[d], annotations[d], [], tok, settings, vectorizer) for d in texts}
    full = {
        **settings.to_json(),
        "cls_id": tok.cls_token_id,
        "sep_id": tok.sep_token_id,
        "pad_id": tok.pad_token_id,
        "vocab_size": tok.vocab_size,
    }
    result = {"records": records, "settings": full}
    if path is not None:
        path.write_bytes(pickle.dumps(result))
    return result


def resize_vocabulary(model, rows: int) -> int:
    """Replace the word embedding by one of ``rows`` rows (random; the same trainability): what a real vocabulary
    costs in memory and in the optimiser's dense update. Returns the rows it had."""
    embedder = getattr(model, "embedder", None)
    old = getattr(embedder, "embedding", None)
    if not isinstance(old, torch.nn.Embedding) or rows <= old.num_embeddings:
        return old.num_embeddings if isinstance(old, torch.nn.Embedding) else 0
    new = torch.nn.Embedding(rows, old.embedding_dim, padding_idx=old.padding_idx)
    new.weight.requires_grad_(old.weight.requires_grad)
    embedder.embedding = new
    return old.num_embeddings


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn, device, warmup: int, repeats: int) -> dict:
    for _ in range(warmup):
        fn()
    sync(device)
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync(device)
        seconds.append(time.perf_counter() - start)
    return {"median_s": statistics.median(seconds), "min_s": min(seconds), "max_s": max(seconds), "seconds": seconds}


def peak_mb(device) -> float | None:
    return torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else None


def reset_peak(device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def bill_model(name: str, entry: dict, top: dict, corpus, data: Path, args, device) -> dict:
    from longrank.config.model_entries import rerank_depth
    from longrank.models.registry import build_model
    from longrank.config.train_settings import TrainSettings

    entry = runnable_entry(entry, data)
    settings = TrainSettings.from_entry(name, entry)
    if args.tiny:
        settings = dataclasses.replace(settings, batch_size=min(settings.batch_size, 2))
    torch.manual_seed(0)
    model = build_model(entry, corpus)
    if entry["type"] == "mir":
        from longrank.models.modules.encoders import RANDOM_BERT_BASE

        graph_cfg = top["mir_graphs"][entry.get("graph_set", "mir")]
        # as the graph stage is passed it: no PRF set, no shard count (job_inputs.graph_set_settings)
        kept = {k: v for k, v in graph_cfg.items() if k not in ("prf_queries", "shards")}
        graph_cfg = {**kept, "encoder": RANDOM_BERT_BASE}
        graphs = mir_records(model, corpus, graph_cfg, args.mir_records)
        model.use_graphs(graphs["records"], graphs["settings"])
    rows_before = resize_vocabulary(model, args.vocabulary if entry["type"] != "ndrm" else args.ndrm_vocabulary)
    model = model.to(device)
    depth = rerank_depth(entry, top["rerank_depth"])
    row = {
        "model": name,
        "type": entry["type"],
        "parameters": sum(p.numel() for p in model.parameters()),
        "steps": settings.steps,
        "batch_size": settings.batch_size,
        "negatives": settings.negatives,
        "eval_every": settings.eval_every,
        "train_precision": settings.precision,
        "rerank_depth": depth,
        "vocabulary_rows": getattr(
            getattr(getattr(model, "embedder", None), "embedding", None), "num_embeddings", None
        ),
        "vocabulary_rows_built": rows_before or None,
    }
    doc_ids = sorted(corpus.docs)
    queries = [corpus.queries[q] for q in sorted(corpus.queries)]
    # --- training step at the recipe's batch: batch_size groups of 1 positive + negatives -------------------------
    if settings.steps:
        row.update(train_timing(model, name, entry, settings, corpus, doc_ids, queries, args, device))
        model.zero_grad(set_to_none=True)
    return rerank_timing(model, row, entry, top, corpus, doc_ids, queries, args, device)


def train_timing(model, name, entry, settings, corpus, doc_ids, queries, args, device) -> dict:
    """Seconds per step at the recipe's batch and the peak memory. The recipe's micro-batch (``train.accumulation``
    parts of the batch) is timed, or when it does not fit the largest half, quarter, ... of it that does, and the
    step's time scaled to the whole batch (what gradient accumulation over those micro-batches takes)."""
    full, out = settings.batch_size, {}
    micro = full // settings.accumulation
    while micro >= 1:
        try:
            timing, peak = train_step_timing(
                model, name, entry, settings, micro, corpus, doc_ids, queries, args, device
            )
        except torch.OutOfMemoryError as err:
            out.setdefault(
                "train_error", f"out of memory at batch {micro} x {1 + settings.negatives}: {str(err).splitlines()[0]}"
            )
            model.zero_grad(set_to_none=True)
            reset_peak(device)
            micro //= 2
            continue
        if micro != full:
            out["train_micro_batch"] = micro
            timing = {**timing, "median_s": timing["median_s"] * full / micro, "measured_median_s": timing["median_s"]}
        out["train_step"], out["train_peak_mb"] = timing, peak
        return out
    out["train_step"] = None
    return out


def train_step_timing(model, name, entry, settings, batch_size, corpus, doc_ids, queries, args, device):
    from longrank.models.registry import model_class
    from longrank.precision import autocast
    from longrank.train.losses import get_loss
    from longrank.train.optimiser import parameter_groups

    settings = dataclasses.replace(settings, batch_size=batch_size)
    group = 1 + settings.negatives
    n = settings.batch_size * group
    ids = [doc_ids[i % len(doc_ids)] for i in range(n)]
    batch_queries = [queries[(i // group) % len(queries)] for i in range(n)]
    batch = model.encode(batch_queries, ids, [corpus.docs[d] for d in ids])
    loss_fn = get_loss(settings.loss or model_class(entry["type"]).default_loss)
    optimizer = torch.optim.AdamW(
        parameter_groups(model, settings, name), lr=settings.lr, weight_decay=settings.weight_decay
    )
    use_precision = settings.precision if device.type == "cuda" else "fp32"
    scaler = torch.amp.GradScaler(device.type, enabled=use_precision == "fp16")
    params = [p for g in optimizer.param_groups for p in g["params"]]
    model.train()

    def step():
        inputs = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
        with autocast(device, use_precision):
            scores = model(**inputs).view(settings.batch_size, group)
            loss = loss_fn(scores.float())
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(params, settings.grad_clip)
        scaler.step(optimizer)
        scaler.update()

    reset_peak(device)
    return timed(step, device, args.warmup, args.repeats), peak_mb(device)


def rerank_timing(model, row, entry, top, corpus, doc_ids, queries, args, device) -> dict:
    from longrank.precision import autocast

    rerank_batch = args.rerank_batch or top["rerank"].get("batch_size", 128)
    precision = top["rerank"].get("precision", "fp32") if device.type == "cuda" else "fp32"
    ids = [doc_ids[i % len(doc_ids)] for i in range(rerank_batch)]
    batch = model.encode([queries[0]] * rerank_batch, ids, [corpus.docs[d] for d in ids])
    model.eval()

    def rerank():
        with torch.no_grad(), autocast(device, precision):
            model(**{k: v.to(device, non_blocking=True) for k, v in batch.items()})

    reset_peak(device)
    try:
        t = timed(rerank, device, args.warmup, args.repeats)
        row["rerank_batch"], row["rerank_precision"] = rerank_batch, precision
        row["rerank_per_1000_s"] = t["median_s"] * 1000 / rerank_batch
        row["rerank_timing"] = t
        row["rerank_peak_mb"] = peak_mb(device)
    except torch.OutOfMemoryError as err:
        row["rerank_error"] = f"out of memory at batch {rerank_batch}: {str(err).splitlines()[0]}"
    return with_hours(row, args.test_queries)


def with_hours(row: dict, test_queries: int) -> dict:
    """One year's run on one GPU: training steps, dev evaluations, the test queries (module docstring)."""
    per_cand = row.get("rerank_per_1000_s")
    if per_cand is None:
        return row
    per_cand /= 1000
    step = (row.get("train_step") or {}).get("median_s")
    evals = math.ceil(row["steps"] / row["eval_every"]) if row["steps"] else 0
    train_h = row["steps"] * step / 3600 if step is not None else None
    dev_h = evals * DEV_QUERIES * row["rerank_depth"] * per_cand / 3600
    test_h = test_queries * row["rerank_depth"] * per_cand / 3600
    row["hours"] = {
        "train": train_h,
        "dev_evaluations": evals,
        "dev": dev_h,
        "test": test_h,
        "run": None if (train_h is None and row["steps"]) else (train_h or 0) + dev_h + test_h,
    }
    return row


def tiny_dimensions() -> None:
    """--tiny: every BERT is 4 layers of 32 (speed of the code path, not of the model)."""
    from longrank.models.modules import encoders

    full = encoders.bert_base_config
    encoders.bert_base_config = lambda **o: full(
        **{"hidden_size": 32, "num_hidden_layers": 4, "num_attention_heads": 4, "intermediate_size": 64, **o}
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="config/trec-dl-2019.yaml")
    parser.add_argument(
        "--entries", type=Path, help="resolved entries written by --write-entries (no jsonschema needed)"
    )
    parser.add_argument("--write-entries", type=Path, help="write the resolved entries here and stop")
    parser.add_argument("--models", nargs="+", default=ORDER)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--vocabulary", type=int, default=1_000_000, help="word rows (the config's max_vocabulary)")
    parser.add_argument(
        "--ndrm-vocabulary", type=int, default=400_000, help="NDRM's rows (word2vec min count 100: an estimate)"
    )
    parser.add_argument("--rerank-batch", type=int, default=0, help="0: the config's rerank.batch_size")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--test-queries", type=int, default=TEST_QUERIES["trec-dl-2019"])
    parser.add_argument("--budget-s", type=float, default=0, help="start no new model after this many seconds")
    parser.add_argument("--mir-records", type=Path, help="MIR's graph set (pickled); built with spaCy if missing")
    parser.add_argument("--tiny", action="store_true", help="tiny dimensions: a CPU smoke run of every code path")
    parser.add_argument("--commit", default="", help="the commit measured, where the tree is no git checkout")
    parser.add_argument("--work", type=Path, default=Path("/tmp/gpu-bill"))
    parser.add_argument("--out", type=Path, default=Path("gpu_bill.json"))
    parser.add_argument("--table", nargs="+", type=Path, help="print the bill of these JSONs (later rows win) and stop")
    args = parser.parse_args(argv)
    if args.table:
        print(table(args.table))
        return
    if args.write_entries:
        models, top = resolved_entries(args.config)
        from longrank.config.files import configfiles, merged

        top["mir_graphs"] = merged(configfiles(args.config)).get("mir_graphs", {})
        args.write_entries.write_text(json.dumps({"models": models, "top": top}, indent=1))
        return
    if args.entries:
        loaded = json.loads(args.entries.read_text())
        models, top = loaded["models"], loaded["top"]
    else:
        models, top = resolved_entries(args.config)
        from longrank.config.files import configfiles, merged

        top["mir_graphs"] = merged(configfiles(args.config)).get("mir_graphs", {})
    if args.tiny:
        tiny_dimensions()
        args.vocabulary, args.ndrm_vocabulary = 5000, 5000
        args.rerank_batch = args.rerank_batch or 4
    device = torch.device(args.device)
    corpus = synthetic_collection(args.work / "data")
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO
        ).stdout
    except OSError:  # no git where it runs (a copied tree): --commit says which
        commit = ""
    result = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="minutes"),
        "commit": args.commit or commit.strip(),
        "tiny": args.tiny,
        "test_queries": args.test_queries,
        "rows": [],
    }
    started = time.perf_counter()
    for name in [m for m in args.models if m in models]:
        if args.budget_s and time.perf_counter() - started > args.budget_s:
            result["rows"].append({"model": name, "skipped": "time budget spent"})
            continue
        t0 = time.perf_counter()
        try:
            row = bill_model(name, models[name], top, corpus, args.work / "data", args, device)
        except Exception as err:  # one model's failure must not lose the others' rows
            row = {"model": name, "error": f"{type(err).__name__}: {err}"}
        row["wall_s"] = time.perf_counter() - t0
        result["rows"].append(row)
        args.out.write_text(json.dumps(result, indent=1))
        print(summary(row), flush=True)
        if device.type == "cuda":
            torch.cuda.empty_cache()
    args.out.write_text(json.dumps(result, indent=1))


def table(paths: list[Path]) -> str:
    """The bill as a Markdown table: one row per model (a later JSON's row replaces an earlier one's), the hours of
    one year's run (2019: 43 test queries) and of both years (each trains its own model)."""
    rows = {}
    for path in paths:
        rows.update({r["model"]: r for r in json.loads(path.read_text())["rows"] if "error" not in r})
    total = 0.0
    lines = [
        "| model | params | batch | step (s, min–max) | train peak GB | rerank s / 1,000 (batch 128, bf16) | rerank peak GB "
        "| steps | dev evals | train + dev h | test s (43 q) | one year h | both years h |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in ORDER:
        r = rows.get(name)
        if r is None:
            continue
        step, hours = r.get("train_step") or {}, r.get("hours") or {}
        micro = f" (micro-batches of {r['train_micro_batch']})" if r.get("train_micro_batch") else ""
        step_cell = (
            f"{step['median_s']:.3f} ({step['min_s'] * (step['median_s'] / step.get('measured_median_s', step['median_s'])):.3f}–{step['max_s'] * (step['median_s'] / step.get('measured_median_s', step['median_s'])):.3f}){micro}"
            if step
            else "–"
        )
        train_dev = (hours.get("train") or 0) + hours.get("dev", 0)
        test_2020 = hours.get("test", 0) * TEST_QUERIES["trec-dl-2020"] / TEST_QUERIES["trec-dl-2019"]
        total += 2 * train_dev + hours.get("test", 0) + test_2020
        gb = lambda mb: f"{mb / 1024:.1f}" if mb else "–"  # noqa: E731
        lines.append(
            f"| {name} | {r['parameters'] / 1e6:.1f}M | {r['batch_size']} × {1 + r['negatives']} | {step_cell} "
            f"| {gb(r.get('train_peak_mb'))} | {r['rerank_per_1000_s']:.3f} | {gb(r.get('rerank_peak_mb'))} | {r['steps']:,} "
            f"| {hours.get('dev_evaluations', 0)} | {train_dev:.2f} | {hours.get('test', 0) * 3600:.0f} | {hours.get('run', 0):.2f} "
            f"| {2 * train_dev + hours.get('test', 0) + test_2020:.2f} |"
        )
    lines.append(f"| **all** | | | | | | | | | | | | **{total:.1f}** |")
    return "\n".join(lines)


def summary(row: dict) -> str:
    if "error" in row or "skipped" in row:
        return f"{row['model']}: {row.get('error') or row.get('skipped')}"
    step = (row.get("train_step") or {}).get("median_s")
    hours = (row.get("hours") or {}).get("run")
    return (
        f"{row['model']}: step {step if step is None else f'{step:.4f}'} s, train peak {row.get('train_peak_mb')} MB, "
        f"rerank {row.get('rerank_per_1000_s')} s/1000, peak {row.get('rerank_peak_mb')} MB, run {hours} h "
        f"{row.get('train_error', '')}{row.get('rerank_error', '')}"
    )


if __name__ == "__main__":
    sys.exit(main())
