"""Train the policy with PPO on the sentiment reward.

    python train_ppo.py                      # tiny preset on a CPU, GPT-2 + IMDB on a GPU
    python train_ppo.py --impl answer        # run the answer key instead of rlhf_practice/rl/
    python train_ppo.py --help               # every setting, with its default

One step: sample prompts -> generate replies -> reward -> old log-probs and values V(s)
-> advantages A = R - V(s) -> ppo_epochs passes of ppo_step -> log.
"""

import torch

from rlhf_practice.config import PPOConfig, parse_config
from rlhf_practice.training import run_main, training_run


def main() -> None:
    config = parse_config(PPOConfig)
    with training_run(config, "ppo") as run:
        ppo = run.impl.ppo
        policy = run.policy
        optimizer = torch.optim.Adam(policy.parameters(), lr=config.learning_rate)
        for step in run.steps():
            # 1. Sample prompts and generate one reply each (no gradient).
            input_ids, attention_mask, prompts = run.next_prompts()  # (B, P)
            generation = run.generate(input_ids, attention_mask)  # sequences (B, P + T)

            # 2. Score the replies with the rule-based reward.
            replies, rewards = run.score_replies(generation)  # rewards: (B,)

            # 3. Log-probs and values of the policy that sampled the replies: the "old" policy.
            with torch.no_grad():
                old = policy.evaluate_sequences(
                    generation.sequences,
                    generation.attention_mask,
                    generation.response_mask,
                    generation.prompt_length,
                    config.mixed_precision,
                )  # logprobs (B,), values (B,)

            # 4. Advantages A = R - V(s) (your compute_advantages).
            advantages = ppo.compute_advantages(rewards, old.values, normalize=config.normalize_advantages)

            # 5. ppo_epochs passes over the batch (your ppo_clip_loss inside ppo_step).
            #    The value head learns to predict the reward: returns = rewards.
            epoch_stats = [
                ppo.ppo_step(policy, optimizer, generation, old.logprobs, advantages, rewards, config)
                for _ in range(config.ppo_epochs)
            ]

            # 6. Log: losses averaged over the epochs, plus reward and advantage statistics.
            metrics = {k: sum(s[k] for s in epoch_stats) / len(epoch_stats) for k in epoch_stats[0]}
            metrics.update(
                {
                    "reward/mean": rewards.mean().item(),
                    "reward/std": rewards.std().item(),
                    "adv/mean": advantages.mean().item(),
                    "adv/std": advantages.std().item(),
                    "value/mean": old.values.mean().item(),
                    "response/length": generation.response_mask.sum(dim=1).mean().item(),
                }
            )
            run.log(
                step,
                metrics,
                bar={
                    "reward": "reward/mean",
                    "policy_loss": "loss/policy",
                    "value_loss": "loss/value",
                    "approx_kl": "kl/approx",
                },
                prompts=prompts,
                replies=replies,
                rewards=rewards,
            )


if __name__ == "__main__":
    run_main(main)
