# Config validation (fails at parse time naming the key and the schema rule) and the helpers rules use.
import copy
import functools
import json
import os
import re
import sys

from pathlib import Path

from longrank.cli import stage_module
from longrank.results.code_digest import code_digest
from longrank.train.code import training_code_digest
from longrank.validation.validate import model_order, validate_config
from longrank.config.schema import DATASETS, SCHEMA
from longrank.config.files import check_command_line
from longrank.data.doc_field import extra_fields, field_readers
from longrank.console import print_failures
from longrank.config.model_types import DEFAULT_ENCODER, artifact_scopes, capabilities
from longrank.models.registry import model_module
from longrank.errors import InputError
from longrank.config.model_entries import effective_settings
from longrank import downloads
from longrank.config.names import check_outputs_not_inputs
from longrank.floors import floor_systems, model_floors
from longrank.results.lock import acquire as acquire_results, check_owner, release as release_results

try:
    # A shipped overlay without its bases (first line of each file under config/), named before validation trips on
    # whatever key the missing base would have set
    check_command_line(workflow.overwrite_configfiles or [], Path(workflow.basedir))
    # The schema and the shipped descriptions (`dataset: <name>`) of the checkout this Snakefile is in (not cached copies)
    validate_config(
        config,
        os.path.join(workflow.basedir, SCHEMA),
        datasets_dir=os.path.join(workflow.basedir, DATASETS),
    )
except InputError as err:
    raise WorkflowError(str(err)) from None

R = f"results/{config['dataset']['name']}"  # a safe name (longrank.config.names.SAFE_NAME): always a folder of results/
try:
    # no configured input inside results/<name>/: the data stage would overwrite (and Snakemake first delete) it
    check_outputs_not_inputs(config, R)
except InputError as err:
    raise WorkflowError(str(err)) from None
# Results owned by one workflow (src/longrank/results/lock.py): Snakemake's lock and records are in this working
# directory's .snakemake/, not beside the outputs, so a checkout whose results/ is another's (a symlink) would count
# that one's outputs up to date. Another working directory's config on these results is refused now, dry runs
# included; the lock on R itself is taken when jobs start (onstart, in the Snakefile) and released when they end.
RESOLVED_CONFIG = copy.deepcopy(config)  # as validated: what the owner record's digest is of
try:
    check_owner(Path(R), Path.cwd(), RESOLVED_CONFIG)
except InputError as err:
    raise WorkflowError(str(err)) from None


def take_results_lock():
    if workflow.execution_settings.lock:  # --nolock: the user's word that nothing else runs here
        try:
            acquire_results(Path(R), Path.cwd(), RESOLVED_CONFIG)
        except InputError as err:
            raise WorkflowError(str(err)) from None


def release_results_lock():
    release_results(Path(R))


DATA = {
    name: f"{R}/data/{name}"
    for name in (
        "docs.jsonl",
        "queries.tsv",
        "qrels.txt",
        "folds.json",
        "doc_lengths.tsv",
        "word_doc_freq.tsv",
        "excluded.tsv",
        "stats.json",
    )
}
FOLDS = list(range(config["splits"]["k"] if config["splits"]["method"] == "kfold" else 1))
MODELS = model_order(config["models"])
# Each model entry as its jobs read it (rerank depth, first stage, words read), resolved once: the rules pass these
# values, and no stage works them out again
EFFECTIVE = effective_settings(config)
FIRST_STAGES = list(config["first_stages"])  # a mapping once resolved (validate_config), the default first
# The untrained lexical rerankers (workflow/rules/sanity.smk), sanity rows every trained model must beat: system name
# -> Floor, query_term_matches (whole documents, global depth) first, then each trained model's own (the words it
# reads, at its depth; MODEL_FLOORS: model -> its floor's name), each once.
FLOORS = floor_systems(config)
SANITY = next(iter(FLOORS))  # query_term_matches: a system of the comparison, as before the models' own floors
MODEL_FLOORS = model_floors(config)
# Each trained model against its own floor: one Holm family of their own (rule compare_floors), so the floors change no
# p-value of the main table.
FLOOR_PAIRS = [(m, floor) for m, floor in MODEL_FLOORS.items() if floor != SANITY]


def first_stage_of(model):
    return EFFECTIVE[model].first_stage


def candidates_of(model):
    return f"{R}/candidates/{first_stage_of(model)}.run"


