rule annotate:
    """MIR's sentences and entities (src/longrank/mir_graphs/annotate.py): spaCy over every document once per collection,
    shared by every graph set; it runs only when a mir model is configured. With annotations.shards above 1 it merges
    the shards' annotations (rule annotate_shard) into the same directory, the same bytes as one job writes."""
    input:
        data=DATA["docs.jsonl"],
        shards=annotation_shards,
    output:
        directory(f"{R}/annotations"),
    log:
        f"{R}/logs/annotate.log",
    benchmark:
        f"{R}/benchmarks/annotate.tsv"
    priority: MIR_CHAIN_PRIORITY
    conda:
        CONDA_ENV
    threads: annotate_threads
    # a day at MS MARCO's size for one job, 2 h for a merge of shards (longrank.plan.job_resources)
    resources:
        mem_mb=8000,
        runtime=lambda wc, input, attempt: collection_stage_minutes("annotate", bool(input.shards), attempt),
    params:
        settings=annotate_settings(),
        data=lambda wc, input: os.path.dirname(input.data),
        merge=lambda wc, input: ["--merge", *input.shards] if input.shards else [],
    shell:
        "python -m longrank annotate --data {params.data:q} --config {params.settings:q} {params.merge:q}"
        " --out {output:q} 2> {log:q}"


rule annotate_shard:
    """One of annotations.shards ranges of the documents, annotated for rule annotate to merge: shard i of N takes
    documents [i*D/N, (i+1)*D/N) of the collection's D in its order (annotate.py, annotate_shard)."""
    input:
        data=DATA["docs.jsonl"],
    output:
        directory(f"{R}/annotations_shards/{{shard}}"),
    log:
        f"{R}/logs/annotate_shard_{{shard}}.log",
    benchmark:
        f"{R}/benchmarks/annotate_shard_{{shard}}.tsv"
    priority: MIR_CHAIN_PRIORITY
    conda:
        CONDA_ENV
    threads: lambda wc: config["annotations"]["n_process"]
    resources:
        mem_mb=8000,
    params:
        settings=annotate_settings(),
        data=lambda wc, input: os.path.dirname(input.data),
        shard=lambda wc: f"{wc.shard}/{config['annotations']['shards']}",
    shell:
        "python -m longrank annotate --data {params.data:q} --config {params.settings:q} --shard {params.shard:q}"
        " --out {output:q} 2> {log:q}"


rule graphs:
    """One MIR graph set (src/longrank/mir_graphs/graphs.py): passages, pivot tokens and the p2p / s2s / t2t graphs of every
    document, built once per collection and set; every mir entry naming the set (its ablations) reads it. With
    mir_graphs.<set>.shards above 1 it merges the shards (rule graphs_shard) into the same directory, the same bytes as one
    job writes."""
    input:
        data=DATA["docs.jsonl"],
        annotations=f"{R}/annotations",
        prf_queries=graph_set_prf_queries,
        shards=graph_set_shards,
    output:
        directory(f"{R}/graphs/{{graph_set}}"),
    log:
        f"{R}/logs/graphs_{{graph_set}}.log",
    benchmark:
        f"{R}/benchmarks/graphs_{{graph_set}}.tsv"
    priority: MIR_CHAIN_PRIORITY
    conda:
        CONDA_ENV
    # 12 h at MS MARCO's size for one job, 2 h for a merge of shards (longrank.plan.job_resources)
    resources:
        mem_mb=8000,
        runtime=lambda wc, input, attempt: collection_stage_minutes("graphs", bool(input.shards), attempt),
    params:
        settings=lambda wc: graph_set_settings(wc.graph_set),
        prf=lambda wc, input: ["--prf-queries", *input.prf_queries] if input.prf_queries else [],
        pretrain_queries=[],
        data=lambda wc, input: os.path.dirname(input.data),
        merge=lambda wc, input: ["--merge", *input.shards] if input.shards else [],
    shell:
        "python -m longrank graphs --data {params.data:q} --annotations {input.annotations:q} {params.prf:q}"
        " {params.pretrain_queries:q} --config {params.settings:q} {params.merge:q} --out {output:q} 2> {log:q}"


rule graphs_shard:
    """One of mir_graphs.<set>.shards ranges of the documents, its records built for rule graphs to merge: shard i of N
    takes documents [i*D/N, (i+1)*D/N) of the collection's D in its order (graph_shards.py); each shard fits the tf-idf
    of the p2p edges on the whole collection, as one job does."""
    input:
        data=DATA["docs.jsonl"],
        annotations=f"{R}/annotations",
        prf_queries=graph_set_prf_queries,
    output:
        directory(f"{R}/graphs_shards/{{graph_set}}/{{shard}}"),
    log:
        f"{R}/logs/graphs_shard_{{graph_set}}_{{shard}}.log",
    benchmark:
        f"{R}/benchmarks/graphs_shard_{{graph_set}}_{{shard}}.tsv"
    priority: MIR_CHAIN_PRIORITY
    conda:
        CONDA_ENV
    resources:
        mem_mb=8000,
    params:
        settings=lambda wc: graph_set_settings(wc.graph_set),
        prf=lambda wc, input: ["--prf-queries", *input.prf_queries] if input.prf_queries else [],
        pretrain_queries=[],
        data=lambda wc, input: os.path.dirname(input.data),
        shard=graph_shard,
    shell:
        "python -m longrank graphs --data {params.data:q} --annotations {input.annotations:q} {params.prf:q}"
        " {params.pretrain_queries:q} --config {params.settings:q} --shard {params.shard:q} --out {output:q} 2> {log:q}"


# A graph set as pre-training on a pseudo-query set reads the collection (rule train_pretrain of a mir model): each positive
# without the text its pseudo-query came from, annotated afresh, and its own query kept out of its PRF terms
# (src/longrank/mir_graphs/graphs.py, pretraining_inputs). Rule graphs' command and resources, with the pseudo-queries;
# sharded as the collection's set is (the same mir_graphs.<set>.shards), each shard annotating the positives afresh.
use rule graphs as graphs_pretrain with:
    input:
        data=DATA["docs.jsonl"],
        annotations=f"{R}/annotations",
        prf_queries=graph_set_prf_queries,
        pretrain_queries=f"{R}/pseudo_queries/{{pseudo_set}}",
        shards=graph_set_pretrain_shards,
    output:
        directory(f"{R}/graphs_pretrain/{{pseudo_set}}/{{graph_set}}"),
    log:
        f"{R}/logs/graphs_pretrain_{{pseudo_set}}_{{graph_set}}.log",
    benchmark:
        f"{R}/benchmarks/graphs_pretrain_{{pseudo_set}}_{{graph_set}}.tsv"
    params:
        pretrain_queries=lambda wc, input: ["--pretrain-queries", input.pretrain_queries],


use rule graphs_shard as graphs_pretrain_shard with:
    input:
        data=DATA["docs.jsonl"],
        annotations=f"{R}/annotations",
        prf_queries=graph_set_prf_queries,
        pretrain_queries=f"{R}/pseudo_queries/{{pseudo_set}}",
    output:
        directory(f"{R}/graphs_pretrain_shards/{{pseudo_set}}/{{graph_set}}/{{shard}}"),
    log:
        f"{R}/logs/graphs_pretrain_shard_{{pseudo_set}}_{{graph_set}}_{{shard}}.log",
    benchmark:
        f"{R}/benchmarks/graphs_pretrain_shard_{{pseudo_set}}_{{graph_set}}_{{shard}}.tsv"
    params:
        pretrain_queries=lambda wc, input: ["--pretrain-queries", input.pretrain_queries],
