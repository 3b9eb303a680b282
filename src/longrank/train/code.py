"""The code a training runs, as one digest (``longrank.results.code_digest``): the train stage's module and the model's,
with every package module they import. Part of the training fingerprint, so that a state left by other code is
never resumed, and the train rule's parameter, so that changed arithmetic retrains. Light on purpose (no torch):
the workflow computes it when it builds the DAG."""

from __future__ import annotations

from pathlib import Path

from longrank.results.code_digest import code_digest, module_name
from longrank.models.registry import model_module

# What `python -m longrank train` runs (longrank.cli.STAGES: longrank.train.train), by its file: the digest reads it and
# never imports it (the stage imports the fingerprint, which imports this module)
TRAINING_FILE = Path(__file__).with_name("train.py")


def training_code_digest(model_type: str) -> str:
    return code_digest(module_name(TRAINING_FILE), model_module(model_type))
