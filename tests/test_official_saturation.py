"""TK's and TKL's ``saturation: official``: each against a plain-PyTorch port of the official code's
forward for that part (matchmaker's ``ecai20_tk.py`` kernel pooling; ``sigir20_tkl.py``'s ``embedding`` saturation
with its region sums and Eq. 6), at the same random weights; and the defaults untouched by the new value."""

from __future__ import annotations

import math

import pytest
import torch
from torch.nn import functional as F

from longrank.errors import InputError
from longrank.models.registry import build_model
from longrank.models.modules.windows import contextualize_windows

from test_tk_tkl import write_tiny_corpus

TOLERANCE = 1e-5


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_tiny_corpus(tmp_path_factory.mktemp("official_saturation") / "data")


def tk_config(**extra):
    return {"type": "tk", "n_layers": 1, "max_query_len": 8, **extra}


def tkl_config(**extra):
    return {"type": "tkl", "n_layers": 1, "max_query_len": 8, "max_doc_len": 200, "window": 40, **extra}


def batch(model, corpus, doc_ids):
    """Each document with its topic's query; every other query cut to its first two words (query padding)."""
    queries = [corpus.queries[d.split("_")[0]] for d in doc_ids]
    queries = [" ".join(text.split()[:2]) if i % 2 else text for i, text in enumerate(queries)]
    return model.encode(queries, doc_ids, [corpus.docs[d] for d in doc_ids])


# ---- ports of the official code (matchmaker), plain PyTorch --------------------------------------------------


def official_cosine(q, d):
    """allennlp's CosineMatrixAttention: vectors over (norm + 1e-13), then the batched dot product."""
    q = q / (q.norm(p=2, dim=-1, keepdim=True) + 1e-13)
    d = d / (d.norm(p=2, dim=-1, keepdim=True) + 1e-13)
    return torch.bmm(q, d.transpose(-1, -2))


def official_kernels(q, d, d_mask, mu, sigma):
    """[B, Lq, Ld, K] kernel activations, document padding masked (both official models do this)."""
    cosine = official_cosine(q, d).unsqueeze(-1)
    raw = torch.exp(-torch.pow(cosine - mu.view(1, 1, 1, -1), 2) / (2 * torch.pow(sigma.view(1, 1, 1, -1), 2)))
    return raw * d_mask.unsqueeze(1).unsqueeze(-1)


def official_tk_pooling(q, d, q_mask, d_mask, mu, sigma, alpha, bin_weights):
    """ECAI20_TK.forward after contextualisation: log(clamp(sum * alpha, 1e-10)), query-masked, no bias."""
    per_kernel_query = official_kernels(q, d, d_mask, mu, sigma).sum(2)
    log_per_kernel_query = torch.log(torch.clamp(per_kernel_query * alpha.view(1, 1, -1), min=1e-10))
    per_kernel = (log_per_kernel_query * q_mask.unsqueeze(-1)).sum(1)
    return (per_kernel @ bin_weights.t()).squeeze(1)


def official_tkl_topography(q, d, q_mask, d_mask, mu, sigma, weights, chunk=40, overlap=5, region=30):
    """TKL_sigir20.forward from the contextualised vectors to ``dense(per_kernel)`` (its region scores, before
    the -9900 sentinel): the batch width padded to whole chunks, regions of 30 every 2 tokens, the ``embedding``
    saturation, query and empty-region masks, the kernel weights."""
    length = d_mask.shape[1]
    extended = chunk + 2 * overlap
    needed = extended - ((length - overlap) % chunk) if length > overlap else extended - overlap - length
    n_chunks = (overlap + length + needed - extended) // chunk + 1
    activations = F.pad(official_kernels(q, d, d_mask, mu, sigma), (0, 0, 0, n_chunks * chunk - length))
    if activations.shape[2] < region:
        activations = F.pad(activations, (0, 0, 0, region - activations.shape[2]))
    unrolled = activations.unfold(2, region, 2).transpose(-1, -2)  # [B, Lq, R, 30, K]
    lengths = torch.sum(unrolled.sum(dim=-1) != 0, dim=-1)  # [B, Lq, R]
    per_kernel_query = unrolled.sum(-2)
    influence = torch.cat(
        [(q @ weights["query"].t()).expand_as(lengths).unsqueeze(-1), lengths.float().unsqueeze(-1)], dim=-1
    )
    influence = F.layer_norm(influence, (2,), weights["norm_w"], weights["norm_b"], eps=1e-5)
    sat1, sat3 = (influence @ weights[k + "_w"].t() + weights[k + "_b"] for k in ("a", "c"))
    sat2 = 1 / (influence @ weights["b_w"].t() + weights["b_b"])
    saturated = sat1 * (torch.clamp(per_kernel_query, min=1e-10) ** sat2) - sat3
    saturated = saturated * q_mask.unsqueeze(-1).unsqueeze(-1) * (lengths > 0).float().unsqueeze(-1)
    return (saturated.sum(1) @ weights["dense"].t()).squeeze(-1)  # [B, R]


