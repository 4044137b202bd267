"""The policy-gradient lecture's experiments (seed 004, TASKS.md task 10): learn to sort n numbers.

    python -m rlhf_practice.lecture                                   # centered rewards, clipped loss, seed 0
    python -m rlhf_practice.lecture --deltas rewards --loss naive     # raw rewards, the lecture's first run
    python -m rlhf_practice.lecture --kl_penalty 0.1                  # plus a KL penalty to a reference model
    python scripts/experiments.py lecture                             # the grid: 4 deltas x 2 losses x 3 seeds

The lecture's simple model maps a prompt of n numbers to the n positions of its reply at once (not
autoregressive): each reply position has its own distribution over the numbers, sampled
independently. One epoch: sample prompts -> generate ``trials`` replies per prompt -> reward each
(prompt, reply) -> deltas (your ``compute_deltas``) -> old log-probs, frozen -> ``steps_per_epoch``
updates with your ``compute_loss`` (plus ``kl_penalty`` x your ``compute_kl_penalty``). Prompts are
drawn at random each epoch; a fixed held-out set, never trained on, measures what the policy learned:
the share of held-out prompts whose greedy reply (the most likely number at each position) is exactly
the sorted prompt. Your functions come from ``--impl`` (your rlhf_practice/rl/lecture.py by default).
Shapes follow the lecture: ``batch`` = prompts, ``trial`` = replies per prompt, ``pos`` = positions.
"""

from __future__ import annotations

import copy
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType

import torch
import torch.nn.functional as F
from torch import nn

from rlhf_practice.config import POSITIVE, Settings, above, at_least, one_of, setting, within
from rlhf_practice.course import load_impl
from rlhf_practice.errors import TrainingError

DELTAS_MODES = ("rewards", "centered_rewards", "normalized_rewards", "max_rewards")
LOSS_MODES = ("naive", "unclipped", "clipped")
REWARDS = {"distance": "sort_distance_reward", "inclusion_ordering": "sort_inclusion_ordering_reward"}
HELDOUT_SEED = 1234  # the held-out prompts are the same in every run, whatever its --seed


@dataclass
class LectureConfig(Settings):
    """Settings of ``python -m rlhf_practice.lecture`` (task 10: the lecture's sorting experiment)."""

    deltas: str = setting("centered_rewards", one_of(*DELTAS_MODES))
    """compute_deltas' mode (rewards, centered_rewards, normalized_rewards, max_rewards): each reply's weight in the update."""
    loss: str = setting("clipped", one_of(*LOSS_MODES))
    """compute_loss' mode: naive, unclipped or clipped."""
    reward: str = setting("distance", one_of(*REWARDS))
    """The reward: "distance" (sort_distance_reward: positions right) or "inclusion_ordering" (sort_inclusion_ordering_reward: partial credit)."""
    n: int = setting(3, POSITIVE)
    """Numbers per prompt; a reply has as many."""
    vocab_size: int = setting(5, at_least(2))
    """The numbers are 0 .. vocab_size - 1 (the lecture's prompts use 0 to 4); a prompt may repeat one."""
    embedding_dim: int = setting(10, POSITIVE)
    """Width of the embedding and of the per-position matrices."""
    epochs: int = setting(300, POSITIVE)
    """Epochs; each samples new prompts and new replies."""
    steps_per_epoch: int = setting(10, POSITIVE)
    """Optimizer steps on one epoch's replies (after the first, the model is no longer the one that sampled them)."""
    batch_size: int = setting(32, POSITIVE)
    """Prompts per epoch."""
    trials: int = setting(10, at_least(2, "a group of one reply has nothing to compare with"))
    """Replies sampled per prompt (the group)."""
    learning_rate: float = setting(0.01, within("(0, 1]"))
    """Adam's learning rate."""
    kl_penalty: float = setting(0.0, at_least(0))
    """Weight of compute_kl_penalty in the loss; 0 = no reference model."""
    ref_period: int = setting(10, POSITIVE)
    """With a KL penalty: every this many epochs the reference becomes a copy of the model."""
    heldout_size: int = setting(25, POSITIVE)
    """Held-out prompts (fixed, never trained on)."""
    eval_every: int = setting(10, POSITIVE)
    """Measure held-out exact sort every this many epochs (and after the last)."""
    clip_range: float = setting(0.01, above(0))
    """compute_loss' clip_range (the lecture's epsilon) for --loss clipped."""
    seed: int = setting(0, within(f"[0, {2**32 - 1}]"))
    """Seeds the model's initialisation, the training prompts and the sampling (not the held-out set)."""
    impl: str = setting(factory=lambda: os.environ.get("RLHF_IMPL", "student"))
    """Whose functions run: "student" (your rlhf_practice/rl/lecture.py), or a folder with ppo.py, grpo.py and lecture.py."""

    def functions_called(self) -> list[str]:
        """The graded functions of lecture.py a run with these settings calls (its reward, compute_deltas,
        compute_loss, and compute_kl_penalty only with a KL penalty): the run checks these, and only these."""
        return [REWARDS[self.reward], "compute_deltas", "compute_loss", *["compute_kl_penalty"] * (self.kl_penalty > 0)]

    def relations(self) -> list:
        prompts = self.vocab_size**self.n
        return [
            (
                self.heldout_size <= prompts // 2,
                "heldout_size",
                self.heldout_size,
                f"must be at most half of the {prompts} possible prompts (vocab_size ** n), leaving the rest to train on",
            )
        ]


