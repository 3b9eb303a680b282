"""Training seeds (``train.seeds``): refused at config load when malformed, naming the key; planned as one model per
seed whose jobs are passed that seed alone, the first seed keeping the entry's name and its very settings."""

from __future__ import annotations

import json

import pytest

from longrank.errors import InputError
from longrank.plan import build_plan
from longrank.config.train_settings import seeds_of
from longrank.plan.seeds import job_entry
from longrank.validation.validate import validate_config

KNRM = {"type": "knrm", "max_doc_len": 60}


def validated(models: dict) -> dict:
    return validate_config(json.loads(json.dumps({"dataset": "cranfield", "models": models})))


@pytest.mark.parametrize(
    ("seeds", "message"),
    [
        ([], r"models\.knrm\.train\.seeds"),
        ([1, 1], r"models\.knrm\.train\.seeds"),
        ([1, "2"], r"models\.knrm\.train\.seeds"),
        ([1.5], r"models\.knrm\.train\.seeds"),
        (0, r"models\.knrm\.train\.seeds"),
        ("3", r"models\.knrm\.train\.seeds"),
        (True, r"models\.knrm\.train\.seeds"),
    ],
)
def test_malformed_seeds_are_refused_at_config_load_naming_the_key(seeds, message):
    with pytest.raises(InputError, match=message):
        validated({"knrm": {**KNRM, "train": {"seeds": seeds}}})


def test_seeds_of_its_own_on_an_entry_that_shares_anothers_weights_are_refused():
    models = {
        "mores": {"type": "mores"},
        "mores_reuse": {"type": "mores", "checkpoint_of": "mores", "train": {"seeds": 2}},
    }
    with pytest.raises(InputError, match=r"models\.mores_reuse\.train\.seeds: .*models\.mores\.train\.seeds"):
        validated(models)


def test_an_entry_sharing_a_seeded_entrys_weights_scores_with_each_seeds():
    """MORES Reuse (checkpoint_of) beside a seeded MORES: one model per seed, each with that seed's weights, so both
    rows are means over the same trainings; a like: of the source inheriting its seeds is accepted."""
    models = {
        "mores": {"type": "mores", "train": {"seeds": [4, 5]}},
        "mores_s1": {"like": "mores", "reuse": "s1", "checkpoint_of": "mores"},
    }
    plan = build_plan(validated(models), "results/x")
    assert plan.seeds == {"mores": [4, 5], "mores_s1": [4, 5]}
    assert plan.weights_of("mores_s1@seed5") == "mores@seed5" and plan.weights_of("mores_s1") == "mores"
    assert "seeds" not in plan.config["models"]["mores_s1"]["train"]
    assert plan.evaluated_runs("mores_s1") == ["results/x/runs/mores_s1.run", "results/x/runs/mores_s1@seed5.run"]
    assert plan.trained == ["mores"]


def test_a_listed_seed_the_entry_trained_before_stays_the_entrys_own():
    assert seeds_of({"train": {"seed": 3, "seeds": [0, 3, 9]}}) == [3, 0, 9]  # knrm keeps its seed-3 training
    plan = build_plan(validated({"knrm": {**KNRM, "train": {"seed": 3, "seeds": [0, 3]}}}), "results/x")
    assert plan.config["models"]["knrm"]["train"] == {"seed": 3}
    assert plan.config["models"]["knrm@seed0"]["train"] == {"seed": 0}


def test_each_seed_asks_slurm_for_its_entrys_time():
    from longrank.plan.job_resources import JobResources

    plan = build_plan(validated({"knrm": {**KNRM, "train": {"seeds": 2}}}), "results/x")
    resources = JobResources(plan)
    assert resources.train("knrm@seed1", 1) == resources.train("knrm", 1)
    assert resources.rerank("knrm@seed1", 1) == resources.rerank("knrm", 1)


def test_a_count_of_seeds_starts_at_the_entrys_seed_and_a_list_is_kept():
    assert seeds_of({"train": {"seeds": 3}}) == [0, 1, 2]
    assert seeds_of({"train": {"seed": 7, "seeds": 2}}) == [7, 8]
    assert seeds_of({"train": {"seed": 7, "seeds": [3, 1]}}) == [3, 1]
    assert seeds_of({"train": {"seed": 7}}) == [7] and seeds_of({}) == [0]


def test_the_first_seeds_jobs_are_passed_the_entry_they_were_passed_before_it_had_seeds():
    before = validated({"knrm": {**KNRM, "train": {"steps": 5}}})
    after = validated({"knrm": {**KNRM, "train": {"steps": 5, "seeds": 3}}})
    plan_before, plan_after = build_plan(before, "results/x"), build_plan(after, "results/x")
    assert plan_after.config["models"]["knrm"] == plan_before.config["models"]["knrm"]
    assert plan_after.config["models"]["knrm@seed2"]["train"] == {"steps": 5, "seed": 2}
    assert plan_after.models == plan_before.models == ["knrm"]  # the report's rows: the entry, not each seed
    assert plan_after.seed_models == ["knrm@seed1", "knrm@seed2"]
    assert plan_after.floor_pairs == plan_before.floor_pairs  # each entry against its floor once, not each seed
    assert job_entry({"train": {"seeds": [4, 5]}}, 4) == {"train": {"seed": 4}}


def test_a_seeded_systems_evaluation_reads_every_seeds_run_and_each_seed_is_a_system_of_its_own():
    plan = build_plan(validated({"knrm": {**KNRM, "train": {"seeds": [3, 5]}}}), "results/x")
    assert plan.seed_systems("knrm+bm25") == {3: "knrm@seed3+bm25", 5: "knrm@seed5+bm25"}
    assert plan.evaluated_runs("knrm+bm25") == ["results/x/runs/knrm+bm25.run", "results/x/runs/knrm@seed5+bm25.run"]
    assert plan.evaluated_runs("knrm@seed3") == ["results/x/runs/knrm.run"]  # the first seed is the entry's run
    assert plan.evaluated_runs("bm25") == ["results/x/candidates/bm25.run"] and plan.seed_systems("bm25") == {}
    assert "knrm@seed3" not in plan.systems and "knrm" in plan.systems
