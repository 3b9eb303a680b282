"""TK and TKL invariants: TKL's window split (Eq. 1), window packing, saturation (Eq. 4), top-local-max
(Eq. 7), shapes, gradients and a short training run that must lower the loss; the position tables
(``sinusoids``) and unknown words (``mask_unknown_words``) read as values."""

from __future__ import annotations

import json
import math
import random

import pytest
import torch

from longrank.data.corpus import Corpus
from longrank.data.words import OOV, count_doc_freq, write_doc_freq
from longrank.models.registry import build_model
from longrank.models.modules.windows import contextualize_windows, merge_windows, split_windows
from longrank.models.tkl_regions import saturate, top_local_max

pytestmark = pytest.mark.stage  # a model, a stage or the workflow runs: not a unit test

TOPICS = {
    "q1": ("river flood water bank", ["river", "flood", "water", "bank", "rain", "dam"]),
    "q2": ("aircraft wing lift drag", ["aircraft", "wing", "lift", "drag", "engine", "flight"]),
    "q3": ("court judge appeal law", ["court", "judge", "appeal", "law", "trial", "verdict"]),
    "q4": ("music guitar song concert", ["music", "guitar", "song", "concert", "band", "album"]),
}
FILLER = "the of and a in to is was for on that with as by at from this it an be are or have which".split()


def write_tiny_corpus(directory, docs_per_topic: int = 6, seed: int = 0, long_every: int = 3) -> Corpus:
    """Documents of filler words with a few topic words (some long, with the topic words late), queries
    made of topic words, qrels: a document is relevant to its topic's query."""
    rng = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    docs, qrels = [], []
    for qid, (_, words) in TOPICS.items():
        for i in range(docs_per_topic):
            length = 160 if i % long_every == 0 else rng.randint(20, 70)
            tokens = [rng.choice(FILLER) for _ in range(length)]
            at = rng.randint(0, length - 10) if length < 160 else rng.randint(110, 150)
            tokens[at:at] = rng.sample(words, 4)
            doc_id = f"{qid}_d{i}"
            docs.append({"doc_id": doc_id, "text": " ".join(tokens)})
            qrels.append(f"{qid} 0 {doc_id} 1\n")
    with open(directory / "docs.jsonl", "w") as f:
        f.writelines(json.dumps(d) + "\n" for d in docs)
    with open(directory / "queries.tsv", "w") as f:
        f.write("query_id\ttext\n")
        f.writelines(f"{qid}\t{text}\n" for qid, (text, _) in TOPICS.items())
    (directory / "qrels.txt").write_text("".join(qrels))
    (directory / "folds.json").write_text(
        json.dumps([{"train": list(TOPICS), "dev": list(TOPICS), "test": list(TOPICS)}])
    )
    (directory / "doc_lengths.tsv").write_text(
        "doc_id\twords\n" + "".join(f"{d['doc_id']}\t{len(d['text'].split())}\n" for d in docs)
    )
    write_doc_freq(directory / "word_doc_freq.tsv", count_doc_freq(d["text"] for d in docs))
    (directory / "stats.json").write_text(json.dumps({"num_docs": len(docs)}))
    return Corpus(directory)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_tiny_corpus(tmp_path_factory.mktemp("tiny") / "data")


def small(model_type: str, **extra):
    cfg = (
        {"type": model_type, "max_query_len": 8}
        if model_type == "knrm"
        else {"type": model_type, "n_layers": 1, "max_query_len": 8}
    )
    if model_type == "tkl":
        cfg.update(max_doc_len=200, window=40, overlap=10, region_size=30)
    cfg.update(extra)
    return cfg


