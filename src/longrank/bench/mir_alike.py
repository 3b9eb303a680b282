"""Which configured entries the MIR bench's one measurement gives a throughput for. Light on purpose (no torch): the
workflow asks it when it parses the config, and passes the answer to the bench (``--alike``) as a parameter, so adding
an ablation does not rerun the bench and adding MIR-1K does."""

from __future__ import annotations

from longrank.data.mir_graph_settings import graph_settings
from longrank.config.model_types import architecture_defaults, architecture_params, capabilities


def timed_alike(models: dict, reference: str, graph_set: dict) -> dict[str, dict]:
    """The entries whose throughput this measurement gives, each as ``{"model": "MIR" | "MaxP", "tokens": n}``: MIR
    entries on the reference's graph set with its architecture but perhaps another ``max_doc_tokens``, and BERT-MaxP
    entries with the graph set's encoder (MIR's: the config checks they agree) over its windows (``passage_len`` =
    window, ``passage_stride`` = stride). An ablation (another architecture) is not timed as the reference is. Which
    entries are which, their classes declare: MIR reads a graph set; MaxP is the other ``mir_speed`` model."""
    ref, settings = models[reference], graph_settings(graph_set)

    def architecture(entry: dict) -> dict:
        params = {"type": entry["type"], **architecture_defaults(entry["type"]), **architecture_params(entry)}
        params.pop("max_doc_tokens", None)
        return params

    alike = {}
    for name, entry in models.items():
        declared = capabilities(entry)
        if (
            declared.reads_graph_set
            and entry.get("graph_set") == ref.get("graph_set")
            and architecture(entry) == architecture(ref)
        ):
            alike[name] = {"model": "MIR", "tokens": declared.document_budget or settings.max_doc_tokens}
        elif (
            declared.speed_bench == "mir_speed"
            and not declared.reads_graph_set
            and entry.get("mode") == "maxp"
            and entry.get("passage_len") == settings.window
            and (entry.get("passage_stride") or entry["passage_len"]) == settings.stride
            and entry.get("encoder", architecture_defaults(entry["type"])["encoder"]) == settings.encoder
        ):
            alike[name] = {"model": "MaxP", "tokens": declared.document_budget}
    return alike
