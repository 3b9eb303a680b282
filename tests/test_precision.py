"""rerank.precision: every model type scored under bf16 autocast (and fp16 on CUDA) agrees with fp32 within the
stated tolerance, and so does nDCG@10; the rerank stage carries the setting; MORES reads its reuse store in half
precision; train.precision on CUDA. CUDA cases exist only where CUDA does (conftest.DEVICES): none are skipped.

Tolerance (stated in the schema's rerank.precision): the largest score difference at most 10% of the fp32 scores'
standard deviation over the candidates (bf16 keeps about 3 significant digits; measured 1.6-4.4% on these models),
and nDCG@10 within 0.05: on this collection of four queries one swapped near tie moves the mean by about 0.03
(bf16 rounds a score to 3 significant digits, so scores 1e-3 apart may swap)."""

from __future__ import annotations

import json

import pytest
import torch

from conftest import DEVICES
from longrank.cli import main
from longrank.errors import InputError
from longrank.io.trec_files import read_run
from longrank.models.registry import build_model
from longrank.precision import autocast
from longrank.results.run_metadata import read_run_metadata
from longrank.runs import mean_measure
from longrank.scoring import score_candidates
from test_tk_tkl import write_tiny_corpus

pytestmark = pytest.mark.stage  # a model, a stage or the workflow runs: not a unit test

SCORE_TOLERANCE = 0.10  # of the fp32 scores' standard deviation
NDCG_TOLERANCE = 0.05
DEPTH = 6  # candidates per query: the first six documents of the collection's order (all topics mixed)