def pairs(corpus: Corpus, n_docs: int = 6):
    """Mixed-length batch: every query with its own first documents and the next topic's documents."""
    queries, doc_ids, docs = [], [], []
    qids = list(corpus.queries)
    for k, qid in enumerate(qids):
        other = qids[(k + 1) % len(qids)]
        for i in range(n_docs // 2):
            for doc_qid in (qid, other):
                queries.append(corpus.queries[qid])
                doc_ids.append(f"{doc_qid}_d{i}")
                docs.append(corpus.docs[doc_ids[-1]])
    return queries, doc_ids, docs


# ---- Eq. 1 ------------------------------------------------------------------------------------------------


def test_window_split_and_merge_keep_every_token_once_in_place():
    batch, length, w, o = 2, 97, 40, 10
    positions = torch.arange(length, dtype=torch.float32)
    vectors = torch.stack([positions + 1, positions * 0 + 7], dim=-1)[None].repeat(batch, 1, 1)  # [B, L, 2]
    mask = torch.ones(batch, length)
    mask[1, 50:] = 0
    windows, window_mask = split_windows(vectors, mask, w, o)
    assert windows.shape == (batch, 3, w + 2 * o, 2)
    # window i holds tokens i*w - o .. (i+1)*w + o - 1 (value = position + 1; 0 = padding outside the doc)
    for i in range(3):
        expected = torch.tensor([p + 1.0 if 0 <= p < length else 0.0 for p in range(i * w - o, (i + 1) * w + o)])
        assert torch.equal(windows[0, i, :, 0], expected)
    assert window_mask[1, 1, o + 10 :].sum() == 0 and window_mask[1, 2].sum() == 0
    assert torch.equal(merge_windows(windows, w, o, length), vectors)

    # A contextualiser that writes, into each slot, the slot index and the window's context range: every
    # token's output must come from the middle of the window whose middle it is, with o tokens either side.
    def slots(x, m):
        n, size, _ = x.shape
        slot = torch.arange(size, dtype=torch.float32)[None, :].expand(n, size)
        lo = torch.where(m > 0, x[..., 0], torch.inf).amin(dim=1, keepdim=True).expand(n, size)
        hi = (x[..., 0] * m).amax(dim=1, keepdim=True).expand(n, size)
        return torch.stack([x[..., 0], slot, lo, hi], dim=-1)

    out, passes = contextualize_windows(torch.cat([vectors, vectors], -1), mask, slots, w, o, pack=False)
    assert passes == batch * 3
    assert torch.equal(out[0, :, 0], positions + 1)  # each token exactly once, in place
    assert ((out[0, :, 1] >= o) & (out[0, :, 1] < o + w)).all()  # from the kept middle of its window
    pos = torch.arange(length)
    first = (pos // w) * w
    assert torch.equal(out[0, :, 2], (first - o).clamp(min=0).float() + 1)  # left context: o tokens
    assert torch.equal(out[0, :, 3], (first + w + o - 1).clamp(max=length - 1).float() + 1)  # right context: o tokens


def test_packing_skips_padding_windows_and_keeps_scores(corpus, device, monkeypatch):
    monkeypatch.setattr(
        "longrank.models.modules.windows.PACK_MIN_WINDOWS_CUDA", 0
    )  # this batch is small: pack it on CUDA too
    torch.manual_seed(0)
    model = build_model(small("tkl"), corpus).eval().to(device)
    queries, doc_ids, docs = pairs(corpus)
    batch = {k: v.to(device) for k, v in model.encode(queries, doc_ids, docs).items()}
    lengths = (batch["doc"] != 0).sum(dim=1)
    assert lengths.min() < 80 and lengths.max() > 150  # a mixed-length batch
    with torch.no_grad():
        model.pack_windows, model.window_passes = False, 0
        unpacked = model(**batch)
        unpacked_passes = model.window_passes
        model.pack_windows, model.window_passes = True, 0
        packed = model(**batch)
        packed_passes = model.window_passes
    n_windows = -(-batch["doc"].shape[1] // model.window)
    assert unpacked_passes == len(docs) * n_windows
    assert packed_passes == int(sum(-(-int(n) // model.window) for n in lengths))
    assert packed_passes < unpacked_passes
    assert torch.allclose(packed, unpacked, atol=1e-4, rtol=1e-5)


# ---- Eq. 4 and 7 ------------------------------------------------------------------------------------------


def test_saturation_with_b_one_is_linear_and_b_100_is_log_like():
    x = torch.tensor([0.0, 1e-6, 0.5, 1.0, 3.0, 29.0])
    a, c = torch.tensor(2.5), torch.tensor(0.7)
    assert torch.allclose(saturate(x, a, torch.tensor(1.0), c), a * x.clamp(min=1e-10) - c)
    hundred = torch.tensor(100.0)
    log_like = saturate(x[1:], hundred, hundred, hundred)
    assert torch.allclose(log_like, torch.log(x[1:]), rtol=0.1, atol=0.05)
    # gradients at x = 0 are finite
    x0 = torch.zeros(3, requires_grad=True)
    b = torch.full((3,), 100.0, requires_grad=True)
    saturate(x0, hundred, b, hundred).sum().backward()
    assert torch.isfinite(x0.grad).all() and torch.isfinite(b.grad).all()


def test_top_local_max_picks_distinct_regions_with_neighbours():
    #                0    1    2    3    4    5    6    7    8    9   10   11   12   13
    topo = torch.tensor([[1.0, 2.0, 9.0, 8.0, 3.0, 1.0, 0.0, 5.0, 6.0, 4.0, 0.0, 7.0, 2.0, 1.0]])
    valid = torch.ones_like(topo, dtype=torch.bool)
    valid[0, 13] = False
    features, index, peaks = top_local_max(topo, valid, top_t=3, neighbours=1, radius=4)
    # 9 at 2 suppresses 0..5 (|i - 2| < 4); then 7 at 11 suppresses 8..12 (8 at 3 never counts twice);
    # then 5 at 7.
    assert index.tolist() == [[2, 11, 7]]
    assert peaks.tolist() == [[9.0, 7.0, 5.0]]
    assert features.tolist() == [
        [2.0, 9.0, 8.0, 0.0, 7.0, 2.0, 0.0, 5.0, 6.0]
    ]  # 11's right neighbour 13 is invalid: clamped to 12
    # fewer separable regions than t: missing slots are -1 / zero
    _, index, peaks = top_local_max(topo[:, :3], valid[:, :3], top_t=3, neighbours=1, radius=30)
    assert index.tolist() == [[2, -1, -1]] and peaks.tolist() == [[9.0, 0.0, 0.0]]


def test_explain_gives_non_overlapping_region_offsets(corpus):
    torch.manual_seed(0)
    model = build_model(small("tkl"), corpus).eval()
    queries, doc_ids, docs = pairs(corpus)
    batch = model.encode(queries, doc_ids, docs)
    with torch.no_grad():
        info = model.explain(**batch)
    starts = info["region_starts"]
    assert starts.shape == (len(docs), 3) and info["region_scores"].shape == (len(docs), 3)
    lengths = (batch["doc"] != 0).sum(dim=1)
    for row, n in zip(starts.tolist(), lengths.tolist()):
        chosen = [s for s in row if s >= 0]
        assert chosen and all(0 <= s < n and s % 2 == 0 for s in chosen)  # tail regions, stride 2 (official code)
        assert all(abs(s - t) >= 30 for i, s in enumerate(chosen) for t in chosen[i + 1 :])


@pytest.mark.parametrize("tail_regions", [True, False])
def test_unknown_words_do_not_shorten_the_valid_regions(corpus, tail_regions):
    """A region's validity follows the document's length in tokens: the same document with a tenth of its words
    unknown (masked like padding, mask_unknown_words' default) keeps every region of the all-known version. Counting
    known words only lost a document's last regions, one per region_stride (2) unknown words."""
    torch.manual_seed(0)
    model = build_model(small("tkl", tail_regions=tail_regions), corpus).eval()
    queries, doc_ids, docs = pairs(corpus)
    batch = model.encode(queries, doc_ids, docs)
    known, doc = batch["doc"], batch["doc"].clone()
    rng = torch.Generator().manual_seed(0)
    real = known > OOV
    doc[real & (torch.rand(known.shape, generator=rng) < 0.1)] = OOV
    assert (doc == OOV).sum() > 0.05 * real.sum()
    with torch.no_grad():
        _, valid_known = model._topography(batch["query"], known)
        _, valid_unknown = model._topography(batch["query"], doc)
    lengths = (known != 0).sum(dim=1)
    stride, size = 2, 30
    expected = -(-lengths // stride) if tail_regions else (lengths - size).clamp(min=0) // stride + 1
    assert valid_known.sum(dim=1).tolist() == expected.tolist()
    assert torch.equal(valid_unknown, valid_known)


# ---- shapes, gradients, training --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cfg",
    [
        small("tk"),
        small("tkl"),
        small("tkl", saturation="log"),
        small("tkl", saturation="linear"),
        small("tkl", pack_windows=False),
    ],
)
def test_forward_shape_and_gradients(corpus, cfg):
    torch.manual_seed(0)
    model = build_model(cfg, corpus).train()
    queries, doc_ids, docs = pairs(corpus)
    scores = model(**model.encode(queries, doc_ids, docs))
    assert scores.shape == (len(docs),) and torch.isfinite(scores).all()
    scores.sum().backward()
    for name, p in model.named_parameters():
        if p.requires_grad:
            assert p.grad is not None and torch.isfinite(p.grad).all(), name
            assert p.grad.abs().sum() > 0, f"no gradient reaches {name}"


def test_rejects_heads_that_do_not_divide_the_width(corpus):
    from longrank.errors import InputError

    with pytest.raises(InputError, match="n_heads"):
        build_model(small("tk", n_heads=7), corpus)
    with pytest.raises(InputError, match="saturation"):
        build_model(small("tkl", saturation="cubic"), corpus)


@pytest.mark.parametrize("model_type", ["tk", "tkl"])
def test_short_training_lowers_pairwise_loss(corpus, model_type):
    torch.manual_seed(0)
    rng = random.Random(0)
    model = build_model(small(model_type), corpus).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
    qids = list(corpus.queries)

    def sample(n=6):
        queries, doc_ids = [], []
        for _ in range(n):
            qid = rng.choice(qids)
            neg = rng.choice([q for q in qids if q != qid])
            queries += [corpus.queries[qid]] * 2
            doc_ids += [f"{qid}_d{rng.randrange(6)}", f"{neg}_d{rng.randrange(6)}"]
        return model.encode(queries, doc_ids, [corpus.docs[d] for d in doc_ids])

    def loss_of(batch):
        scores = model(**batch).view(-1, 2)
        return torch.relu(1 - scores[:, 0] + scores[:, 1]).mean()

    held_out = [sample(12)]
    with torch.no_grad():
        before = sum(loss_of(b).item() for b in held_out)
    for _ in range(30):
        optimizer.zero_grad()
        loss = loss_of(sample())
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        after = sum(loss_of(b).item() for b in held_out)
    assert after < 0.8 * before, (before, after)


@pytest.mark.parametrize("model_type", ["tk", "tkl"])
def test_scores_do_not_depend_on_batch_mates_and_survive_empty_texts(corpus, model_type):
    torch.manual_seed(0)
    model = build_model(small(model_type), corpus).eval()
    queries, doc_ids, docs = pairs(corpus)
    with torch.no_grad():
        together = model(**model.encode(queries, doc_ids, docs))
        alone = torch.stack(
            [model(**model.encode([q], [i], [d]))[0] for q, i, d in zip(queries[:4], doc_ids[:4], docs[:4])]
        )
        empty = model(**model.encode(["", queries[0]], [doc_ids[0], "empty"], [docs[0], ""]))
    assert torch.allclose(together[:4], alone, atol=1e-4, rtol=1e-5)
    assert torch.isfinite(empty).all()


def test_region_sums_match_direct_sums():
    from longrank.models.tkl_regions import region_sums

    torch.manual_seed(0)
    values = torch.rand(2, 3, 4000) * (torch.rand(2, 3, 4000) > 0.7)
    for stride in (1, 7):
        direct = values.unfold(-1, 30, stride).sum(-1)
        assert torch.allclose(region_sums(values, 30, stride), direct, atol=1e-5)
    assert region_sums(torch.zeros(1, 5000), 30).abs().max() == 0  # no cancellation noise where nothing matched
    assert region_sums(torch.ones(1, 12), 30).tolist() == [[12.0]]  # shorter than a region: one region


# ---- position tables (sinusoids) and unknown words (mask_unknown_words) ------------------------------------


def test_project_sinusoids_are_the_transformer_frequencies_sin_then_cos():
    """project (default): h = ceil(d/2) frequencies 10000^(-i/h); [p, i] = sin(p f_i), [p, h + i] = cos(p f_i);
    odd d drops the last cosine."""
    from longrank.models.modules.positions import sinusoidal_positions

    table = sinusoidal_positions(520, 50)
    assert table.shape == (520, 50)
    for p, i in [(0, 0), (1, 0), (3, 1), (7, 12), (517, 24), (501, 5)]:
        f = 10000.0 ** (-i / 25)
        assert table[p, i].item() == pytest.approx(math.sin(p * f), abs=2e-4)
        assert table[p, 25 + i].item() == pytest.approx(math.cos(p * f), abs=2e-4)
    assert table[1, 24].item() == pytest.approx(math.sin(10000.0 ** (-24 / 25)), abs=1e-6)  # slowest: not 1/10000
    odd = sinusoidal_positions(10, 7)  # h = 4: sin f_0..f_3, cos f_0..f_2
    assert odd[3, 3].item() == pytest.approx(math.sin(3 * 10000.0 ** (-3 / 4)), abs=1e-6)
    assert odd[3, 6].item() == pytest.approx(math.cos(3 * 10000.0 ** (-2 / 4)), abs=1e-6)
    assert torch.equal(sinusoidal_positions(30, 300, sinusoids="project"), sinusoidal_positions(30, 300))


def test_official_sinusoids_are_matchmakers_table():
    """official (matchmaker's get_positional_features, the tensor2tensor timing signal): h = d // 2 timescales
    from 1 to exactly 10^4, f_i = 10000^(-i/(h-1)); [p, i] = sin(p f_i), [p, h + i] = cos(p f_i); odd d: a zero column."""
    from longrank.models.modules.positions import sinusoidal_positions

    for dim in (50, 300):
        h = dim // 2
        table = sinusoidal_positions(560, dim, sinusoids="official")
        assert table.shape == (560, dim)
        for p, i in [(0, 0), (1, 0), (2, 1), (9, h // 2), (500, 3), (549, h - 1)]:
            f = 10000.0 ** (-i / (h - 1))
            assert table[p, i].item() == pytest.approx(math.sin(p * f), abs=2e-4)
            assert table[p, h + i].item() == pytest.approx(math.cos(p * f), abs=2e-4)
        assert table[1, h - 1].item() == pytest.approx(math.sin(1e-4), rel=1e-4)  # the slowest timescale is 10^4
        assert table[1, 0].item() == pytest.approx(math.sin(1.0), abs=1e-6) and table[1, h].item() == pytest.approx(
            math.cos(1.0), abs=1e-6
        )
        # the two tables differ (only their first frequency, 1, agrees)
        project = sinusoidal_positions(560, dim)
        assert torch.equal(table[:, 0], project[:, 0]) and (table - project).abs().max() > 0.5
    odd = sinusoidal_positions(10, 7, sinusoids="official")  # h = 3: f = 1, 0.01, 0.0001, then a zero column
    assert odd[5, 1].item() == pytest.approx(math.sin(0.05), abs=1e-6)
    assert odd[5, 5].item() == pytest.approx(math.cos(5e-4), abs=1e-6)
    assert odd[:, 6].abs().max() == 0


@pytest.mark.parametrize("model_type", ["tk", "tkl"])
def test_sinusoids_key_reaches_the_models_positions(corpus, model_type):
    """``sinusoids: official`` in a config gives TK's fixed table and TKL's learned table's start matchmaker's
    values: queries at rows 0.., documents at rows 500.. (doc_position_offset)."""
    from longrank.validation.validate import check_model_keys
    from longrank.models.modules.positions import sinusoidal_positions

    check_model_keys({model_type: small(model_type, sinusoids="official", mask_unknown_words=False)})
    torch.manual_seed(0)
    model = build_model(small(model_type, sinusoids="official"), corpus)
    default = build_model(small(model_type), corpus)
    dim = model.embedder.dim
    official = sinusoidal_positions(560, dim, sinusoids="official")
    ctx = model.contextualizer
    query_rows = ctx.positions(8, 0, dim, torch.device("cpu"))
    doc_rows = ctx.positions(40, ctx.doc_position_offset, dim, torch.device("cpu"))
    assert torch.allclose(query_rows, official[:8]) and torch.allclose(doc_rows, official[500:540])
    h = dim // 2
    assert doc_rows[7, h - 1].item() == pytest.approx(
        math.sin(507 * 1e-4), abs=1e-5
    )  # entry [507, h-1], read as a value
    assert ctx.position_table is None if model_type == "tk" else isinstance(ctx.position_table, torch.nn.Parameter)
    default_rows = default.contextualizer.positions(40, 500, dim, torch.device("cpu"))
    assert torch.allclose(default_rows, sinusoidal_positions(540, dim)[500:])
    with pytest.raises(Exception, match="sinusoids"):
        build_model(small(model_type, sinusoids="vaswani"), corpus)


@pytest.mark.parametrize("model_type", ["knrm", "tk", "tkl"])
def test_unknown_words_masked_or_kept_per_setting(corpus, model_type):
    """mask_unknown_words: true (default) masks an OOV token like padding; false keeps it as a token (the official
    codes): mask 1, its vector the OOV row, so two different unknown words are one vector (cosine 1) and match."""
    from longrank.data.words import PAD

    torch.manual_seed(0)
    masked = build_model(small(model_type), corpus)
    kept = build_model(small(model_type, mask_unknown_words=False), corpus)
    assert masked.embedder.mask_unknown_words is True and kept.embedder.mask_unknown_words is False
    ids = kept.embedder.encode(["river zzunknownone flood qqunknowntwo", "river flood river flood river flood"], 6)[:1]
    assert ids.tolist() == [[ids[0, 0].item(), OOV, ids[0, 2].item(), OOV, PAD, PAD]] and ids[0, 0] > OOV
    vectors_kept, mask_kept = kept.embedder(ids)
    _, mask_masked = masked.embedder(ids)
    assert mask_kept.tolist() == [[1.0, 1.0, 1.0, 1.0, 0.0, 0.0]]
    assert mask_masked.tolist() == [[1.0, 0.0, 1.0, 0.0, 0.0, 0.0]]
    oov_row = kept.embedder.embedding.weight[OOV]
    assert (
        oov_row.abs().sum() > 0
        and torch.equal(vectors_kept[0, 1], oov_row)
        and torch.equal(vectors_kept[0, 3], oov_row)
    )
    # the scores see it: a query of one unknown word against a document of another one
    query = kept.embedder.encode_query(["zzunknownthree"], 8)
    doc = kept.embedder.encode(["qqunknownfour " * 5], 200)
    assert query[0, 0] == OOV and doc[0, 0] == OOV
    with torch.no_grad():
        masked.load_state_dict(kept.state_dict())
        assert kept(query, doc).item() != pytest.approx(masked(query, doc).item(), abs=1e-6)
    with pytest.raises(Exception, match="mask_unknown_words"):
        build_model(small(model_type, mask_unknown_words="yes"), corpus)
