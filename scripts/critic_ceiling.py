"""How much of the reward can a critic that sees only the prompt explain? (TASKS.md §4, the critic)

    python scripts/critic_ceiling.py                 # 32 prompts x 16 replies, seeds 0 1 2
    python scripts/critic_ceiling.py --prompts 64 --replies 8 --seeds 0

PPO's value head reads V(s) at the last prompt token, before any reply token exists; the reward
depends on the reply. The best any V(prompt) can do is predict each prompt's mean reward. This
samples many replies per prompt from the starting policy (tiny preset, CPU) and reports the
explained variance of that best predictor, estimated out of sample (each reply is predicted from
the *other* replies to its prompt), i.e. 1 - Var(r - prediction) / Var(r). Nothing here is a test.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rlhf_practice.config import PPOConfig, preset_config  # noqa: E402
from rlhf_practice.sampling import Sampler  # noqa: E402
from rlhf_practice.tasks import build_task  # noqa: E402


def ceiling(num_prompts: int, replies: int, seed: int) -> float:
    config = preset_config(PPOConfig, "tiny")
    torch.manual_seed(seed)
    task = build_task(config)
    tokenizer = task.load_tokenizer()
    policy = task.load_policy(torch.device("cpu"))
    batch = next(task.prompt_batches(tokenizer, num_prompts, seed))
    generation = Sampler(policy, tokenizer, max_new_tokens=config.max_new_tokens).sample(
        batch["input_ids"].repeat_interleave(replies, dim=0), batch["attention_mask"].repeat_interleave(replies, dim=0)
    )
    prompts = [p for p in batch["prompt_text"] for _ in range(replies)]
    rewards = task.reward(prompts, generation.decode(tokenizer)).double().view(num_prompts, replies)
    others_mean = (rewards.sum(dim=1, keepdim=True) - rewards) / (replies - 1)  # leave-one-out V(prompt)
    return (1 - (rewards - others_mean).var() / rewards.var()).item()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--replies", type=int, default=16, help="replies sampled per prompt (>= 2)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args()
    for seed in args.seeds:
        value = ceiling(args.prompts, args.replies, seed)
        print(f"seed {seed}: the best V(prompt) explains {100 * value:+.1f} % of the reward variance")


if __name__ == "__main__":
    main()
