"""What a job reads, by the wildcard values of the job: the files of its inputs and the settings it is passed.
workflow/rules/common.smk turns each into an input function of the job's wildcards."""

from __future__ import annotations

import json

from longrank.data.doc_field import extra_fields, field_readers
from longrank.config.model_types import artifact_scopes, artifacts_of
from longrank.plan.targets import Plan


def as_json(obj) -> str:
    return json.dumps(obj, sort_keys=True)


def checkpoints(plan: Plan, model: str) -> list[str]:
    return [f"{plan.results}/models/{plan.weights_of(model)}/fold{fold}/model.safetensors" for fold in plan.folds]


def dev_runs(plan: Plan, model: str) -> list[str]:
    return [f"{plan.results}/models/{plan.weights_of(model)}/fold{fold}/dev.run" for fold in plan.folds]


def collection_artifacts(plan: Plan, model: str) -> list[str]:
    """Per-document artifacts built once from the data, when the model declares any: a mir model's graph set
    (workflow/rules/graphs.smk, shared by the entries naming it), else the model's own (workflow/rules/artifacts.smk).
    """
    entry = plan.config["models"][model]
    if "collection" not in artifact_scopes(entry):
        return []
    if "graph_set" in entry:
        return [f"{plan.results}/graphs/{entry['graph_set']}"]
    return [f"{plan.results}/artifacts/{model}/collection"]


def pretraining_artifacts(plan: Plan, model: str) -> list[str]:
    """What pre-training attaches: a mir model's graph set as the pseudo-queries' positives read (built by
    graphs_pretrain), else the model's collection artifacts."""
    entry = plan.config["models"][model]
    if "graph_set" in entry:
        return [f"{plan.results}/graphs_pretrain/{plan.pseudo_queries_of(model)}/{entry['graph_set']}"]
    return collection_artifacts(plan, model)


def fold_artifacts(plan: Plan, model: str) -> list[str]:
    """Per-document artifacts built from each fold's trained weights (MORES Reuse stores), one directory per fold."""
    if "fold" not in artifact_scopes(plan.config["models"][model]):
        return []
    return [f"{plan.results}/artifacts/{model}/fold{fold}" for fold in plan.folds]


def artifact_shards(plan: Plan, model: str, scope: str) -> list[str]:
    """The shards an artifacts job merges, in order: an NDRM impact index (a fold's ``impact_index`` artifact) with
    ``impact_index.shards`` above 1, one artifacts_shard job each; none otherwise: the artifacts job then builds
    everything itself, as before shards existed."""
    shards = plan.config["impact_index"]["shards"]
    if shards == 1 or scope == "collection" or "impact_index" not in artifacts_of(plan.config["models"][model]):
        return []
    return [f"{plan.results}/artifacts_shards/{model}/{scope}/{shard}" for shard in range(shards)]


def artifact_shard(plan: Plan, shard: str) -> str:
    """An artifacts shard job's ``--shard``: its index of ``impact_index.shards``, ``i/N``."""
    return f"{shard}/{plan.config['impact_index']['shards']}"


def stage_artifacts(plan: Plan, first_stage: str) -> list[str]:
    """A first stage a trained model produces (method model) reads that model's per-fold artifacts (its impact
    index); an hdct or pisa first stage reads its index."""
    spec = plan.config["first_stages"][first_stage]
    if spec["method"] == "hdct":  # HDCT's index, built once for the collection (workflow/rules/hdct.smk)
        return [f"{plan.results}/hdct/{first_stage}"]
    if spec["method"] == "pisa":  # PISA's index, once per collection and index settings (workflow/rules/pisa.smk)
        return [f"{plan.results}/pisa/{first_stage}"]
    if spec["method"] != "model":
        return []
    return [f"{plan.results}/artifacts/{spec['model']}/fold{fold}" for fold in plan.folds]


def hdct_pseudo_queries(plan: Plan, first_stage: str) -> list[str]:
    """The pseudo-query set an HDCT first stage trains on (targets: <set>); none for targets: titles."""
    targets = plan.config["first_stages"][first_stage].get("targets", "titles")
    return [] if targets == "titles" else [f"{plan.results}/pseudo_queries/{targets}"]


def first_stage_spec(plan: Plan, first_stage: str) -> str:
    """A first stage's entry as the jobs that read it are passed it (hdct's, the candidates', a model's history):
    without ``shards`` (method hdct), which spreads the stage's weighting over jobs and changes no weight. Left out, a
    config that only changes the shard count passes these jobs the entry they had (Snakemake reruns a job whose
    params changed), and the default's as before shards existed."""
    return as_json({k: v for k, v in plan.config["first_stages"][first_stage].items() if k != "shards"})


