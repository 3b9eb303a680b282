# Each model's results of every setting it ran with (src/longrank/history.py): after its evaluations, copied into
# results/<name>/history/<model>/<settings hash>/, at most history.keep settings per model. The report's experiment
# log reads them; rule train reads them back (--history) when a setting returns.


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


rule history:
    input:
        evals=lambda wc: [f"{R}/eval/{s}.tsv" for s in model_systems(wc.model)],
        runs=lambda wc: [run_file(SimpleNamespace(system=s)) for s in model_systems(wc.model)],
        summaries=history_summaries,
    output:
        f"{R}/history/{{model}}/latest.json",
    log:
        f"{R}/logs/history_{{model}}.log",
    conda:
        CONDA_ENV
    params:
        settings=lambda wc: history_settings(wc.model),
        systems=lambda wc: model_systems(wc.model),
        keep=config["history"]["keep"],
        weights=str(config["history"]["weights"]).lower(),
    shell:
        "python -m longrank history --model {wildcards.model:q} --settings {params.settings:q}"
        " --systems {params.systems:q} --evals {input.evals:q} --runs {input.runs:q} --summaries {input.summaries:q}"
        " --keep {params.keep:q} --weights {params.weights:q} --out {output:q} 2> {log:q}"
