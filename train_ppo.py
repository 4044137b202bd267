"""Train the policy with PPO on the sentiment reward.

    python train_ppo.py                      # tiny preset on a CPU, GPT-2 + IMDB on a GPU
    python train_ppo.py --impl answer        # run the answer key instead of rlhf_practice/rl/
    python train_ppo.py --help               # every setting, with its default

One step: sample prompts -> generate replies -> reward -> old log-probs and values V(s)
-> advantages A = R - V(s) -> ppo_epochs passes of ppo_step -> log.
"""

import torch

from rlhf_practice.config import PPOConfig, parse_config
from rlhf_practice.tracking import explained_variance, mean_metrics, rollout_stats
from rlhf_practice.training import run_main, training_run


def main() -> None:
    config = parse_config(PPOConfig)
    with training_run(config) as run:
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
                **rollout_stats(rewards, advantages, generation.response_mask),
                "value/mean": old.values.mean(),
                "value/explained_variance": explained_variance(old.values, rewards),  # how much of R does V(s) see?
                # Before any update new = old, so ratio = 1 and the clip loss is -mean(A): 0 once A is normalized.
                "loss/policy_before_update": ppo.ppo_clip_loss(
                    old.logprobs, old.logprobs, advantages, config.ppo_clip_range
                ),
            }
            run.logger.log(step, metrics, prompts, replies, rewards)


if __name__ == "__main__":
    run_main(main)
