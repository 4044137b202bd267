"""Train the policy with PPO on the reward of a task (``--task``; sentiment by default).

    python train_ppo.py                      # tiny preset on a CPU, GPT-2 + IMDB on a GPU
    python train_ppo.py --impl FOLDER        # run the rl/ files in FOLDER instead of rlhf_practice/rl/
    python train_ppo.py --level token        # token-level PPO (tasks 7-8): KL to a reference, GAE
    python train_ppo.py --reward_model DIR   # task 13: the reward of a learned model (the task's: reward/gold)
    python train_ppo.py --reward_model DIR --online.refresh_every 20   # task 16: refreshed with fresh labels
    python train_ppo.py --help               # every setting, with its default

One step (--level sequence, tasks 1-2): sample prompts -> generate replies -> reward -> old log-probs
and values V(s) -> advantages A = R - V(s) -> ppo_epochs passes of ppo_step -> log. Every step of
both levels logs kl/ref, the KL from the starting policy.
The functions you write come from ``run.impl`` (``--impl``): ``ppo`` is rlhf_practice/rl/ppo.py,
``rl`` in the token-level loop is rlhf_practice/rl/token_level.py.
"""

from collections.abc import Callable
from types import ModuleType

import torch
import torch.nn.functional as F

from rlhf_practice import online_labels
from rlhf_practice.config import PPOConfig, TokenPPOConfig, parse_config
from rlhf_practice.modeling import Generation, TokenOutputs
from rlhf_practice.tracking import check_finite, explained_variance, mean_metrics
from rlhf_practice.training import TrainingRun, run_main, training_run


def main() -> None:
    config = parse_config(PPOConfig)
    with training_run(config) as run:
        online_labels.attach(run)  # task 16, --online.refresh_every: run.online, whose refreshes the loops call
        token_level(run, config) if config.level == "token" else sequence_level(run, config)


def sequence_level(run: TrainingRun, config: PPOConfig) -> None:
    ppo = run.impl.ppo
    policy = run.policy
    reference = policy.reference_model()  # the starting policy, never updated: only kl/ref reads it
    optimizer = torch.optim.Adam(policy.trainable_parameters(), lr=config.learning_rate)
    # Under torchrun / accelerate launch: the model wrapped in DDP (gradients averaged over the
    # processes); in one process the policy itself.
    model, optimizer = run.prepare(policy, optimizer)
    for step in run.logger.steps(range(1, config.num_steps + 1)):
        online = run.refresh_reward_model(step)  # task 16, --online.refresh_every: fresh labels; {} without it
        # 1. Sample prompts and generate one reply each (no gradient).
        input_ids, attention_mask, prompts = run.next_prompts()  # (B, P)
        generation = run.generate(input_ids, attention_mask)  # sequences (B, P + T)

        # 2. Score the replies with the task's reward (sentiment: the rule-based reward), or with
        #    --reward_model the learned model's (the task's is then only logged, as reward/gold).
        replies, rewards = run.score_replies(generation, prompts)  # rewards: (B,)
        task_stats = run.task_metrics(step, prompts, replies)  # --task sort/add: see train_grpo.py; {} for sentiment

        # 3. Log-probs and values of the policy that sampled the replies: the "old" policy.
        with torch.no_grad():
            old = policy.evaluate_sequences(generation)  # logprobs (B,), values (B,)
        kl_ref = run.kl_to_reference(reference, generation)  # KL from the start, at sampling time: logged only

        # 4. Advantages A = R - V(s) (your compute_advantages), normalized over the global batch;
        #    then this process's rows (all of them in one process).
        advantages = ppo.compute_advantages(
            run.gather(rewards), run.gather(old.values), normalize=config.normalize_advantages
        )
        advantages = run.shard(advantages)  # (B,)

        # 5. ppo_epochs passes over the batch (your ppo_clip_loss inside ppo_step).
        #    The value head learns to predict the reward: returns = rewards.
        epoch_stats = [
            ppo_step(
                ppo,
                model,
                optimizer,
                generation,
                old_logprobs=old.logprobs,
                advantages=advantages,
                returns=rewards,
                config=config,
            )
            for _ in range(config.ppo_epochs)
        ]

        # 6. Log: losses averaged over the epochs, plus reward, advantage and value statistics.
        metrics = {
            **mean_metrics(epoch_stats),
            **run.rollout_stats(rewards, advantages, generation),
            "kl/ref": kl_ref,
            "value/mean": old.values.mean(),
            # how much of R does V(s) see?
            "value/explained_variance": explained_variance(run.gather(old.values), run.gather(rewards)),
            # Before any update new = old, so ratio = 1 and the clip loss is -mean(A): 0 once A is normalized.
            "loss/policy_before_update": ppo.ppo_clip_loss(
                old.logprobs, old.logprobs, advantages, config.ppo_clip_range
            ),
            **task_stats,
            **online,
        }
        run.logger.log(step, metrics, prompts, replies, rewards)