SYSTEMS = (
    FIRST_STAGES
    + [SANITY]
    + [s for m in MODELS for s in ([m, f"{m}+{first_stage_of(m)}"] if config["models"][m]["interpolate"] else [m])]
)
REPORT = f"{R}/report/index.html"
WORD2VEC = f"{R}/data/word2vec.txt"


def capability(model):
    """What a configured model's type declares (longrank.config.model_types.Capabilities): the workflow asks it, never
    the model's type name."""
    return capabilities(config["models"][model])


def speed_benched(bench):
    """The configured models the paper-figure bench ``bench`` times (longrank.config.model_types: speed_bench)."""
    return [m for m in MODELS if capability(m).speed_bench == bench]


def mores_speed_encoder():
    """The encoder mores_speed times: the first configured MORES entry's."""
    return next(
        (config["models"][m].get("encoder", DEFAULT_ENCODER) for m in speed_benched("mores_speed")), DEFAULT_ENCODER
    )


# MORES's Table 4 (the dot keeps it apart from bench/{model}.json): only when a MORES model is configured.
MORES_SPEED = (
    [f"{R}/bench/mores.speed.json"] if config["mores_speed"]["enabled"] and speed_benched("mores_speed") else []
)
# MIR's Fig. 5 (workflow/rules/bench.smk: mir_speed) times the reference MIR entry (named mir, else the first) beside
# BERT-MaxP over the same windows; MIR models read documents by id from their graph set, so the generic bench, which
# cuts synthetic documents, does not time them.
_MIR_MODELS = [m for m in speed_benched("mir_speed") if capability(m).reads_graph_set]
MIR_REFERENCE = "mir" if "mir" in _MIR_MODELS else next(iter(_MIR_MODELS), None)
MIR_SPEED = [f"{R}/bench/mir.speed.json"] if MIR_REFERENCE and config["mir_speed"]["enabled"] else []
# every model the generic bench times (bench.enabled: false, none)
BENCHED = [m for m in MODELS if not capability(m).reads_graph_set] if config["bench"]["enabled"] else []
CONDA_ENV = "../../envs/longrank.yaml"  # used with --use-conda; pins as pyproject.toml
# CPU threads of every job that runs a model (train, rerank, artifacts, hdct and the benches; their commands set
# OMP_NUM_THREADS={threads}): one. Torch's CPU arithmetic depends on its thread count: the default config's TKL trained
# on two threads and on one reads nDCG@10 0.349 and 0.315. Snakemake lowers a rule's threads to --cores, so with two
# a run's numbers changed with --cores; with one they are the same on any machine's --cores, and the tests (one thread
# a job) compute what a user's run does. The default config's models are small and a second thread mostly waited:
# two one-thread jobs side by side run the default run in less wall time and CPU time (docs/studies/default-run.md,
# Time). More per job: --set-threads train=4 (profiles/slurm sets its GPU jobs' threads to their cpus_per_task).
MODEL_THREADS = 1
# Scheduling: with one thread a job, the run is a list schedule of ~80 jobs on --cores cores, and it ends soonest when
# the long jobs start first and the short ones fill the cores at the end (docs/studies/speed.md, 11-13). Snakemake
# starts the ready job of highest priority, so the jobs are given levels by how long they take:
# - MIR's chain (spaCy's annotation, its graphs and what they read, then its training and rerank) is the longest of the
#   default run, and MIR trains longest at full scale too (docs/gpu-bill.md): first, so the other models' jobs fill the
#   other cores beside it instead of MIR running alone at the end. A rule's priority does not pass to the jobs it waits
#   for, so every job of the chain carries it: one left at 0 (the graphs' PRF pseudo-queries) held the graphs back by
#   six minutes.
# - the trainings (100-220 s each in the default run) and the jobs they wait for;
# - the reranks and the papers' speed tables (30-120 s);
# - the rest (benches, evaluations, history: seconds each) at 0. With all at one level a training once started last
#   and ran alone for 86 s.
MIR_CHAIN_PRIORITY = 3
TRAINING_PRIORITY = 2
RERANK_PRIORITY = 1


def mir_models():
    return [m for m in MODELS if capability(m).reads_graph_set]


