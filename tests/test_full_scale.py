"""The papers' settings build and train: every enabled model of every full-scale config
(config/trec-dl-2019.yaml, config/trec-dl-2020.yaml, each merged over its bases as Snakemake merges them)
is built from its resolved entry at the papers' dimensions and takes one training step on CPU.

Why: these configs run on a GPU cluster, and a model that cannot start (a frozen embedding given a learning rate,
a FirstP input longer than BERT's 512 positions) used to show only after hours of earlier stages.

What the test replaces, and nothing else:
- ``encoder: bert-base-uncased`` (a hub download) by ``random-bert-base``: BERT-base's shape from
  ``transformers.BertConfig()`` with random weights and the same uncased 30,522-word WordPiece vocabulary;
- ``embeddings:`` (a GloVe 300d file that is not here) by a file of random 300d vectors in the same text format, read
  by the real loader; ``embeddings: word2vec`` finds a random 2 x 128 = 256d ``word2vec.txt`` in the data directory;
- MIR's graph set, built from the tiny collection by the graphs stage's own functions (spaCy annotation, records).

The training step is the trainer's (src/longrank/train/trainer.py) parts in its order: the entry's ``TrainSettings``,
``parameter_groups`` into the configured optimiser (Adam or AdamW), ``PairSampler`` and ``TrainingBatches`` for the batch (one
query; the configured negatives on the word models, one on a BERT-sized model; the configured negative sources), the
model's loss (with the Conformer-Kernel paper's extra pairs where configured), backward, gradient clipping, the
optimiser step.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import BertConfig

from longrank.validation.validate import validate_config
from longrank.config.files import configfiles, merged
from longrank.data.corpus import Corpus
from longrank.data.doc_field import field_dir, model_doc_fields, write_field_store
from longrank.data.words import OOV, PAD, analyzer, count_doc_freq, write_doc_freq
from longrank.models.modules.encoders import RANDOM_BERT_BASE, bert_base_config
from longrank.config.model_types import model_type
from longrank.models.registry import build_model, model_class
from longrank.train.batches import TrainingBatches
from longrank.train.losses import get_loss, with_negative_pairs
from longrank.train.optimiser import make_optimizer, parameter_groups
from longrank.train.sampling import PairSampler
from longrank.config.train_settings import TrainSettings

pytestmark = pytest.mark.stage

FULL_SCALE = ("config/trec-dl-2019.yaml", "config/trec-dl-2020.yaml")
BERT_POSITIONS = BertConfig().max_position_embeddings  # 512
GLOVE_DIM = 300  # TKL paper §4: "300 dimensional GloVe embeddings"
WORD2VEC_DIM = 256  # Conformer-Kernel paper §4: IN ‖ OUT word2vec into "all hidden layer sizes ... 256"
WORD_TYPES = ("knrm", "tk", "tkl", "ndrm")

# TKL paper §4, for TK and TKL alike: "a learning rate of 10^-4 for representation learning [embeddings and Transformer],
# 10^-3 for other network components"; KNRM's embeddings learn at the representation rate too.
GROUP_LRS = {
    "knrm": {"rest": 1e-3, "embeddings": 1e-4},
    "tk": {"rest": 1e-4, "embeddings": 1e-4, "scoring": 1e-3},
    "tkl": {"rest": 1e-4, "embeddings": 1e-4, "scoring": 1e-3},
    "tkl_4k": {"rest": 1e-4, "embeddings": 1e-4, "scoring": 1e-3},
}
# Encoder models: one learning rate for every weight (MORES §4: AdamW 3e-5; MIR §4.2: Adam 1e-5)
ONE_RATE = {"bert_firstp": 3e-5, "bert_maxp": 3e-5, "mores": 3e-5, "mores_1ib": 3e-5, "mir": 1e-5, "bert_maxp128": 1e-5}
ONE_RATE["bert_firstp_mir"] = 1e-5  # MIR Table 1's FirstP, MIR's recipe
# document lengths the papers read: TKL Table 1 (200 / 2,000 / 4,000 words), CK §4 (4,000 terms), MIR §4.2 (2,048)
DOC_LENGTHS = {"knrm": 200, "tk": 200, "tkl": 2000, "tkl_4k": 4000, "ndrm1": 4000, "ndrm2": 4000, "ndrm3": 4000}


def resolved_models(config_name: str) -> dict[str, dict]:
    """The enabled model entries of a full-scale config, resolved as the workflow resolves them."""
    config = validate_config(merged(configfiles(config_name)))
    return {name: entry for name, entry in config["models"].items() if entry.get("enabled", True)}


MODELS = resolved_models(FULL_SCALE[0])


def test_the_full_scale_configs_resolve_the_same_models():
    """The two TREC DL files differ in their collection only: building one's models builds the other's."""
    assert resolved_models(FULL_SCALE[1]) == MODELS


def test_ndrm_reads_url_title_and_body_and_every_other_model_the_collections_fields():
    """CK §4: "URL, title, and body". NDRM's entries name the fields they read; every other entry reads the
    collection's text (dataset.doc_fields) as before."""
    for config_name in FULL_SCALE:
        config = validate_config(merged(configfiles(config_name)))
        assert config["dataset"]["doc_fields"] == ["title", "body"]
        for name, entry in config["models"].items():
            expected = ["url", "title", "body"] if entry["type"] == "ndrm" else ["title", "body"]
            assert model_doc_fields(config, name) == expected, (config_name, name)
            if entry["type"] != "ndrm":
                assert "doc_fields" not in entry, name  # their entries, and so their jobs' inputs, are as they were