class Model(nn.Module):
    """The lecture's simple model: per-position parameters, every reply position decoded independently.

    A prompt's numbers are embedded; prompt position i multiplies its embedding by its own encode
    matrix and the results are summed into one vector; reply position j multiplies that vector by its
    own decode matrix; the logits are the dot products with the (shared) embedding of every number.
    """

    def __init__(self, vocab_size: int, embedding_dim: int, prompt_length: int, response_length: int):
        super().__init__()
        scale = 1 / math.sqrt(embedding_dim)
        self.embedding = nn.Embedding(vocab_size, embedding_dim)
        self.encode_weights = nn.Parameter(torch.randn(prompt_length, embedding_dim, embedding_dim) * scale)
        self.decode_weights = nn.Parameter(torch.randn(response_length, embedding_dim, embedding_dim) * scale)

    def forward(self, prompts: torch.Tensor) -> torch.Tensor:
        """[batch, pos] integer prompts -> [batch, pos, vocab] logits of the reply's positions."""
        embeddings = self.embedding(prompts)  # [batch, pos, dim]
        encoded = torch.einsum("bpd,pde->be", embeddings, self.encode_weights)  # [batch, dim]: the prompt in one vector
        decoded = torch.einsum("be,qed->bqd", encoded, self.decode_weights)  # [batch, pos, dim]: one per reply position
        return decoded @ self.embedding.weight.T  # [batch, pos, vocab]: input and output share the embedding


def generate_responses(prompts: torch.Tensor, model: Model, trials: int) -> torch.Tensor:
    """Sample ``trials`` replies per prompt, each position independently: [batch, pos] -> [batch, trial, pos]."""
    logits = model(prompts)  # [batch, pos, vocab]
    batch, pos, vocab = logits.shape
    probs = F.softmax(logits.reshape(batch * pos, vocab), dim=-1)
    responses = torch.multinomial(probs, num_samples=trials, replacement=True)  # [batch * pos, trial]
    return responses.reshape(batch, pos, trials).transpose(1, 2)  # [batch, trial, pos]


def compute_reward(
    prompts: torch.Tensor, responses: torch.Tensor, reward_fn: Callable[[Sequence[int], Sequence[int]], float]
) -> torch.Tensor:
    """``reward_fn`` (one prompt, one reply -> a float) on every pair: [batch, trial, pos] -> [batch, trial]."""
    rewards = [
        [reward_fn(prompt, response) for response in trials]
        for prompt, trials in zip(prompts.tolist(), responses.tolist())
    ]
    return torch.tensor(rewards, dtype=torch.float32)


def compute_log_probs(prompts: torch.Tensor, responses: torch.Tensor, model: Model) -> torch.Tensor:
    """The log-prob of each sampled number under ``model``: [batch, trial, pos]."""
    log_probs = F.log_softmax(model(prompts), dim=-1)  # [batch, pos, vocab]
    log_probs = log_probs.unsqueeze(1).expand(-1, responses.shape[1], -1, -1)  # [batch, trial, pos, vocab]
    return log_probs.gather(dim=-1, index=responses.unsqueeze(-1)).squeeze(-1)  # [batch, trial, pos]