@functools.cache  # the config is fixed once parsed; every job of the DAG asks
def mir_chain():
    """What MIR's rerank waits for, by the wildcards of the jobs that make it: the models trained (MIR's, the weights
    they share, a first stage's model), the first stages whose candidates are read, the first stages whose PISA index
    alone is read (a pseudo-query set's BM25) and the pseudo-query sets (graph sets' PRF queries, pre-training
    queries, HDCT's targets). A walk from MIR's models over what each of those reads, until nothing is added."""
    models, stages, index_only, sets = set(mir_models()), set(), set(), set()
    while True:  # each pass only adds configured names, so it ends
        size = (len(models), len(stages), len(index_only), len(sets))
        for m in list(models):
            entry = config["models"][m]
            models.add(weights_of(m))
            stages.add(first_stage_of(m))
            sets.add(pseudo_queries_of(m))
            if entry.get("graph_set") in config["mir_graphs"]:
                sets.add(config["mir_graphs"][entry["graph_set"]].get("prf_queries"))
        for stage in stages:
            spec = config["first_stages"][stage]
            if spec["method"] == "model":
                models.add(spec["model"])
            if spec["method"] == "hdct" and spec.get("targets", "titles") != "titles":  # as hdct_pseudo_queries
                sets.add(spec["targets"])
        sets.discard(None)
        index_only |= {config["pseudo_queries"][p].get("first_stage") for p in sets if p in config["pseudo_queries"]}
        index_only.discard(None)
        if size == (len(models), len(stages), len(index_only), len(sets)):
            return {"models": models, "stages": stages, "indexes": stages | index_only, "pseudo_sets": sets}


def chain_priority(part, otherwise=TRAINING_PRIORITY):
    """A rule's priority: MIR_CHAIN_PRIORITY for the jobs MIR's rerank waits for (``mir_chain()[part]`` holds the
    job's wildcard, ``model``, ``first_stage`` or ``pseudo_set``), else ``otherwise``."""
    wildcard = {"models": "model", "stages": "first_stage", "indexes": "first_stage", "pseudo_sets": "pseudo_set"}[part]
    return lambda wc: MIR_CHAIN_PRIORITY if getattr(wc, wildcard) in mir_chain()[part] else otherwise


def rerank_priority(wc):
    """Only MIR's own rerank is in its chain (a first stage's model is read through its artifacts)."""
    return MIR_CHAIN_PRIORITY if wc.model in mir_models() else RERANK_PRIORITY


wildcard_constraints:
    model="|".join(map(re.escape, config["models"])),  # configured models only (not the sanity row)
    system="[A-Za-z0-9_+@-]+",  # @: a model's floor, query_term_matches@{first stage}-top{depth}-first{words}w
    fold="[0-9]+",
    first_stage="[A-Za-z0-9_-]+",
    scope="collection|fold[0-9]+",
    pseudo_set="[A-Za-z0-9_-]+",
    graph_set="[A-Za-z0-9_-]+",
    field="[A-Za-z0-9_]+",  # a document field (rule doc_field)


def code_of(stage, model=None):
    """A digest of the code ``stage`` runs (its module, the model's, and the package modules they import:
    longrank.results.code_digest), a parameter of its rule: changed arithmetic reruns the job, a changed comment does not."""
    if stage == "train":
        return training_code_digest(config["models"][model]["type"])  # the one the training fingerprint holds
    roots = [stage_module(stage)] + ([model_module(config["models"][model]["type"])] if model else [])
    return code_digest(*roots)


def as_json(obj):
    return json.dumps(obj, sort_keys=True)


for _name in MODELS:
    _source = config["models"][_name].get("checkpoint_of")
    if _source is not None and (_source not in config["models"] or config["models"][_source].get("checkpoint_of")):
        raise WorkflowError(
            f"config key models.{_name}.checkpoint_of: {_source!r} must name a model that trains its own weights"
        )


def weights_of(model):
    """The model whose trained checkpoints ``model`` uses (``checkpoint_of``: Reuse variants share MORES's weights)."""
    return config["models"][model].get("checkpoint_of") or model


def checkpoints(wildcards):
    return expand(f"{R}/models/{weights_of(wildcards.model)}/fold{{fold}}/model.safetensors", fold=FOLDS)


def dev_runs(wildcards):
    return expand(f"{R}/models/{weights_of(wildcards.model)}/fold{{fold}}/dev.run", fold=FOLDS)


