"""The workflow's plan (src/longrank/plan/) of the repository's real configs, loaded and validated as the workflow's
parse does, without Snakemake: the target lists, MIR's chain and the jobs' priorities, and the inputs of a few jobs.
The dry runs of every config (tests/test_config_matrix.py) check the same plan through Snakemake."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from longrank.validation.validate import validate_config
from longrank.config.files import merged
from longrank.errors import InputError
from longrank.plan import Plan, build_plan, job_inputs
from longrank.plan.preflight import planned_names
from longrank.plan.priorities import MIR_CHAIN_PRIORITY, RERANK_PRIORITY, TRAINING_PRIORITY

TREC_DL_2019 = ("config/trec-dl.yaml", "config/trec-dl-2019.yaml")
MIR_IRLED = ("config/irled.yaml", "config/studies/mir-irled.yaml")


def plan_of(*files: str, edit=None) -> Plan:
    """The plan of ``--configfile *files`` over config/config.yaml; ``edit`` changes the merged config first."""
    config = merged(files)
    if edit:
        edit(config)
    config = validate_config(config)
    return build_plan(config, f"results/{config['dataset']['name']}")


@pytest.fixture(scope="module")
def default() -> Plan:
    return plan_of()


def test_the_default_configs_models_and_systems(default):
    assert default.results == "results/cranfield"
    assert default.models == ["knrm", "tk", "tkl", "ndrm3", "bert_firstp", "mores", "bi_encoder", "mir"]
    assert default.first_stages == ["bm25", "ndrm3_full"] and default.folds == [0]
    # the first stages, the sanity floor, then each model and its interpolation with the first stage it reranks
    assert default.systems[:5] == ["bm25", "ndrm3_full", "query_term_matches", "knrm", "knrm+bm25"]
    assert len(default.systems) == 3 + 2 * len(default.models)
    assert default.data["docs.jsonl"] == "results/cranfield/data/docs.jsonl" and len(default.data) == 8
    assert default.report == "results/cranfield/report/index.html"
    assert default.run_file("bm25") == "results/cranfield/candidates/bm25.run"
    assert default.run_file("knrm+bm25") == "results/cranfield/runs/knrm+bm25.run"


def test_each_trained_model_has_a_floor_pair_apart_from_the_global_floor(default):
    assert default.sanity == "query_term_matches"
    assert default.floor_pairs[:2] == [
        ("knrm", "query_term_matches@bm25-top100-first200w"),
        ("tk", "query_term_matches@bm25-top30-first200w"),
    ]
    assert all(floor != default.sanity for _, floor in default.floor_pairs)
    assert set(default.floor_pair_systems) == {s for pair in default.floor_pairs for s in pair}


def test_the_benches_the_default_config_plans(default):
    # MIR reads documents from its graph set: MIR's own bench times it, the generic bench every other model
    assert default.benched == [m for m in default.models if m != "mir"]
    assert default.mir_reference == "mir"
    assert default.mir_speed == ["results/cranfield/bench/mir.speed.json"]
    assert default.mores_speed == ["results/cranfield/bench/mores.speed.json"]
    assert default.attention_scaling == []  # no NDRM study configured
    assert plan_of("config/studies/ndrm.yaml").attention_scaling == ["results/cranfield/bench/attention_scaling.json"]


def test_benches_off_plan_no_bench():
    def off(config):
        for bench in ("bench", "mores_speed", "mir_speed"):
            config.setdefault(bench, {})["enabled"] = False

    plan = plan_of(edit=off)
    assert (plan.benched, plan.mores_speed, plan.mir_speed) == ([], [], [])


def test_a_config_without_mir_has_an_empty_chain_and_no_mir_bench():
    plan = plan_of("config/trec-dl-passage.yaml")
    assert plan.mir_models == [] and plan.mir_reference is None and plan.mir_speed == []
    assert plan.mir_chain.models == plan.mir_chain.stages == plan.mir_chain.pseudo_sets == frozenset()


def test_the_default_mir_chain_holds_the_graphs_prf_queries(default):
    chain = default.mir_chain
    assert chain.models == {"mir"} and chain.stages == chain.indexes == {"bm25"}
    assert chain.pseudo_sets == {"titles"}  # mir_graphs.mir.prf_queries


def test_the_mir_chain_follows_an_hdct_first_stage_and_its_pseudo_queries_pisa_index():
    """TREC DL: MIR reranks HDCT's candidates; the graphs' PRF queries are BM25'd through PISA's bm25 index, read alone
    (its candidates are not in the chain)."""
    chain = plan_of(*TREC_DL_2019).mir_chain
    assert chain.models == {"mir"} and chain.stages == {"hdct"}
    assert chain.indexes == {"hdct", "bm25"} and chain.pseudo_sets == {"titles"}


def test_the_mir_chain_follows_a_model_first_stage_and_pretraining():
    def mir_on_ndrm(config):
        config["models"]["mir"]["first_stage"] = "ndrm3_full"
        config["models"]["mir"].setdefault("train", {})["pretrain"] = {"queries": "titles"}

    plan = plan_of(edit=mir_on_ndrm)
    chain = plan.mir_chain
    assert chain.models == {"mir", "ndrm3"}  # the first stage's model trains before MIR's candidates exist
    assert chain.stages == {"ndrm3_full", "bm25"}  # ndrm3 reranks bm25's candidates
    assert chain.pseudo_sets == {"titles"}


def test_all_mir_entries_share_the_chain():
    plan = plan_of(*MIR_IRLED)
    assert plan.mir_models == ["mir_512", "mir_1k", "mir"] and plan.mir_reference == "mir"
    assert plan.mir_chain.models == {"mir_512", "mir_1k", "mir"}
    assert plan.mir_chain.pseudo_sets == {"formulated"}


def test_priorities_put_mirs_chain_first_then_training_then_reranks(default):
    priorities = default.priorities
    train = priorities.chain_priority("models")
    assert train(SimpleNamespace(model="mir")) == MIR_CHAIN_PRIORITY
    assert train(SimpleNamespace(model="knrm")) == TRAINING_PRIORITY
    candidates = priorities.chain_priority("stages")
    assert candidates(SimpleNamespace(first_stage="bm25")) == MIR_CHAIN_PRIORITY
    assert candidates(SimpleNamespace(first_stage="ndrm3_full")) == TRAINING_PRIORITY
    pseudo = priorities.chain_priority("pseudo_sets", otherwise=0)
    assert pseudo(SimpleNamespace(pseudo_set="titles")) == MIR_CHAIN_PRIORITY
    assert pseudo(SimpleNamespace(pseudo_set="other")) == 0
    assert priorities.rerank("mir") == MIR_CHAIN_PRIORITY and priorities.rerank("knrm") == RERANK_PRIORITY
    assert MIR_CHAIN_PRIORITY > TRAINING_PRIORITY > RERANK_PRIORITY > 0


def test_shared_weights_point_at_the_trained_entry():
    plan = plan_of("config/studies/mores.yaml")
    shared = [m for m in plan.models if plan.weights_of(m) != m]
    assert shared and not set(shared) & set(plan.trained)
    for model in shared:
        assert job_inputs.checkpoints(plan, model) == [
            f"results/cranfield/models/{plan.weights_of(model)}/fold0/model.safetensors"
        ]
        assert job_inputs.history_summaries(plan, model) == []


def test_a_chain_of_shared_weights_is_refused():
    def chained(config):
        config["models"]["mores"]["checkpoint_of"] = "bert_firstp"
        config["models"]["bert_firstp"]["checkpoint_of"] = "knrm"

    with pytest.raises(InputError, match=r"models\.mores\.checkpoint_of: 'bert_firstp' must name a model that trains"):
        plan_of(edit=chained)


def test_pretraining_plans_its_sets_inputs():
    plan = plan_of("config/studies/pretrain.yaml", "config/studies/hdct.yaml")
    assert plan.pretrained == [
        "knrm_pretrained",
        "tk_pretrained",
        "tkl_pretrained",
        "bert_firstp_pretrained",
        "mir_pretrained",
    ]
    assert job_inputs.pretrained_weights(plan, "knrm_pretrained") == [
        "results/cranfield/models/knrm_pretrained/pretrained/model.safetensors"
    ]
    assert job_inputs.pretrained_weights(plan, "knrm") == []
    # a MIR model pre-trains on its graph set built for the pseudo-queries' positives
    assert job_inputs.pretraining_artifacts(plan, "mir_pretrained") == ["results/cranfield/graphs_pretrain/titles/mir"]
    assert job_inputs.collection_artifacts(plan, "mir") == ["results/cranfield/graphs/mir"]
    assert job_inputs.stage_artifacts(plan, "hdct") == ["results/cranfield/hdct/hdct"]
    assert job_inputs.stage_artifacts(plan, "bm25") == []
    assert job_inputs.hdct_pseudo_queries(plan, "hdct") == []  # targets: titles


def test_the_inputs_of_first_stages_and_pseudo_queries_on_trec_dl():
    plan = plan_of(*TREC_DL_2019)
    assert plan.results == "results/trec-dl-2019"
    assert job_inputs.stage_artifacts(plan, "bm25") == [f"{plan.results}/pisa/bm25"]  # method pisa
    assert job_inputs.pseudo_query_index(plan, "titles") == [f"{plan.results}/pisa/bm25"]
    source = job_inputs.pseudo_query_source(plan, "titles")
    assert source[0] == "--dataset" and source[-2:] == ["--index", f"{plan.results}/pisa/bm25"]


def test_the_default_models_embeddings_and_artifacts(default):
    assert job_inputs.model_embeddings(default, "ndrm3") == ["results/cranfield/data/word2vec.txt"]
    assert job_inputs.model_embeddings(default, "knrm") == []
    assert job_inputs.fold_artifacts(default, "knrm") == []
    assert job_inputs.stage_artifacts(default, "ndrm3_full") == ["results/cranfield/artifacts/ndrm3/fold0"]


def test_the_downloads_check_reads_every_planned_wildcard_value():
    assert planned_names([["knrm", 0], ["bm25"]]) == {"knrm", "0", "bm25"}