MODELS = {
    "knrm": {"type": "knrm", "max_doc_len": 100},
    "tk": {"type": "tk", "n_layers": 1, "max_query_len": 8, "max_doc_len": 120},
    "tkl": {"type": "tkl", "n_layers": 1, "max_query_len": 8, "max_doc_len": 160},
    "ndrm": {"type": "ndrm", "max_doc_len": 120, "hidden_dim": 32, "n_heads": 4, "conv_groups": 4},
    "bert_ranker": {"type": "bert_ranker", "encoder": "minilm", "mode": "firstp", "passage_len": 64},
    "mores": {"type": "mores", "encoder": "minilm", "interaction_blocks": 2, "max_doc_len": 64},
    "bi_encoder": {"type": "bi_encoder", "encoder": "minilm", "max_doc_len": 64},
}
# fp16 only on CUDA: CPU kernels for it are slow or missing, and the schema says it is for GPUs
CASES = [(device, p) for device in DEVICES for p in ("bf16", "fp16") if p == "bf16" or device == "cuda"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_tiny_corpus(tmp_path_factory.mktemp("precision") / "data")


def candidates_of(corpus):
    """Every query's candidates: documents of several topics, relevant and not, so nDCG@10 can move."""
    docs = sorted(corpus.docs)
    step = max(1, len(docs) // DEPTH)
    return {q: {d: 0.0 for d in docs[::step][:DEPTH]} | {f"{q}_d0": 0.0} for q in corpus.queries}


def assert_agrees(reference, reduced, corpus, qids):
    ref = torch.tensor([reference[q][d] for q in reference for d in reference[q]])
    low = torch.tensor([reduced[q][d] for q in reference for d in reference[q]])
    assert ref.std() > 0, "the comparison is not between constants"
    assert float((ref - low).abs().max()) <= SCORE_TOLERANCE * float(ref.std()), (ref, low)
    ndcg = mean_measure(reference, corpus.qrels, qids), mean_measure(reduced, corpus.qrels, qids)
    assert abs(ndcg[0] - ndcg[1]) <= NDCG_TOLERANCE, ndcg


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("device,precision", CASES)
def test_every_model_type_scores_alike_in_half_precision(corpus, name, device, precision):
    torch.manual_seed(0)
    model = build_model(MODELS[name], corpus).to(device)
    candidates, qids = candidates_of(corpus), sorted(corpus.queries)
    reference = score_candidates(model, corpus, candidates, qids, DEPTH + 1)
    reduced = score_candidates(model, corpus, candidates, qids, DEPTH + 1, precision=precision)
    assert reference.keys() == reduced.keys() and all(reference[q].keys() == reduced[q].keys() for q in qids)
    assert_agrees(reference, reduced, corpus, qids)


def test_an_unknown_precision_is_refused():
    with pytest.raises(InputError, match="precision: expected one of"):
        autocast("cpu", "fp8")


@pytest.mark.parametrize("reuse", ["s1", "s2"])
@pytest.mark.parametrize("device,precision", CASES)
def test_mores_reads_its_reuse_store_in_half_precision(tmp_path, device, precision, reuse):
    from longrank.models.modules.encoders import load_tokenizer
    from test_mores import DOC_IDS, DOCS, QUERIES, build_store, small_mores

    model = small_mores(load_tokenizer("minilm"), reuse=reuse).to(device)
    build_store(model, tmp_path / "fold0", batch_size=2)
    model.attach_artifacts(tmp_path / "fold0")
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    with torch.no_grad(), autocast(device, precision):
        from_fp32_store = model.score_pairs(QUERIES, DOC_IDS, DOCS).float()
        model.store = model.store.resident(device, dtype)  # the half-precision store: half the memory
        assert model.store.array.dtype == dtype
        from_half_store = model.score_pairs(QUERIES, DOC_IDS, DOCS).float()
    # Under autocast attention reads keys and values (S1: states) in the half type anyway: storing them so changes
    # (almost) nothing.
    assert torch.allclose(from_half_store, from_fp32_store, rtol=1e-2, atol=1e-3), (from_fp32_store, from_half_store)


def test_the_rerank_stage_scores_in_the_configured_precision(tmp_path, corpus):
    """``longrank rerank --precision bf16`` from a trained checkpoint: the run ranks as the fp32 run does."""
    entry = json.dumps({**MODELS["knrm"], "train": {"steps": 10, "batch_size": 4, "eval_every": 10}})
    candidates = tmp_path / "candidates.run"
    candidates.write_text(
        "".join(
            f"{q} Q0 {d} {rank + 1} {-rank} bm25\n"
            for q, docs in candidates_of(corpus).items()
            for rank, d in enumerate(sorted(docs))
        )
    )
    common = ["--model", "knrm", "--model-config", entry, "--data", str(corpus.dir), "--candidates", str(candidates)]
    common += ["--rerank-depth", str(DEPTH + 1), "--device", "cpu"]
    checkpoint = tmp_path / "knrm" / "fold0" / "model.safetensors"
    main(["train", *common, "--fold", "0", "--out", str(checkpoint)])
    runs = {}
    for precision in ("fp32", "bf16"):
        out = tmp_path / precision
        main(["rerank", *common, "--checkpoints", str(checkpoint), "--precision", precision, "--out-dir", str(out)])
        runs[precision] = read_run(out / "knrm.run")
        assert read_run_metadata(out / "knrm.run")["method"]["retrieval"][-1]["params"]["rerank_precision"] == precision
    assert_agrees(runs["fp32"], runs["bf16"], corpus, sorted(corpus.test_queries()))


if "cuda" in DEVICES:  # defined only where CUDA is: a CPU machine generates no case (none is skipped)

    @pytest.mark.parametrize("precision", ["bf16", "fp16"])
    def test_training_in_half_precision_on_cuda_learns_as_fp32(tmp_path, corpus, precision):
        """train.precision on CUDA: the same recipe trained in fp32 and under autocast reaches a dev nDCG@10
        within 0.05 (fp16 with its gradient scaler), with finite weights."""
        from longrank.results.stage_outputs import TrainSummary
        from safetensors.torch import load_file

        candidates = tmp_path / "candidates.run"
        candidates.write_text(
            "".join(
                f"{q} Q0 {d} {rank + 1} {-rank} bm25\n"
                for q, docs in candidates_of(corpus).items()
                for rank, d in enumerate(sorted(docs))
            )
        )
        dev = {}
        for p in ("fp32", precision):
            entry = {**MODELS["tk"], "train": {"steps": 30, "batch_size": 4, "eval_every": 10, "precision": p}}
            out = tmp_path / p / "fold0" / "model.safetensors"
            main(
                ["train", "--model", "tk", "--model-config", json.dumps(entry), "--data", str(corpus.dir)]
                + ["--candidates", str(candidates), "--rerank-depth", str(DEPTH + 1), "--device", "cuda"]
                + ["--fold", "0", "--out", str(out)]
            )
            assert all(torch.isfinite(t).all() for t in load_file(out).values())
            dev[p] = TrainSummary.read(out.parent / "train_summary.json").best_dev_ndcg10
        assert abs(dev["fp32"] - dev[precision]) <= 0.05, dev
