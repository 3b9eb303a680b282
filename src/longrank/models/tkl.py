"""TKL: Hofstätter, Zamani, Mitra, Craswell and Hanbury, "Local Self-Attention over Long Text for Efficient
Document Retrieval" (SIGIR 2020). TK (``tk.py``) made to read thousands of document tokens.

Equation by equation (the paper's numbering). Where the paper is silent, defaults follow the official code
(matchmaker's ``models/published/sigir20_tkl.py``); each such choice is a key, with this project's first
reading still reachable.

- Eq. 1, local self-attention. The document is cut into chunks of ``window`` w = 40 tokens; each
  chunk is contextualised together with ``overlap`` o tokens of context on each side (a w + 2o token window,
  stride w) and only the chunk's own w output vectors are kept, so every token's vector comes from
  exactly one window, the one in whose middle it sits. The first window has no left context: it sees
  d_1..d_{w+o} (the paper's ``TF(d_{1:w+o})``; implemented as o masked padding slots, so position features
  are the same for every window: a token of the kept chunk always sits at slots o..o+w-1). The paper's
  ``TF(d_{w-o:2w+o})_{o:-o}`` is the second window; we read the first window's ``_{1:o}`` as ``_{1:-o}``
  (keep all but the right overlap), the only reading under which the concatenation covers d_1..d_m once.
  ``overlap``: the paper (§4) states o = 10, which the full-scale configs (config/trec-dl-20*.yaml) set; the
  official code hard-codes o = 5, the default here, kept so that the CPU config (which leaves the key out) keeps
  its measured numbers. The query is contextualised in one window. Windows whose kept chunk holds only
  padding are skipped and the remaining windows of the whole batch are packed into one Transformer batch
  (``pack_windows: true``); ``pack_windows: false`` runs every window of the padded batch (same scores, more work: the comparison the
  ``bench`` stage makes), and packing is used only where it pays (``modules/windows.py``: enough windows to skip,
  and on a GPU enough windows in the batch). ``window_passes`` counts the windows fed to the Transformer.
- Eq. 2, kernels: as TK (11 kernels, sigma 0.1).
  Positions (official code): trainable (``positions: learned``), initialised with sinusoids; the query's
  start at 0, every document window's at ``doc_position_offset`` = 500 (``modules.contextualizer.Contextualizer``).
  The starting sinusoids: ``sinusoids: project`` (default) or ``official`` (matchmaker's table,
  ``modules/positions.py``; the paper is silent), which the full-scale configs use.
- Eq. 3, regions: kernel activations summed over sliding regions of ``region_size`` r = 30 document tokens,
  one region starting at every ``region_stride`` = 2 tokens (official code; ``region_stride: 1`` starts one at every token).
  ``tail_regions: true`` (default; this project's rule, not the official code's): a document of n tokens has
  regions starting at every stride before n, the last ones running past its end and holding fewer than r
  tokens, which is what the region-length input c_len of Eq. 5 is for; ``false`` keeps only full regions
  (starts 0 .. max(n - r, 0); c_len is then the constant r). Either way a score never depends on the other
  documents of a batch. The official code differs on purpose here: it slides regions over the *batch's*
  padded width (its windows padded to the longest document, w-aligned) and keeps every region with at least
  one real token, so a short document's tail regions exist only when a longer document shares its batch
  (its score changes with the batch it is scored in; a document alone in a batch of its own length gets
  none past width - r). A reranker's score should not depend on which candidates share its batch, so the
  project keeps the batch-independent rule (regions up to the document's own end).
- Eq. 4-5, learned saturation ``a * x^(1/b) - c`` with a, b, c = [ReLU(e_i); c_len] W + bias per query term
  and region, e_i a one-dimensional query-term salience embedding initialised with the collection IDF and
  c_len the region's token count. Biases are initialised to 100 (a = b = c = 100: 100 x^(1/100) - 100 ~ ln x,
  so training starts log-like) and W to N(0, 0.01) (still log-like, but every parameter gets a gradient
  from the first step). Numerical safety: x is clamped to >= 1e-10 (KNRM's clamp; 100 x^(0.01) - 100 at
  1e-10 is -20.6 ~ ln 1e-10) and b to >= 1 (the function stays a saturation, never super-linear, and
  x^(1/b) <= x cannot overflow). ``saturation: embedding`` (default) is the paper's Eq. 4-5 above; ``official``
  is the official code's ``embedding`` form: e_i a linear map (no bias) of the *contextualised* query vector, not an
  IDF-initialised per-word embedding; [e_i; c_len] LayerNormed before the three layers; W from U(-0.014, 0.014)
  (biases 100); ``x ** (1 / b)``; regions without a real token zeroed. Kept from here: the clamp b >= 1 (the
  official code has none; b starts at 100, and below 1 x^(1/b) may overflow). ``saturation: log`` is the fixed
  ln(max(x, 1e-10)) of earlier kernel models (the official ``log`` saturation scales x by a learned
  per-kernel factor first), ``saturation: linear`` fixes b = 1 (a x - c; a's bias initialised to 1 and c's
  to 0): the Table 2 ablation.
- Eq. 6, relevance topography: saturated values summed over (real) query terms, kernels weighted by W_k.
- Eq. 7, top-local-max: greedily the t = ``top_t`` highest regions, each followed by non-maximum suppression
  of every region starting less than ``nms_radius`` (default r) tokens away, so selected regions never
  overlap and no term match counts twice; each maximum is taken with its f = ``neighbours`` left and right
  topography values (clamped to the document's regions), t (2f + 1) values that W_s weights into the score.
  W_s starts at ones with no bias (``region_init: ones``, official code: the untrained score is the top
  regions' summed topography); ``uniform`` draws ±0.014 with a bias, as the kernel weights start (an ablation).
- ``exact_match: true`` adds this project's exact-match channel (``modules/exact_match.py``; in neither paper) to
  Eq. 7's score: the IDF-weighted log term frequency of each query word among the document's read tokens.
- Learning rates: ``train.scoring_lr`` reaches W_k, W_s and the saturation layers and salience embedding;
  ``train.embedding_lr`` the word embeddings (the official code trains kernel weights at 10x the rest).
  A document with fewer than t separable regions gets zeros for the missing ones (and start -1 in
  ``explain``).
- Reranking (``score_pairs``, then ``explain_pairs``) contextualises each distinct document's windows once per job
  (``modules/kept_documents.py``): the same scores and regions to fp32's rounding.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from longrank.data.words import PAD
from longrank.errors import InputError
from longrank.models.base import Ranker, config_keys, split_config
from longrank.models.modules import kept_documents
from longrank.models.modules.contextualizer import Contextualizer
from longrank.models.modules.exact_match import ExactMatch
from longrank.models.modules.kernel_pooling import cosine_matrix, gaussian, tk_kernels
from longrank.models.modules.windows import contextualize_windows
from longrank.models.modules.word_embedder import WordEmbedder
from longrank.models.tkl_regions import MIN_X, region_sums, saturate, top_local_max

SATURATIONS = ("embedding", "official", "log", "linear")
REGION_INITS = ("ones", "uniform")


def _check_settings(
    saturation: str,
    window: int,
    region_size: int,
    region_stride: int,
    top_t: int,
    region_init: str,
    overlap: int,
    neighbours: int,
    nms_radius: int | None,
) -> None:
    if saturation not in SATURATIONS:
        raise InputError(f"saturation: {saturation!r} is not one of {list(SATURATIONS)}")
    for key, value in (
        ("window", window),
        ("region_size", region_size),
        ("region_stride", region_stride),
        ("top_t", top_t),
    ):
        if int(value) < 1:
            raise InputError(f"{key}: must be a positive integer, got {value!r}")
    if region_init not in REGION_INITS:
        raise InputError(f"region_init: {region_init!r} is not one of {list(REGION_INITS)}")
    if overlap < 0 or neighbours < 0 or (nms_radius is not None and nms_radius < 1):
        raise InputError(
            f"overlap and neighbours must be >= 0 and nms_radius >= 1, got overlap={overlap}, "
            f"neighbours={neighbours}, nms_radius={nms_radius}"
        )


class TKL(Ranker):
    default_loss = "pairwise_hinge"
    config_parts = (WordEmbedder, Contextualizer, tk_kernels)
    #: TKL's own defaults for keys of its parts: trainable positions, as the official TKL code
    part_defaults = {"positions": "learned"}
    parameter_groups = {
        "embeddings": ("embedder.",),
        "scoring": ("kernel_weights.", "region_weights.", "saturation_", "salience.", "exact_match."),
    }
    mu: torch.Tensor  # buffers: the kernels' centres and widths
    sigma: torch.Tensor

    def __init__(
        self,
        embedder: WordEmbedder,
        contextualizer: Contextualizer,
        mu: torch.Tensor,
        sigma: torch.Tensor,
        idf: torch.Tensor,
        max_query_len: int = 30,
        max_doc_len: int = 2000,
        window: int = 40,
        overlap: int = 5,
        region_size: int = 30,
        region_stride: int = 2,
        tail_regions: bool = True,
        top_t: int = 3,
        neighbours: int = 2,
        nms_radius: int | None = None,
        saturation: str = "embedding",
        region_init: str = "ones",
        pack_windows: bool = True,
        exact_match: bool = False,
    ):
        super().__init__()
        _check_settings(
            saturation, window, region_size, region_stride, top_t, region_init, overlap, neighbours, nms_radius
        )
        self.embedder, self.contextualizer = embedder, contextualizer
        self.max_query_len, self.max_doc_len = max_query_len, max_doc_len
        self.window, self.overlap = window, overlap
        self.region_size, self.region_stride, self.tail_regions = region_size, region_stride, tail_regions
        self.top_t, self.neighbours = top_t, neighbours
        self.nms_radius = region_size if nms_radius is None else nms_radius
        self.saturation, self.pack_windows = saturation, pack_windows
        self.window_passes = 0  # windows contextualised since construction (bench and tests read it)
        self.register_buffer("mu", mu, persistent=False)
        self.register_buffer("sigma", sigma, persistent=False)
        if saturation == "official":
            self._add_official_saturation(embedder.dim)
        elif saturation != "log":
            self._add_saturation(idf, saturation)
        self._add_scoring(len(mu), top_t, neighbours, region_init)
        self.exact_match = ExactMatch() if exact_match else None
        self._kept_documents = kept_documents.KeptDocuments()

    def _add_saturation(self, idf: torch.Tensor, saturation: str) -> None:
        # Eq. 5: query-term salience e_i (IDF-initialised) and [ReLU(e_i); c_len] -> a, b, c.
        self.salience = nn.Embedding.from_pretrained(idf[:, None].clone(), freeze=False)
        self.saturation_a = nn.Linear(2, 1)
        self.saturation_c = nn.Linear(2, 1)
        start = 100.0 if saturation == "embedding" else None
        for layer, bias in ((self.saturation_a, start or 1.0), (self.saturation_c, start or 0.0)):
            nn.init.normal_(layer.weight, std=0.01)
            nn.init.constant_(layer.bias, bias)
        if saturation == "embedding":
            self.saturation_b = nn.Linear(2, 1)
            nn.init.normal_(self.saturation_b.weight, std=0.01)
            nn.init.constant_(self.saturation_b.bias, 100.0)

    def _add_official_saturation(self, dim: int) -> None:
        # The official code's: e_i = q_i w (no bias), LayerNorm([e_i; c_len]) -> a, b, c; W ~ U(-0.014, 0.014), bias 100
        self.saturation_query = nn.Linear(dim, 1, bias=False)
        self.saturation_norm = nn.LayerNorm(2)
        self.saturation_a, self.saturation_b, self.saturation_c = (nn.Linear(2, 1) for _ in range(3))
        for layer in (self.saturation_a, self.saturation_b, self.saturation_c):
            nn.init.uniform_(layer.weight, -0.014, 0.014)
            nn.init.constant_(layer.bias, 100.0)

    def _add_scoring(self, n_kernels: int, top_t: int, neighbours: int, region_init: str) -> None:
        self.kernel_weights = nn.Linear(n_kernels, 1, bias=False)  # W_k (Eq. 6)
        nn.init.uniform_(self.kernel_weights.weight, -0.014, 0.014)
        # W_s (Eq. 7). Official code: every region value weighted 1, no bias, so the untrained score is the sum
        # of the top regions' topography; ``region_init: uniform`` draws ±0.014 with a bias (an ablation).
        self.region_weights = nn.Linear(top_t * (2 * neighbours + 1), 1, bias=region_init == "uniform")
        if region_init == "ones":
            nn.init.ones_(self.region_weights.weight)
        else:
            nn.init.uniform_(self.region_weights.weight, -0.014, 0.014)
            nn.init.zeros_(self.region_weights.bias)

    @classmethod
    def from_config(cls, params, corpus):
        embedder_keys, context_keys, kernel_keys, own = split_config(
            "tkl", params, WordEmbedder, Contextualizer, tk_kernels, cls.__init__
        )
        embedder = WordEmbedder.for_corpus(corpus, **embedder_keys)
        sizes = {**config_keys(cls.__init__), **own}  # the learned position table must hold a query and a window
        longest = max(sizes["max_query_len"], sizes["window"] + 2 * sizes["overlap"])
        contextualizer = Contextualizer(embedder.dim, longest, **{**cls.part_defaults, **context_keys})
        return cls(embedder, contextualizer, *tk_kernels(**kernel_keys), embedder.vocab.idf(), **own)

    def encode(self, queries, doc_ids, docs):
        return self.embedder.encode_pair(queries, docs, self.max_query_len, self.max_doc_len)

    def _saturate(
        self, sums: torch.Tensor, query: torch.Tensor, q: torch.Tensor, region_len: torch.Tensor
    ) -> torch.Tensor:
        """sums [B, Lq, K, R], query ids [B, Lq], contextual query [B, Lq, E], c_len [B, R] -> [B, Lq, K, R]."""
        if self.saturation == "log":
            return torch.log(torch.clamp(sums, min=MIN_X))
        if self.saturation == "official":
            return self._saturate_official(sums, q, region_len)
        salience = torch.relu(self.salience(query))[..., None]  # [B, Lq, 1, 1]
        region_len = region_len[:, None, None, :]  # [B, 1, 1, R]

        def condition(layer: nn.Linear) -> torch.Tensor:  # [ReLU(e_i); c_len] W + bias -> [B, Lq, 1, R]
            w = layer.weight[0]
            return salience * w[0] + region_len * w[1] + layer.bias

        a, c = condition(self.saturation_a), condition(self.saturation_c)
        b = condition(self.saturation_b) if self.saturation == "embedding" else torch.ones_like(a)
        return saturate(sums, a, b, c)

    def _saturate_official(self, sums: torch.Tensor, q: torch.Tensor, region_len: torch.Tensor) -> torch.Tensor:
        """The official code's saturation: LayerNorm([q_i w; c_len]) -> a, b, c, each [B, Lq, 1, R]."""
        e = self.saturation_query(q.float())  # [B, Lq, 1]
        length = region_len[:, None, :].expand(-1, e.shape[1], -1)  # [B, Lq, R]
        influence = self.saturation_norm(torch.stack([e.expand_as(length), length], dim=-1))  # [B, Lq, R, 2]
        a, b, c = (
            lin(influence).transpose(-1, -2) for lin in (self.saturation_a, self.saturation_b, self.saturation_c)
        )
        return saturate(sums, a, b, c) * (region_len > 0)[:, None, None, :]

    def _document_states(self, doc: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """ids [B, L] -> contextualised words [B, L, E] (window by window, Eq. 1) and their mask [B, L]: the side
        that never sees the query."""
        return self._contextualise_document(*self.embedder(doc))

    def _contextualise_document(self, d: torch.Tensor, d_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        d, passes = contextualize_windows(
            d,
            d_mask,
            lambda v, m: self.contextualizer(v, m, is_document=True),
            self.window,
            self.overlap,
            self.pack_windows,
        )
        self.window_passes += passes
        return d, d_mask

    def _kept_document_states(self, docs: list[str], width: int) -> tuple[torch.Tensor, ...]:
        """``_document_states`` of ``docs``' ids padded to ``width``, each distinct document contextualised once per
        job (``kept_documents``)."""

        def contextualise(texts: list[str]) -> list[tuple[torch.Tensor, ...]]:
            ids = self.embedder.encode(texts, self.max_doc_len).to(self.device)
            return kept_documents.trimmed_rows(self._document_states(ids), (ids != PAD).sum(dim=1).tolist())

        return kept_documents.padded(self._kept_documents.get(self, docs, contextualise), width)

    def _topography(
        self, query: torch.Tensor, doc: torch.Tensor, states: tuple[torch.Tensor, ...] | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Eq. 1-6 -> relevance topography [B, R] and the valid-region mask [B, R]; ``states``: the documents'
        (``_document_states``), if already made. Kernel tensors are kept as [B, Lq, K, Ld] so region sums run along
        the contiguous last dimension without copies. Without ``states`` the two sides run in the order the forward
        always ran them (query words, document words, then their contexts): another order can sum a shared weight's
        gradient in another order (TK's ``mix`` did), and training would move in the last bits."""
        q, q_mask = self.embedder(query)
        if states is None:
            words = self.embedder(doc)
            q = self.contextualizer(q, q_mask)
            states = self._contextualise_document(*words)
        else:
            q = self.contextualizer(q, q_mask)
        d, d_mask = states
        # Kernels, region sums, saturation and topography in fp32 also under autocast (rerank.precision): the learned
        # saturation subtracts terms near 100 (a x^(1/b) - c) and the top-t regions are chosen among near ties, which
        # bf16's 3 significant digits would reorder; only the Transformer above runs in half precision.
        with torch.autocast(doc.device.type, enabled=False):
            cosine = cosine_matrix(q, d)[:, :, None, :]  # [B, Lq, 1, Ld]
            kernels = (
                gaussian(-((cosine - self.mu[:, None]) ** 2) / (2 * self.sigma[:, None] ** 2))
                * d_mask[:, None, None, :]
            )
            if self.tail_regions:  # regions may run past the document's end: one starts at every stride before it
                kernels, d_mask = F.pad(kernels, (0, self.region_size - 1)), F.pad(d_mask, (0, self.region_size - 1))
            sums = region_sums(kernels, self.region_size, self.region_stride)  # Eq. 3, [B, Lq, K, R]
            region_len = region_sums(d_mask, self.region_size, self.region_stride)  # c_len, [B, R]
            q_weight = self.embedder.query_weights(query, q_mask)[:, :, None, None]
            saturated = (self._saturate(sums, query, q, region_len) * q_weight).sum(dim=1)  # [B, K, R]
            topography = torch.einsum("bkr,k->br", saturated, self.kernel_weights.weight[0])  # Eq. 6
        starts = torch.arange(topography.shape[1], device=doc.device) * self.region_stride
        # Regions are valid by the document's length in tokens, unknown words included: d_mask leaves them out
        # when mask_unknown_words (the default), and counting only known words lost a document's last regions
        # to its OOV words.
        n_tokens = (doc != PAD).sum(dim=1)
        last_start = n_tokens - 1 if self.tail_regions else (n_tokens - self.region_size).clamp(min=0)
        return topography, starts[None, :] <= last_start[:, None]

    def _select(
        self, query: torch.Tensor, doc: torch.Tensor, states: tuple[torch.Tensor, ...] | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Top-t regions of the topography; ``states``: the documents' (``_document_states``), if already made."""
        topography, valid = self._topography(query, doc, states)
        return top_local_max(topography, valid, self.top_t, self.neighbours, self.nms_radius, self.region_stride)

    def forward(self, query: torch.Tensor, doc: torch.Tensor) -> torch.Tensor:
        return self._score(query, doc)

    def score_pairs(self, queries, doc_ids, docs):
        """The forward's scores with each distinct document contextualised once per job (``kept_documents``)."""
        if not kept_documents.applies(self):
            return super().score_pairs(queries, doc_ids, docs)
        batch = {k: v.to(self.device) for k, v in self.encode(queries, doc_ids, docs).items()}
        return self._score(**batch, states=self._kept_document_states(docs, batch["doc"].shape[1]))

    def explain_pairs(self, queries, doc_ids, docs):
        """``explain`` reading the documents ``score_pairs`` kept."""
        if not kept_documents.applies(self):
            return super().explain_pairs(queries, doc_ids, docs)
        batch = {k: v.to(self.device) for k, v in self.encode(queries, doc_ids, docs).items()}
        return self._explain(**batch, states=self._kept_document_states(docs, batch["doc"].shape[1]))

    def _score(
        self, query: torch.Tensor, doc: torch.Tensor, states: tuple[torch.Tensor, ...] | None = None
    ) -> torch.Tensor:
        features, _, _ = self._select(query, doc, states)
        score = self.region_weights(features).squeeze(-1)
        if self.exact_match is not None:
            score = score + self.exact_match(
                query, doc, self.embedder.query_weights(query, self.embedder.token_mask(query))
            )
        return score

    def explain(self, query: torch.Tensor, doc: torch.Tensor) -> dict[str, torch.Tensor]:
        """Token offsets of the top-t regions in the document (-1 where the document had fewer) and their
        topography values, the paper's highlightable regions (Fig. 3)."""
        return self._explain(query, doc)

    def _explain(
        self, query: torch.Tensor, doc: torch.Tensor, states: tuple[torch.Tensor, ...] | None = None
    ) -> dict[str, torch.Tensor]:
        _, index, peaks = self._select(query, doc, states)
        return {"region_starts": torch.where(index >= 0, index * self.region_stride, index), "region_scores": peaks}
