"""Follow a few reviews through one PPO step and print what each stage produces (TASKS.md task 0).

    python -m rlhf_practice.walkthrough                  # your rl/ functions (unfinished ones are skipped)
    python -m rlhf_practice.walkthrough --impl FOLDER    # the rl/ files in FOLDER (a copy of rlhf_practice/rl/)
    python -m rlhf_practice.walkthrough --batch_size 4 --seed 1

Stages: review text -> prompt ids (a DataLoader batch) -> generated reply -> reward ->
old log-probs and values V(s) -> advantages -> clip loss -> one optimizer step. It runs on the
tiny preset and the CPU, and prints shapes and values; nothing is saved.
"""

from __future__ import annotations

import argparse

import torch

from rlhf_practice.config import PPOConfig, preset_config
from rlhf_practice.course import load_impl
from rlhf_practice.data import build_prompt_dataloader
from rlhf_practice.modeling import PolicyValueModel, load_tokenizer
from rlhf_practice.reward import build_reward
from rlhf_practice.sampling import Sampler


def _show(name: str, value: torch.Tensor) -> None:
    shown = value.tolist() if not value.is_floating_point() else torch.round(value, decimals=4).tolist()
    print(f"  {name:<16} shape {tuple(value.shape)}  {value.dtype}  {shown}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m rlhf_practice.walkthrough",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--impl",
        default="student",
        help='whose rl/ functions run: "student" (your rlhf_practice/rl/) or a folder with ppo.py and grpo.py',
    )
    parser.add_argument("--batch_size", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    config = preset_config(PPOConfig, "tiny")
    torch.manual_seed(args.seed)
    impl = load_impl(args.impl)
    tokenizer = load_tokenizer(config.model.model_name)
    policy = PolicyValueModel.from_pretrained(config.model.model_name)
    config.data.max_samples = 200

    print("1. A DataLoader batch: the first few tokens of each review, left-padded (rlhf_practice/data.py)")
    batch = next(iter(build_prompt_dataloader(config.data, tokenizer, args.batch_size, args.seed)))
    _show("input_ids", batch["input_ids"])
    _show("attention_mask", batch["attention_mask"])
    for text in batch["prompt_text"]:
        print(f"  prompt_text      {text!r}")

    print("\n2. Generate one reply per prompt, no gradient (Sampler.sample, rlhf_practice/sampling.py)")
    sampler = Sampler(policy, tokenizer, max_new_tokens=config.max_new_tokens)
    generation = sampler.sample(batch["input_ids"], batch["attention_mask"])
    print(f"  sequences        shape {tuple(generation.sequences.shape)} = prompt {generation.prompt_length} + reply")
    _show("response_mask", generation.response_mask)
    replies = generation.decode(tokenizer)
    for reply in replies:
        print(f"  reply            {reply!r}")

    print("\n3. Reward: the rule-based sentiment score of each reply, in [-1, 1] (rlhf_practice/reward.py)")
    rewards = build_reward(config.reward)(replies)
    _show("rewards", rewards)

    print("\n4. Old log-probs (sum over reply tokens) and values V(s) (PolicyValueModel.evaluate_sequences)")
    with torch.no_grad():
        old = policy.evaluate_sequences(generation)
    _show("old.logprobs", old.logprobs)
    _show("old.values", old.values)

    print("\n5. Advantages A = R - V(s) (your compute_advantages, TASKS.md §1.2)")
    try:
        advantages = impl.ppo.compute_advantages(rewards, old.values)
    except NotImplementedError as err:
        print(f"  skipped: {err} The stages after it need it too.")
        return
    _show("advantages", advantages)

    print("\n6. The clip loss on the same replies, before any update (your ppo_clip_loss, TASKS.md §2.2)")
    new = policy.evaluate_sequences(generation)
    try:
        loss = impl.ppo.ppo_clip_loss(new.logprobs, old.logprobs, advantages, config.ppo_clip_range)
    except NotImplementedError as err:
        print(f"  skipped: {err} The stages after it need it too.")
        return
    print(
        f"  loss/policy      {loss.item():+.4f}   (ratio = 1 before the update: this is -mean(advantages), 0 once normalized)"
    )

    print("\n7. One optimizer step on the clip loss, then the log-probs of the same replies again")
    optimizer = torch.optim.Adam(policy.parameters(), lr=config.learning_rate)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    with torch.no_grad():
        new = policy.evaluate_sequences(generation)
    _show("new - old", new.logprobs - old.logprobs)
    print("  replies with A > 0 became more likely (new - old > 0), those with A < 0 less likely.")


if __name__ == "__main__":
    main()
