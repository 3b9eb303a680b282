"""Stage ``attention_scaling``: peak training memory and forward+backward time of one Conformer stack (paper
Sec. 3, Eq. 2) with three attentions, by sequence length -- the paper's Fig. 2 (RQ2) brought up to date.

The paper compares the Conformer's separable attention (Eq. 2: softmax(Q over d_key) . (softmax(K over n)^T V),
O(n . d_key) memory) with the 2020 Transformer, whose attention writes out the n x n matrix softmax(QK^T/sqrt d)
(Eq. 1). Since then fused kernels (``torch.nn.functional.scaled_dot_product_attention``: flash / memory-efficient
attention) compute Eq. 1 exactly without storing the n x n matrix either. So the same layer stack
(``ConformerLayer``: grouped convolution, attention, feed-forward; only ``attention`` differs) runs with
``materialised`` (Eq. 1 written out, as in 2020), ``sdpa`` (Eq. 1 fused) and ``separable`` (Eq. 2), and the
report separates the two claims: the memory advantage holds against materialised attention only, the time
advantage is the one against fused attention.

How it measures (also written into the output's ``method``):
- One configuration (attention, length) = one fresh Python process, so no configuration inherits another's
  allocator caches. The child builds ``layers`` ConformerLayers (hidden, heads; the layer's own defaults for
  the convolution window and groups, feed-forward width and dropout 0.2) in training mode, and a batch of
  ``batch_size`` random sequences of exactly ``length`` positions with an all-valid padding mask.
- A training step without the optimiser: forward, sum, backward, gradients dropped as ``zero_grad`` does.
  ``warmup`` untimed steps, then ``repeats`` timed steps (CUDA synchronised around each); ``seconds`` is their
  median and ``timing`` (``outputs.Timing``) keeps every step with the median's spread.
- Peak memory over the warm-up and the timed steps, above what the process held after building the layers and
  the batch (so weights and inputs are excluded: it is the working memory of training). GPU:
  ``torch.cuda.max_memory_allocated`` minus ``torch.cuda.memory_allocated`` before. CPU: the child's peak
  resident set growth (``longrank.bench.memory``'s probe: the kernel's RSS high-water mark reset after setup;
  the lifetime ``ru_maxrss`` growth, a lower bound, where the kernel does not allow the reset).
- A configuration whose estimated memory (``estimate_bytes``) exceeds ``max_memory_gb`` is not run and is
  recorded as skipped with the estimate; one that runs out of memory anyway (a CUDA out-of-memory error, a
  failed CPU allocation, or a child killed by the kernel) is recorded as skipped with what happened.

Output: ``{"title", "rows": [{attention, length, peak_mb, seconds, device, skipped, reason, estimate_mb,
seconds_all, timing}], "config": {...}, "device", "device_name", "memory_method", "method"}``. It has no
``columns``/``notes`` table: the report's own section (``longrank.report.attention_scaling_section``) renders it.
"""

from __future__ import annotations

import argparse
import logging
import signal

import torch

from longrank.bench import fresh
from longrank.bench.fresh import measure_in_fresh_process
from longrank.bench.timing import MIN_REPEATS, check_repeats, median_of, time_region
from longrank.errors import InputError
from longrank.results.stage_outputs import AttentionScaling, Timing
from longrank.runtime import resolve_device
from longrank.config.schema import schema_default

log = logging.getLogger(__name__)
# Measures in fresh processes forked from a server that the CLI forks from this process (bench.fresh.start_here) after
# importing what fresh_preload names


def fresh_preload(args: argparse.Namespace) -> tuple[str, ...]:
    """What the measuring server imports (bench.fresh): the Conformer's attention needs torch alone."""
    return fresh.TORCH


ATTENTIONS = ("materialised", "sdpa", "separable")
FLOAT_BYTES = 4  # float32 training
# Activations a layer keeps per position for the backward pass, in multiples of ``hidden`` floats: the masked
# input, convolution, q/k/v, the attention's own intermediates and output, output projection, feed-forward,
# two layer norms, residual sums and dropout masks come to about 25; 32 leaves some room. Only the order of
# magnitude matters: the estimate's job is to keep materialised attention's quadratic configurations from
# running the machine out of memory.
LINEAR_FLOATS_PER_POSITION = 32


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # Defaults are the paper's configuration (Sec. 4: 2 Conformer layers, hidden 256, 32 heads; batch 4 as in
    # the prototype); the lengths span the paper's Fig. 2 up to its 4,000 document terms.
    parser.add_argument(
        "--lengths",
        type=int,
        nargs="+",
        default=schema_default("attention_scaling.lengths"),
        help="sequence lengths (positions)",
    )
    parser.add_argument("--attentions", nargs="+", choices=ATTENTIONS, default=list(ATTENTIONS))
    parser.add_argument("--batch-size", type=int, default=schema_default("attention_scaling.batch_size"))
    parser.add_argument("--layers", type=int, default=schema_default("attention_scaling.layers"))
    parser.add_argument("--hidden", type=int, default=schema_default("attention_scaling.hidden"))
    parser.add_argument("--heads", type=int, default=schema_default("attention_scaling.heads"))
    parser.add_argument(
        "--repeats", type=int, default=MIN_REPEATS, help="timed forward+backward steps per configuration (median kept)"
    )
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps before the timed ones")
    parser.add_argument(
        "--max-memory-gb",
        type=float,
        default=16.0,
        help="skip a configuration whose estimated peak memory exceeds this (GB)",
    )
    parser.add_argument("--threads", type=int, default=0, help="torch threads in each child (0: torch's default)")
    parser.add_argument("--device", default=schema_default("device"), help="auto, cpu or cuda[:N]")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True, help="output JSON (results/{dataset}/bench/attention_scaling.json)")