def greedy_responses(prompts: torch.Tensor, model: Model) -> torch.Tensor:
    """The most likely number at each reply position: [batch, pos] -> [batch, pos]."""
    with torch.no_grad():
        return model(prompts).argmax(dim=-1)


def exact_sort_accuracy(prompts: torch.Tensor, model: Model) -> float:
    """The share of ``prompts`` whose greedy reply is exactly the sorted prompt."""
    return (greedy_responses(prompts, model) == prompts.sort(dim=-1).values).all(dim=-1).float().mean().item()


def heldout_prompts(config: LectureConfig) -> torch.Tensor:
    """The fixed held-out prompts: ``heldout_size`` distinct ones, the same for every --seed. [heldout, n]"""
    generator = torch.Generator().manual_seed(HELDOUT_SEED)
    codes = torch.randperm(config.vocab_size**config.n, generator=generator)[: config.heldout_size]
    return _decode(codes, config)


def sample_prompts(config: LectureConfig, heldout: torch.Tensor) -> torch.Tensor:
    """``batch_size`` random prompts, none of them held out: [batch, n]."""
    excluded = _encode(heldout, config)
    prompts = torch.randint(config.vocab_size, (config.batch_size, config.n))
    while True:
        again = torch.isin(_encode(prompts, config), excluded)  # held-out prompts drawn: draw those rows again
        if not again.any():
            return prompts
        prompts[again] = torch.randint(config.vocab_size, (int(again.sum()), config.n))


def _encode(prompts: torch.Tensor, config: LectureConfig) -> torch.Tensor:
    """Each prompt as one integer (its numbers are the digits in base vocab_size): [batch, n] -> [batch]."""
    powers = config.vocab_size ** torch.arange(config.n - 1, -1, -1)
    return (prompts * powers).sum(dim=-1)


def _decode(codes: torch.Tensor, config: LectureConfig) -> torch.Tensor:
    powers = config.vocab_size ** torch.arange(config.n - 1, -1, -1)
    return codes.unsqueeze(-1) // powers % config.vocab_size


@dataclass
class Curve:
    """What one run measured at each evaluation (every ``eval_every`` epochs)."""

    epochs: list[int] = field(default_factory=list)
    heldout: list[float] = field(default_factory=list)  # exact sort of greedy replies to held-out prompts
    reward: list[float] = field(default_factory=list)  # mean reward of that epoch's sampled replies (RL runs)
    tied: list[float] = field(default_factory=list)  # share of that epoch's prompts whose replies all got one reward
    stopped: str = ""  # why the run stopped early (a loss that is not finite); "" when it ran to the end
    stopped_epoch: int | None = None  # the epoch it stopped in


Report = Callable[[Curve], None]  # called after each evaluation, with the curve so far


