rule train:
    input:
        data=list(DATA.values()),
        embeddings=model_embeddings,
        candidates=lambda wc: candidates_of(wc.model),
        artifacts=collection_artifacts,
        pretrained=pretrained_weights,
        # no training before the measures are known to be satisfiable (rule satisfiable); ancient: a rerun of the
        # check (other measures) does not retrain
        measures_checked=ancient(MEASURES_CHECKED),
    output:
        model=f"{R}/models/{{model}}/fold{{fold}}/model.safetensors",
        # the model's size and SHA-256: rerank scores only with weights it vouches for
        manifest=f"{R}/models/{{model}}/fold{{fold}}/model.manifest.json",
        dev_run=f"{R}/models/{{model}}/fold{{fold}}/dev.run",
        summary=f"{R}/models/{{model}}/fold{{fold}}/train_summary.json",
    log:
        f"{R}/logs/train_{{model}}_fold{{fold}}.log",
    benchmark:
        f"{R}/benchmarks/train_{{model}}_fold{{fold}}.tsv"
    priority: chain_priority("models")
    conda:
        CONDA_ENV
    threads: MODEL_THREADS
    # per job (longrank.plan.job_resources): the GPU bill's time for this model's steps and dev evaluations, with a
    # margin that grows on each retry; a constraint for a job over a 40 GB card's memory when the config names one
    resources:
        runtime=lambda wc, attempt: JOB_RESOURCES.train(wc.model, attempt).runtime,
        mem_mb=lambda wc, attempt: JOB_RESOURCES.train(wc.model, attempt).mem_mb,
        constraint=lambda wc, attempt: JOB_RESOURCES.train(wc.model, attempt).constraint,
        gpu=training_gpus,
    params:
        model=model_config,
        # the code that trains this model (longrank.results.code_digest): changed arithmetic retrains it (params trigger)
        code=lambda wc: code_of("train", wc.model),
        candidates=lambda wc, input: input.candidates,
        artifacts=lambda wc, input: ["--collection-artifacts", *input.artifacts] if input.artifacts else [],
        init=lambda wc, input: ["--init", *input.pretrained] if input.pretrained else [],
        pretrain_queries=[],
        # a training finished before from exactly these inputs is copied, not trained again: an earlier setting's
        # (rule history) and, with history.across_collections, another results folder's (the other TREC DL year)
        reuse=["--reuse-from", "results" if config["history"]["across_collections"] else R],
        fold=lambda wc: wc.fold,
        rerank_depth=lambda wc: EFFECTIVE[wc.model].rerank_depth,
        data=data_dir,
        device=config["device"],
        deterministic=DETERMINISTIC,
    shell:
        "OMP_NUM_THREADS={threads:q} python -m longrank train --model {wildcards.model:q} --model-config {params.model:q}"
        " --data {params.data:q} {params.pretrain_queries:q} --candidates {params.candidates:q} {params.artifacts:q}"
        " {params.init:q} --fold {params.fold:q} --rerank-depth {params.rerank_depth:q} --device {params.device:q} {params.deterministic:q}"
        " {params.reuse:q} --out {output.model:q} 2> {log:q}"


# train.pretrain: the model trained on a pseudo-query set (rule pseudo_queries) before its supervised training,
# early-stopped on held-out pseudo-queries. One job for all folds: it sees no real query. Rule train's command and
# settings, on the set's queries and candidates; its resources from the pre-training's own steps and held-out share.
use rule train as train_pretrain with:
    input:
        data=list(DATA.values()),
        embeddings=model_embeddings,
        pseudo_queries=lambda wc: f"{R}/pseudo_queries/{pseudo_queries_of(wc.model)}",
        artifacts=pretraining_artifacts,
        measures_checked=ancient(MEASURES_CHECKED),
    output:
        model=f"{R}/models/{{model}}/pretrained/model.safetensors",
        manifest=f"{R}/models/{{model}}/pretrained/model.manifest.json",
        summary=f"{R}/models/{{model}}/pretrained/train_summary.json",
    log:
        f"{R}/logs/pretrain_{{model}}.log",
    benchmark:
        f"{R}/benchmarks/pretrain_{{model}}.tsv"
    resources:
        runtime=lambda wc, attempt: JOB_RESOURCES.pretrain(wc.model, attempt).runtime,
        mem_mb=lambda wc, attempt: JOB_RESOURCES.pretrain(wc.model, attempt).mem_mb,
        constraint=lambda wc, attempt: JOB_RESOURCES.pretrain(wc.model, attempt).constraint,
        gpu=training_gpus,
    params:
        candidates=lambda wc, input: os.path.join(input.pseudo_queries, "candidates.run"),
        init=[],
        reuse=[],
        pretrain_queries=lambda wc, input: ["--pretrain-queries", input.pseudo_queries],
        fold=0,
