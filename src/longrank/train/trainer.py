"""One training process's work, in steps each short enough to test alone: ``prepare`` (``train/job.py``: check the
job, build the model, choose the loss), ``Trainer`` (the optimiser, the scheduler and the sampler), ``Trainer.resume``
(a fitting checkpoint set, or a fresh position), ``Trainer.step``, ``Trainer.evaluate_and_checkpoint`` and
``Trainer.finish``; ``run_job`` strings them together. The stage around it (its command line, process groups) is
``train/train.py``."""

from __future__ import annotations

import contextlib
import functools
import logging
import shutil
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from longrank.errors import InputError
from longrank.io.atomic import link_or_copy, write_text
from longrank.io.trec_files import write_run
from longrank.results.stage_outputs import TrainSummary
from longrank.precision import AUTOCAST_DTYPES
from longrank.progress import progress, to_console
from longrank.train.accumulation import accumulate_gradients, check_batch_independent
from longrank.train.batches import TrainingBatches, step_seed
from longrank.train.state_sets import (
    clear_state,
    find_finished_set,
    finish_state,
    kept_finished_sets,
    sets_newest_first,
)
from longrank.train.train_state import export_best, load_training_state, save_training_state
from longrank.train.fingerprint import fingerprint_of, keep_only_a_fitting_state, training_inputs
from longrank.train.job import TrainingJob, keep_untrained, prepare
from longrank.train.losses import with_negative_pairs
from longrank.results.trainer_lock import holding_state
from longrank.train.starter import StarterEnded
from longrank.train.optimiser import lr_lambda, make_optimizer, parameter_groups
from longrank.train.position import TrainingPosition
from longrank.train.sampling import PairSampler

log = logging.getLogger(__name__)

# How often the loop asks whether the Snakemake process that started it still runs (a read of /proc).
STARTER_CHECK_S = 1.0


def run_job(job: TrainingJob) -> None:
    """Train one process's part of ``job``, resuming a fitting state; rank 0 writes the outputs, holding the state's
    lock throughout (``results/trainer_lock.py``): a second trainer on the same state is refused."""
    training = job.lead and job.settings.steps
    with holding_state(job.state_dir) if training else contextlib.nullcontext():
        _run_job(job)


def _run_job(job: TrainingJob) -> None:
    model, built, loss_fn = prepare(job)
    if job.settings.steps == 0:
        keep_untrained(job, model)
        return
    trainer = Trainer(job, model, loss_fn)
    trainer.resume(built)
    trainer.train()
    if job.lead:
        trainer.finish()


