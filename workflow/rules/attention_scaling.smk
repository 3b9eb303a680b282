# NDRM paper Fig. 2 brought up to date: peak training memory and forward+backward time of one
# Conformer stack with materialised, fused (SDPA) and separable attention by sequence length. It reads nothing
# from the collection (random inputs), so one run's table serves every dataset. Runs when an NDRM model is
# configured (as mores_speed with MORES); `enabled: false` leaves it out (ATTENTION_SCALING, longrank.plan.targets).


rule attention_scaling:
    """Peak memory and time of materialised / fused / separable attention by length (report section 'Attention scaling')."""
    output:
        f"{R}/bench/attention_scaling.json",
    log:
        f"{R}/logs/attention_scaling.log",
    priority: RERANK_PRIORITY
    conda:
        CONDA_ENV
    threads: 2
    resources:
        # the children are kept under max_memory_gb by estimate; the interpreter and torch come on top
        mem_mb=lambda wc: int(config["attention_scaling"]["max_memory_gb"] * 1024) + 3000,
        gpu=lambda wc: 0 if config["device"] == "cpu" else 1,
    params:
        lengths=config["attention_scaling"]["lengths"],
        attentions=config["attention_scaling"]["attentions"],
        batch_size=config["attention_scaling"]["batch_size"],
        layers=config["attention_scaling"]["layers"],
        hidden=config["attention_scaling"]["hidden"],
        heads=config["attention_scaling"]["heads"],
        repeats=config["attention_scaling"]["repeats"],
        max_memory_gb=config["attention_scaling"]["max_memory_gb"],
        device=config["device"],
    shell:
        "python -m longrank attention_scaling --lengths {params.lengths:q} --attentions {params.attentions:q}"
        " --batch-size {params.batch_size:q} --layers {params.layers:q} --hidden {params.hidden:q} --heads {params.heads:q}"
        " --repeats {params.repeats:q} --max-memory-gb {params.max_memory_gb:q} --threads {threads:q}"
        " --device {params.device:q} --out {output:q} 2> {log:q}"