# ---- TK ------------------------------------------------------------------------------------------------------


def test_tk_official_saturation_is_the_official_kernel_pooling(corpus):
    torch.manual_seed(0)
    model = build_model(tk_config(saturation="official"), corpus).eval()
    assert model.dense.bias is None and model.kernel_alpha.tolist() == [1.0] * 11  # the official initialisation
    with torch.no_grad():  # random weights, the same in both: the scale moves off 1 so its place is tested
        model.kernel_alpha.uniform_(0.3, 3.0)
        model.dense.weight.uniform_(-0.5, 0.5)
    ids = batch(model, corpus, ["q1_d0", "q1_d1", "q2_d3", "q3_d2"])
    with torch.no_grad():
        scores = model(**ids)
        q, q_mask = model.embedder(ids["query"])
        d, d_mask = model.embedder(ids["doc"])
        q, d = model.contextualizer(q, q_mask), model.contextualizer(d, d_mask, is_document=True)
        port = official_tk_pooling(q, d, q_mask, d_mask, model.mu, model.sigma, model.kernel_alpha, model.dense.weight)
    assert (q_mask == 0).any() and (d_mask == 0).any()  # padding on both sides: the masks' places are tested
    difference = (scores - port).abs().max().item()
    print(f"TK official saturation vs the official port: max |difference| {difference:.2e}")
    assert difference < TOLERANCE * max(1.0, port.abs().max().item())
    assert scores.std() > 1e-3  # not a constant that any formula would match


def test_tk_default_saturation_is_unchanged(corpus):
    ids = None
    scores = {}
    for name, extra in (("absent", {}), ("knrm", {"saturation": "knrm"}), ("official", {"saturation": "official"})):
        torch.manual_seed(1)
        model = build_model(tk_config(**extra), corpus).eval()
        ids = ids or batch(model, corpus, ["q1_d0", "q2_d1", "q3_d2"])
        with torch.no_grad():
            scores[name] = model(**ids)
        if name != "official":
            assert model.dense.bias is not None and not hasattr(model, "kernel_alpha")
    torch.testing.assert_close(scores["knrm"], scores["absent"], rtol=0, atol=0)
    assert not torch.allclose(scores["official"], scores["absent"])  # the option changes the computation
    with pytest.raises(InputError, match="saturation"):
        build_model(tk_config(saturation="log"), corpus)


# ---- TKL -----------------------------------------------------------------------------------------------------


def randomise_tkl(model) -> dict[str, torch.Tensor]:
    """Random saturation and kernel weights (b's output kept >= 1: the project's guard, which the port lacks);
    returns them under the port's names."""
    with torch.no_grad():
        model.saturation_query.weight.normal_(0, 0.3)
        model.saturation_norm.weight.uniform_(0.5, 1.5)
        model.saturation_norm.bias.uniform_(-0.5, 0.5)
        for layer, low, high in (
            (model.saturation_a, 50, 150),
            (model.saturation_b, 20, 120),
            (model.saturation_c, 50, 150),
        ):
            layer.weight.uniform_(-5, 5)
            layer.bias.uniform_(low, high)
        model.kernel_weights.weight.uniform_(-0.5, 0.5)
    names = {"a": model.saturation_a, "b": model.saturation_b, "c": model.saturation_c}
    weights = {f"{k}_{p}": getattr(layer, {"w": "weight", "b": "bias"}[p]) for k, layer in names.items() for p in "wb"}
    return {
        **weights,
        "query": model.saturation_query.weight,
        "norm_w": model.saturation_norm.weight,
        "norm_b": model.saturation_norm.bias,
        "dense": model.kernel_weights.weight,
    }


