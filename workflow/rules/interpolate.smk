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
        rerank_depth=lambda wc: EFFECTIVE[wc.model].rerank_depth,
        data=data_dir,
    shell:
        "python -m longrank interpolate --model-run {input.model_run:q} --dev-runs {input.dev_runs:q} --candidates {input.candidates:q}"
        " --rerank-depth {params.rerank_depth:q} --data {params.data:q} --out {output.run:q} 2> {log:q}"