def run_policy_gradient(config: LectureConfig, lecture: ModuleType, report: Report | None = None) -> Curve:
    """Train the lecture's model with ``lecture``'s functions (``impl.lecture``); returns its curve.

    ``report(curve)`` is called after each evaluation. A loss that is not finite stops the run: the
    curve then says where (``Curve.stopped``).
    """
    config.validate()
    torch.manual_seed(config.seed)
    heldout = heldout_prompts(config)
    model = Model(config.vocab_size, config.embedding_dim, config.n, config.n)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.learning_rate)
    reward_fn = getattr(lecture, REWARDS[config.reward])
    curve, ref_model = Curve(), None
    for epoch in range(1, config.epochs + 1):
        if config.kl_penalty > 0 and (epoch - 1) % config.ref_period == 0:
            ref_model = copy.deepcopy(model)  # pi_ref: the model as it is now, frozen for ref_period epochs

        # 1. Sample prompts (never held-out ones) and `trials` replies to each; reward every reply.
        prompts = sample_prompts(config, heldout)  # [batch, pos]
        with torch.no_grad():
            responses = generate_responses(prompts, model, config.trials)  # [batch, trial, pos]
        rewards = compute_reward(prompts, responses, reward_fn)  # [batch, trial]

        # 2. Deltas: the weight of each reply in the update (your compute_deltas).
        deltas = lecture.compute_deltas(rewards, config.deltas)  # [batch, trial]

        # 3. Log-probs of the model that sampled the replies, and of the reference: constants.
        old_log_probs = ref_log_probs = None
        with torch.no_grad():
            if config.loss != "naive":
                old_log_probs = compute_log_probs(prompts, responses, model)  # [batch, trial, pos]
            if ref_model is not None:
                ref_log_probs = compute_log_probs(prompts, responses, ref_model)

        # 4. Several updates on the same replies (your compute_loss and compute_kl_penalty).
        for step in range(config.steps_per_epoch):
            log_probs = compute_log_probs(prompts, responses, model)  # [batch, trial, pos]
            loss = lecture.compute_loss(log_probs, deltas, config.loss, old_log_probs, clip_range=config.clip_range)
            if ref_log_probs is not None:
                loss = loss + config.kl_penalty * lecture.compute_kl_penalty(log_probs, ref_log_probs)
            if not torch.isfinite(loss):
                curve.stopped = f"the loss is {loss.item()} at epoch {epoch}, step {step + 1}"
                curve.stopped_epoch = epoch
                return curve
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

        # 5. Evaluate: greedy replies to the held-out prompts.
        if epoch % config.eval_every == 0 or epoch == config.epochs:
            curve.epochs.append(epoch)
            curve.heldout.append(exact_sort_accuracy(heldout, model))
            curve.reward.append(rewards.mean().item())
            # A prompt whose replies all got the same reward has centered deltas 0: it teaches nothing.
            curve.tied.append((rewards == rewards[:, :1]).all(dim=-1).float().mean().item())
            if report is not None:
                report(curve)
    return curve


def run_supervised(config: LectureConfig, report: Report | None = None) -> Curve:
    """The same model, prompts and number of updates, trained on the answer instead of a reward:
    cross-entropy to the sorted prompt at every position. What the model can learn when it is told
    the answer; its curve has no rewards."""
    config.validate()
    torch.manual_seed(config.seed)
    heldout = heldout_prompts(config)
    model = Model(config.vocab_size, config.embedding_dim, config.n, config.n)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.learning_rate)
    curve = Curve()
    for epoch in range(1, config.epochs + 1):
        prompts = sample_prompts(config, heldout)  # [batch, pos]
        targets = prompts.sort(dim=-1).values  # [batch, pos]
        for _ in range(config.steps_per_epoch):
            loss = F.cross_entropy(model(prompts).flatten(0, 1), targets.flatten())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if epoch % config.eval_every == 0 or epoch == config.epochs:
            curve.epochs.append(epoch)
            curve.heldout.append(exact_sort_accuracy(heldout, model))
            if report is not None:
                report(curve)
    return curve


def one_thread_unless_told() -> None:
    """Run torch on one thread unless OMP_NUM_THREADS says otherwise: the model's matrices are 10 x 10, so
    a second thread gains nothing, and on a busy machine it spins while it waits for its share."""
    if "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(1)


def main(args: list[str] | None = None) -> None:
    import tyro

    config = tyro.cli(LectureConfig, args=args, prog="python -m rlhf_practice.lecture", use_underscores=True)
    config.validate()
    impl = load_impl(config.impl)
    impl.check_functions(config.functions_called())  # an unfinished stub: one line now, before any training
    one_thread_unless_told()

    def report(curve: Curve) -> None:
        epoch, heldout, reward, tied = curve.epochs[-1], curve.heldout[-1], curve.reward[-1], curve.tied[-1]
        print(
            f"epoch {epoch:4d}  reward {reward:5.3f}  tied groups {tied:4.2f}  held-out exact sort {heldout:.2f}",
            flush=True,
        )

    print(f"{config.deltas} + {config.loss}, reward {config.reward}, n = {config.n}, seed {config.seed}", flush=True)
    curve = run_policy_gradient(config, impl.lecture, report)
    if curve.stopped:
        raise TrainingError(
            f"{curve.stopped} (not finite). Check compute_loss's ratio and compute_deltas' std, or lower learning_rate."
        )
    print(f"held-out exact sort after {config.epochs} epochs: {curve.heldout[-1]:.2f}")


if __name__ == "__main__":
    from rlhf_practice.training import run_main

    run_main(main)
