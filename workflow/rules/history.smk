# Each model's results of every setting it ran with (src/longrank/history.py): after its evaluations, copied into
# results/<name>/history/<model>/<settings hash>/, at most history.keep settings per model. The report's experiment
# log reads them; rule train reads them back (--history) when a setting returns.


rule history:
    input:
        evals=lambda wc: [f"{R}/eval/{s}.tsv" for s in model_systems(wc.model)],
        runs=lambda wc: [PLAN.run_file(s) for s in model_systems(wc.model)],
        summaries=history_summaries,
        # what the setting ran on: its history entry is keyed by these files' content as well as by the settings
        data=[DATA[name] for name in ("docs.jsonl", "queries.tsv", "qrels.txt", "folds.json")],
        candidates=lambda wc: candidates_of(wc.model),
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
        data=data_dir,
    shell:
        "python -m longrank history --model {wildcards.model:q} --settings {params.settings:q}"
        " --systems {params.systems:q} --evals {input.evals:q} --runs {input.runs:q} --summaries {input.summaries:q}"
        " --keep {params.keep:q} --weights {params.weights:q} --data {params.data:q}"
        " --candidates {input.candidates:q} --out {output:q} 2> {log:q}"
