"""Set-up and lifecycle of a training run: check, load, start, finish -- and readable errors.

The RL loop itself is written out in ``train_ppo.py``, ``train_grpo.py`` and ``train_dpo.py``; the bookkeeping of each
step (metrics, progress bar, files) is :mod:`rlhf_practice.tracking`.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import random
import secrets
import shutil
import signal
import socket
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlparse

import numpy as np
import torch
import torch.nn.functional as F

from rlhf_practice.config import TrainConfig
from rlhf_practice.course import Impl, load_impl
from rlhf_practice.data import LOCAL_SUFFIXES
from rlhf_practice.errors import ConfigError, DataError, ModelLoadError, RLHFPracticeError, TrainingError
from rlhf_practice.learned_reward import LearnedReward, RewardEnsemble, check_reward_model
from rlhf_practice.modeling import (
    AdapterOff,
    Generation,
    PolicyValueModel,
    position_ids_from_mask,
    response_mask_from_ids,
)
from rlhf_practice.sampling import Sampler
from rlhf_practice.tasks import Task, build_task
from rlhf_practice.tracking import RunLogger, check_finite, k3_per_reply, rollout_stats

if TYPE_CHECKING:
    from accelerate import Accelerator
    from transformers import PreTrainedTokenizerBase

T = TypeVar("T")
PROCESS_SEED_OFFSET = 2**40
"""With N > 1 processes, process r reseeds with seed + r * this right before the training loop: each
samples its own replies, and no process of one seed shares its random numbers with a run of another seed."""


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch. On a CPU the same seed then gives the same metrics.csv
    (tests/test_scripts.py checks it): the kernels a run uses there are deterministic. We do not call
    ``torch.use_deterministic_algorithms``: it imports torch's compiler stack, over a second of
    start-up, and on CUDA it would cost speed."""
    random.seed(seed)
    np.random.seed(seed if seed < 2**32 else [seed % 2**32, seed // 2**32])  # NumPy takes 32-bit words
    torch.manual_seed(seed)


def resolve_device(device: str) -> torch.device:
    """ "auto" -> cuda if available, else cpu; "cuda" without a GPU is a ConfigError."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(
            f"device={device!r} but no CUDA device is available; use --device cpu (or auto) and --preset tiny."
        )
    return torch.device(device)


def _is_hub_name(name: str) -> bool:
    """True for a Hugging Face Hub name ("gpt2", "imdb"); False for "tiny", a path or a local data file."""
    local = name == "tiny" or name.startswith(("/", ".", "~")) or Path(name).suffix.lower() in LOCAL_SUFFIXES
    return not local and not Path(name).exists()


def work_offline_unless_hub_answers(names: list[str], timeout: float = 3.0) -> None:
    """Knock once on the Hub when a run needs it. If it does not answer, switch to offline mode, so that
    loading uses the local cache or fails at once, instead of retrying for about a minute."""
    if os.environ.get("HF_HUB_OFFLINE") == "1" or not any(_is_hub_name(name) for name in names):
        return
    from huggingface_hub import constants

    url = urlparse(constants.ENDPOINT)
    try:
        socket.create_connection((url.hostname, url.port or (443 if url.scheme == "https" else 80)), timeout).close()
    except OSError:
        print(f"note: {constants.ENDPOINT} did not answer within {timeout:g} s; working offline.", file=sys.stderr)
        os.environ["HF_HUB_OFFLINE"] = "1"
        constants.HF_HUB_OFFLINE = True
        if "datasets.config" in sys.modules:
            sys.modules["datasets.config"].HF_HUB_OFFLINE = True


def _signal_as_ctrl_c(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _ignore_signal(signum: int, frame: object) -> None:
    """The handler once run_main is on its way out: a signal then changes nothing."""


SETTLE_S = 0.05
"""Seconds run_main waits, after an error that is not an interrupt, for a signal that has already
arrived to raise its KeyboardInterrupt. Python runs a signal's handler between two instructions of the
main thread, and a signal that the kernel hands to another thread of the process (the tokenizer's, a
hub check's) reaches it a moment later: meanwhile the start-up step it cut short can fail on its own
(a tokenizer that never came back). Reported as that failure, an interrupt would be a traceback."""


def check_writable(run_dir: Path) -> None:
    """ConfigError unless run folders can be made in ``run_dir`` (checked by writing, as root ignores modes)."""
    existing = next(p for p in (run_dir, *run_dir.parents) if p.exists())
    if not existing.is_dir():
        raise ConfigError(f"run_dir={str(run_dir)!r}: {existing} is not a folder; give a folder for the runs.")
    try:
        tempfile.TemporaryFile(dir=existing).close()
    except OSError as err:
        raise ConfigError(
            f"run_dir={str(run_dir)!r} is not writable ({err.strerror}); give a folder you can write to."
        ) from err


def run_main(main: Callable[[], None]) -> None:
    """Run a script's ``main`` and turn predictable failures into one line on stderr.

    Exit codes: 0 success (an interrupted run that saved its work included), 1 training error, 2 bad
    setting or input (configuration, data, model), 3 unfinished student stub, 130 interrupted during
    start-up. SIGTERM is handled like Ctrl-C, and an interrupt at any point of the start-up is one line
    and exit 130, even when the step it cut short failed before the interrupt was raised (SETTLE_S).

    A process of a run started by a launcher (torchrun, accelerate launch: WORLD_SIZE > 1) leaves with
    ``os._exit`` once everything is written and its process group closed, skipping the interpreter's
    finalization: there, a C++ thread of the process group (gloo's) that still frees a tensor must take the
    GIL, CPython 3.11 ends such a thread with ``pthread_exit``, and unwinding it through a ``noexcept`` C++
    frame calls ``std::terminate`` ("terminate called without an active exception", exit -6, after the run
    had written everything: pytorch/pytorch#179291). Nothing is left to finalize by then.
    """
    if int(os.environ.get("WORLD_SIZE", "1")) < 2:
        _run_main(main)
        return
    code = 0
    try:
        _run_main(main)
    except SystemExit as stop:
        if isinstance(stop.code, int) or stop.code is None:
            code = stop.code or 0
        else:  # sys.exit("message"), as Python prints it
            print(stop.code, file=sys.stderr)
            code = 1
    except BaseException:  # noqa: BLE001 -- as Python reports an uncaught one, then the same exit
        traceback.print_exc()
        code = 1
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _run_main(main: Callable[[], None]) -> None:
    """:func:`run_main`'s work, in this process's ordinary exit."""
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig in previous:
        signal.signal(sig, _signal_as_ctrl_c)
    try:
        try:
            main()
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException:
            time.sleep(SETTLE_S)  # an interrupt that already arrived raises here, in place of this error
            raise
        finally:
            for sig in previous:
                signal.signal(sig, _ignore_signal)
    except KeyboardInterrupt:
        print("\ninterrupted during start-up: nothing was written.", file=sys.stderr)
        sys.exit(130)
    except NotImplementedError as err:
        print(
            f"error: {err} Finish it (pytest -m graded shows what is missing), then run this again.",
            file=sys.stderr,
        )
        sys.exit(3)
    except (ConfigError, DataError, ModelLoadError) as err:
        if not _other_process():  # under a launcher every process finds the same bad setting: one line
            print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    except RLHFPracticeError as err:
        where = f"process {os.environ['RANK']}: " if _other_process() else ""
        print(f"error: {where}{err}", file=sys.stderr)
        sys.exit(1)
    finally:  # leave the process group of a run under a launcher, whatever the exit: a process that
        if torch.distributed.is_initialized():  # exits with it open can abort in gloo's teardown
            torch.distributed.destroy_process_group()
        for sig, handler in previous.items():  # the caller's (a test's) handlers back
            signal.signal(sig, handler)


def _other_process() -> bool:
    """True in every process but the first (rank 0) of a run started by ``torchrun`` or ``accelerate launch``."""
    return int(os.environ.get("RANK", "0")) > 0


def peak_memory_mb(device: torch.device) -> float:
    """Peak GPU memory allocated by torch on CUDA; peak resident memory of the process on a CPU."""
    if device.type == "cuda":
        return round(torch.cuda.max_memory_allocated(device) / 2**20, 1)
    import resource

    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)  # Linux reports KiB


@dataclass
class TrainingRun:
    """Everything a training script needs, built from its config by :func:`start_run`."""

    config: TrainConfig
    impl: Impl
    device: torch.device
    tokenizer: PreTrainedTokenizerBase
    policy: PolicyValueModel
    task: Task
    prompts: Iterator[dict]  # the task's prompt batches
    logger: RunLogger
    sampler: Sampler
    accelerator: Accelerator  # the processes of the run: one, or N under torchrun / accelerate launch
    learned_reward: RewardEnsemble | None = None  # --reward_model: the reward the update sees
    # --online.refresh_every: the reward model's refreshes (task 16), an online_labels.OnlineLabels that the script
    # attaches (online_labels.attach); None without it
    online: Any = None

    @property
    def num_processes(self) -> int:
        return self.accelerator.num_processes

    @property
    def process_index(self) -> int:
        """0 .. num_processes - 1; process 0 is the main one, which writes the run folder."""
        return self.accelerator.process_index

    def next_prompts(self) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
        """(input_ids (B, P), attention_mask (B, P)) on the run's device, and the prompt texts.

        B is ``train_batch_size`` in one process. With N processes every process draws the same
        global batch and keeps its share, B / N consecutive rows (process 0 the first ones)."""
        batch = next(self.prompts)
        rows = self._rows(len(batch["prompt_text"]))
        input_ids, attention_mask = batch["input_ids"][rows], batch["attention_mask"][rows]
        return input_ids.to(self.device), attention_mask.to(self.device), batch["prompt_text"][rows]

    def _rows(self, n: int) -> slice:
        """This process's share of n rows (all of them in one process)."""
        share = n // self.num_processes
        if share * self.num_processes != n:
            raise ConfigError(
                f"a batch of {n} prompts does not split into {self.num_processes} equal shares; "
                f"use a train_batch_size that is a multiple of {self.num_processes} (and at most the number of prompts)."
            )
        return slice(self.process_index * share, (self.process_index + 1) * share)

    def prepare(
        self, model: torch.nn.Module, optimizer: torch.optim.Optimizer
    ) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
        """The model and optimizer the update steps use. In one process: the same objects. Under a
        launcher (``torchrun``, ``accelerate launch``) with N processes: accelerate's ``prepare``, which
        wraps the model in DistributedDataParallel, so that ``loss.backward()`` averages the gradients
        of the N processes. Call the returned model (``model(generation)``) for every forward pass
        that gets a gradient; sample and evaluate without gradient on the unwrapped policy."""
        if self.num_processes == 1:
            return model, optimizer
        return self.accelerator.prepare(model, optimizer)

    def gather(self, tensor: torch.Tensor) -> torch.Tensor:
        """``tensor`` over the global batch: the rows of every process, in process order (replies of
        different lengths padded on the right with 0). In one process: ``tensor`` itself. Use it for
        what must be computed over the whole batch: normalized advantages, logged statistics."""
        if self.num_processes == 1:
            return tensor
        return self.accelerator.gather(self.accelerator.pad_across_processes(tensor, dim=1))

    def shard(self, tensor: torch.Tensor) -> torch.Tensor:
        """This process's rows of a tensor over the global batch (the inverse of :meth:`gather`)."""
        return tensor[self._rows(len(tensor))]

    def mean_over_processes(self, tensor: torch.Tensor) -> torch.Tensor:
        """The mean of ``tensor`` over the processes (every process must call it); ``tensor`` in one process.
        The run's logger averages each step's metrics with it: a per-process mean over an equal share of
        the rows becomes the mean over the global batch."""
        if self.num_processes == 1:
            return tensor
        return self.accelerator.reduce(tensor, reduction="mean")

    def from_main(self, make: Callable[[], T]) -> T:
        """``make()`` run on the main process only, and its result sent to every process (train_dpo.py's
        preference pairs: built or read once, no shared file system needed). In one process: ``make()``."""
        return _from_main(self.accelerator, make)

    def rollout_stats(
        self, rewards: torch.Tensor, advantages: torch.Tensor, generation: Generation, group_size: int = 0
    ) -> dict[str, torch.Tensor]:
        """:func:`~rlhf_practice.tracking.rollout_stats` over the global batch. rewards: (N,);
        advantages: (N,), or (N, T) per token, of which the real tokens (response_mask 1) count."""
        mask = self.gather(generation.response_mask)
        advantages = self.gather(advantages)
        if advantages.dim() == 2:
            advantages = advantages[mask > 0]
        return rollout_stats(self.gather(rewards), advantages, self.gather(generation.response_ids), mask, group_size)

    def generate(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> Generation:
        """Sample one reply per prompt row with the run's :class:`~rlhf_practice.sampling.Sampler`, timed."""
        try:
            with self.logger.timed("generate"):
                return self.sampler.sample(input_ids, attention_mask)
        except RuntimeError as err:
            if "inf" not in str(err) and "nan" not in str(err):
                raise
            raise TrainingError(
                "sampling met NaN/inf probabilities: the last update blew the policy's weights up; "
                "lower learning_rate (or max_grad_norm)."
            ) from err

    def score_replies(self, generation: Generation, prompts: list[str]) -> tuple[list[str], torch.Tensor]:
        """The decoded replies (up to their first EOS) and the reward of each reply to its prompt (one
        prompt text per row of ``generation``): (N,) float32 on the device.

        The reward is the task's, or with ``--reward_model`` the learned model's normalised score only
        (:class:`~rlhf_practice.learned_reward.RewardEnsemble`: one model, or several combined): the task's reward then never reaches the
        update; :meth:`task_metrics` logs it beside, as ``reward/gold``."""
        with self.logger.timed("score"):
            replies = generation.decode(self.tokenizer)
            if self.learned_reward is not None:
                return replies, self.learned_reward.score(generation, self.impl)
            return replies, self.task.reward(prompts, replies).to(self.device)

    def refresh_reward_model(self, step: int) -> dict[str, torch.Tensor]:
        """Online RLHF (task 16, :mod:`rlhf_practice.online_labels`, attached by the script): at the start of a step that a refresh is due, the
        reward model refreshed with the annotator's labels of fresh pairs of the current policy, and its figures
        (``online/``); at every step the labels spent so far (``labels/total``, ``labels/online``). Nothing
        without ``--online.refresh_every``: the run is then exactly what it was without it."""
        return self.online.metrics(step) if self.online is not None else {}

    def task_metrics(self, step: int, prompts: list[str], replies: list[str]) -> dict[str, torch.Tensor]:
        """What a task logs beyond the reward (0-dim tensors): the mean of each part of the reward
        (``reward/format``, ``reward/answer``), and ``accuracy/heldout`` at step 1, every ``eval_every``
        steps and at the last step. Call it before the step's update: like ``reward/mean``, it then
        measures the policy that sampled the step's replies (at step 1: after the warm-up, before any
        RL). With ``--reward_model``, also ``reward/gold``: the mean of the task's reward (the "gold"
        the learned model stands for), which the update never sees. All of them come from the task's
        reward. Nothing for a task without parts or held-out prompts (sentiment) and no reward model."""
        metrics = {tag: part.mean().to(self.device) for tag, part in self.task.reward_parts(prompts, replies).items()}
        if self.learned_reward is not None:
            with self.logger.timed("score"):
                metrics["reward/gold"] = self.task.reward(prompts, replies).float().mean().to(self.device)
        heldout = self.task.heldout_prompts()
        if heldout and self.is_eval_step(step):
            with self.logger.timed("eval"):
                metrics["accuracy/heldout"] = torch.tensor(self.heldout_accuracy(heldout), device=self.device)
        return metrics

    @torch.no_grad()
    def kl_to_reference(
        self, reference: PolicyValueModel | AdapterOff, generation: Generation, logprobs: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``kl/ref``: KL(pi || pi_ref) in nats per reply at sampling time, as the token-level loops log
        it: per reply token k3 = exp(r) - r - 1 with r = log pi_ref - log pi, summed over the reply's
        tokens, averaged over the replies of the global batch (0-dim). ``logprobs``: the policy's (N, T)
        log-probs of the replies if already computed, else evaluated here. Draws no random numbers and
        changes nothing, so a run logs the same other figures with it as without it."""
        if logprobs is None:
            logprobs = self.policy.evaluate_tokens(generation).logprobs  # (N, T)
        ref_logprobs = reference.evaluate_tokens(generation).logprobs  # (N, T)
        return self.gather(k3_per_reply(logprobs, ref_logprobs, generation.response_mask)).mean()

    def is_eval_step(self, step: int) -> bool:
        """Step 1, every ``eval_every`` steps and the last step: when accuracy/heldout (and train_dpo.py's
        fresh samples) are measured."""
        return step == 1 or step % self.config.eval_every == 0 or step == self.config.num_steps

    def heldout_accuracy(self, prompts: list[str]) -> float:
        """Exact match of greedy replies to ``prompts``: the share whose reply is the task's solution."""
        replies = greedy_replies(self.policy, self.tokenizer, prompts, self.config.max_new_tokens)
        return sum(r == s for r, s in zip(replies, self.task.solutions(prompts))) / len(prompts)

    def _save_policy(self, folder: Path) -> Path:
        """Write the policy and tokenizer to ``folder``/policy atomically: a partial save never has that name."""
        partial = Path(tempfile.mkdtemp(prefix=".policy-partial-", dir=folder))
        try:
            self.policy.save_pretrained(partial, merge=self.config.lora_merge)
            self.tokenizer.save_pretrained(partial)
            os.replace(partial, folder / "policy")
        finally:
            shutil.rmtree(partial, ignore_errors=True)
        return folder / "policy"

    def finish(self, outcome: str) -> None:
        """Save the policy (unless training failed), write summary.json, close the logs.

        A second Ctrl-C (or SIGTERM) while saving waits for the save. If the run folder cannot be
        written any more, the policy and summary go to a new temporary folder instead, and the last
        line says where.
        """
        if not self.logger.writes:  # another process than the main one: nothing to save
            return
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
        for sig in previous:
            signal.signal(sig, lambda *_: print("\nsaving; please wait until it is done.", file=sys.stderr))
        try:
            extra = {"peak_memory_mb": peak_memory_mb(self.device), "decoding": self.sampler.decoding}
            if self.sampler.decoding == "static":
                extra["decode_capture_s"] = round(self.sampler.capture_seconds, 3)

            if self.online is not None:
                extra["online"] = self.online.notes()
                self.online.save_pairs()

            def save_to(folder: Path) -> None:
                if outcome != "failed" and self.config.algorithm != "rm":  # train_reward_model.py saves its own model
                    extra["policy_dir"] = str(self._save_policy(folder))
                self.logger.write_summary(outcome, folder, **extra)

            try:
                save_to(self.logger.run_dir)
            except OSError as err:
                fallback = Path(tempfile.mkdtemp(prefix=f"{self.logger.run_dir.name}-"))
                print(
                    f"note: could not write to {self.logger.run_dir} ({err.strerror}); saving to {fallback}",
                    file=sys.stderr,
                )
                save_to(fallback)
            with contextlib.suppress(OSError):  # a folder gone read-only cannot take the last flush either
                self.logger.close()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        where = f"; policy saved to {extra['policy_dir']}" if "policy_dir" in extra else ""
        print(f"{outcome} after {self.logger.steps_done} steps: logs in {self.logger.run_dir}{where}", file=sys.stderr)


WARMUP_BATCH_SIZE = 128
"""Prompt/reply pairs per warm-up step (whatever the RL batch, so that a warm-up of N steps is the same in every run)."""


@torch.no_grad()
def greedy_replies(
    policy: PolicyValueModel, tokenizer: PreTrainedTokenizerBase, prompts: list[str], max_new_tokens: int
) -> list[str]:
    """The most likely reply to each prompt, token by token (no sampling, so no random numbers are
    drawn), as text up to its first EOS. Recomputes the whole sequence for each token: meant for the
    short prompts and replies of the verifiable tasks."""
    encoded = tokenizer(prompts, padding=True, return_tensors="pt")
    ids, mask = encoded.input_ids.to(policy.device), encoded.attention_mask.to(policy.device)  # (B, P)
    prompt_length = ids.shape[1]
    for _ in range(max_new_tokens):
        logits = policy.lm(input_ids=ids, attention_mask=mask, position_ids=position_ids_from_mask(mask)).logits
        ids = torch.cat([ids, logits[:, -1].argmax(dim=-1, keepdim=True)], dim=1)
        mask = F.pad(mask, (0, 1), value=1)
    response_mask = response_mask_from_ids(ids[:, prompt_length:], tokenizer.eos_token_id)
    return Generation(ids, mask, response_mask, prompt_length).decode(tokenizer)


def warm_up(run: TrainingRun) -> None:
    """``config.warmup_steps`` supervised steps before RL: cross-entropy of the task's correct replies
    (EOS included) given their prompts, on batches of :data:`WARMUP_BATCH_SIZE` prompts drawn from the
    training prompts (never the held-out ones), with their own Adam optimizer. Logs ``warmup/loss``
    and ``warmup/accuracy`` (the share of the batch whose every reply token is the model's most likely
    one, measured before the step's update) to TensorBoard and warmup.csv."""
    config, tokenizer, policy = run.config, run.tokenizer, run.policy
    batches = run.task.prompt_batches(tokenizer, WARMUP_BATCH_SIZE, config.seed + 2**32)  # not RL's prompts
    optimizer = torch.optim.Adam(policy.parameters(), lr=config.warmup_learning_rate)
    with run.logger.timed("warmup"):
        for step in range(1, config.warmup_steps + 1):
            batch = next(batches)
            replies = [r + tokenizer.eos_token for r in run.task.solutions(batch["prompt_text"])]
            targets = tokenizer(replies, padding="longest", padding_side="right", return_tensors="pt")
            target_ids, target_mask = targets.input_ids.to(run.device), targets.attention_mask.to(run.device)  # (B, T)
            ids = torch.cat([batch["input_ids"].to(run.device), target_ids], dim=1)  # (B, P + T)
            mask = torch.cat([batch["attention_mask"].to(run.device), target_mask], dim=1)
            prompt_length = batch["input_ids"].shape[1]
            logits = policy.lm(input_ids=ids, attention_mask=mask, position_ids=position_ids_from_mask(mask)).logits
            logits = logits[:, prompt_length - 1 : -1]  # (B, T, V): the prediction of each reply token
            token_loss = F.cross_entropy(logits.transpose(1, 2), target_ids, reduction="none")  # (B, T)
            loss = (token_loss * target_mask).sum() / target_mask.sum()
            right = (logits.argmax(dim=-1) == target_ids) | (target_mask == 0)
            check_finite("warmup/loss", loss)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), config.max_grad_norm)
            optimizer.step()
            run.logger.log_warmup(
                step, {"warmup/loss": loss.item(), "warmup/accuracy": right.all(dim=1).float().mean().item()}
            )


def check_lora(config: TrainConfig, policy: PolicyValueModel) -> None:
    """ConfigError for LoRA settings that do not fit the loaded model: target modules it does not have,
    or an r other than that of the adapter the model folder already holds."""
    peft_model = policy.peft_model
    if peft_model is not None:
        saved_r = peft_model.peft_config[peft_model.active_adapter].r
        if config.lora_r not in (0, saved_r):
            raise ConfigError(
                f"lora_r={config.lora_r}: model.model_name={config.model.model_name!r} holds a LoRA adapter of "
                f"r={saved_r}, which trains on; drop --lora_r (or give {saved_r})."
            )
        return
    if config.lora_r == 0:
        return
    names = {name.rsplit(".", 1)[-1] for name, _ in policy.lm.named_modules()}
    missing = [m for m in config.lora_target_modules if m not in names]
    if missing:
        raise ConfigError(
            f"lora_target_modules={config.lora_target_modules!r}: the model has no module named {missing[0]!r}; "
            "GPT-2's are c_attn, c_proj and c_fc."
        )


def attach_lora(run: TrainingRun) -> None:
    """With ``lora_r`` > 0 (and no adapter loaded from the model folder): attach a new LoRA adapter to
    the policy (:meth:`PolicyValueModel.add_lora`), which freezes every weight of the LM."""
    config, policy = run.config, run.policy
    if config.lora_r == 0 or policy.peft_model is not None:
        return
    if config.warmup_steps:
        policy.base_source = None  # the warmed-up weights are on no disk: a saved adapter takes them along
    policy.add_lora(config.lora_r, config.lora_alpha, config.lora_dropout, config.lora_target_modules)


def memory_now_mb(device: torch.device) -> float:
    """Memory in use now: what torch has allocated on a CUDA device; the resident memory (RSS) of the
    process on a CPU (its peak where /proc is missing)."""
    if device.type == "cuda":
        return round(torch.cuda.memory_allocated(device) / 2**20, 1)
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)  # kB
    return peak_memory_mb(device)


def log_parameters(run: TrainingRun) -> None:
    """One line on stderr and four entries of summary.json: the parameters that train (what the
    optimizer gets) against all of them, and the memory in use before the first step."""
    policy = run.policy
    trainable = sum(p.numel() for p in policy.trainable_parameters())
    total = sum(p.numel() for p in policy.parameters())
    memory = memory_now_mb(run.device)
    peft_model = policy.peft_model
    if peft_model is None:
        what = "full fine-tuning"
    else:
        lora = peft_model.peft_config[peft_model.active_adapter]
        what = f"LoRA r={lora.r} alpha={lora.lora_alpha:g} on {', '.join(sorted(lora.target_modules))}"
        run.logger.notes["lora"] = {
            "r": lora.r,
            "alpha": lora.lora_alpha,
            "dropout": lora.lora_dropout,
            "target_modules": sorted(lora.target_modules),
            "reference": "adapter disabled" if policy.adapter_is_new else "frozen copy",
        }
    run.logger.notes.update(
        trainable_parameters=trainable,
        all_parameters=total,
        trainable_percent=round(100 * trainable / total, 3),
        memory_at_start_mb=memory,
    )
    if run.process_index > 0:  # under a launcher: the main process says it for all
        return
    print(
        f"parameters: {trainable:,} of {total:,} train ({100 * trainable / total:.2f} %, {what}) "
        f"| memory {memory:,.0f} MB ({'CUDA allocated' if run.device.type == 'cuda' else 'RSS'})",
        file=sys.stderr,
    )


def start_accelerator(config: TrainConfig) -> tuple[Accelerator, torch.device]:
    """The run's one ``accelerate.Accelerator`` and the device of this process.

    In one process (``python train_grpo.py``) the Accelerator changes nothing: the device is
    ``config.device``, the model and optimizer stay as they are. Under ``torchrun`` or ``accelerate
    launch`` with N processes it joins them (gloo on a CPU, NCCL on GPUs, where process r takes
    ``cuda:LOCAL_RANK``). No accelerate config file is read: mixed precision stays the run's own
    (``mixed_precision``, bfloat16 autocast on CUDA)."""
    from accelerate import Accelerator

    device = resolve_device(config.device)
    accelerator = Accelerator(cpu=device.type == "cpu", mixed_precision="no")
    if accelerator.num_processes > 1 and device.type == "cuda":
        device = accelerator.device
    return accelerator, device


def check_process_count(config: TrainConfig, processes: int) -> None:
    """ConfigError unless the prompts (and minibatches) of a step split evenly over ``processes``
    (raised by every process alike, before any of them waits for another). train_reward_model.py and
    train_grpo.py --dynamic_sampling: one process."""
    if config.algorithm == "rm" and processes > 1:
        raise ConfigError(
            f"train_reward_model.py runs in one process, not {processes}; start it with python, "
            "not torchrun or accelerate launch."
        )
    if getattr(config, "dynamic_sampling", False) and processes > 1:
        raise ConfigError(
            f"dynamic_sampling=True runs in one process, not {processes} (each would keep a different number of "
            "groups); start it with python, not torchrun or accelerate launch, or drop --dynamic_sampling."
        )
    online = getattr(config, "online", None)
    if online is not None and online.refresh_every > 0 and processes > 1:
        raise ConfigError(
            f"online.refresh_every={online.refresh_every} runs in one process, not {processes} (the reward model "
            "is refreshed in the main one); start it with python, not torchrun or accelerate launch."
        )
    if config.train_batch_size % processes:
        raise ConfigError(
            f"train_batch_size={config.train_batch_size} does not split over {processes} processes; "
            f"use a multiple of {processes} (each process takes an equal share of the prompts)."
        )
    replies = config.replies_per_step() // processes
    for name in ("ppo_num_minibatches", "grpo_num_minibatches"):
        minibatches = getattr(config, name, 1)
        if replies % minibatches:
            raise ConfigError(
                f"{name}={minibatches} must divide the {replies} replies of each of the {processes} processes; "
                f"pick a divisor of {replies} (or a train_batch_size that gives one)."
            )


def _from_main(accelerator: Accelerator, make: Callable[[], T], share: bool = True) -> T | None:
    """``make()`` on the main process; its result (``share``) and any exception it raised sent to the
    others, so that an error stops every process instead of leaving them waiting. Without ``share``
    the other processes get None."""
    if accelerator.num_processes == 1:
        return make()
    from accelerate.utils import broadcast_object_list

    value, message = None, [None, None]
    if accelerator.is_main_process:
        try:
            value = make()
            message = [value if share else None, None]
        except Exception as err:  # every process raises it, below
            message = [None, err]
    broadcast_object_list(message)
    if message[1] is not None:
        raise message[1]
    return value if accelerator.is_main_process else message[0]


def _new_run_dir(config: TrainConfig) -> Path:
    """The run folder's path: not there yet, in a writable run_dir (decided once, by the main process)."""
    name = (
        config.run_name
        or f"{config.algorithm}{'-token' * (config.level == 'token')}-{config.preset if config.task == 'sentiment' else config.task}-{datetime.now():%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"
    )
    run_dir = Path(config.run_dir) / name
    if run_dir.exists():
        raise ConfigError(f"run folder {run_dir} already exists; pick another --run_name.")
    check_writable(Path(config.run_dir))
    return run_dir


def start_run(config: TrainConfig) -> TrainingRun:
    """Check everything that can be checked cheaply, then load the model, prompts and reward.

    Order matters for the user: bad settings, an unfinished stub, a bad ``--reward_model`` folder and
    a taken run folder are reported before anything slow is loaded; the checks that need the tokenizer
    or the model (top_k against the vocabulary, prompt + reply against the positions, the static
    decoder's model type, the reward model's vocabulary) run right after loading them; the run folder
    is made last.

    Under a launcher every process loads the same model with ``seed`` (the same weights, the same
    warm-up); only the main process makes the run folder, whose name it decides for all.
    """
    config.validate()
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # its per-shard bars (loading, and saving the policy) would bury the run's own
    impl = load_impl(config.impl)
    # The graded functions this run calls, and only those (a file none of them is in is never opened).
    impl.check_functions(config.functions_called())
    reward_model = getattr(config, "reward_model", "")  # train_ppo.py and train_grpo.py only
    reward_models = [name.strip() for name in reward_model.split(",")] if reward_model else []
    reward_folders = [check_reward_model(name, config.task) for name in reward_models]  # no weights yet
    accelerator, device = start_accelerator(config)
    processes = accelerator.num_processes
    check_process_count(config, processes)
    main = accelerator.is_main_process
    run_dir = _from_main(accelerator, lambda: _new_run_dir(config))
    task = build_task(config)
    if config.warmup_steps and task.solutions([]) is None:
        raise ConfigError(
            f"warmup_steps={config.warmup_steps}: the {config.task} task has no correct replies to learn from; "
            "use 0 (a warm-up needs --task sort or add)."
        )
    work_offline_unless_hub_answers(task.hub_names())

    seed_everything(config.seed)
    tokenizer = task.load_tokenizer()
    if config.top_k > len(tokenizer):
        raise ConfigError(f"top_k={config.top_k} exceeds the vocabulary ({len(tokenizer)} tokens); use 0 for no limit.")
    policy = task.load_policy(device)
    check_lora(config, policy)
    if task.max_prompt_length + config.max_new_tokens > policy.max_length:
        raise ConfigError(
            f"max_new_tokens={config.max_new_tokens} plus {task.prompt_length_setting}={task.max_prompt_length} "
            f"exceed the model's {policy.max_length} positions; lower one of them."
        )
    sampler = Sampler.from_config(policy, tokenizer, config)
    learned_reward = None
    if reward_folders:
        members = [LearnedReward.load(folder, tokenizer, device) for folder in reward_folders]
        learned_reward = RewardEnsemble(members, config.reward_ensemble, config.reward_uncertainty_coef)
    prompts = task.prompt_batches(tokenizer, config.train_batch_size, config.seed)  # the global stream
    record = {}
    if processes > 1:
        record = {"processes": processes, "process_seeds": [process_seed(config.seed, r) for r in range(processes)]}
    reduce = None if processes == 1 else functools.partial(accelerator.reduce, reduction="mean")  # metric means

    def open_logger() -> RunLogger:
        try:
            return RunLogger(run_dir, config, record, reduce)
        except FileExistsError as err:  # a run started at the same moment took the name
            raise ConfigError(f"run folder {run_dir} already exists; pick another --run_name.") from err

    logger = _from_main(accelerator, open_logger, share=False)
    if logger is None:  # another process than the main one: it times its steps and writes nothing
        logger = RunLogger(run_dir, config, record, reduce, writes=False)
    if main:
        where = f" | processes={processes}" * (processes > 1)
        print(
            f"{config.algorithm} | task={config.task} | level={config.level} | impl={impl.name} | {task.describe()} "
            f"| device={device}{where} | run folder {run_dir}",
            file=sys.stderr,
        )
        print(f"sampling: {sampler.description}", file=sys.stderr)
        if learned_reward is not None:
            print(learned_reward.describe(vars(config.reward)), file=sys.stderr)
    if learned_reward is not None:
        logger.notes["reward_model"] = learned_reward.notes()
    return TrainingRun(
        config, impl, device, tokenizer, policy, task, prompts, logger, sampler, accelerator, learned_reward
    )


def process_seed(seed: int, process_index: int) -> int:
    """The seed with which process ``process_index`` of a run of several processes reseeds right before
    the training loop (see :data:`PROCESS_SEED_OFFSET`)."""
    return seed + process_index * PROCESS_SEED_OFFSET


@contextmanager
def training_run(config: TrainConfig) -> Iterator[TrainingRun]:
    """``with training_run(config) as run:`` -- the run folder is always flushed and closed.

    Finishing normally or with Ctrl-C saves the policy; any other exception leaves the logs written
    so far and re-raises (``run_main`` turns it into one line).
    """
    run = start_run(config)
    try:
        if config.warmup_steps:
            warm_up(run)
        attach_lora(run)  # after the warm-up: with --lora_r the warmed-up model is the frozen base
        if config.algorithm != "ppo":  # GRPO and DPO use no value head: it neither trains nor counts as trained
            run.policy.value_head.requires_grad_(False)
        log_parameters(run)
        if run.num_processes > 1:  # each process samples its own replies from here on
            seed_everything(process_seed(config.seed, run.process_index))
        yield run
    except KeyboardInterrupt:
        print(f"\ninterrupted (Ctrl-C) at step {run.logger.steps_done + 1}", file=sys.stderr)
        run.finish("interrupted")
        return
    except OSError as err:  # the run folder went away or read-only: keep what was trained
        run.finish("stopped")
        where = f"{err.strerror}: {os.fsdecode(err.filename)}" if err.strerror and err.filename else str(err)
        raise TrainingError(
            f"step {run.logger.steps_done + 1}: could not write the logs ({where}); the policy was saved (see above)."
        ) from err
    except BaseException as err:
        if isinstance(err, TrainingError):
            err.args = (f"step {run.logger.steps_done + 1}: {err}",)
        run.finish("failed")
        raise
    run.finish("finished")
    run.accelerator.wait_for_everyone()  # the others wait for the main process's save (run_main then
    # closes the process group: a process that exits with it open can abort, pytorch/pytorch#190489)