def hdct_shards(plan: Plan, first_stage: str) -> list[str]:
    """The shards an hdct job merges, in order (``first_stages[].shards`` above 1, one hdct_shard job each); none with
    one shard: the hdct job then trains, weights every document and indexes itself, as before shards existed."""
    shards = plan.config["first_stages"][first_stage]["shards"]  # the schema's default for method hdct
    return [f"{plan.results}/hdct_shards/{first_stage}/{shard}" for shard in range(shards)] if shards > 1 else []


def hdct_encoder(plan: Plan, first_stage: str) -> list[str]:
    """The encoder an hdct stage's shards weight with and its merge copies (rule hdct_encoder), when sharded."""
    return [f"{plan.results}/hdct_encoder/{first_stage}"] if hdct_shards(plan, first_stage) else []


def hdct_shard(plan: Plan, first_stage: str, shard: str) -> str:
    """An hdct shard job's ``--shard``: its index of the first stage's shard count, ``i/N``."""
    return f"{shard}/{plan.config['first_stages'][first_stage]['shards']}"


def brought_run_file(plan: Plan, first_stage: str) -> list[str]:
    """The run file a first stage of method run_file reads (the user's)."""
    spec = plan.config["first_stages"][first_stage]
    return [spec["path"]] if spec["method"] == "run_file" else []


def doc_field_store(plan: Plan, field: str) -> str:
    return f"{plan.results}/data/fields/{field}/docs.jsonl"


def model_embeddings(plan: Plan, model: str) -> list[str]:
    """What a model's text and vectors read beyond the prepared data: the collection's word2vec vectors
    (workflow/rules/word2vec.smk) for a model configured with them, and the store of each document field its
    ``doc_fields`` names beyond ``dataset.doc_fields`` (workflow/rules/data.smk, rule doc_field)."""
    entry, collection = plan.config["models"][model], plan.config["dataset"].get("doc_fields")
    fields = [doc_field_store(plan, f) for f in extra_fields(entry.get("doc_fields"), collection)]
    return ([plan.word2vec] if entry.get("embeddings") == "word2vec" else []) + fields


def word2vec_field_stores(plan: Plan) -> list[str]:
    """The stores of the fields word2vec.doc_fields reads beyond dataset.doc_fields (rule doc_field)."""
    fields = extra_fields(plan.config["word2vec"].get("doc_fields"), plan.config["dataset"].get("doc_fields"))
    return [doc_field_store(plan, f) for f in fields]


def doc_field_readers(plan: Plan, field: str) -> str:
    """The config keys that read document field ``field`` (named in the stage's errors): model entries'
    doc_fields and word2vec's."""
    collection = plan.config["dataset"].get("doc_fields")
    readers = field_readers(plan.config).items()
    return ",".join(key for key, fields in readers if field in extra_fields(fields, collection))


def pretrained_weights(plan: Plan, model: str) -> list[str]:
    """A model with train.pretrain fine-tunes from its pre-trained weights (rule train_pretrain), one file for all
    folds."""
    return [f"{plan.results}/models/{model}/pretrained/model.safetensors"] if plan.pseudo_queries_of(model) else []


def pseudo_query_source(plan: Plan, pseudo_set: str) -> list[str]:
    """What a pseudo-query set reads beside the data: the source collection for titles, the query formulation
    for formulated (only these, so that changing neither reruns the other sources' sets), and the pisa first
    stage its BM25 runs through (first_stage)."""
    config = plan.config
    spec = config["pseudo_queries"][pseudo_set]
    source, out = spec["source"], []  # filled by validation (schema default)
    if source == "titles":
        out = ["--dataset", as_json(config["dataset"])]
    if source == "formulated":
        out = ["--query-formulation", as_json(config["query_formulation"])]
    if spec.get("first_stage"):
        stage = spec["first_stage"]
        out += ["--first-stage", as_json(config["first_stages"][stage]), "--index", f"{plan.results}/pisa/{stage}"]
    return out


def pseudo_query_index(plan: Plan, pseudo_set: str) -> list[str]:
    """The PISA index a pseudo-query set's BM25 reads (its first_stage), or none (bm25s in memory)."""
    stage = plan.config["pseudo_queries"][pseudo_set].get("first_stage")
    return [f"{plan.results}/pisa/{stage}"] if stage else []


