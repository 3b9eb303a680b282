# Config validation (fails at parse time naming the key and the schema rule), the plan of the run
# (src/longrank/plan/) and the names and input functions the rules use.
import copy
import json
import os
import re
import sys

from pathlib import Path

from longrank.cli import stage_module
from longrank.results.code_digest import code_digest
from longrank.train.code import model_code, training_code_digest
from longrank.validation.validate import validate_config
from longrank.validation.checks import check_input_files_exist
from longrank.config.schema import DATASETS, SCHEMA
from longrank.config.files import check_command_line
from longrank.console import print_failures
from longrank.errors import InputError
from longrank.config.names import check_outputs_not_inputs
from longrank.plan import build_plan, job_inputs
from longrank.plan.job_resources import JobResources, collection_stage_minutes
from longrank.plan.preflight import ResultsOwner, check_downloads as download_check, planned_names
from longrank.plan.job_inputs import as_json
from longrank.plan.priorities import CHECK_PRIORITY, MIR_CHAIN_PRIORITY, RERANK_PRIORITY, TRAINING_PRIORITY

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
    # every input file a config key names, by its key, before any job runs (Snakemake would list a job's inputs)
    check_input_files_exist(config)
    R = f"results/{config['dataset']['name']}"  # a safe name (longrank.config.names.SAFE_NAME): always a folder of results/
    # no configured input inside results/<name>/: the data stage would overwrite (and Snakemake first delete) it
    check_outputs_not_inputs(config, R)
    # Results owned by one workflow (longrank.plan.preflight): the lock on R itself is taken when jobs start (onstart,
    # in the Snakefile) and released when they end
    RESULTS_OWNER = ResultsOwner(Path(R), Path.cwd(), copy.deepcopy(config))  # the config as validated
    RESULTS_OWNER.check()
    PLAN = build_plan(config, R)
except InputError as err:
    raise WorkflowError(str(err)) from None


def take_results_lock():
    try:
        RESULTS_OWNER.take(locking=workflow.execution_settings.lock)
    except InputError as err:
        raise WorkflowError(str(err)) from None


def release_results_lock():
    RESULTS_OWNER.release()


def check_downloads():
    """Each missing download the planned jobs read, named before any job runs; a hub model the first job will
    download is noted."""
    notes, refusal = download_check(config, planned_names(job.wildcards for job in workflow.dag.needrun_jobs()))
    for note in notes:
        print(f"Note: {note}", file=sys.stderr)
    if refusal:
        raise WorkflowError(refusal)


DATA = PLAN.data
# the record of the satisfiable check (workflow/rules/evaluate.smk), which evaluations read and trainings wait for
MEASURES_CHECKED = f"{R}/eval/measures_satisfiable.json"
FOLDS = PLAN.folds
MODELS = PLAN.models
EFFECTIVE = PLAN.effective
FIRST_STAGES = PLAN.first_stages
FLOORS = PLAN.floors
MODEL_FLOORS = PLAN.model_floors
FLOOR_PAIRS = PLAN.floor_pairs
SYSTEMS = PLAN.systems
REPORT = PLAN.report
WORD2VEC = PLAN.word2vec
BENCHED = PLAN.benched
MORES_SPEED = PLAN.mores_speed
MIR_REFERENCE = PLAN.mir_reference
MIR_SPEED = PLAN.mir_speed
ATTENTION_SCALING = PLAN.attention_scaling
CONDA_ENV = "../../envs/longrank.yaml"  # used with --use-conda; pins as pyproject.toml
# CPU threads of every job that runs a model (train, rerank, artifacts, hdct and the benches; their commands set
# OMP_NUM_THREADS={threads}): one. Torch's CPU arithmetic depends on its thread count, and Snakemake lowers a rule's
# threads to --cores, so with more than one a run's numbers would change with --cores; with one they are the same on
# any machine's --cores, and the tests (one thread a job) compute what a user's run does. The default config's models
# are small: two one-thread jobs side by side take less wall time and CPU time than one on two threads
# (docs/studies/default-run.md, Time). More per job: --set-threads train=4 (profiles/slurm sets its GPU jobs' threads
# to their cpus_per_task).
MODEL_THREADS = 1
# `deterministic: true`: the flag of every stage that runs a model (longrank.runtime.set_deterministic)
DETERMINISTIC = ["--deterministic"] if config["deterministic"] else []
# Each GPU job's time, host memory and large-GPU constraint, from the GPU bill and its model's settings
# (longrank.plan.job_resources): the rules train, train_pretrain and rerank ask it per job and attempt
JOB_RESOURCES = JobResources(PLAN)
# The jobs' levels (longrank.plan.priorities): the checks, MIR's chain, then the trainings, then the reranks
chain_priority = PLAN.priorities.chain_priority


def rerank_priority(wc):
    return PLAN.priorities.rerank(wc.model)


wildcard_constraints:
    # configured models (not the sanity row), and each entry's further training seeds (longrank.plan.seeds)
    model="|".join(map(re.escape, PLAN.config["models"])),
    system="[A-Za-z0-9_+@-]+",  # @: a model's floor, query_term_matches@{first stage}-top{depth}-first{words}w
    fold="[0-9]+",
    first_stage="[A-Za-z0-9_-]+",
    scope="collection|fold[0-9]+",
    pseudo_set="[A-Za-z0-9_-]+",
    graph_set="[A-Za-z0-9_-]+",
    shard="[0-9]+",  # a shard's index (annotate_shard, graphs_shard, graphs_pretrain_shard, hdct_shard, artifacts_shard)
    field="[A-Za-z0-9_]+",  # a document field (rule doc_field)


