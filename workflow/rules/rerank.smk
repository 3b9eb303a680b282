rule rerank:
    input:
        checkpoints=checkpoints,
        dev_runs=dev_runs,
        stores=reuse_stores,
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
        " --data {params.data} --candidates {input.candidates} --checkpoints {input.checkpoints} --dev-runs {input.dev_runs} --stores {input.stores}"
        " --rerank-depth {params.rerank_depth} --device " + config["device"] + " --out-dir {R}/runs 2> {log}"


rule precompute:
    input:
        checkpoint=lambda wc: f"{R}/models/{weights_of(wc.model)}/fold{wc.fold}/model.safetensors",
        candidates=CANDIDATES,
    output:
        index=f"{R}/stores/{{model}}/fold{{fold}}.json",
        array=f"{R}/stores/{{model}}/fold{{fold}}.npy",
    params:
        model=model_config,
        data=f"{R}/data",
    log:
        f"{R}/logs/precompute_{{model}}_fold{{fold}}.log",
    threads: 2
    resources:
        mem_mb=12000,
        gpu=lambda wc: 0 if config["device"] == "cpu" else 1,
    conda:
        CONDA_ENV
    shell:
        "OMP_NUM_THREADS={threads} python -m longrank precompute --model-config {params.model:q} --checkpoint {input.checkpoint}"
        " --data {params.data} --candidates {input.candidates} --device " + config["device"] + " --out {output.index} 2> {log}"
