rule bench:
    input:
        checkpoint=f"{R}/models/{{model}}/fold0/model.safetensors",
        data=list(DATA.values()),
    output:
        f"{R}/bench/{{model}}.json",
    params:
        model=model_config,
        lengths=config["bench"]["lengths"],
        batch_size=config["bench"]["batch_size"],
        repeats=config["bench"]["repeats"],
        data=f"{R}/data",
    log:
        f"{R}/logs/bench_{{model}}.log",
    threads: 2
    resources:
        mem_mb=12000,
        gpu=lambda wc: 0 if config["device"] == "cpu" else 1,
    conda:
        CONDA_ENV
    shell:
        "OMP_NUM_THREADS={threads} python -m longrank bench --model {wildcards.model} --model-config {params.model:q}"
        " --checkpoint {input.checkpoint} --data {params.data} --lengths {params.lengths} --batch-size {params.batch_size}"
        " --repeats {params.repeats} --device " + config["device"] + " --out {output} 2> {log}"