def collection_artifacts(wildcards):
    """Per-document artifacts built once from the data, when the model declares any: a mir model's graph set
    (workflow/rules/graphs.smk, shared by the entries naming it), else the model's own (workflow/rules/artifacts.smk).
    """
    entry = config["models"][wildcards.model]
    if "collection" not in artifact_scopes(entry):
        return []
    if "graph_set" in entry:
        return [f"{R}/graphs/{entry['graph_set']}"]
    return [f"{R}/artifacts/{wildcards.model}/collection"]


def pretraining_artifacts(wildcards):
    """What pre-training attaches: a mir model's graph set as the pseudo-queries' positives read (built by
    graphs_pretrain), else the model's collection artifacts."""
    entry = config["models"][wildcards.model]
    if "graph_set" in entry:
        return [f"{R}/graphs_pretrain/{pseudo_queries_of(wildcards.model)}/{entry['graph_set']}"]
    return collection_artifacts(wildcards)


def graph_set_settings(name):
    """A graph set's settings for its stage: the PRF queries arrive as an input directory, not a setting."""
    return as_json({k: v for k, v in config["mir_graphs"][name].items() if k != "prf_queries"})


def mir_speed_alike():
    """The configured entries mir_speed's side-by-side measurement gives a throughput for (MIR at other lengths, MaxP
    over the same windows): as a param, so adding an ablation does not rerun it, adding MIR-1K does."""
    from longrank.bench.mir_alike import timed_alike

    graph_set = json.loads(graph_set_settings(config["models"][MIR_REFERENCE]["graph_set"]))
    return as_json(timed_alike({m: config["models"][m] for m in MODELS}, MIR_REFERENCE, graph_set))


def graph_set_prf_queries(wildcards):
    """The pseudo-query set whose BM25 runs weight a graph set's PRF terms (mir_graphs.<set>.prf_queries), if any."""
    prf = config["mir_graphs"][wildcards.graph_set].get("prf_queries")
    return [f"{R}/pseudo_queries/{prf}"] if prf else []


def fold_artifacts(wildcards):
    """Per-document artifacts built from each fold's trained weights (MORES Reuse stores), one directory per fold."""
    if "fold" not in artifact_scopes(config["models"][wildcards.model]):
        return []
    return expand(f"{R}/artifacts/{wildcards.model}/fold{{fold}}", fold=FOLDS)


def stage_artifacts(wildcards):
    """A first stage a trained model produces (method model) reads that model's per-fold artifacts (its impact
    index); an hdct or pisa first stage reads its index."""
    spec = config["first_stages"][wildcards.first_stage]
    if spec["method"] == "hdct":  # HDCT's index, built once for the collection (workflow/rules/hdct.smk)
        return [f"{R}/hdct/{wildcards.first_stage}"]
    if spec["method"] == "pisa":  # PISA's index, once per collection and index settings (workflow/rules/pisa.smk)
        return [f"{R}/pisa/{wildcards.first_stage}"]
    if spec["method"] != "model":
        return []
    return expand(f"{R}/artifacts/{spec['model']}/fold{{fold}}", fold=FOLDS)


def hdct_pseudo_queries(first_stage):
    """The pseudo-query set an HDCT first stage trains on (targets: <set>); none for targets: titles."""
    targets = config["first_stages"][first_stage].get("targets", "titles")
    return [] if targets == "titles" else [f"{R}/pseudo_queries/{targets}"]


def model_embeddings(wildcards):
    """What a model's text and vectors read beyond the prepared data: the collection's word2vec vectors
    (workflow/rules/word2vec.smk) for a model configured with them, and the store of each document field its
    ``doc_fields`` names beyond ``dataset.doc_fields`` (workflow/rules/data.smk, rule doc_field)."""
    entry = config["models"][wildcards.model]
    fields = [doc_field_store(f) for f in extra_fields(entry.get("doc_fields"), config["dataset"].get("doc_fields"))]
    return ([WORD2VEC] if entry.get("embeddings") == "word2vec" else []) + fields


def word2vec_field_stores(wildcards):
    """The stores of the fields word2vec.doc_fields reads beyond dataset.doc_fields (rule doc_field)."""
    fields = extra_fields(config["word2vec"].get("doc_fields"), config["dataset"].get("doc_fields"))
    return [doc_field_store(f) for f in fields]


def doc_field_store(field):
    return f"{R}/data/fields/{field}/docs.jsonl"


