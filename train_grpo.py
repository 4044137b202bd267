"""Train the policy with GRPO on the reward of a task (``--task``; sentiment by default).

    python train_grpo.py                     # tiny preset on a CPU, GPT-2 + IMDB on a GPU
    python train_grpo.py --impl FOLDER       # run the rl/ files in FOLDER instead of rlhf_practice/rl/
    python train_grpo.py --level token       # GRPO-clip (task 9): ratio clipping, KL to a reference
    python train_grpo.py --task sort         # task 11: a small GPT learns to sort 4 digits (--task add: addition)
    python train_grpo.py --reward_model DIR  # task 13: the reward of a learned model (the task's: reward/gold)
    python train_grpo.py --level token --advantage rloo  # task 14: RLOO, Dr. GRPO, DAPO, GSPO, CISPO (TASKS.md §14.7)
    python train_grpo.py --help              # every setting, with its default

One step: sample B prompts -> repeat each grpo_group_size (K) times -> generate B * K replies
-> reward -> group advantages (each reply vs. its own group) -> update -> log.
No value head is used: the group's mean reward is the baseline. Every step logs kl/ref, the KL from
the starting policy. The functions you write come from
``run.impl`` (``--impl``): ``grpo`` is rlhf_practice/rl/grpo.py, ``rl`` rlhf_practice/rl/token_level.py,
``after_grpo`` rlhf_practice/rl/after_grpo.py (task 14: only the runs that ask for its options call it).
"""

from types import ModuleType

import torch

from rlhf_practice import online_labels
from rlhf_practice.config import GRPOConfig, TokenGRPOConfig, parse_config
from rlhf_practice.course import Impl
from rlhf_practice.modeling import Generation, PolicyValueModel
from rlhf_practice.tracking import check_finite, frac_reward_zero_std, k3_per_reply, mean_metrics
from rlhf_practice.training import TrainingRun, run_main, training_run


def main() -> None:
    config = parse_config(GRPOConfig)
    with training_run(config) as run:
        online_labels.attach(run)  # task 16, --online.refresh_every: run.online, whose refreshes the loop calls
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
            online = run.refresh_reward_model(step)  # task 16, --online.refresh_every: fresh labels; {} without it
            # 1-2. B prompts, K replies to each (rows i*K .. i*K+K-1 share prompt i), scored: see
            #    sample_groups (--dynamic_sampling: only the groups whose replies differ in correctness).
            generation, prompts, replies, rewards, sampling_stats = sample_groups(run, config)
            # --task sort/add: the reward's parts, and greedy exact match on held-out prompts every
            # eval_every steps (accuracy/heldout), of the policy before this step's update ({} for sentiment).
            task_stats = run.task_metrics(step, prompts, replies)

            # 3. Group advantages: reward minus the mean of the K replies to the same prompt
            #    (your compute_group_advantages; --advantage rloo: your compute_rloo_advantages),
            #    over the global batch, then this process's rows.
            advantages = group_advantages(run, run.gather(rewards), config)
            advantages = run.shard(advantages)  # (B*K,)

            # 4. Update: the GRPO loss (your grpo_loss inside grpo_step), or at the token level
            #    grpo_iterations updates with GRPO-clip (your grpo_clip_loss inside grpo_clip_step).
            if config.level == "sequence":
                with torch.no_grad():  # for kl/ref only (logged, never in the loss)
                    ref_logprobs = reference.evaluate_tokens(generation).logprobs  # (B*K, T)
                stats = grpo_step(grpo, model, optimizer, generation, advantages, config, ref_logprobs)
            else:
                stats = token_level_update(run, model, optimizer, reference, generation, advantages, config)
                # The share of groups whose K rewards all tie: zero advantage, no learning signal.
                stats["frac_reward_zero_std"] = frac_reward_zero_std(run.gather(rewards), group_size)

            # 5. Log. adv/mean is ~0 by construction: watch reward/mean, not the loss.
            metrics = {
                **stats,
                **run.rollout_stats(rewards, advantages, generation, group_size),
                **task_stats,
                **sampling_stats,
                **online,
            }
            run.logger.log(step, metrics, prompts, replies, rewards)


