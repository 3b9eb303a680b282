rule train:
    input:
        data=list(DATA.values()),
        candidates=CANDIDATES,
    output:
        model=f"{R}/models/{{model}}/fold{{fold}}/model.safetensors",
        dev_run=f"{R}/models/{{model}}/fold{{fold}}/dev.run",
        summary=f"{R}/models/{{model}}/fold{{fold}}/train_summary.json",
    params:
        model=model_config,
        rerank_depth=config["rerank_depth"],
        data=f"{R}/data",
    log:
        f"{R}/logs/train_{{model}}_fold{{fold}}.log",
    benchmark:
        f"{R}/benchmarks/train_{{model}}_fold{{fold}}.tsv"
    threads: 2
    resources:
        mem_mb=12000,
        runtime=720,
        gpu=lambda wc: 0 if config["device"] == "cpu" else 1,
    conda:
        CONDA_ENV
    shell:
        "OMP_NUM_THREADS={threads} python -m longrank train --model {wildcards.model} --model-config {params.model:q}"
        " --data {params.data} --candidates {input.candidates} --fold {wildcards.fold}"
        " --rerank-depth {params.rerank_depth} --device " + config["device"] + " --out {output.model} 2> {log}"
