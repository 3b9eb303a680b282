rule artifacts:
    """What a model declares it needs precomputed per document (src/longrank/artifacts.py): once per collection
    from the data, or per fold from that fold's trained weights (MORES Reuse-S1/S2 stores). With impact_index.shards
    above 1 an NDRM impact index is the merge of its shards (rule artifacts_shard): the same index as one job writes."""
    input:
        checkpoint=lambda wc: (
            [] if wc.scope == "collection" else f"{R}/models/{weights_of(wc.model)}/{wc.scope}/model.safetensors"
        ),
        candidates=lambda wc: candidates_of(wc.model),
        data=list(DATA.values()),
        embeddings=model_embeddings,
        shards=artifact_shards,
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
    # 8 h at MS MARCO's size for one job, 2 h for a merge of an impact index's shards (longrank.plan.job_resources)
    resources:
        mem_mb=12000,
        runtime=lambda wc, input, attempt: collection_stage_minutes("artifacts", bool(input.shards), attempt),
        # the merge of shards indexes on the CPU: it asks for no GPU (and the profile sends it to the CPU partition)
        gpu=lambda wc, input: 0 if config["device"] == "cpu" or input.shards else 1,
    params:
        model=model_config,
        data=data_dir,
        device=config["device"],
        deterministic=DETERMINISTIC,
        checkpoint=lambda wc, input: ["--checkpoint", input.checkpoint] if input.checkpoint else [],
        scope=lambda wc: "collection" if wc.scope == "collection" else "fold",
        merge=lambda wc, input: ["--merge", *input.shards] if input.shards else [],
    shell:
        "OMP_NUM_THREADS={threads:q} python -m longrank artifacts --model-config {params.model:q} --scope {params.scope:q} {params.checkpoint:q}"
        " --data {params.data:q} --candidates {input.candidates:q} --device {params.device:q} {params.deterministic:q} {params.merge:q}"
        " --out {output:q} 2> {log:q}"


rule artifacts_shard:
    """One of impact_index.shards ranges of the documents of an NDRM impact index (a fold's, from its trained weights),
    scored on the GPU as one job scores them, for rule artifacts to merge: shard i of N takes the scoring batches
    [i*B/N, (i+1)*B/N) of the collection's B in the index's order (src/longrank/models/ndrm_impact_shards.py)."""
    input:
        checkpoint=lambda wc: f"{R}/models/{weights_of(wc.model)}/{wc.scope}/model.safetensors",
        data=list(DATA.values()),
        embeddings=model_embeddings,
    output:
        directory(f"{R}/artifacts_shards/{{model}}/{{scope}}/{{shard}}"),
    log:
        f"{R}/logs/artifacts_shard_{{model}}_{{scope}}_{{shard}}.log",
    benchmark:
        f"{R}/benchmarks/artifacts_shard_{{model}}_{{scope}}_{{shard}}.tsv"
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
        shard=artifact_shard,
    shell:
        "OMP_NUM_THREADS={threads:q} python -m longrank artifacts --model-config {params.model:q} --scope fold"
        " --checkpoint {input.checkpoint:q} --data {params.data:q} --device {params.device:q} {params.deterministic:q}"
        " --shard {params.shard:q} --out {output:q} 2> {log:q}"