def doc_field_readers(wildcards):
    """The config keys that read document field ``wildcards.field`` (named in the stage's errors): model entries'
    doc_fields and word2vec's."""
    collection = config["dataset"].get("doc_fields")
    readers = field_readers(config).items()
    return ",".join(key for key, fields in readers if wildcards.field in extra_fields(fields, collection))


def pseudo_queries_of(model):
    """The pseudo-query set a model pre-trains on (train.pretrain.queries), or None."""
    return (config["models"][model].get("train", {}).get("pretrain") or {}).get("queries")


def pretrained_weights(wildcards):
    """A model with train.pretrain fine-tunes from its pre-trained weights (rule train_pretrain), one file for all folds."""
    return [f"{R}/models/{wildcards.model}/pretrained/model.safetensors"] if pseudo_queries_of(wildcards.model) else []


def pseudo_query_source(wildcards):
    """What a pseudo-query set reads beside the data: the source collection for titles, the query formulation
    for formulated (only these, so that changing neither reruns the other sources' sets), and the pisa first
    stage its BM25 runs through (first_stage)."""
    spec = config["pseudo_queries"][wildcards.pseudo_set]
    source, out = spec.get("source", "ict"), []
    if source == "titles":
        out = ["--dataset", as_json(config["dataset"])]
    if source == "formulated":
        out = ["--query-formulation", as_json(config["query_formulation"])]
    if spec.get("first_stage"):
        stage = spec["first_stage"]
        out += ["--first-stage", as_json(config["first_stages"][stage]), "--index", f"{R}/pisa/{stage}"]
    return out


def pseudo_query_index(wildcards):
    """The PISA index a pseudo-query set's BM25 reads (its first_stage), or none (bm25s in memory)."""
    stage = config["pseudo_queries"][wildcards.pseudo_set].get("first_stage")
    return [f"{R}/pisa/{stage}"] if stage else []


def model_config(wildcards):
    """Only the model's own entry: changing one model's hyper-parameter reruns only that model's jobs."""
    return as_json(config["models"][wildcards.model])


def training_gpus(wildcards):
    """GPUs a training job asks for: one per training process (train.processes), none with device: cpu."""
    return 0 if config["device"] == "cpu" else config["models"][wildcards.model].get("train", {}).get("processes", 1)


def run_file(wildcards):
    if wildcards.system in config["first_stages"]:
        return f"{R}/candidates/{wildcards.system}.run"
    return f"{R}/runs/{wildcards.system}.run"


def data_dir(wildcards, input):
    """results/{dataset}/data, read off the rule's inputs (a path derived from the inputs, not composed twice)."""
    return os.path.dirname(input.data[0])


def local_collection_files(wildcards):
    """Local collection files are inputs, so editing them reruns the data stage."""
    dataset = config["dataset"]
    if dataset["source"] != "local":
        return []
    return [
        dataset[k]
        for k in ("docs", "queries", "qrels", "train_queries", "train_qrels", "dev_queries", "dev_qrels")
        if k in dataset
    ]


def check_downloads():
    """Each missing download the planned jobs read, named with its key, what to get and where to put it
    (longrank.downloads); a hub model the first job will download is noted."""
    planned = {str(value) for job in workflow.dag.needrun_jobs() for value in job.wildcards}  # a Namedlist of values
    problems, notes = downloads.check(config, planned=planned)
    for note in notes:
        print(f"Note: {note}", file=sys.stderr)
    if problems:
        raise WorkflowError("missing downloads, before any job runs:\n" + "\n".join(problems))


# rule history (workflow/rules/history.smk)
def model_systems(model):
    """A model's systems of the comparison: itself, and its interpolation with its first stage."""
    return [model] + ([f"{model}+{first_stage_of(model)}"] if config["models"][model]["interpolate"] else [])


def history_summaries(wildcards):
    """Each fold's training summary, for a model that trains its own weights (checkpoint_of shares another's)."""
    model = wildcards.model
    return [f"{R}/models/{model}/fold{fold}/train_summary.json" for fold in FOLDS] if weights_of(model) == model else []


def history_settings(model):
    """What an entry of the model's history is of: its config entry, the candidates it reranks and the code that
    trains and scores it (a changed model file is a new setting, as it retrains)."""
    return as_json(
        {
            "entry": config["models"][model],
            "first_stage": config["first_stages"][first_stage_of(model)],
            "code": {"train": code_of("train", weights_of(model)), "rerank": code_of("rerank", model)},
        }
    )
