"""Where a training stands: the resumable part of the loop's state that is not tensors (those are the checkpoint set's
safetensors files). Saved as ``position.json`` in every checkpoint set, in the shape the loop has always written; a file
of any other shape is refused by name (``PositionShapeError``), never read in part."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path


class PositionShapeError(ValueError):
    """A ``position.json`` that is not this loop's: written by other code, or damaged into other valid JSON."""


@dataclass(frozen=True)
class Evaluation:
    """One dev evaluation: the step it followed, the mean training loss since the one before, dev nDCG@10."""

    step: int
    train_loss: float
    dev_ndcg10: float


@dataclass
class TrainingPosition:
    """The loop's position after ``step`` steps, and what it was made from (``fingerprint`` of the named ``inputs``:
    a state resumes only for the same)."""

    step: int = 0
    best_dev_ndcg10: float = -1.0  # below any nDCG: the first evaluation is an improvement
    best_step: int = 0
    evals_without_improvement: int = 0
    history: list[Evaluation] = field(default_factory=list)
    seconds: float = 0.0  # training time so far, across resumes
    fingerprint: str | None = None
    inputs: dict[str, str] = field(default_factory=dict)

    def record(self, train_loss: float, dev_ndcg: float, seconds: float, keep_last: bool = False) -> bool:
        """Count a dev evaluation at this step; returns whether it is the best so far (then this step's weights are
        the ones to keep), or, with ``keep_last``, always (the last evaluation's weights are kept)."""
        improved = keep_last or dev_ndcg > self.best_dev_ndcg10
        if improved:
            self.best_dev_ndcg10, self.best_step, self.evals_without_improvement = dev_ndcg, self.step, 0
        else:
            self.evals_without_improvement += 1
        self.history.append(Evaluation(self.step, train_loss, dev_ndcg))
        self.seconds = seconds
        return improved

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data, source: str | Path = "position.json") -> TrainingPosition:
        """The position a ``to_json`` gave; any other shape (a key missing or unknown, a value of another type) is a
        ``PositionShapeError`` naming ``source`` and what differs."""
        if not isinstance(data, dict):
            raise PositionShapeError(f"{source}: expected a JSON object, got {type(data).__name__}")
        expected = [f.name for f in dataclasses.fields(cls)]
        missing, unknown = [k for k in expected if k not in data], sorted(set(data) - set(expected))
        if missing or unknown:
            raise PositionShapeError(
                f"{source}: not a training position of this version"
                + (f"; missing {missing}" if missing else "")
                + (f"; unknown {unknown}" if unknown else "")
            )
        try:
            history = [Evaluation(**entry) for entry in data["history"]]
        except TypeError as err:
            raise PositionShapeError(f"{source}: history holds an entry of another shape ({err})") from None
        position = cls(**{**data, "history": history})
        for name, kinds in _TYPES.items():
            if not isinstance(getattr(position, name), kinds) or isinstance(getattr(position, name), bool):
                raise PositionShapeError(f"{source}: {name} is {getattr(position, name)!r}, of the wrong type")
        return position


_TYPES: dict[str, type | tuple[type, ...]] = {
    "step": int,
    "best_dev_ndcg10": (int, float),
    "best_step": int,
    "evals_without_improvement": int,
    "seconds": (int, float),
    "fingerprint": (str, type(None)),
    "inputs": dict,
}
