"""Train the policy with GRPO on the reward of a task (``--task``; sentiment by default).

    python train_grpo.py                     # tiny preset on a CPU, GPT-2 + IMDB on a GPU
    python train_grpo.py --impl FOLDER       # run the rl/ files in FOLDER instead of rlhf_practice/rl/
    python train_grpo.py --level token       # GRPO-clip (task 9): ratio clipping, KL to a reference
    python train_grpo.py --task sort         # task 11: a small GPT learns to sort 4 digits (--task add: addition)
    python train_grpo.py --reward_model DIR  # task 13: the reward of a learned model (the task's: reward/gold)
    python train_grpo.py --help              # every setting, with its default

One step: sample B prompts -> repeat each grpo_group_size (K) times -> generate B * K replies
-> reward -> group advantages (each reply vs. its own group) -> update -> log.
No value head is used: the group's mean reward is the baseline. Every step logs kl/ref, the KL from
the starting policy. The functions you write come from
``run.impl`` (``--impl``): ``grpo`` is rlhf_practice/rl/grpo.py, ``rl`` rlhf_practice/rl/token_level.py.
"""

from types import ModuleType

import torch

from rlhf_practice.config import GRPOConfig, TokenGRPOConfig, parse_config
from rlhf_practice.modeling import Generation, PolicyValueModel
from rlhf_practice.tracking import check_finite, k3_per_reply, mean_metrics
from rlhf_practice.training import TrainingRun, run_main, training_run


def main() -> None:
    config = parse_config(GRPOConfig)
    with training_run(config) as run:
        grpo = run.impl.grpo
        policy = run.policy
        group_size = config.grpo_group_size
        reference = policy.reference_model()  # pi_ref, never updated (sequence level: only kl/ref reads it)
        # No critic in GRPO (the group's mean is the baseline): training_run froze the value head.
        optimizer = torch.optim.Adam(policy.trainable_parameters(), lr=config.learning_rate)
        # Under torchrun / accelerate launch: the model wrapped in DDP (gradients averaged over the
        # processes); in one process the policy itself.
        model, optimizer = run.prepare(policy, optimizer)
        for step in run.logger.steps(range(1, config.num_steps + 1)):
            # 1. Sample B prompts and repeat each K times: rows i*K .. i*K+K-1 share prompt i.
            #    (With N processes, B is this process's share: a group never spans two processes.)
            input_ids, attention_mask, prompts = run.next_prompts()  # (B, P)
            input_ids = input_ids.repeat_interleave(group_size, dim=0)  # (B*K, P)
            attention_mask = attention_mask.repeat_interleave(group_size, dim=0)
            prompts = [p for p in prompts for _ in range(group_size)]

            # 2. Generate B*K replies (no gradient) and score them (--reward_model: with the learned
            #    model; the task's reward is then only logged, as reward/gold).
            generation = run.generate(input_ids, attention_mask)
            replies, rewards = run.score_replies(generation, prompts)  # rewards: (B*K,)
            # --task sort/add: the reward's parts, and greedy exact match on held-out prompts every
            # eval_every steps (accuracy/heldout), of the policy before this step's update ({} for sentiment).
            task_stats = run.task_metrics(step, prompts, replies)

            # 3. Group advantages: reward minus the mean of the K replies to the same prompt
            #    (your compute_group_advantages), over the global batch, then this process's rows.
            advantages = grpo.compute_group_advantages(
                run.gather(rewards), group_size, normalize=config.normalize_advantages
            )
            advantages = run.shard(advantages)  # (B*K,)

            # 4. Update: the GRPO loss (your grpo_loss inside grpo_step), or at the token level
            #    grpo_iterations updates with GRPO-clip (your grpo_clip_loss inside grpo_clip_step).
            if config.level == "sequence":
                with torch.no_grad():  # for kl/ref only (logged, never in the loss)
                    ref_logprobs = reference.evaluate_tokens(generation).logprobs  # (B*K, T)
                stats = grpo_step(grpo, model, optimizer, generation, advantages, config, ref_logprobs)
            else:
                stats = token_level_update(run, model, optimizer, reference, generation, advantages, config)

            # 5. Log. adv/mean is ~0 by construction: watch reward/mean, not the loss.
            metrics = {**stats, **run.rollout_stats(rewards, advantages, generation, group_size), **task_stats}
            run.logger.log(step, metrics, prompts, replies, rewards)