# ---- a tiny collection ---------------------------------------------------------------------------------------------

TOPICS = {
    "q1": "river flood water bank rain dam",
    "q2": "aircraft wing lift drag engine flight",
    "q3": "court judge appeal law trial verdict",
}
FILLER = (
    "the of and a in to is was for on that with as by at from this it an be are or have which new York Paris "
    "government report study"
).split()
LONG_DOC = "long"  # longer than every model's budget: its encoding shows how much of a document each model reads


def write_collection(directory: Path) -> Corpus:
    """Three queries (two train, one dev) with 9 short documents each (a document is relevant to its topic's query)
    and one document of 5,000 words; the data stage's files; a candidate run of every document for every query."""
    rng = random.Random(0)
    directory.mkdir(parents=True)
    docs, qrels = {}, []
    for qid, topic in TOPICS.items():
        for i in range(9):
            words = [rng.choice(FILLER) for _ in range(40)]
            words[10:10] = rng.sample(topic.split(), 3)
            docs[f"{qid}_d{i}"] = " ".join(words[:20]) + ". " + " ".join(words[20:]) + "."
            qrels.append(f"{qid} 0 {qid}_d{i} 1\n")
    docs[LONG_DOC] = ". ".join(" ".join(rng.choice(FILLER) for _ in range(20)) for _ in range(250)) + "."
    with open(directory / "docs.jsonl", "w") as f:
        f.writelines(json.dumps({"doc_id": d, "text": t}) + "\n" for d, t in docs.items())
    (directory / "queries.tsv").write_text("query_id\ttext\n" + "".join(f"{q}\t{t}\n" for q, t in TOPICS.items()))
    (directory / "qrels.txt").write_text("".join(qrels))
    (directory / "folds.json").write_text(json.dumps([{"train": ["q1", "q2"], "dev": ["q3"], "test": ["q3"]}]))
    (directory / "doc_lengths.tsv").write_text(
        "doc_id\twords\n" + "".join(f"{d}\t{len(t.split())}\n" for d, t in docs.items())
    )
    write_doc_freq(directory / "word_doc_freq.tsv", count_doc_freq(docs.values()))
    (directory / "stats.json").write_text(json.dumps({"num_docs": len(docs)}))
    # NDRM's doc_fields [url, title, body]: the URL store the doc_field stage writes beside the data (title + body
    # are the collection's docs.jsonl)
    urls = ((d, f"https://www.example.com/{d}/page-{i}.html") for i, d in enumerate(docs))
    write_field_store(field_dir(directory, "url"), "url", urls, ["title", "body"])
    return Corpus(directory)


def write_vectors(path: Path, words: list[str], dim: int, seed: int) -> None:
    """Random vectors in the word-vector text format (GloVe's lines; word2vec's header line too, which the reader skips)."""
    vectors = np.random.default_rng(seed).normal(0, 0.3, size=(len(words), dim))
    lines = [f"{len(words)} {dim}\n"] + [
        w + " " + " ".join(f"{v:.5f}" for v in row) + "\n" for w, row in zip(words, vectors)
    ]
    path.write_text("".join(lines))