def token_level(run: TrainingRun, config: TokenPPOConfig) -> None:
    """--level token: per-token rewards with a KL penalty to the start policy, GAE, clipped losses."""
    rl = run.impl.token_level
    policy = run.policy
    reference = policy.reference_model()  # pi_ref: the policy before training; never updated
    kl_control = KLController(config.beta, config.kl_target, config.kl_horizon)
    optimizer = torch.optim.Adam(policy.trainable_parameters(), lr=config.learning_rate)
    model, optimizer = run.prepare(policy, optimizer)  # DDP under a launcher, as in sequence_level
    for step in run.logger.steps(range(1, config.num_steps + 1)):
        online = run.refresh_reward_model(step)  # task 16, as in sequence_level
        # 1. Sample prompts, generate one reply each, score it: one number per reply, as before.
        input_ids, attention_mask, prompts = run.next_prompts()
        generation = run.generate(input_ids, attention_mask)
        replies, scores = run.score_replies(generation, prompts)  # (B,); --reward_model: the learned model's
        task_stats = run.task_metrics(step, prompts, replies)  # --task sort/add: see train_grpo.py; {} for sentiment
        mask = generation.response_mask  # (B, T): 1 on each reply's tokens up to its EOS

        # 2. Per-token log-probs and values V(s_t) of the sampling policy, log-probs of the reference.
        with torch.no_grad():
            old = policy.evaluate_tokens(generation)  # logprobs, values: (B, T)
            ref_logprobs = reference.evaluate_tokens(generation).logprobs  # (B, T)

        # 3. Per-token reward r_t = -beta * KL_t, plus the score on the last token (your per_token_kl).
        kl = rl.per_token_kl(old.logprobs, ref_logprobs, mask, config.kl_estimator)
        rewards = token_rewards(scores, kl, mask, kl_control.beta)  # (B, T)

        # 4. Advantages and returns by GAE, right to left (your compute_gae); then standardized over
        #    the real tokens of the global batch (this process's rows, without other processes' padding).
        advantages, returns = rl.compute_gae(rewards, old.values, mask, config.gamma, config.gae_lambda)
        if config.normalize_advantages:
            whitened = whiten(rl.masked_mean, run.gather(advantages), run.gather(mask))
            advantages = run.shard(whitened)[:, : mask.shape[1]]

        # 5. ppo_epochs passes over the batch (your token_ppo_loss inside token_ppo_step).
        epoch_stats = [
            token_ppo_step(rl, model, optimizer, generation, old, advantages, returns, config)
            for _ in range(config.ppo_epochs)
        ]

        # 6. KL(pi || pi_ref) per reply (k3 summed over its tokens) adapts beta when kl_target > 0; log.
        #    Over the global batch, so that every process adapts beta alike.
        kl_ref = run.gather(rl.per_token_kl(old.logprobs, ref_logprobs, mask, "k3").sum(dim=1)).mean()
        metrics = {
            **mean_metrics(epoch_stats),
            **run.rollout_stats(scores, advantages, generation),
            "kl/ref": kl_ref,
            "kl/beta": torch.tensor(kl_control.beta, device=run.device),
            "value/mean": rl.masked_mean(old.values, mask),
            "value/explained_variance": explained_variance(
                *(run.gather(x)[run.gather(mask) > 0] for x in (old.values, returns))
            ),
            **task_stats,
            **online,
        }
        run.logger.log(step, metrics, prompts, replies, scores)
        kl_control.update(kl_ref.item(), n=len(run.gather(scores)))