@pytest.mark.parametrize("tail_regions", [True, False])
def test_tkl_official_saturation_is_the_official_code(corpus, tail_regions):
    torch.manual_seed(0)
    model = build_model(tkl_config(saturation="official", tail_regions=tail_regions), corpus).eval()
    assert not hasattr(model, "salience") and model.saturation_b.bias.item() == 100.0
    assert model.saturation_a.weight.abs().max() <= 0.014  # the official U(-0.014, 0.014)
    weights = randomise_tkl(model)
    # a 160-token document (4 whole chunks) batched with shorter ones: the official code keeps a short document's
    # tail regions when a longer one shares its batch, where the project's tail_regions rule has them too; and a
    # document opening with 40 unknown words (masked): regions without a real token, zeroed by both
    ids = batch(model, corpus, ["q1_d0", "q1_d1", "q2_d2", "q3_d3"])
    unknown = " ".join(["zzunknownzz"] * 40 + corpus.docs["q3_d3"].split())
    ids["doc"][3] = model.encode([""], ["unknown"], [unknown])["doc"][0, : ids["doc"].shape[1]]
    with torch.no_grad():
        topography, valid = model._topography(ids["query"], ids["doc"])
        q, q_mask = model.embedder(ids["query"])
        d, d_mask = model.embedder(ids["doc"])
        q = model.contextualizer(q, q_mask)
        d, _ = contextualize_windows(
            d, d_mask, lambda v, m: model.contextualizer(v, m, is_document=True), model.window, model.overlap
        )
        port = official_tkl_topography(q, d, q_mask, d_mask, model.mu, model.sigma, weights)
    lengths = (ids["doc"] != 0).sum(dim=1)
    assert d_mask[3, :40].sum() == 0 and d_mask[:3].sum(dim=1).tolist() == lengths[:3].tolist()
    assert (topography[3, :5] == 0).all() and (port[3, :5] == 0).all()  # regions of unknown words only
    common = min(topography.shape[1], port.shape[1])
    compared = valid[:, :common]
    assert compared.sum() > 20 and (lengths < lengths.max()).any()
    difference = (topography[:, :common] - port[:, :common]).abs()[compared].max().item()
    scale = port[:, :common][compared].abs().max().item()
    print(
        f"TKL official saturation (tail_regions {tail_regions}) vs the official port: max |difference| "
        f"{difference:.2e} (values up to {scale:.1f})"
    )
    assert difference < TOLERANCE * max(1.0, scale)
    assert port[:, :common][compared].std() > 1e-2
    if tail_regions:  # a short document's regions running past its end are compared too
        short = lengths.argmin().item()
        assert compared[short].sum() * 2 > lengths[short] - 2


def test_tkl_default_saturation_is_unchanged(corpus):
    ids = None
    scores = {}
    for name, extra in (
        ("absent", {}),
        ("embedding", {"saturation": "embedding"}),
        ("official", {"saturation": "official"}),
    ):
        torch.manual_seed(2)
        model = build_model(tkl_config(**extra), corpus).eval()
        ids = ids or batch(model, corpus, ["q1_d0", "q2_d1", "q4_d3"])
        with torch.no_grad():
            scores[name] = model(**ids)
        if name != "official":
            assert hasattr(model, "salience") and not hasattr(model, "saturation_norm")
    torch.testing.assert_close(scores["embedding"], scores["absent"], rtol=0, atol=0)
    assert not torch.allclose(scores["official"], scores["absent"])
    assert math.isfinite(scores["official"].sum().item())


@pytest.mark.parametrize(
    "config, new",
    [
        (tk_config(saturation="official"), {"kernel_alpha"}),
        (
            tkl_config(saturation="official"),
            {"saturation_query.weight", "saturation_norm.weight", "saturation_norm.bias"},
        ),
    ],
)
def test_official_saturation_trains_at_the_scoring_rate(corpus, config, new):
    torch.manual_seed(3)
    model = build_model(config, corpus)
    names = dict(model.named_parameters())
    assert new <= set(names)
    scoring = type(model).parameter_groups["scoring"]
    assert all(name.startswith(scoring) for name in new)  # train.scoring_lr reaches them, as the kernel weights
    ids = batch(model, corpus, ["q1_d0", "q2_d1", "q3_d2", "q4_d4"])
    model(**ids).sum().backward()
    for name in new:
        assert torch.isfinite(names[name].grad).all() and names[name].grad.abs().sum() > 0, name