def by_wildcard(wildcard, question):
    """An input function: ``question`` (longrank.plan.job_inputs) of the plan and the job's ``wildcard``."""
    return lambda wc: question(PLAN, getattr(wc, wildcard))


first_stage_of = PLAN.first_stage_of
candidates_of = PLAN.candidates_of
weights_of = PLAN.weights_of
pseudo_queries_of = PLAN.pseudo_queries_of
model_systems = PLAN.model_systems
checkpoints = by_wildcard("model", job_inputs.checkpoints)
dev_runs = by_wildcard("model", job_inputs.dev_runs)
collection_artifacts = by_wildcard("model", job_inputs.collection_artifacts)
pretraining_artifacts = by_wildcard("model", job_inputs.pretraining_artifacts)
fold_artifacts = by_wildcard("model", job_inputs.fold_artifacts)
model_embeddings = by_wildcard("model", job_inputs.model_embeddings)
pretrained_weights = by_wildcard("model", job_inputs.pretrained_weights)
training_gpus = by_wildcard("model", job_inputs.training_gpus)
history_summaries = by_wildcard("model", job_inputs.history_summaries)
stage_artifacts = by_wildcard("first_stage", job_inputs.stage_artifacts)
hdct_pseudo_queries = by_wildcard("first_stage", job_inputs.hdct_pseudo_queries)
hdct_shards = by_wildcard("first_stage", job_inputs.hdct_shards)
hdct_encoder = by_wildcard("first_stage", job_inputs.hdct_encoder)
first_stage_spec = by_wildcard("first_stage", job_inputs.first_stage_spec)
pseudo_query_source = by_wildcard("pseudo_set", job_inputs.pseudo_query_source)
pseudo_query_index = by_wildcard("pseudo_set", job_inputs.pseudo_query_index)
graph_set_prf_queries = by_wildcard("graph_set", job_inputs.graph_set_prf_queries)
graph_set_shards = by_wildcard("graph_set", job_inputs.graph_set_shards)
doc_field_readers = by_wildcard("field", job_inputs.doc_field_readers)
brought_run_file = by_wildcard("first_stage", job_inputs.brought_run_file)


def evaluated_runs(wildcards):
    return PLAN.evaluated_runs(wildcards.system)


def local_collection_files(wildcards):
    return job_inputs.local_collection_files(PLAN)


def word2vec_field_stores(wildcards):
    return job_inputs.word2vec_field_stores(PLAN)


def annotate_settings():
    return job_inputs.annotate_settings(PLAN)


def annotation_shards(wildcards):
    return job_inputs.annotation_shards(PLAN)


def annotate_threads(wildcards):
    return job_inputs.annotate_threads(PLAN)


def graph_set_pretrain_shards(wildcards):
    return job_inputs.graph_set_shards(PLAN, wildcards.graph_set, wildcards.pseudo_set)


def graph_shard(wildcards):
    return job_inputs.graph_shard(PLAN, wildcards.graph_set, wildcards.shard)


def artifact_shards(wildcards):
    return job_inputs.artifact_shards(PLAN, wildcards.model, wildcards.scope)


def artifact_shard(wildcards):
    return job_inputs.artifact_shard(PLAN, wildcards.shard)


def hdct_shard(wildcards):
    return job_inputs.hdct_shard(PLAN, wildcards.first_stage, wildcards.shard)


def graph_set_settings(name):
    return job_inputs.graph_set_settings(PLAN, name)


def mir_speed_alike():
    return job_inputs.mir_speed_alike(PLAN)


def model_config(wildcards):
    """Only the model's own entry (one seed's: longrank.plan.seeds): changing one model's hyper-parameter reruns only
    that model's jobs, and an added seed runs only its own."""
    return as_json(PLAN.config["models"][wildcards.model])


def data_dir(wildcards, input):
    """results/{dataset}/data, read off the rule's inputs (a path derived from the inputs, not composed twice)."""
    return os.path.dirname(input.data[0])


def code_of(stage, model=None):
    """A digest of the code ``stage`` runs (its module, the model's, and the package modules they import:
    longrank.results.code_digest), a parameter of its rule: changed arithmetic reruns the job, a changed comment does not.
    """
    if stage == "train":
        return training_code_digest(PLAN.config["models"][model])  # the one the training fingerprint holds
    roots, files = model_code(PLAN.config["models"][model]) if model else ([], {})
    return code_digest(stage_module(stage), *roots, files=files)


def history_settings(model):
    """What an entry of the model's history is of (the history rule): its config entry, the candidates it reranks and
    the code that trains and scores it (a changed model file is a new setting, as it retrains). The entry as the
    config gives it, train.seeds included: its scores are the seeds' mean, so other seeds are another setting."""
    return as_json(
        {
            "entry": config["models"][model],
            "first_stage": json.loads(job_inputs.first_stage_spec(PLAN, first_stage_of(model))),
            "code": {"train": code_of("train", weights_of(model)), "rerank": code_of("rerank", model)},
        }
    )