@pytest.fixture(scope="module")
def collection(tmp_path_factory):
    root = tmp_path_factory.mktemp("full_scale")
    corpus = write_collection(root / "data")
    words = sorted(set(corpus.word_vocabulary().index) - {"<pad>", "<oov>"})
    write_vectors(root / "glove.300d.txt", words, GLOVE_DIM, seed=0)
    # NDRM's text_processing: ck reads what the word2vec stage writes with processing: ck (data/word2vec.py):
    # vectors and document frequencies of the processed terms, and word2vec.json naming the processing
    ck_df = count_doc_freq(corpus.docs.values(), analyzer("ck"))
    write_doc_freq(root / "data" / "word2vec_doc_freq.tsv", ck_df)
    (root / "data" / "word2vec.json").write_text(json.dumps({"processing": "ck"}))
    ck_terms = sorted(w for w in ck_df if "\0" not in w)  # past count_doc_freq's document count entry
    write_vectors(root / "data" / "word2vec.txt", ck_terms, WORD2VEC_DIM, seed=1)
    candidates = {q: {d: -i for i, d in enumerate(sorted(corpus.docs))} for q in TOPICS}
    return corpus, candidates, root / "glove.300d.txt"


def runnable_entry(entry: dict, glove: Path) -> dict:
    """The resolved entry with only what cannot run here replaced: the hub's BERT-base by random-bert-base, the GloVe
    path by the random 300d file."""
    entry = json.loads(json.dumps(entry))
    if entry.get("encoder") == "bert-base-uncased":
        entry["encoder"] = RANDOM_BERT_BASE
    if entry["type"] in WORD_TYPES and entry.get("embeddings", "").endswith(".txt"):
        entry["embeddings"] = str(glove)
    return entry


def attach_mir_graphs(model, corpus: Corpus) -> None:
    """The graph set of the tiny collection as the graphs stage builds it, with the config's mir_graphs settings."""
    from longrank.mir_graphs import annotate, graphs

    # as the workflow passes the graph stage its settings (job_inputs.graph_set_settings): no PRF set, no shard count
    given = merged(configfiles(FULL_SCALE[0]))["mir_graphs"]["mir"]
    graph_cfg = {k: v for k, v in given.items() if k not in ("prf_queries", "shards")}
    settings = graphs.graph_settings({**graph_cfg, "encoder": RANDOM_BERT_BASE})
    texts = dict(corpus.docs.items())
    cut = {d: annotate.cut_text(t, settings.max_doc_tokens) for d, t in texts.items()}
    annotations = annotate.annotate_texts(cut, annotate.settings({}))
    vectorizer = graphs.fit_tfidf(cut.values())
    tok = model.tokenizer
    records = {d: graphs.build_record(cut[d], annotations[d], [], tok, settings, vectorizer) for d in texts}
    model.use_graphs(
        records,
        {
            **settings.to_json(),
            "cls_id": tok.cls_token_id,
            "sep_id": tok.sep_token_id,
            "pad_id": tok.pad_token_id,
            "vocab_size": tok.vocab_size,
        },
    )


# ---- what the papers fix ------------------------------------------------------------------------------------------


def test_random_bert_base_is_bert_base():
    """The encoder the test builds has BertConfig()'s shape: what bert-base-uncased has."""
    ours, reference = bert_base_config().to_dict(), BertConfig().to_dict()
    keys = (
        "vocab_size",
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "intermediate_size",
        "max_position_embeddings",
    )
    assert {k: ours[k] for k in keys} == {k: reference[k] for k in keys}