class Trainer:
    """The training of a prepared model: its optimiser, scheduler and sampler, and its ``position``."""

    def __init__(self, job: TrainingJob, model, loss_fn):
        settings = self.settings = job.settings
        check_batch_independent(model, settings, job.name)
        self.job, self.model = job, _with_batch_norm_across(job, model)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = make_optimizer(parameter_groups(self.model, settings, job.name), settings)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lr_lambda(settings.warmup_steps, settings.steps, settings.schedule)
        )
        self.sampler = PairSampler(
            job.fold["train"],
            job.corpus.qrels,
            job.candidates,
            job.depth,
            settings.negatives,
            settings.seed,
            settings.positives,
            settings.negatives_from,
            list(job.corpus.docs) if settings.negatives_from != "candidates" else None,
        )
        # extra pairs in the loss only: the sampler draws exactly what it draws without them
        self.loss_fn = (
            with_negative_pairs(loss_fn, self.sampler.from_candidates) if settings.negative_pairs else loss_fn
        )
        amp_dtype = AUTOCAST_DTYPES[settings.precision] if job.device.type == "cuda" else None
        self.amp_dtype = amp_dtype
        self.scaler = torch.amp.GradScaler("cuda", enabled=amp_dtype is torch.float16)  # fp16 gradients underflow
        self.forward = self.model  # DistributedDataParallel's wrapper once resumed, on several processes
        self.position = TrainingPosition()
        self.started = time.time()
        self.restored_from: Path | None = None  # the folder a finished training was copied from (_restore_finished)
        self.next_starter_check = 0.0  # time.monotonic() of the next check_starter that looks

    def resume(self, built: dict[str, str]) -> None:
        """Load the newest checkpoint set made for exactly this training problem, or start a fresh position. Rank 0
        alone verifies (moving corrupt sets aside), judges and discards; then every rank loads the same set (weights,
        optimiser moments, scheduler, position), which leaves them bit-identical without sending the optimiser
        state around."""
        job = self.job
        inputs, fingerprint = {}, None  # rank 0's alone are saved (the other ranks take its position at evaluations)
        if job.lead:
            inputs = training_inputs(
                job.entry,
                job.corpus,
                job.fold,
                job.depth,
                job.candidates,
                built,
                job.init,
                job.collection_artifacts,
                self.optimizer,
            )
            fingerprint = fingerprint_of(inputs)
            discarded = keep_only_a_fitting_state(job.state_dir, inputs, fingerprint)
            # what is left was verified and fits (keep_only_a_fitting_state): no set left is no rehash of one
            if job.reuse_from is not None and not sets_newest_first(job.state_dir):
                self._restore_finished(job.reuse_from, fingerprint)
            self._say_where_it_starts(discarded)
        if job.world > 1:
            dist.barrier()
        newest = next(iter(sets_newest_first(job.state_dir)), None)
        position = load_training_state(newest, self.model, self.optimizer, self.scheduler) if newest else None
        if job.world > 1:
            found = [None] * job.world
            dist.all_gather_object(found, position and position.step)
            if len(set(found)) > 1:
                raise RuntimeError(
                    f"the training processes found different states in {job.state_dir} (steps by rank: {found}); "
                    "the output directory must be one shared by all of them"
                )
        if position is None:
            position = TrainingPosition(fingerprint=fingerprint, inputs=inputs)
            if job.lead:
                clear_state(job.state_dir)
        elif job.lead:
            log.info(
                "resuming %s fold %d at step %d (best dev nDCG@10 %.4f)",
                job.name,
                job.fold_index,
                position.step,
                position.best_dev_ndcg10,
            )
        self.position = position

    def _restore_finished(self, reuse_from: Path, fingerprint: str) -> None:
        """A training finished before from exactly these inputs (``fingerprint``: the documents, queries, judgments,
        candidates, settings, initial weights and code) is copied, not trained again: an earlier setting's, kept in
        the model's history, or with ``job.reuse_from`` the folder of results folders, another collection's (the
        other TREC DL year: the same training and dev queries over the same documents)."""
        job = self.job
        kept = find_finished_set(kept_finished_sets(reuse_from, job.name, job.out.parent.name), fingerprint)
        if kept is None:
            return
        clear_state(job.state_dir)
        shutil.copytree(kept, job.state_dir / kept.name, copy_function=link_or_copy)
        self.restored_from = kept.parent.parent

    def _say_where_it_starts(self, discarded: str | None) -> None:
        """One account of where this training starts, in the order it happened: a discarded state and why, then
        either the finished training restored from the history (also one line on the console: no training line
        follows it) or training afresh."""
        job = self.job
        if discarded:
            then = "the finished training of these inputs is restored" if self.restored_from else "training afresh"
            log.info("discarding the training state in %s: %s; %s", job.state_dir, discarded, then)
        if self.restored_from:
            line = (
                f"restoring {job.name} fold {job.fold_index} from {self.restored_from}: trained before from exactly "
                "these inputs, so not trained again"
            )
            log.info("%s", line)
            to_console(f"[train] {line}")

    def batches(self):
        """This rank's batches from the position's step on. Sampling, reading the documents and tokenising run in
        train.num_workers DataLoader workers, ahead of the steps that need them (0: in this process); the batches
        are the same either way, in step order."""
        settings, job = self.settings, self.job
        share = settings.batch_size // job.world  # this rank's contiguous share of the global batch
        prepared = TrainingBatches(
            self.sampler,
            job.corpus,
            self.model.encode,
            self.position.step,
            settings.steps,
            settings.batch_size,
            job.rank * share,
            share,
            settings.accumulation,
        )
        return iter(TrainingBatches.loader(prepared, settings.num_workers))

    def train(self) -> None:
        """Steps until ``steps`` or ``patience`` evaluations without improvement, evaluating every ``eval_every``."""
        settings, job = self.settings, self.job
        if job.world > 1:  # after the state is loaded: DDP starts every rank from rank 0's weights
            # Unused parameters are looked for (a model may leave some out of a forward pass), as one process skips
            # them.
            self.forward = DistributedDataParallel(
                self.model,
                device_ids=[job.device.index] if job.device.type == "cuda" else None,
                find_unused_parameters=True,
            )
        batches = self.batches()
        self.model.train()
        self.started = time.time() - self.position.seconds
        losses: list[float] = []
        bar = progress(
            total=settings.steps,
            initial=self.position.step,
            desc=f"train {job.name} fold {job.fold_index}",
            unit="step",
            mininterval=5,
            disable=not job.lead,
        )
        while self.position.step < settings.steps and self.patient():
            if job.world == 1:  # several processes: rank 0 checks at evaluations, and every rank stops with it
                self.check_starter()
            losses.append(self.step(batches))
            bar.update(1)
            bar.set_postfix(loss=f"{sum(losses[-20:]) / len(losses[-20:]):.4f}", refresh=False)
            if self.position.step % settings.eval_every == 0 or self.position.step == settings.steps:
                mean_loss = sum(losses) / len(losses)
                losses.clear()
                # every rank continues (or stops) at rank 0's position
                evaluate = functools.partial(self.evaluate_and_checkpoint, mean_loss)
                self.position = on_rank0(evaluate, job.rank, job.world)
        bar.close()
        del batches  # stops the workers preparing steps that early stopping made unnecessary

    def check_starter(self) -> None:
        """Stop (``StarterEnded``) when the Snakemake process that started the training has ended; its last checkpoint
        set stays for the next run to resume. Looks at most every ``STARTER_CHECK_S``."""
        starter, now = self.job.starter, time.monotonic()
        if starter is None or now < self.next_starter_check:
            return
        self.next_starter_check = now + STARTER_CHECK_S
        if starter.ended():
            kept = next(iter(sets_newest_first(self.job.state_dir)), None)
            raise StarterEnded(
                f"models.{self.job.name} fold {self.job.fold_index}: the Snakemake process {starter.pid} that started "
                f"this training has ended; stopped at step {self.position.step}, the last checkpoint set "
                f"({kept or 'none yet'}) kept for the next run to resume"
            )

    def patient(self) -> bool:
        """Whether training goes on: fewer than ``patience`` evaluations without improvement (``patience: 0``: always)."""
        patience = self.settings.patience
        return patience == 0 or self.position.evals_without_improvement < patience

    def step(self, batches) -> float:
        """One optimiser step on the next batch, in ``train.accumulation`` micro-batches; returns the global batch's
        loss."""
        job, step = self.job, self.position.step
        torch.manual_seed(step_seed(self.settings.seed, step, job.rank))  # dropout noise, reproducible across a resume
        prepared_step, micro_batches = next(batches)
        assert prepared_step == step, f"the batches arrived out of order ({prepared_step} for step {step})"
        self.optimizer.zero_grad(set_to_none=True)
        # a mean over this share: DDP's mean over equal shares is the batch's
        batch_loss = accumulate_gradients(
            self.forward, micro_batches, self.loss_fn, self.scaler, job.device, self.amp_dtype
        )
        if job.world > 1:  # the global batch's loss, for the log and for every rank to agree on stopping
            dist.all_reduce(batch_loss)
            batch_loss /= job.world
        if not torch.isfinite(batch_loss):
            raise FloatingPointError(
                f"models.{job.name}: loss is {batch_loss.item()} at step {step}; the last good state is in "
                f"{job.state_dir} (lower train.lr or raise train.grad_clip)"
            )
        if self.settings.grad_clip:  # a disabled scaler (fp32, bf16): unscale_ does nothing, step is the optimiser's
            self.scaler.unscale_(self.optimizer)
            torch.nn.utils.clip_grad_norm_(self.params, self.settings.grad_clip)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.scheduler.step()
        self.position.step = step + 1
        return batch_loss.item()

    def evaluate_and_checkpoint(self, mean_loss: float) -> TrainingPosition:
        """Rank 0's work at an evaluation: rerank dev, count it, log one line, checkpoint (this step's weights as
        the best when they are); returns the position, which every rank then takes."""
        job, position = self.job, self.position
        if job.world > 1:
            self.check_starter()
        dev_ndcg, dev_run = job.dev_rerank(self.model)
        # patience 0 (no early stopping, a fixed number of epochs): every evaluation's weights replace the kept ones
        improved = position.record(mean_loss, dev_ndcg, time.time() - self.started, self.settings.patience == 0)
        # one line per dev evaluation on stderr (the console; the job's log under the workflow: tail -f it)
        per_step = position.seconds / max(position.step, 1)
        line = (
            f"{job.name} fold {job.fold_index} step {position.step}/{self.settings.steps}: loss {mean_loss:.4f}, "
            f"dev nDCG@10 {dev_ndcg:.4f}{' (best)' if improved else ''}, elapsed {clock(position.seconds)}, "
            f"ETA {clock(per_step * (self.settings.steps - position.step))}"
        )
        log.info("%s", line)
        to_console(f"[train] {line}")
        best_run = (lambda path: write_run(path, dev_run, tag=job.name)) if improved else None
        save_training_state(job.state_dir, self.model, self.optimizer, self.scheduler, position, best_run)
        return position

    def finish(self) -> None:
        """Rank 0, training over: the training log, the summary, and the best weights with their dev run."""
        job, position = self.job, self.position
        final_set = next(iter(sets_newest_first(job.state_dir)), None)
        if final_set is None or not (final_set / "best.safetensors").exists():
            raise InputError(
                f"models.{job.name}: training ended before any dev evaluation; set train.eval_every <= train.steps"
            )
        out_dir = job.out.parent
        write_text(
            out_dir / "training_log.tsv",
            "step\ttrain_loss\tdev_ndcg10\n"
            + "".join(f"{e.step}\t{e.train_loss:.6f}\t{e.dev_ndcg10:.6f}\n" for e in position.history),
        )
        TrainSummary(
            model=job.name,
            fold=job.fold_index,
            device=str(job.device),
            processes=job.world,
            threads=torch.get_num_threads(),
            deterministic=torch.are_deterministic_algorithms_enabled(),
            steps_run=position.step,
            best_step=position.best_step,
            best_dev_ndcg10=position.best_dev_ndcg10,
            stopped_early=position.step < self.settings.steps,
            seconds=time.time() - self.started,
            parameters=sum(p.numel() for p in self.model.parameters()),
            trainable_parameters=sum(p.numel() for p in self.params),
            hyperparameters=self.settings.as_dict(),
            restored_from=str(self.restored_from or ""),
        ).write(out_dir / "train_summary.json")
        # the kept model's dev scores: rerank chooses the interpolation weight on them
        export_best(final_set, job.out, out_dir / "dev.run")  # verified against the set's manifest; whole or absent
        finish_state(job.state_dir)  # the model is out: what only a resume reads goes


def _with_batch_norm_across(job: TrainingJob, model):
    """On several processes, batch norm over the global batch, as one process computes it (CUDA only)."""
    if job.world == 1 or not any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in model.modules()):
        return model
    if job.device.type == "cuda":
        return torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)
    log.warning(
        "models.%s: batch norm statistics are each process's share's on the CPU (SyncBatchNorm needs "
        "CUDA): %d processes do not train exactly as one",
        job.name,
        job.world,
    )
    return model


def on_rank0(work, rank: int, world: int):
    """``work()`` on rank 0 only, its result handed to every rank. A failure on rank 0 fails every rank at once,
    rather than leaving the others waiting in a collective until the process group times out."""
    result, error = None, None
    if rank == 0:
        try:
            result = work()
        except BaseException as err:
            if world == 1:
                raise
            error = err
    if world > 1:
        box = [(result, None if error is None else f"{type(error).__name__}: {error}")]
        dist.broadcast_object_list(box, src=0)
        result, notice = box[0]
        if error is not None:
            raise error
        if notice is not None:
            raise RuntimeError(f"rank 0 failed: {notice}")
    return result


def clock(seconds: float) -> str:
    """h:mm:ss for the console's progress lines."""
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
