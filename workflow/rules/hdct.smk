rule hdct:
    """HDCT's term-weight encoder, trained on the collection's titles or a pseudo-query set, and the BM25 index of
    its pseudo-documents (src/longrank/train/hdct.py): once per collection and first stage; no query is seen. With
    first_stages[].shards above 1 it indexes the shards' weights (rule hdct_shard) with the encoder rule hdct_encoder
    trained (src/longrank/train/hdct_shards.py): the same directory, the same bytes as one job writes."""
    input:
        data=[DATA[name] for name in ("docs.jsonl", "queries.tsv")],
        pseudo_queries=hdct_pseudo_queries,
        encoder=hdct_encoder,
        shards=hdct_shards,
    output:
        directory(f"{R}/hdct/{{first_stage}}"),
    log:
        f"{R}/logs/hdct_{{first_stage}}.log",
    benchmark:
        f"{R}/benchmarks/hdct_{{first_stage}}.tsv"
    priority: chain_priority("stages")
    conda:
        CONDA_ENV
    threads: MODEL_THREADS
    # a day at MS MARCO's size for one job, 4 h for the index of the shards (longrank.plan.job_resources)
    resources:
        mem_mb=12000,
        runtime=lambda wc, input, attempt: collection_stage_minutes("hdct", bool(input.shards), attempt),
        # the merge of shards indexes on the CPU: it asks for no GPU (and the profile sends it to the CPU partition)
        gpu=lambda wc, input: 0 if config["device"] == "cpu" or input.shards else 1,
    params:
        spec=first_stage_spec,
        source=lambda wc, input: (
            ["--pseudo-queries", *input.pseudo_queries]
            if input.pseudo_queries
            else ["--dataset", as_json(config["dataset"])]
        ),
        data=data_dir,
        device=config["device"],
        deterministic=DETERMINISTIC,
        part=lambda wc, input: (["--encoder", *input.encoder, "--merge", *input.shards] if input.shards else []),
    shell:
        "OMP_NUM_THREADS={threads:q} python -m longrank hdct --data {params.data:q} --first-stage {params.spec:q}"
        " {params.source:q} --device {params.device:q} {params.deterministic:q} {params.part:q} --out {output:q} 2> {log:q}"


# first_stages[].shards above 1: the encoder trained in a job of its own, as one job trains it (rule hdct's command
# with --train-encoder), for the shards to weight with and the merge to copy.
use rule hdct as hdct_encoder with:
    input:
        data=[DATA[name] for name in ("docs.jsonl", "queries.tsv")],
        pseudo_queries=hdct_pseudo_queries,
    output:
        directory(f"{R}/hdct_encoder/{{first_stage}}"),
    log:
        f"{R}/logs/hdct_encoder_{{first_stage}}.log",
    benchmark:
        f"{R}/benchmarks/hdct_encoder_{{first_stage}}.tsv"
    # the encoder's training alone (20,000 steps of 32 passages at full scale: under 1 h estimated on an H100)
    resources:
        mem_mb=12000,
        runtime=lambda wc, attempt: 240 * attempt,
        gpu=lambda wc: 0 if config["device"] == "cpu" else 1,
    params:
        part=["--train-encoder"],


rule hdct_shard:
    """One of first_stages[].shards ranges of the documents weighted through the trained encoder (rule hdct_encoder),
    for rule hdct to index: shard i of N takes the chunks [i*C/N, (i+1)*C/N) of the collection's C chunks of 256
    documents in its order (src/longrank/train/hdct_shards.py), on the GPU as one job weights them."""
    input:
        data=[DATA["docs.jsonl"]],
        encoder=f"{R}/hdct_encoder/{{first_stage}}",
    output:
        directory(f"{R}/hdct_shards/{{first_stage}}/{{shard}}"),
    log:
        f"{R}/logs/hdct_shard_{{first_stage}}_{{shard}}.log",
    benchmark:
        f"{R}/benchmarks/hdct_shard_{{first_stage}}_{{shard}}.tsv"
    priority: chain_priority("stages")
    conda:
        CONDA_ENV
    threads: MODEL_THREADS
    resources:
        mem_mb=12000,
        gpu=lambda wc: 0 if config["device"] == "cpu" else 1,
    params:
        spec=first_stage_spec,
        data=data_dir,
        device=config["device"],
        deterministic=DETERMINISTIC,
        shard=hdct_shard,
    shell:
        "OMP_NUM_THREADS={threads:q} python -m longrank hdct --data {params.data:q} --first-stage {params.spec:q}"
        " --device {params.device:q} {params.deterministic:q} --encoder {input.encoder:q} --shard {params.shard:q}"
        " --out {output:q} 2> {log:q}"