def ppo_step(
    ppo: ModuleType,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    generation: Generation,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    returns: torch.Tensor,
    config: PPOConfig,
) -> dict[str, torch.Tensor]:
    """One pass (epoch) of PPO updates over a batch of N sampled replies (your ``ppo.ppo_clip_loss``).

    ``old_logprobs``, ``advantages`` and ``returns`` (the value targets R) are (N,) constants
    computed once per batch. The batch is split into ``config.ppo_num_minibatches`` minibatches;
    each gets one optimizer step on

        loss/total_with_kl = loss/policy + value_loss_coef * loss/value + kl_coef * kl/approx

    Returns the metrics of the pass (0-dim tensors), averaged over its minibatches.
    """
    stats = []
    for idx in torch.randperm(len(returns), device=returns.device).chunk(config.ppo_num_minibatches):
        new = model(generation[idx])  # evaluate_sequences, with gradient (through DDP under a launcher)
        policy_loss = ppo.ppo_clip_loss(new.logprobs, old_logprobs[idx], advantages[idx], config.ppo_clip_range)
        value_loss = F.mse_loss(new.values, returns[idx])
        log_ratio = new.logprobs - old_logprobs[idx]
        approx_kl = (-log_ratio).mean()  # the task book's KL estimate: mean(old - new)
        total_no_kl = policy_loss + config.value_loss_coef * value_loss
        total_with_kl = total_no_kl + config.kl_coef * approx_kl
        check_finite("loss/total_with_kl", total_with_kl)

        optimizer.zero_grad(set_to_none=True)
        total_with_kl.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm)
        optimizer.step()

        with torch.no_grad():
            ratio = log_ratio.exp()
            stats.append(
                {
                    "loss/policy": policy_loss,
                    "loss/value": value_loss,
                    "loss/total_no_kl": total_no_kl,
                    "loss/total_with_kl": total_with_kl,
                    "kl/approx": approx_kl,
                    "kl/k3": ((ratio - 1) - log_ratio).mean(),  # always >= 0, lower variance
                    "ppo/clip_frac": ((ratio - 1).abs() > config.ppo_clip_range).float().mean(),
                    "ppo/ratio_mean": ratio.mean(),
                    "policy/entropy": new.entropy,
                }
            )
    return mean_metrics(stats)


def token_rewards(scores: torch.Tensor, kl: torch.Tensor, mask: torch.Tensor, beta: float) -> torch.Tensor:
    """The per-token reward of RLHF: r_t = -beta * KL_t on every reply token, plus the reward
    model's score on the reply's last real token. scores: (N,); kl, mask: (N, T). Returns (N, T)."""
    last = mask.sum(dim=1).long().clamp(min=1) - 1  # (N,): index of each reply's last real token
    rewards = -beta * kl * mask
    return rewards.scatter_add(1, last.unsqueeze(1), scores.to(rewards.dtype).unsqueeze(1))


