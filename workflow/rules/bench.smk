rule bench:
    input:
        checkpoint=lambda wc: f"{R}/models/{weights_of(wc.model)}/fold0/model.safetensors",
        data=list(DATA.values()),
        embeddings=model_embeddings,
    output:
        f"{R}/bench/{{model}}.json",
    log:
        f"{R}/logs/bench_{{model}}.log",
    conda:
        CONDA_ENV
    threads: MODEL_THREADS
    resources:
        mem_mb=12000,
        gpu=lambda wc: 0 if config["device"] == "cpu" else 1,
    params:
        model=model_config,
        lengths=config["bench"]["lengths"],
        batch_size=config["bench"]["batch_size"],
        repeats=config["bench"]["repeats"],
        data=data_dir,
        device=config["device"],
    shell:
        "OMP_NUM_THREADS={threads:q} python -m longrank bench --model {wildcards.model:q} --model-config {params.model:q}"
        " --checkpoint {input.checkpoint:q} --data {params.data:q} --lengths {params.lengths:q} --batch-size {params.batch_size:q}"
        " --repeats {params.repeats:q} --device {params.device:q} --out {output:q} 2> {log:q}"


rule mores_speed:
    """MORES Table 4: time to rank 1,000 candidates, BERT ranker vs MORES under no reuse / Reuse-S1 / -S2."""
    output:
        f"{R}/bench/mores.speed.json",
    log:
        f"{R}/logs/mores_speed.log",
    priority: RERANK_PRIORITY
    conda:
        CONDA_ENV
    threads: MODEL_THREADS
    resources:
        gpu=lambda wc: 0 if config["device"] == "cpu" else 1,
    params:
        encoder=PLAN.mores_speed_encoder,
        sizes=config["mores_speed"]["sizes"],
        lengths=config["mores_speed"]["lengths"],
        blocks=config["mores_speed"]["blocks"],
        candidates=config["mores_speed"]["candidates"],
        batch_size=config["mores_speed"]["batch_size"],
        repeats=config["mores_speed"]["repeats"],
        device=config["device"],
    shell:
        "python -m longrank mores_speed --encoder {params.encoder:q} --sizes {params.sizes:q} --lengths {params.lengths:q}"
        " --blocks {params.blocks:q} --candidates {params.candidates:q} --batch-size {params.batch_size:q} --repeats {params.repeats:q}"
        " --threads {threads:q} --device {params.device:q} --out {output:q} 2> {log:q}"


rule mir_speed:
    """MIR Fig. 5: throughput and peak memory of MIR and of BERT-MaxP over the same windows at each length, side by
    side in one process, and the graph construction time per document (src/longrank/bench/mir_speed.py)."""
    input:
        data=DATA["docs.jsonl"],
    output:
        f"{R}/bench/mir.speed.json",
    log:
        f"{R}/logs/mir_speed.log",
    priority: RERANK_PRIORITY
    conda:
        CONDA_ENV
    threads: MODEL_THREADS
    resources:
        mem_mb=12000,
        gpu=lambda wc: 0 if config["device"] == "cpu" else 1,
    params:
        name=MIR_REFERENCE,
        model=lambda wc: as_json(config["models"][MIR_REFERENCE]),
        graph_set=lambda wc: graph_set_settings(config["models"][MIR_REFERENCE]["graph_set"]),
        alike=lambda wc: mir_speed_alike(),
        annotations=annotate_settings(),
        settings=as_json(config["mir_speed"]),
        data=lambda wc, input: os.path.dirname(input.data),
        device=config["device"],
    shell:
        "OMP_NUM_THREADS={threads:q} python -m longrank mir_speed --model {params.name:q} --model-config {params.model:q}"
        " --graph-set {params.graph_set:q} --alike {params.alike:q} --annotations {params.annotations:q} --settings {params.settings:q}"
        " --data {params.data:q} --device {params.device:q} --out {output:q} 2> {log:q}"
