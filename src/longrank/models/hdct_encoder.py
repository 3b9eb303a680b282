"""HDCT (Dai & Callan, WWW 2020, "Context-aware document term weighting for ad-hoc search"): a pretrained
encoder with a per-token regression head predicts how important each term of a passage is. The network and its
weights' file only: what it is trained on and how (stage ``hdct``, :mod:`longrank.train.hdct`) and how its weights
become the BM25 index a first stage (``method: hdct``) retrieves from (:mod:`longrank.retrieval.hdct_index`) sit above
it, so that nothing here imports the first stages or the training.

- **Term weights**: the encoder reads a passage (its words given as pre-split words; a word's weight is its
  first WordPiece's output); a linear head gives each word occurrence a weight ŷ (clipped at 0 where it becomes a
  pseudo term frequency).
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from longrank.models.checkpoint import load_weights
from longrank.models.modules.encoders import load_encoder, load_tokenizer

#: the file of the stage's output directory that holds the trained model's weights
WEIGHTS = "model.safetensors"


class HDCT(nn.Module):
    """The encoder and its per-token regression head."""

    def __init__(self, encoder, tokenizer, max_tokens: int = 256):
        super().__init__()
        self.encoder, self.tokenizer, self.max_tokens = encoder, tokenizer, max_tokens
        self.head = nn.Linear(encoder.config.hidden_size, 1)

    @property
    def device(self) -> torch.device:
        return self.head.weight.device

    def forward(self, passages: list[list[str]]) -> list[torch.Tensor]:
        """Per passage, one weight per word (words the tokenizer cut off past ``max_tokens`` get 0)."""
        enc = self.tokenizer(
            passages,
            is_split_into_words=True,
            truncation=True,
            max_length=self.max_tokens,
            padding=True,
            return_tensors="pt",
        )
        states = self.encoder(
            input_ids=enc["input_ids"].to(self.device), attention_mask=enc["attention_mask"].to(self.device)
        ).last_hidden_state
        raw = self.head(states).squeeze(-1)  # [B, T]
        out = []
        for i, words in enumerate(passages):
            first = {}
            for position, word in enumerate(enc.word_ids(i)):
                if word is not None and word not in first:
                    first[word] = position
            index = torch.tensor([first.get(w, -1) for w in range(len(words))], device=self.device)
            weights = raw[i].gather(0, index.clamp(min=0))
            out.append(torch.where(index >= 0, weights, torch.zeros_like(weights)))
        return out


def load_model(directory: Path, encoder: str) -> HDCT:
    """The model the ``hdct`` stage trained on ``encoder`` and saved in ``directory``, ready to weight passages."""
    model = HDCT(load_encoder(encoder), load_tokenizer(encoder))
    load_weights(model, directory / WEIGHTS)
    return model.eval()
