# LongRank: collection -> first-stage candidates -> trained re-rankers -> evaluation -> significance -> report.
# Thin on purpose: validation and helpers live in workflow/rules/common.smk, one .smk per stage, and every
# rule calls `python -m longrank <stage>` (the logic is in src/longrank/).
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/word2vec.smk"
include: "workflow/rules/pisa.smk"
include: "workflow/rules/candidates.smk"
include: "workflow/rules/sanity.smk"
include: "workflow/rules/pseudo_queries.smk"
include: "workflow/rules/hdct.smk"
include: "workflow/rules/graphs.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/artifacts.smk"
include: "workflow/rules/rerank.smk"
include: "workflow/rules/interpolate.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/history.smk"
include: "workflow/rules/bench.smk"
include: "workflow/rules/attention_scaling.smk"
include: "workflow/rules/report.smk"


rule all:
    default_target: True
    input:
        REPORT,


onstart:
    # Weights a job reads from outside the repository (a GloVe file, a hub model, a weights package): a missing one
    # named now, before any job runs (workflow/rules/common.smk)
    check_downloads()
    # the lock on results/<dataset> itself (workflow/rules/common.smk): never taken by a dry run
    take_results_lock()


onsuccess:
    release_results_lock()
    # where to look: the report's path when this run built it or it exists (a run for another target leaves it be)
    if os.path.exists(REPORT):
        print(f"LongRank report: {os.path.abspath(REPORT)}")


onerror:
    release_results_lock()
    # each failed job's own error (the stage's message is in its log file, which Snakemake only names)
    print_failures(log)