def estimate_bytes(attention: str, length: int, batch_size: int, layers: int, hidden: int, heads: int) -> int:
    """An estimate of a configuration's peak training memory (bytes above weights and inputs).

    Every attention keeps O(n . hidden) activations per layer. Materialised attention (Eq. 1 written out,
    ``conformer.materialised_attention``) in addition keeps its n x n attention probabilities, batch . heads . n^2
    floats, in every layer for the backward pass, and while the last layer computes its softmax it holds two
    more n x n tensors (the scaled scores and their masked copy): (layers + 2) n x n tensors in all, which
    matches the issue's CPU prototype (2.1 GB at 1,000 and 8.1 GB at 2,000 positions for batch 4, 32 heads,
    2 layers). Fused SDPA and separable attention (Eq. 2) store no n x n tensor."""
    linear = layers * LINEAR_FLOATS_PER_POSITION * batch_size * length * hidden * FLOAT_BYTES
    if attention != "materialised":
        return linear
    return linear + (layers + 2) * batch_size * heads * length * length * FLOAT_BYTES


def run(args: argparse.Namespace) -> None:
    _check(args)
    device = resolve_device(args.device)
    shape = {"batch_size": args.batch_size, "layers": args.layers, "hidden": args.hidden, "heads": args.heads}
    rows, info = [], {}
    for length in sorted(set(args.lengths)):
        for attention in args.attentions:
            row, result = _configuration(args, shape, attention, length, device)
            if result and not result.get("oom"):
                info = {k: result[k] for k in ("device_name", "memory_method", "threads", "parameters")}
            rows.append(row)
    AttentionScaling(
        title="Attention scaling: peak training memory and time by sequence length",
        rows=rows,
        config={
            **shape,
            "lengths": sorted(set(args.lengths)),
            "attentions": list(args.attentions),
            "repeats": args.repeats,
            "warmup": args.warmup,
            "max_memory_gb": args.max_memory_gb,
            "seed": args.seed,
        },
        device=str(device),
        device_name=info.get("device_name"),
        method=_method(args, device, info),
        extra={
            "memory_method": info.get("memory_method"),
            "parameters": info.get("parameters"),
            "torch": torch.__version__,
        },
    ).write(args.out)


def _check(args: argparse.Namespace) -> None:
    if min(args.batch_size, args.layers, args.hidden, args.heads, *args.lengths) < 1:
        raise InputError("--batch-size, --layers, --hidden, --heads and every --lengths value must be positive")
    check_repeats(args.repeats, args.warmup)
    if args.hidden % args.heads:
        raise InputError(f"--hidden {args.hidden} is not a multiple of --heads {args.heads}")
    if args.max_memory_gb <= 0:
        raise InputError("--max-memory-gb must be positive")


def _configuration(args, shape: dict, attention: str, length: int, device) -> tuple[dict, dict | None]:
    """One (attention, length) row: skipped on its memory estimate, or measured in a fresh process (whose result
    is returned beside the row)."""
    estimate = estimate_bytes(attention, length, **shape)
    row = {
        "attention": attention,
        "length": length,
        "peak_mb": None,
        "seconds": None,
        "device": str(device),
        "skipped": False,
        "reason": None,
        "estimate_mb": estimate / 2**20,
        "seconds_all": [],
        "timing": None,
    }
    if estimate > args.max_memory_gb * 2**30:
        row.update(skipped=True, reason=f"estimated {estimate / 2**30:.1f} GB > max_memory_gb {args.max_memory_gb:g}")
        log.info("%s at %d: skipped (%s)", attention, length, row["reason"])
        return row, None
    log.info(
        "%s at %d positions x %d on %s (estimate %.0f MB)", attention, length, args.batch_size, device, estimate / 2**20
    )
    job = {
        **shape,
        "attention": attention,
        "length": length,
        "repeats": args.repeats,
        "warmup": args.warmup,
        "device": str(device),
        "threads": args.threads,
        "seed": args.seed,
    }
    result = _in_fresh_process(job)
    if result.get("oom"):
        row.update(skipped=True, reason=result["oom"])
    else:
        timing = Timing.from_json(result["timing"])
        row.update(
            peak_mb=result["peak_mb"], seconds=timing.median_s, seconds_all=timing.seconds, timing=result["timing"]
        )
    log.info("%s at %d: %s", attention, length, row["reason"] or f"{row['peak_mb']:.0f} MB, {row['seconds']:.3f} s")
    return row, result


