rule rerank:
    input:
        checkpoints=expand(f"{R}/models/{{{{model}}}}/fold{{fold}}/model.safetensors", fold=FOLDS),
        dev_runs=expand(f"{R}/models/{{{{model}}}}/fold{{fold}}/dev.run", fold=FOLDS),
        candidates=CANDIDATES,
    output:
        run=f"{R}/runs/{{model}}.run",
        interpolated=f"{R}/runs/{{model}}+{FIRST_STAGE}.run",
        weights=f"{R}/runs/{{model}}.interpolation.json",
        details=f"{R}/runs/{{model}}.details.jsonl",
    params:
        model=model_config,
        rerank_depth=config["rerank_depth"],
        data=f"{R}/data",
    log:
        f"{R}/logs/rerank_{{model}}.log",
    benchmark:
        f"{R}/benchmarks/rerank_{{model}}.tsv"
    threads: 2
    resources:
        mem_mb=12000,
        runtime=240,
        gpu=lambda wc: 0 if config["device"] == "cpu" else 1,
    conda:
        CONDA_ENV
    shell:
        "OMP_NUM_THREADS={threads} python -m longrank rerank --model {wildcards.model} --model-config {params.model:q}"
        " --data {params.data} --candidates {input.candidates} --checkpoints {input.checkpoints} --dev-runs {input.dev_runs}"
        " --rerank-depth {params.rerank_depth} --device " + config["device"] + " --out-dir {R}/runs 2> {log}"