def sample_groups(
    run: TrainingRun, config: GRPOConfig
) -> tuple[Generation, list[str], list[str], torch.Tensor, dict[str, torch.Tensor]]:
    """Steps 1-2: B prompts, each repeated K times, B * K replies generated and scored. Returns the
    generation, the prompt and reply of each row, the rewards (B*K,) and the sampling's metrics.

    With ``--dynamic_sampling`` (DAPO): keep only the groups whose replies differ in exact correctness
    (your ``filter_groups``), and sample fresh batches of B prompts until B groups are kept or
    ``max_num_gen_batches`` batches were sampled; train on the first B kept groups (fewer if fewer were
    kept; the last batch unfiltered if none was). Logs ``dynamic_sampling/gen_batches`` (batches
    sampled) and ``dynamic_sampling/groups_dropped`` (groups sampled but not trained on)."""
    group_size = config.grpo_group_size
    dynamic = getattr(config, "dynamic_sampling", False)  # token level only
    kept: list[tuple[Generation, list[str], list[str], torch.Tensor]] = []
    groups_kept = rounds = 0
    while True:
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
        if not dynamic:
            return generation, prompts, replies, rewards, {}

        # DAPO: a group whose K replies are all right, or all wrong, teaches nothing: drop it.
        rounds += 1
        correct = run.task.correct(prompts, replies).to(rewards.device)  # (B*K,): 1 = exactly right
        keep = run.impl.after_grpo.filter_groups(correct, group_size)  # (B,) bool
        rows = keep.repeat_interleave(group_size).nonzero().squeeze(1)  # (kept*K,)
        if len(rows):
            kept.append((generation[rows], [prompts[i] for i in rows], [replies[i] for i in rows], rewards[rows]))
            groups_kept += int(keep.sum())
        if groups_kept >= config.train_batch_size or rounds == config.max_num_gen_batches:
            break

    batch_size = config.train_batch_size  # B
    if kept:  # the first B kept groups, in the order they were sampled
        rows = slice(0, min(groups_kept, batch_size) * group_size)
        generation = Generation.cat([g for g, *_ in kept], run.tokenizer.pad_token_id)[rows]
        prompts = [p for _, batch, *_ in kept for p in batch][rows]
        replies = [r for *_, batch, _ in kept for r in batch][rows]
        rewards = torch.cat([r for *_, r in kept])[rows]
    # else: no group was kept in any batch: the last batch trains unfiltered (each of its groups is all
    # right or all wrong; partial credit in the reward may still tell the replies apart)
    stats = {
        "dynamic_sampling/gen_batches": torch.tensor(float(rounds), device=rewards.device),
        "dynamic_sampling/groups_dropped": torch.tensor(
            float(rounds * batch_size - len(rewards) // group_size), device=rewards.device
        ),
    }
    return generation, prompts, replies, rewards, stats


def group_advantages(run: TrainingRun, rewards: torch.Tensor, config: GRPOConfig) -> torch.Tensor:
    """Step 3 on the global batch's rewards (N,): each reply against the other replies to its prompt.

    ``--advantage grpo`` (the default): your ``compute_group_advantages``, divided by the group's std
    when ``normalize_advantages``; ``dr_grpo`` (Dr. GRPO, Liu et al. 2025): the same, never divided;
    ``rloo``: your ``compute_rloo_advantages`` (the mean of the other K - 1 replies; never divided)."""
    advantage = getattr(config, "advantage", "grpo")  # token level only
    if advantage == "rloo":
        return run.impl.after_grpo.compute_rloo_advantages(rewards, config.grpo_group_size)
    normalize = config.normalize_advantages and advantage == "grpo"
    return run.impl.grpo.compute_group_advantages(rewards, config.grpo_group_size, normalize=normalize)


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
        grpo_clip_step(run.impl, model, optimizer, generation, old_logprobs, ref_logprobs, advantages, config)
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
    impl: Impl,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    generation: Generation,
    old_logprobs: torch.Tensor,
    ref_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    config: TokenGRPOConfig,
) -> dict[str, torch.Tensor]:
    """One GRPO-clip iteration over N = B * K replies, in ``config.grpo_num_minibatches`` minibatches
    (your ``rl.grpo_clip_loss`` and ``rl.masked_mean``; task 14's options: your functions of
    ``after_grpo``, picked by :func:`policy_loss`).

    ``old_logprobs`` and ``ref_logprobs`` are (N, T) constants, ``advantages`` (N,). Returns the
    metrics of the iteration (0-dim tensors), averaged over its minibatches.
    """
    rl = impl.token_level
    stats = []
    for idx in torch.randperm(len(generation), device=advantages.device).chunk(config.grpo_num_minibatches):
        mask = generation.response_mask[idx]
        new = model(generation[idx], per_token=True)  # evaluate_tokens: (n, T) with gradient
        loss = policy_loss(impl, new.logprobs, old_logprobs[idx], ref_logprobs[idx], advantages[idx], mask, config)
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
                    **clip_ratios(rl, new.logprobs, old_logprobs[idx], advantages[idx], mask, config),
                }
            )
    return mean_metrics(stats)