def whiten(masked_mean: Callable, values: torch.Tensor, mask: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Standardize over the real tokens: (x - masked mean) / masked std; padding stays 0."""
    mean = masked_mean(values, mask)
    var = masked_mean((values - mean) ** 2, mask)
    return (values - mean) * torch.rsqrt(var + eps) * mask


class KLController:
    """The weight beta of the KL penalty: fixed, or adapted toward ``target`` (Ziegler et al. 2019,
    "Fine-Tuning Language Models from Human Preferences", section 2.2; TRL's AdaptiveKLController).
    After a step of n replies whose KL to the reference is KL nats per reply:

        error = clip(KL / target - 1, -0.2, 0.2)       # how far off, relative to the target
        beta  = beta * (1 + error * n / horizon)        # proportional: a small error moves beta a little

    so beta changes by at most a factor 1 +- 0.2 * n / horizon per step, and ``horizon`` replies at a
    constant error move it by about exp(error). beta stays in [BETA_MIN, BETA_MAX]: below 1e-3 even the
    60 nats of an unpenalized run cost 0.06, nothing against the score's range [-1, 1]; above 10 a reply
    0.1 nats away already pays 1. Further out beta changes nothing but the time it takes to come back.
    ``target`` = 0 keeps beta fixed."""

    BETA_MIN, BETA_MAX = 1e-3, 10.0

    def __init__(self, beta: float, target: float = 0.0, horizon: int = 1):
        self.beta, self.target, self.horizon = beta, target, horizon

    def update(self, kl: float, n: int) -> None:
        if self.target > 0:
            error = min(max(kl / self.target - 1, -0.2), 0.2)
            self.beta = min(max(self.beta * (1 + error * n / self.horizon), self.BETA_MIN), self.BETA_MAX)


def token_ppo_step(
    rl: ModuleType,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    generation: Generation,
    old: TokenOutputs,
    advantages: torch.Tensor,
    returns: torch.Tensor,
    config: TokenPPOConfig,
) -> dict[str, torch.Tensor]:
    """One pass (epoch) of token-level PPO over N replies, ``config.ppo_num_minibatches`` minibatches
    (your ``rl.token_ppo_loss`` and ``rl.masked_mean``):

        loss/total = loss/policy + value_loss_coef * loss/value - entropy_coef * policy/entropy

    ``old`` (log-probs and values at sampling time), ``advantages`` and ``returns`` are (N, T)
    constants. Returns the metrics of the pass (0-dim tensors), averaged over its minibatches.
    """
    masked_mean = rl.masked_mean
    stats = []
    for idx in torch.randperm(len(generation), device=returns.device).chunk(config.ppo_num_minibatches):
        mask = generation.response_mask[idx]
        new = model(generation[idx], per_token=True)  # evaluate_tokens, with gradient
        policy_loss, value_loss = rl.token_ppo_loss(
            new.logprobs,
            old.logprobs[idx],
            advantages[idx],
            new.values,
            old.values[idx],
            returns[idx],
            mask,
            config.ppo_clip_range,
            config.clip_range_value,
        )
        entropy = masked_mean(new.entropy, mask)
        total = policy_loss + config.value_loss_coef * value_loss - config.entropy_coef * entropy
        check_finite("loss/total", total)

        optimizer.zero_grad(set_to_none=True)
        total.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm)
        optimizer.step()

        with torch.no_grad():
            log_ratio = new.logprobs - old.logprobs[idx]
            value_moved = (new.values - old.values[idx]).abs() > config.clip_range_value
            stats.append(
                {
                    "loss/policy": policy_loss,
                    "loss/value": value_loss,
                    "loss/total": total,
                    "kl/approx": masked_mean(-log_ratio, mask),  # per token, mean(old - new)
                    "kl/k3": masked_mean(log_ratio.exp() - 1 - log_ratio, mask),
                    "ppo/clip_frac": masked_mean(((log_ratio.exp() - 1).abs() > config.ppo_clip_range).float(), mask),
                    "ppo/ratio_mean": masked_mean(log_ratio.exp(), mask),
                    "loss/value_clipped_frac": masked_mean(value_moved.float(), mask),
                    "policy/entropy": entropy,
                }
            )
    return mean_metrics(stats)


if __name__ == "__main__":
    run_main(main)
