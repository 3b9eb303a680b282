"""The optimiser of a training: AdamW (or Adam: ``train.optimizer``) over the model's parameter groups at their own
learning rates, with linear warm-up and linear decay (or a constant rate: ``train.schedule``)."""

from __future__ import annotations

from torch.nn.parallel import DistributedDataParallel

from longrank.errors import InputError
from longrank.config.train_settings import TrainSettings

# Training keys that set the learning rate of one of a model's declared parameter groups (Ranker.parameter_groups).
GROUP_LR_KEYS = {"embedding_lr": "embeddings", "scoring_lr": "scoring"}


def parameter_groups(model, settings: TrainSettings, name: str = "model") -> list[dict]:
    """AdamW groups: the model's declared groups whose rate a training key sets (word embeddings learn slower
    than the rest in TK/TKL; scoring layers, a few dozen weights over large pooled features, need a far
    higher rate than a Transformer or a pretrained encoder), and everything else at ``lr``. A key that would
    reach no trainable parameter is an error: a silently ignored learning rate is how KNRM, TK and TKL once
    trained their scoring layers at the Transformer's rate."""
    if isinstance(model, DistributedDataParallel):  # the wrapper names parameters "module.<name>", declares no groups
        model = model.module
    declared = type(model).parameter_groups
    trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    taken: set[str] = set()
    groups = []
    for key, group in GROUP_LR_KEYS.items():
        lr = getattr(settings, key)
        if lr is None:
            continue
        prefixes = declared.get(group, ())
        members = [(n, p) for n, p in trainable if n.startswith(prefixes) and n not in taken] if prefixes else []
        if not members:
            why = (
                f"declares no {group!r} parameters"
                if not prefixes
                else f"has no trainable parameter under {list(prefixes)} (frozen?)"
            )
            raise InputError(f"models.{name}.train.{key}: {type(model).__name__} {why}; remove the key")
        taken.update(n for n, _ in members)
        groups.append({"name": group, "params": [p for _, p in members], "lr": lr})
    rest = [p for n, p in trainable if n not in taken]
    return [{"name": "rest", "params": rest}] + groups if rest else groups


def lr_lambda(warmup: int, total: int, schedule: str = "linear"):
    """Linear warm-up over ``warmup`` steps, then linear decay to 0 at ``total`` (``schedule: linear``) or the
    configured rate (``constant``)."""

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        if schedule == "constant":
            return 1.0
        return max(0.0, (total - step) / max(1, total - warmup))

    return factor


def make_optimizer(groups: list[dict], settings: TrainSettings):
    """AdamW (decoupled decay) or Adam (weight_decay as an L2 term in the gradient), as ``train.optimizer`` says."""
    import torch

    kind = {"adamw": torch.optim.AdamW, "adam": torch.optim.Adam}[settings.optimizer]
    return kind(groups, lr=settings.lr, weight_decay=settings.weight_decay)