def _method(args: argparse.Namespace, device, info: dict) -> str:
    return (
        f"{args.layers} ConformerLayers (hidden {args.hidden}, {args.heads} heads, the layer's defaults otherwise) "
        f"in training mode, batch {args.batch_size}, float32, on {device} ({info.get('device_name', '?')}, "
        f"{info.get('threads', '?')} threads). Time: {median_of(args.repeats, 'forward+backward steps', 'forward+backward step')} after "
        f"{args.warmup} warm-up step(s), each synchronised on CUDA (its spread, max - min and IQR, in each row's "
        f"timing), one fresh process per configuration. Peak memory: {info.get('memory_method', '?')} "
        f"Configurations estimated above {args.max_memory_gb:g} GB are skipped, not run."
    )


# ---- one configuration in a fresh process -------------------------------------------------------------------


def _in_fresh_process(job: dict) -> dict:
    outcome = measure_in_fresh_process("longrank.bench.attention_scaling", job)
    if outcome.exitcode == -signal.SIGKILL:  # the kernel's OOM killer: the estimate was too low for this machine
        return {"oom": "killed by SIGKILL while running (out of memory?)"}
    if outcome.result is None:
        raise RuntimeError(
            f"attention_scaling {job['attention']} at length {job['length']} failed:\n{outcome.error[-4000:]}"
        )
    return outcome.result


def measure(job: dict) -> dict:
    """One configuration (see the module docstring); run in a fresh process by ``run``."""
    # Imported here: only the child needs the model, and the bench's probe (which reads /proc and libc).
    from longrank.bench.memory import MemoryProbe
    from longrank.models.modules.conformer import ConformerLayer

    if job["threads"] > 0:
        torch.set_num_threads(job["threads"])
    torch.manual_seed(job["seed"])
    device = torch.device(job["device"])
    cuda = device.type == "cuda"
    stack = (
        torch.nn.ModuleList(
            ConformerLayer(job["hidden"], job["heads"], attention=job["attention"]) for _ in range(job["layers"])
        )
        .to(device)
        .train()
    )
    x = torch.randn(job["batch_size"], job["length"], job["hidden"], device=device)
    mask = torch.ones(job["batch_size"], job["length"], dtype=torch.bool, device=device)
    params = list(stack.parameters())

    def step() -> None:
        h = x
        for layer in stack:
            h = layer(h, mask)
        h.sum().backward()
        for p in params:  # as optimizer.zero_grad(): the next step allocates its gradients afresh
            p.grad = None

    out = {
        "device_name": torch.cuda.get_device_name(device) if cuda else "CPU",
        "threads": torch.get_num_threads(),
        "parameters": sum(p.numel() for p in params),
    }
    probe = MemoryProbe(device)
    out["memory_method"] = _describe(probe)
    try:
        timing = time_region(step, device, job["repeats"], job["warmup"])  # warm-up: kernels, allocator
    except torch.cuda.OutOfMemoryError:
        return {**out, "oom": "CUDA out of memory"}
    except RuntimeError as err:  # a CPU allocation that failed: "DefaultCPUAllocator: can't allocate memory"
        if "allocate" not in str(err):
            raise
        return {**out, "oom": f"CPU out of memory ({str(err).splitlines()[0][:200]})"}
    return {**out, "peak_mb": probe.peak_mb(), "timing": timing.to_json()}


def _describe(probe) -> str:
    """What the bench's probe measured, in this stage's words (steps are forward+backward, not forwards)."""
    if probe.cuda:
        return (
            "torch.cuda.max_memory_allocated during the steps minus the memory allocated before them (weights and "
            "inputs excluded)."
        )
    if probe.hwm:
        return (
            "peak resident set growth of the fresh process during the steps (VmHWM reset through /proc/self/clear_refs "
            "after building the layers and the batch; VmHWM after minus VmRSS before)."
        )
    return (
        "growth of the process's lifetime peak RSS (ru_maxrss) during the steps, a lower bound (/proc/self/clear_refs "
        "was not writable)."
    )
