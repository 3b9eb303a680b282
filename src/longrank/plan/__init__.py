"""What the workflow plans for a validated config, without Snakemake: the models and systems, the target lists, MIR's
chain and the jobs' priorities, and each job's inputs by its wildcards. workflow/rules/common.smk builds one
:class:`Plan` per parse and its rules read it; everything here is torch-free, as the parse is."""

from longrank.plan.targets import Plan, build_plan

__all__ = ["Plan", "build_plan"]