def token_level_update(
    run: TrainingRun,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    reference: PolicyValueModel,
    generation: Generation,
    advantages: torch.Tensor,
    config: TokenGRPOConfig,
) -> dict[str, torch.Tensor]:
    """--level token: mu = grpo_iterations GRPO-clip updates on one batch of replies."""
    rl = run.impl.token_level
    mask = generation.response_mask  # (N, T)
    with torch.no_grad():  # per-token log-probs of the sampling ("old") policy and of the reference
        old_logprobs = run.policy.evaluate_tokens(generation).logprobs  # (N, T)
        ref_logprobs = reference.evaluate_tokens(generation).logprobs  # (N, T)
    stats = [
        grpo_clip_step(rl, model, optimizer, generation, old_logprobs, ref_logprobs, advantages, config)
        for _ in range(config.grpo_iterations)
    ]
    # KL(pi || pi_ref) per reply: k3 summed over its tokens, at sampling time. Logged even when beta = 0.
    kl_ref = rl.per_token_kl(old_logprobs, ref_logprobs, mask, "k3").sum(dim=1).mean()
    return {**mean_metrics(stats), "kl/ref": kl_ref}


def grpo_step(
    grpo: ModuleType,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    generation: Generation,
    advantages: torch.Tensor,
    config: GRPOConfig,
    ref_logprobs: torch.Tensor | None = None,
) -> dict[str, torch.Tensor]:
    """One GRPO update on N = B * K sampled replies: recompute log-probs, your ``grpo.grpo_loss``,
    one optimizer step. ``model`` is the policy (or its DDP wrapper: see ``TrainingRun.prepare``).

    The loss takes sequence-level log-probs: each reply's per-token log-probs summed over its tokens,
    exactly as ``evaluate_sequences`` sums them. The per-token ones of this same forward pass (the
    policy that sampled the replies: the update comes after it) also give ``kl/ref`` when
    ``ref_logprobs`` (N, T), the reference's, are given: KL to the start, logged, not in the loss."""
    new = model(generation, per_token=True)  # evaluate_tokens: per-token log-probs (N, T) with gradient
    mask = generation.response_mask.to(new.logprobs.dtype)  # (N, T)
    logprobs = (new.logprobs * mask).sum(dim=1)  # (N,): one log-prob per reply
    loss = grpo.grpo_loss(logprobs, advantages)
    check_finite("loss/policy", loss)

    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm)
    optimizer.step()
    entropy = (new.entropy * mask).sum() / mask.sum().clamp(min=1)  # mean over reply tokens
    stats = {"loss/policy": loss.detach(), "policy/entropy": entropy.detach()}
    if ref_logprobs is not None:
        stats["kl/ref"] = k3_per_reply(new.logprobs.detach(), ref_logprobs, generation.response_mask).mean()
    return stats


def grpo_clip_step(
    rl: ModuleType,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    generation: Generation,
    old_logprobs: torch.Tensor,
    ref_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    config: TokenGRPOConfig,
) -> dict[str, torch.Tensor]:
    """One GRPO-clip iteration over N = B * K replies, in ``config.grpo_num_minibatches`` minibatches
    (your ``rl.grpo_clip_loss`` and ``rl.masked_mean``).

    ``old_logprobs`` and ``ref_logprobs`` are (N, T) constants, ``advantages`` (N,). Returns the
    metrics of the iteration (0-dim tensors), averaged over its minibatches.
    """
    stats = []
    for idx in torch.randperm(len(generation), device=advantages.device).chunk(config.grpo_num_minibatches):
        mask = generation.response_mask[idx]
        new = model(generation[idx], per_token=True)  # evaluate_tokens: (n, T) with gradient
        loss = rl.grpo_clip_loss(
            new.logprobs,
            old_logprobs[idx],
            ref_logprobs[idx],
            advantages[idx],
            mask,
            config.grpo_clip_range,
            config.beta,
            config.loss_type,
            config.max_new_tokens,
        )
        check_finite("loss/policy", loss)

        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm)
        optimizer.step()

        with torch.no_grad():
            ratio = (new.logprobs - old_logprobs[idx]).exp()
            stats.append(
                {
                    "loss/policy": loss,
                    "ppo/clip_frac": rl.masked_mean(((ratio - 1).abs() > config.grpo_clip_range).float(), mask),
                    "policy/entropy": rl.masked_mean(new.entropy, mask),
                }
            )
    return mean_metrics(stats)


if __name__ == "__main__":
    run_main(main)
