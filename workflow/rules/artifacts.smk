rule artifacts:
    """What a model declares it needs precomputed per document (src/longrank/artifacts.py): once per collection
    from the data, or per fold from that fold's trained weights (MORES Reuse-S1/S2 stores)."""
    input:
        checkpoint=lambda wc: (
            [] if wc.scope == "collection" else f"{R}/models/{weights_of(wc.model)}/{wc.scope}/model.safetensors"
        ),
        candidates=lambda wc: candidates_of(wc.model),
        data=list(DATA.values()),
        embeddings=model_embeddings,
    output:
        directory(f"{R}/artifacts/{{model}}/{{scope}}"),
    log:
        f"{R}/logs/artifacts_{{model}}_{{scope}}.log",
    benchmark:
        f"{R}/benchmarks/artifacts_{{model}}_{{scope}}.tsv"
    priority: chain_priority("models")
    conda:
        CONDA_ENV
    threads: MODEL_THREADS
    resources:
        mem_mb=12000,
        gpu=lambda wc: 0 if config["device"] == "cpu" else 1,
    params:
        model=model_config,
        data=data_dir,
        device=config["device"],
        deterministic=DETERMINISTIC,
        checkpoint=lambda wc, input: ["--checkpoint", input.checkpoint] if input.checkpoint else [],
        scope=lambda wc: "collection" if wc.scope == "collection" else "fold",
    shell:
        "OMP_NUM_THREADS={threads:q} python -m longrank artifacts --model-config {params.model:q} --scope {params.scope:q} {params.checkpoint:q}"
        " --data {params.data:q} --candidates {input.candidates:q} --device {params.device:q} {params.deterministic:q} --out {output:q} 2> {log:q}"
