rule interpolate:
    """A model's run mixed with the first stage it reranked, the weight chosen on each fold's dev queries."""
    input:
        model_run=f"{R}/runs/{{model}}.run",
        dev_runs=dev_runs,
        candidates=lambda wc: candidates_of(wc.model),
        data=list(DATA.values()),
    output:
        run=f"{R}/runs/{{model}}+{{first_stage}}.run",
        weights=f"{R}/runs/{{model}}+{{first_stage}}.interpolation.json",
    log:
        f"{R}/logs/interpolate_{{model}}+{{first_stage}}.log",
    conda:
        CONDA_ENV
    params:
        rerank_depth=lambda wc: config["models"][wc.model].get("rerank_depth", config["rerank_depth"]),
        data=data_dir,
    shell:
        "python -m longrank interpolate --model-run {input.model_run} --dev-runs {input.dev_runs} --candidates {input.candidates}"
        " --rerank-depth {params.rerank_depth} --data {params.data} --out {output.run} 2> {log}"
