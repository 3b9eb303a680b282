"""Loading an encoder is a call with its own arguments, not a change to the process: the packaged MiniLM is read
with ``local_files_only`` (the hub is never asked about it), and the environment is left as it was, so a hub name
loaded later in the same process may still be downloaded."""

from __future__ import annotations

import os

import pytest

from longrank.models.modules import encoders
from longrank.models.modules.encoders import DEFAULT_ENCODER, RANDOM_BERT_BASE, load_encoder, load_tokenizer


# what looks an encoder name up: its tokenizer, its weights (random-bert-base's weights are built, not looked up)
LOOKUPS = {
    "minilm tokenizer": lambda: load_tokenizer(DEFAULT_ENCODER),
    "minilm weights": lambda: load_encoder(DEFAULT_ENCODER),
    "random-bert-base tokenizer": lambda: load_tokenizer(RANDOM_BERT_BASE),
}


@pytest.mark.stage
@pytest.mark.parametrize("lookup", list(LOOKUPS))
def test_looking_up_an_encoder_leaves_the_environment_unchanged(lookup, monkeypatch):
    LOOKUPS[lookup]()  # torch's and transformers' own imports set variables of theirs once
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    load_tokenizer.cache_clear()  # a cached tokenizer would not be looked up again
    before = dict(os.environ)
    loaded = LOOKUPS[lookup]()
    assert dict(os.environ) == before
    if "tokenizer" in lookup:
        assert loaded("wing lift")["input_ids"][1:-1] == loaded.convert_tokens_to_ids(["wing", "lift"])
    else:
        assert loaded.config.hidden_size == 384


def test_only_the_packaged_encoder_is_read_offline():
    path, where = encoders._resolve(DEFAULT_ENCODER)
    assert os.path.isdir(path) and where == {"local_files_only": True}
    # a hub name (full-scale configs: bert-base-uncased) may be downloaded
    assert encoders._resolve("bert-base-uncased") == ("bert-base-uncased", {})