def policy_loss(
    impl: Impl,
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    ref_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    config: TokenGRPOConfig,
) -> torch.Tensor:
    """The loss of one minibatch, by the settings (epsilon = grpo_clip_range, beta = beta):

    --loss_type cispo                    your cispo_loss, weight capped at 1 + (grpo_clip_range_high or epsilon)
    --importance_sampling_level sequence your gspo_loss, s_i in [1 - epsilon, 1 + (grpo_clip_range_high or epsilon)]
    --grpo_clip_range_high EPS_HIGH      your clip_higher_loss, ratio in [1 - epsilon, 1 + EPS_HIGH]
    otherwise                            your grpo_clip_loss, ratio in [1 - epsilon, 1 + epsilon] (task 9)
    """
    low, high = config.grpo_clip_range, config.grpo_clip_range_high
    args = (logprobs, old_logprobs, ref_logprobs, advantages, mask)
    if config.loss_type == "cispo":
        return impl.after_grpo.cispo_loss(*args, high or low, config.beta)
    if config.importance_sampling_level == "sequence":
        return impl.after_grpo.gspo_loss(*args, low, high or low, config.beta)
    if high is not None:
        return impl.after_grpo.clip_higher_loss(*args, low, high, config.beta, config.loss_type, config.max_new_tokens)
    return impl.token_level.grpo_clip_loss(*args, low, config.beta, config.loss_type, config.max_new_tokens)


def clip_ratios(
    rl: ModuleType,
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    config: TokenGRPOConfig,
) -> dict[str, torch.Tensor]:
    """TRL's clip_ratio/ tags: the share of ratios whose clip took the gradient away, low (ratio below
    1 - epsilon with A < 0), high (above 1 + epsilon_high with A > 0) and either (region): a mean over
    real tokens; over replies, of s_i, with --importance_sampling_level sequence; with --loss_type cispo
    high is the share of tokens whose weight was capped (it has no floor, so low is 0)."""
    low, high = config.grpo_clip_range, config.grpo_clip_range_high or config.grpo_clip_range
    if config.loss_type == "cispo":
        capped = rl.masked_mean(((logprobs - old_logprobs).exp() > 1 + high).float(), mask)
        return {
            "clip_ratio/low_mean": torch.zeros_like(capped),
            "clip_ratio/high_mean": capped,
            "clip_ratio/region_mean": capped,
        }
    if config.importance_sampling_level == "sequence":  # s_i, one ratio per reply
        lengths = mask.sum(dim=1).clamp(min=1)
        ratio = (((logprobs - old_logprobs) * mask).sum(dim=1) / lengths).exp()  # (n,)
        is_low, is_high = (ratio < 1 - low) & (advantages < 0), (ratio > 1 + high) & (advantages > 0)
        mean = lambda x: x.float().mean()  # noqa: E731
    else:
        ratio, sign = (logprobs - old_logprobs).exp(), advantages.unsqueeze(1)  # (n, T), (n, 1)
        is_low, is_high = (ratio < 1 - low) & (sign < 0), (ratio > 1 + high) & (sign > 0)
        mean = lambda x: rl.masked_mean(x.float(), mask)  # noqa: E731
    return {
        "clip_ratio/low_mean": mean(is_low),
        "clip_ratio/high_mean": mean(is_high),
        "clip_ratio/region_mean": mean(is_low | is_high),
    }


if __name__ == "__main__":
    run_main(main)