def check_positions(name: str, model, corpus: Corpus) -> None:
    """Query + document + special tokens fit BERT's 512 positions, and FirstP and MORES's document tower use them all."""
    batch = model.encode([TOPICS["q1"] + " " + " ".join(FILLER * 3)], [LONG_DOC], [corpus.docs[LONG_DOC]])
    lengths = {key: value.shape[-1] for key, value in batch.items() if key.endswith("input_ids")}
    assert lengths and max(lengths.values()) <= BERT_POSITIONS, f"{name}: {lengths}"
    if name in ("bert_firstp", "mores", "mores_1ib"):
        used = lengths.get("d_input_ids", lengths.get("input_ids"))  # MORES's document tower; FirstP's pair
        assert used == BERT_POSITIONS, f"{name} reads {used} positions, not BERT's {BERT_POSITIONS}"
        with torch.no_grad():  # the real encoder takes the longest input: no position index beyond its table
            assert torch.isfinite(model.eval()(**batch)).all()


def check_dimensions(name: str, entry: dict, model, corpus: Corpus) -> None:
    """The papers' sizes, read from the built model."""
    if entry["type"] in WORD_TYPES:
        assert model.embedder.dim == (WORD2VEC_DIM if entry["type"] == "ndrm" else GLOVE_DIM), name
        doc = model.encode([TOPICS["q1"]], [LONG_DOC], [corpus.docs[LONG_DOC]]).get("doc")
        if doc is not None:
            assert doc.shape[-1] == DOC_LENGTHS[name], f"{name} reads {doc.shape[-1]} terms"
        trains_embeddings = entry.get("variant") != "ndrm2"  # NDRM2's embeddings only tokenise (Eq. 4 has no vectors)
        assert model.embedder.embedding.weight.requires_grad == trains_embeddings, name
    if entry["type"] in ("knrm", "tk", "tkl"):  # official code: an unknown word is a token (mask 1), padding is not
        assert model.embedder.token_mask(torch.tensor([[OOV, PAD]])).tolist() == [[1.0, 0.0]], name
    if entry["type"] in (
        "tk",
        "tkl",
    ):  # TKL §4: 2 layers, 10 heads, 11 kernels; TKL's w = 40, o = 10, r = 30, top 3 x (2 + 1 + 2)
        assert (
            len(model.contextualizer.layers) == 2
            and model.contextualizer.layers[0].n_heads == 10
            and len(model.mu) == 11
        )
        assert model.embedder.idf is None, f"{name}: the TK papers sum query terms uniformly"
        # matchmaker's sinusoids (timescales 1 .. 10^4): document row 501 (offset 500), last sine column = sin(501 / 10^4)
        rows = model.contextualizer.positions(2, 500, GLOVE_DIM, torch.device("cpu"))
        assert abs(rows[1, GLOVE_DIM // 2 - 1].item() - math.sin(501e-4)) < 1e-6, name
    if entry["type"] == "tkl":
        assert (model.window, model.overlap, model.region_size, model.top_t, model.neighbours) == (40, 10, 30, 3, 2)
        assert model.saturation == "embedding", "TKL Eq. 4-5: the learned saturation"
    if entry["type"] == "ndrm" and model.latent:  # CK §4
        layer = model.encoder[0]
        assert len(model.encoder) == 2 and layer.heads == 32 and layer.conv.in_channels == 256, name
        assert (layer.conv.kernel_size[0], layer.conv.groups, layer.drop1.p) == (31, 32, 0.2), name
        assert (len(model.mu), model.pool_window, model.pool_stride, model.max_query_len) == (10, 300, 100, 20), name
    if (
        entry.get("encoder") == RANDOM_BERT_BASE
    ):  # the config's bert-base-uncased (bi_encoder is MiniLM's zero-shot floor)
        encoder = getattr(model, "encoder", None) or model.document_module
        assert encoder.config.num_hidden_layers == 12 and encoder.config.hidden_size == 768, name
    if entry["type"] == "mores":  # §3.3: the query module's layers are another copy, not the document module's
        query_params = {id(p) for p in model.query_module.parameters()}
        assert not query_params & {id(p) for p in model.document_module.parameters()}, name


def check_learning_rates(name: str, optimizer: torch.optim.Optimizer) -> None:
    rates = {group["name"]: group["lr"] for group in optimizer.param_groups}
    if name in GROUP_LRS:
        assert rates == GROUP_LRS[name], name
    if name in ONE_RATE:
        assert set(rates.values()) == {ONE_RATE[name]}, f"{name}: {rates}"
    # TKL §4 and MIR §4.2 say Adam (MIR's L2 decay coupled); MORES's Appendix A.2 AdamW
    adam = name in GROUP_LRS or name in ("mir", "bert_firstp_mir", "bert_maxp128")
    assert type(optimizer) is (torch.optim.Adam if adam else torch.optim.AdamW), f"{name}: {type(optimizer).__name__}"


def one_training_step(
    name: str, entry: dict, model, corpus: Corpus, candidates: dict
) -> tuple[float, torch.optim.Optimizer, dict]:
    """The training loop's step on one query, its positive and negatives at the paper's lengths; returns the loss, the
    optimiser and each group's parameters before.

    One query, not the configured batch, and on a pretrained encoder or MIR one negative, not the configured seven: the
    same graph at the same lengths, at a quarter of the CPU time (BERT-base forward and backward over 512 tokens is
    ~3 s a document here). How many negatives the papers take is test_paper_settings's check (docs/paper_settings.yaml);
    the word models keep theirs (NDRM's pairs between negatives need them, and they cost nothing)."""
    settings = TrainSettings.from_entry(name, entry)
    costly = model_type(entry["type"]).on_pretrained_encoder or entry["type"] == "mir"
    settings = dataclasses.replace(settings, batch_size=1, negatives=1 if costly else settings.negatives)
    optimizer = make_optimizer(parameter_groups(model, settings, name), settings)  # Adam or AdamW, as configured
    collection = list(corpus.docs) if settings.negatives_from != "candidates" else None
    sampler = PairSampler(
        corpus.folds[0]["train"],
        corpus.qrels,
        candidates,
        entry.get("rerank_depth", 100),
        settings.negatives,
        settings.seed,
        settings.positives,
        settings.negatives_from,
        collection,
    )
    loss_fn = get_loss(settings.loss or model_class(entry["type"]).default_loss)
    if settings.negative_pairs:
        loss_fn = with_negative_pairs(loss_fn, sampler.from_candidates)
    before = {g["name"]: [p.detach().clone() for p in g["params"]] for g in optimizer.param_groups}
    model.train()
    # The first of the sampler's steps whose loss is not 0: a hinge loss met with margin has no gradient
    # (TKL's untrained scores span tens, so a batch whose positives already lead by 1 happens by chance).
    for _, [(n_groups, batch)] in TrainingBatches(
        sampler, corpus, model.encode, 0, 8, settings.batch_size, 0, settings.batch_size
    ):
        scores = model(**batch).view(n_groups, -1)
        assert scores.shape == (1, 1 + settings.negatives), name
        loss = loss_fn(scores.float())
        if loss.item() > 0:
            break
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if settings.grad_clip:  # as the trainer: grad_clip 0 clips nothing (TK/TKL's full-scale entries)
        torch.nn.utils.clip_grad_norm_([p for g in optimizer.param_groups for p in g["params"]], settings.grad_clip)
    optimizer.step()
    return loss.item(), optimizer, before


@pytest.mark.parametrize("name", sorted(MODELS))
def test_each_model_builds_at_the_papers_dimensions_and_takes_a_training_step(name, collection):
    corpus, candidates, glove = collection
    entry = runnable_entry(MODELS[name], glove)
    torch.manual_seed(0)
    model = build_model(entry, corpus)
    if entry["type"] == "mir":
        attach_mir_graphs(model, corpus)
    check_dimensions(name, entry, model, corpus)
    if model_type(entry["type"]).on_pretrained_encoder or entry["type"] == "mir":
        check_positions(name, model, corpus)
    parameters = sum(p.numel() for p in model.parameters())
    if not TrainSettings.from_entry(name, entry).steps:
        print(f"\n{name}: {parameters:,} parameters, nothing to train (steps: 0)")
        return
    start = time.perf_counter()
    loss, optimizer, before = one_training_step(name, entry, model, corpus, candidates)
    seconds = time.perf_counter() - start
    print(f"\n{name}: {parameters:,} parameters, one step at batch 1: {seconds:.1f} s, loss {loss:.4f}")
    assert np.isfinite(loss), name
    check_learning_rates(name, optimizer)
    for group in optimizer.param_groups:  # every learning rate reaches weights that move
        moved = any(not torch.equal(old, new) for old, new in zip(before[group["name"]], group["params"]))
        assert moved, f"{name}: no parameter of group {group['name']!r} changed"
