"""Train the policy with PPO on the sentiment reward.

    python train_ppo.py                      # tiny preset on a CPU, GPT-2 + IMDB on a GPU
    python train_ppo.py --impl answer        # run the answer key instead of rlhf_practice/rl/
    python train_ppo.py --level token        # token-level PPO (tasks 7-8): KL to a reference, GAE
    python train_ppo.py --help               # every setting, with its default

One step (--level sequence, tasks 1-2): sample prompts -> generate replies -> reward -> old log-probs
and values V(s) -> advantages A = R - V(s) -> ppo_epochs passes of ppo_step -> log.
"""

import torch

from rlhf_practice.config import PPOConfig, parse_config
from rlhf_practice.tracking import explained_variance, mean_metrics, rollout_stats
from rlhf_practice.training import TrainingRun, run_main, training_run


def main() -> None:
    config = parse_config(PPOConfig)
    with training_run(config) as run:
        token_level(run, config) if config.level == "token" else sequence_level(run, config)


def sequence_level(run: TrainingRun, config: PPOConfig) -> None:
    ppo = run.impl.ppo
    policy = run.policy
    optimizer = torch.optim.Adam(policy.parameters(), lr=config.learning_rate)
    for step in run.logger.steps():
        # 1. Sample prompts and generate one reply each (no gradient).
        input_ids, attention_mask, prompts = run.next_prompts()  # (B, P)
        generation = run.generate(input_ids, attention_mask)  # sequences (B, P + T)

        # 2. Score the replies with the rule-based reward.
        replies, rewards = run.score_replies(generation)  # rewards: (B,)

        # 3. Log-probs and values of the policy that sampled the replies: the "old" policy.
        with torch.no_grad():
            old = policy.evaluate_sequences(generation, config.mixed_precision)  # logprobs (B,), values (B,)

        # 4. Advantages A = R - V(s) (your compute_advantages).
        advantages = ppo.compute_advantages(rewards, old.values, normalize=config.normalize_advantages)

        # 5. ppo_epochs passes over the batch (your ppo_clip_loss inside ppo_step).
        #    The value head learns to predict the reward: returns = rewards.
        epoch_stats = [
            ppo.ppo_step(
                policy,
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
            **rollout_stats(rewards, advantages, generation),
            "value/mean": old.values.mean(),
            "value/explained_variance": explained_variance(old.values, rewards),  # how much of R does V(s) see?
            # Before any update new = old, so ratio = 1 and the clip loss is -mean(A): 0 once A is normalized.
            "loss/policy_before_update": ppo.ppo_clip_loss(
                old.logprobs, old.logprobs, advantages, config.ppo_clip_range
            ),
        }
        run.logger.log(step, metrics, prompts, replies, rewards)


def token_level(run: TrainingRun, config: PPOConfig) -> None:
    """--level token: per-token rewards with a KL penalty to the start policy, GAE, clipped losses."""
    tok = run.impl.token_level
    policy = run.policy
    reference = policy.frozen_copy()  # pi_ref: the policy before training; never updated
    kl_control = tok.KLController(config.beta, config.kl_target)
    optimizer = torch.optim.Adam(policy.parameters(), lr=config.learning_rate)
    for step in run.logger.steps():
        # 1. Sample prompts, generate one reply each, score it: one number per reply, as before.
        input_ids, attention_mask, prompts = run.next_prompts()
        generation = run.generate(input_ids, attention_mask)
        replies, scores = run.score_replies(generation)  # (B,)
        mask = generation.response_mask  # (B, T): 1 on each reply's tokens up to its EOS

        # 2. Per-token log-probs and values V(s_t) of the sampling policy, log-probs of the reference.
        with torch.no_grad():
            old = policy.evaluate_tokens(generation, config.mixed_precision)  # logprobs, values: (B, T)
            ref_logprobs = reference.evaluate_tokens(generation, config.mixed_precision).logprobs  # (B, T)

        # 3. Per-token reward r_t = -beta * KL_t, plus the score on the last token (your per_token_kl).
        kl = tok.per_token_kl(old.logprobs, ref_logprobs, mask, config.kl_estimator)
        rewards = tok.token_rewards(scores, kl, mask, kl_control.beta)  # (B, T)

        # 4. Advantages and returns by GAE, right to left (your compute_gae); then standardized.
        advantages, returns = tok.compute_gae(rewards, old.values, mask, config.gamma, config.gae_lambda)
        if config.normalize_advantages:
            advantages = tok.whiten(advantages, mask)

        # 5. ppo_epochs passes over the batch (your token_ppo_loss inside token_ppo_step).
        epoch_stats = [
            tok.token_ppo_step(policy, optimizer, generation, old, advantages, returns, config)
            for _ in range(config.ppo_epochs)
        ]

        # 6. KL(pi || pi_ref) per reply (k3 summed over its tokens) adapts beta when kl_target > 0; log.
        kl_ref = tok.per_token_kl(old.logprobs, ref_logprobs, mask, "k3").sum(dim=1).mean()
        metrics = {
            **mean_metrics(epoch_stats),
            **rollout_stats(scores, advantages[mask > 0], generation),
            "kl/ref": kl_ref,
            "kl/beta": torch.tensor(kl_control.beta),
            "value/mean": tok.masked_mean(old.values, mask),
            "value/explained_variance": explained_variance(old.values[mask > 0], returns[mask > 0]),
        }
        run.logger.log(step, metrics, prompts, replies, scores)
        kl_control.update(metrics["kl/ref"].item())


if __name__ == "__main__":
    run_main(main)
