rule rerank:
    input:
        checkpoints=checkpoints,
        # each checkpoint's manifest (written by train beside it): rerank refuses a model without one
        manifests=lambda wc: [path.replace(".safetensors", ".manifest.json") for path in checkpoints(wc)],
        collection_artifacts=collection_artifacts,
        fold_artifacts=fold_artifacts,
        candidates=lambda wc: candidates_of(wc.model),
        data=list(DATA.values()),
        embeddings=model_embeddings,
    output:
        run=f"{R}/runs/{{model}}.run",
        details=f"{R}/runs/{{model}}.details.jsonl",
    log:
        f"{R}/logs/rerank_{{model}}.log",
    benchmark:
        f"{R}/benchmarks/rerank_{{model}}.tsv"
    priority: rerank_priority
    conda:
        CONDA_ENV
    threads: MODEL_THREADS
    # per job (longrank.plan.job_resources): the GPU bill's time for the test queries' candidates, with a margin
    # that grows on each retry
    resources:
        runtime=lambda wc, attempt: JOB_RESOURCES.rerank(wc.model, attempt).runtime,
        mem_mb=lambda wc, attempt: JOB_RESOURCES.rerank(wc.model, attempt).mem_mb,
        constraint=lambda wc, attempt: JOB_RESOURCES.rerank(wc.model, attempt).constraint,
        gpu=lambda wc: 0 if config["device"] == "cpu" else 1,
    params:
        model=model_config,
        # the code that reranks with this model (longrank.results.code_digest): changed arithmetic reruns it
        code=lambda wc: code_of("rerank", wc.model),
        rerank_depth=lambda wc: EFFECTIVE[wc.model].rerank_depth,
        batch_size=config["rerank"]["batch_size"],
        precision=config["rerank"]["precision"],
        data=data_dir,
        device=config["device"],
        deterministic=DETERMINISTIC,
        out_dir=lambda wc, output: os.path.dirname(output.run),
        artifacts=lambda wc, input: (
            ["--collection-artifacts", *input.collection_artifacts] if input.collection_artifacts else []
        )
        + (["--fold-artifacts", *input.fold_artifacts] if input.fold_artifacts else []),
    shell:
        "OMP_NUM_THREADS={threads:q} python -m longrank rerank --model {wildcards.model:q} --model-config {params.model:q}"
        " --data {params.data:q} --candidates {input.candidates:q}"
        " --checkpoints {input.checkpoints:q} {params.artifacts:q}"
        " --rerank-depth {params.rerank_depth:q} --batch-size {params.batch_size:q} --precision {params.precision:q}"
        " --device {params.device:q} {params.deterministic:q} --out-dir {params.out_dir:q} 2> {log:q}"
