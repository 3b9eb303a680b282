# Config validation (fails at parse time naming the key and the schema rule) and the helpers rules use.
import json

from longrank.config import validate_config
from longrank.io import InputError

try:
    validate_config(config, workflow.source_path("../../config/schema.yaml"))
except InputError as err:
    raise WorkflowError(str(err)) from None

R = f"results/{config['dataset']['name']}"
DATA = {name: f"{R}/data/{name}" for name in ("docs.jsonl", "queries.tsv", "qrels.txt", "folds.json", "doc_lengths.tsv", "stats.json")}
CANDIDATES = f"{R}/candidates/{config['first_stage']['method']}.run"
FIRST_STAGE = config["first_stage"]["method"]
FOLDS = list(range(config["splits"]["k"] if config["splits"]["method"] == "kfold" else 1))
MODELS = [name for name, entry in config["models"].items() if entry["enabled"]]
SYSTEMS = [FIRST_STAGE] + [s for m in MODELS for s in ([m, f"{m}+{FIRST_STAGE}"] if config["models"][m]["interpolate"] else [m])]
REPORT = f"{R}/report/index.html"
CONDA_ENV = "../../envs/longrank.yaml"  # used with --use-conda; pins as pyproject.toml

wildcard_constraints:
    model="[A-Za-z0-9_-]+",
    system="[A-Za-z0-9_+-]+",
    fold="[0-9]+",


def as_json(obj):
    return json.dumps(obj, sort_keys=True)


def model_config(wildcards):
    """Only the model's own entry: changing one model's hyper-parameter reruns only that model's jobs."""
    return as_json(config["models"][wildcards.model])


def run_file(wildcards):
    if wildcards.system == FIRST_STAGE:
        return CANDIDATES
    return f"{R}/runs/{wildcards.system}.run"


def local_collection_files(wildcards):
    """Local collection files are inputs, so editing them reruns the data stage."""
    dataset = config["dataset"]
    return [dataset[k] for k in ("docs", "queries", "qrels")] if dataset["source"] == "local" else []