def graph_set_settings(plan: Plan, graph_set: str) -> str:
    """A graph set's settings for its stage: the PRF queries arrive as an input directory, not a setting; ``shards``
    spreads the work over jobs and changes no record. Left out, a config that only changes the shard count passes every
    graph job (and mir_speed) the settings it had (Snakemake reruns a job whose params changed), and the default's
    as before shards existed."""
    return as_json(
        {k: v for k, v in plan.config["mir_graphs"][graph_set].items() if k not in ("prf_queries", "shards")}
    )


def graph_set_shards(plan: Plan, graph_set: str, pseudo_set: str | None = None) -> list[str]:
    """The shards a graph set's job merges, in order (``mir_graphs.<set>.shards`` above 1, one graphs_shard job each;
    with ``pseudo_set`` the set built for pre-training on it, one graphs_pretrain_shard job each); none with one
    shard: the graph job then builds every document's record itself, as before shards existed."""
    shards = plan.config["mir_graphs"][graph_set]["shards"]
    where = f"graphs_shards/{graph_set}" if pseudo_set is None else f"graphs_pretrain_shards/{pseudo_set}/{graph_set}"
    return [f"{plan.results}/{where}/{shard}" for shard in range(shards)] if shards > 1 else []


def graph_shard(plan: Plan, graph_set: str, shard: str) -> str:
    """A graph shard job's ``--shard``: its index of the set's shard count, ``i/N``."""
    return f"{shard}/{plan.config['mir_graphs'][graph_set]['shards']}"


def annotate_settings(plan: Plan) -> str:
    """The annotation settings every stage that annotates is passed (annotate's ``--config``, mir_speed's
    ``--annotations``): the annotations block but ``shards``, which spreads the work over jobs and changes no record. Left out, a config that only changes the shard count leaves the settings every annotation job is
    passed as they were (Snakemake reruns a job whose params changed), and the default's as before shards existed."""
    return as_json({key: value for key, value in plan.config["annotations"].items() if key != "shards"})


def annotation_shards(plan: Plan) -> list[str]:
    """The shards rule annotate merges, in order (``annotations.shards`` above 1, one rule annotate_shard job each);
    none with one shard: the annotate job then annotates every document itself, as before shards existed."""
    shards = plan.config["annotations"]["shards"]
    return [f"{plan.results}/annotations_shards/{shard}" for shard in range(shards)] if shards > 1 else []


def annotate_threads(plan: Plan) -> int:
    """Rule annotate's threads: spaCy's processes when it annotates, one when it merges shards (a copy of records)."""
    return 1 if annotation_shards(plan) else plan.config["annotations"]["n_process"]


def graph_set_prf_queries(plan: Plan, graph_set: str) -> list[str]:
    """The pseudo-query set whose BM25 runs weight a graph set's PRF terms (mir_graphs.<set>.prf_queries), if any."""
    prf = plan.config["mir_graphs"][graph_set].get("prf_queries")
    return [f"{plan.results}/pseudo_queries/{prf}"] if prf else []


def mir_speed_alike(plan: Plan) -> str:
    """The configured entries mir_speed's side-by-side measurement gives a throughput for (MIR at other lengths, MaxP
    over the same windows): as a param, so that adding an ablation does not rerun it, adding MIR-1K does."""
    from longrank.bench.mir_alike import timed_alike  # only when a mir_speed job is planned

    reference = plan.mir_reference
    assert reference is not None, "a mir_speed job is planned only with a MIR reference (Plan.mir_speed)"
    models = plan.config["models"]
    graph_set = json.loads(graph_set_settings(plan, models[reference]["graph_set"]))
    return as_json(timed_alike({m: models[m] for m in plan.models}, reference, graph_set))


def training_gpus(plan: Plan, model: str) -> int:
    """GPUs a training job asks for: one per training process (train.processes), none with device: cpu."""
    if plan.config["device"] == "cpu":
        return 0
    return plan.config["models"][model].get("train", {}).get("processes", 1)


def history_summaries(plan: Plan, model: str) -> list[str]:
    """Each fold's training summary, for a model that trains its own weights (checkpoint_of shares another's)."""
    if plan.weights_of(model) != model:
        return []
    return [f"{plan.results}/models/{model}/fold{fold}/train_summary.json" for fold in plan.folds]


def local_collection_files(plan: Plan) -> list[str]:
    """Local collection files are inputs, so that editing them reruns the data stage."""
    dataset = plan.config["dataset"]
    if dataset["source"] != "local":
        return []
    keys = ("docs", "queries", "qrels", "train_queries", "train_qrels", "dev_queries", "dev_qrels")
    return [dataset[k] for k in keys if k in dataset]
