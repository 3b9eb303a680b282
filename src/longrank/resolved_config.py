"""Stage ``resolved_config``: the config as the workflow resolved it (validated, defaults filled in), written beside
the results it produced, with each model entry as its jobs read it (``resolved_models``). The report reads it there
and prints it."""

from __future__ import annotations

import json

from longrank.io.json_yaml import write_json
from longrank.config.model_entries import Effective, effective_settings
from longrank.config.model_types import architecture_params, capabilities, declared_type, entry_defaults
from longrank.config.train_settings import TrainSettings


def add_arguments(parser):
    parser.add_argument("--json", required=True, help="the resolved config as JSON")
    parser.add_argument("--out", required=True)


# The version of what this stage writes beside the resolved config (a rule parameter: raise it when the shape of
# config.json changes, so that results made before rerun the stage rather than give the report an old shape)
CONFIG_JSON_SHAPE = 4


def run(args):
    config = json.loads(args.json)
    config["resolved_models"] = resolved_models(config["models"], effective_settings(config))
    write_json(args.out, config)


def resolved_models(models: dict, effective: dict[str, Effective] | None = None) -> dict:
    """Each model entry as its jobs read it, for the report, which imports nothing from models/ or train/: its
    architecture keys with the model's defaults filled in, its training keys with the loop's, the entry it is
    ``like`` (if any), whether it is built on a pretrained WordPiece encoder, its capabilities (what the report
    asks of its type: longrank.config.model_types.Capabilities) and, from a whole config, its effective settings (its rerank
    depth, first stage and the words it reads: longrank.config.model_entries.Effective)."""
    return {
        name: {
            "architecture": {**entry_defaults(entry), **architecture_params(entry)},
            "train": {**TrainSettings.defaults(), **(entry.get("train") or {})},
            "like": entry.get("like"),
            "on_pretrained_encoder": declared_type(entry).on_pretrained_encoder,
            "capabilities": capabilities(entry).to_json(),
            **({"effective": effective[name].to_json()} if effective else {}),
        }
        for name, entry in models.items()
    }
