"""Train the policy with DPO on preference pairs ranked by the reward of a task (``--task``; sentiment by default).

    python train_dpo.py                      # tiny preset on a CPU, GPT-2 + IMDB on a GPU
    python train_dpo.py --impl FOLDER        # run the rl/ files in FOLDER instead of rlhf_practice/rl/
    python train_dpo.py --task sort          # pairs ranked by the sort task's reward (--task add: addition)
    python train_dpo.py --pairs_file FILE    # your own pairs: prompt, chosen, rejected (.jsonl, .json, .csv)
    python train_dpo.py --rounds 2           # iterative DPO: new pairs from the policy after half the steps
    python train_dpo.py --help               # every setting, with its default

Before the loop: preference pairs, built once from the starting policy (pair_samples replies per prompt
-> the task's reward -> ranked, ties dropped) and kept in pairs_dir for the next run with the same
settings, or read from --pairs_file (rlhf_practice/preferences.py). Then log pi_ref of every pair, once
(your reference_logps on the frozen reference, in batches): pi_ref never changes, so every step and epoch
reuses them. Both are timed apart from training (summary.json's pairs_s). One step: a batch of pairs
-> log pi of its chosen and rejected replies (with gradient), their log pi_ref read from the pairs ->
DPO loss -> update -> log. No reward and no sampling in the loop: only every eval_every steps are fresh
replies sampled, to measure reward/mean and kl/ref, the figures that compare with PPO and GRPO. The functions you write come from ``run.impl.dpo`` (``--impl``): rlhf_practice/rl/dpo.py.
"""

import sys
from types import ModuleType

import torch

from rlhf_practice.config import DPOConfig, parse_config
from rlhf_practice.modeling import PolicyValueModel
from rlhf_practice.preferences import (
    PAIR_SEED_OFFSET,
    PairBatch,
    PairData,
    build_pairs,
    cached_pairs,
    load_pairs,
    write_pairs,
)
from rlhf_practice.tracking import check_finite
from rlhf_practice.training import TrainingRun, run_main, training_run


def main() -> None:
    config = parse_config(DPOConfig)
    with training_run(config) as run:
        dpo = run.impl.dpo
        policy = run.policy  # always in eval mode: no dropout, so log-probs are deterministic (TRL: disable_dropout)
        start = policy.reference_model()  # the starting policy: kl/ref is measured against it
        reference = start  # pi_ref of the loss, never updated (--rounds 2 replaces it halfway)

        # 0. Preference pairs: from the file, from the cache, or sampled from the starting policy.
        #    (Under a launcher: by the main process, which sends them to the others.)
        with run.logger.set_aside("pairs"):
            pairs, source = run.from_main(lambda: load_pairs(config) if config.pairs_file else cached_pairs(run))
            data = PairData(pairs, run.tokenizer, policy.max_length, str(source))
            reference_once(run, dpo, reference, data, config.seed)  # log pi_ref of every pair, once
        announce_pairs(run, len(data))
        run.logger.notes["pairs_file"] = str(source)
        # Batches of train_batch_size pairs (with N processes, each takes its share of every batch).
        batches = data.batches(config.train_batch_size, config.seed, run.process_index, run.num_processes)
        optimizer = torch.optim.Adam(policy.trainable_parameters(), lr=config.learning_rate)  # no value head: frozen
        # The LM your reply_logps runs with gradient: under torchrun / accelerate launch wrapped in DDP
        # (gradients averaged over the processes); in one process policy.lm itself.
        lm, optimizer = run.prepare(policy.lm, optimizer)
        for step in run.logger.steps(range(1, config.num_steps + 1)):
            if config.rounds == 2 and step == config.num_steps // 2 + 1:
                # Iterative DPO: pairs from the current policy, which becomes the reference, so that
                # the pairs come from pi_ref as the derivation of the loss assumes. New prompts, too.
                reference = policy.frozen_copy()  # (with LoRA too: a copy of base + adapter as they are now)
                with run.logger.set_aside("pairs"):
                    pairs = run.from_main(lambda: round_two_pairs(run))
                    data = PairData(pairs, run.tokenizer, policy.max_length, "pairs_round2.jsonl")
                    reference_once(run, dpo, reference, data, config.seed + 1)
                announce_pairs(run, len(data), "round 2 ")
                batches = data.batches(config.train_batch_size, config.seed + 1, run.process_index, run.num_processes)

            # 1. Every eval_every steps (and at the first and last): fresh replies from the policy
            #    before this step's update, their reward and KL to the starting policy.
            sampled, prompts, replies, rewards = ({}, [], [], None)
            if run.is_eval_step(step):
                sampled, prompts, replies, rewards = evaluate(run, start, step)

            # 2. The DPO update on a batch of pairs (your reply_logps, reference_logps, dpo_loss).
            batch = next(batches).to(run.device)
            stats = dpo_step(dpo, policy, lm, optimizer, batch, config)

            # 3. Log: rewards/* are DPO's implicit rewards beta * (log pi - log pi_ref) on the training
            #    pairs; reward/mean is the task's reward of fresh samples.
            run.logger.log(step, {**stats, **sampled}, prompts, replies, rewards)


def dpo_step(
    dpo: ModuleType,
    policy: PolicyValueModel,
    lm: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    batch: PairBatch,
    config: DPOConfig,
) -> dict[str, torch.Tensor]:
    """One DPO update on a batch of n pairs (2n rows: chosen, then rejected; see :class:`PairBatch`).
    ``lm`` is ``policy.lm``, or its DDP wrapper (see ``TrainingRun.prepare``)."""
    args = (batch.input_ids, batch.attention_mask, batch.prompt_lengths)
    with policy.autocast():
        logps = dpo.reply_logps(lm, *args)  # (2n,), with gradient
    chosen, rejected = logps.chunk(2)
    ref_chosen, ref_rejected = batch.ref_logps.chunk(2)  # your reference_logps, computed once per pair set
    losses, chosen_rewards, rejected_rewards = dpo.dpo_loss(chosen, rejected, ref_chosen, ref_rejected, config.beta)
    loss = losses.mean()
    check_finite("loss/policy", loss)

    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(lm.parameters(), config.max_grad_norm)
    optimizer.step()

    chosen_rewards, rejected_rewards = chosen_rewards.detach(), rejected_rewards.detach()
    return {
        "loss/policy": loss.detach(),
        "rewards/chosen": chosen_rewards.mean(),
        "rewards/rejected": rejected_rewards.mean(),
        "rewards/accuracies": (chosen_rewards > rejected_rewards).float().mean(),
        "rewards/margins": (chosen_rewards - rejected_rewards).mean(),
        "logps/chosen": chosen.detach().mean(),
        "logps/rejected": rejected.detach().mean(),
    }


def announce_pairs(run: TrainingRun, count: int, which: str = "") -> None:
    """One line with the seconds spent so far on the pairs (built or read, tokenized, their log pi_ref): the same
    measurement as summary.json's ``pairs_s``, which leaves them out of every step's time."""
    if run.process_index == 0:
        seconds = run.logger.set_aside_seconds["pairs"]
        print(f"pairs: {which}{count} ready; pairs_s = {seconds:.1f} s (summary.json)", file=sys.stderr)


def reference_once(run: TrainingRun, dpo: ModuleType, reference: PolicyValueModel, data: PairData, seed: int) -> None:
    """log pi_ref of every pair, with your reference_logps, once per pair set (:meth:`PairData.compute_reference`,
    on the batches ``data.batches`` yields first with ``seed``): pi_ref never changes while these pairs are
    used, so every step and epoch reads them instead of running the reference again."""
    with reference.autocast():
        data.compute_reference(
            dpo.reference_logps,
            reference.lm,
            run.config.train_batch_size,
            seed,
            run.process_index,
            run.num_processes,
            run.device,
        )


def round_two_pairs(run: TrainingRun) -> list[dict]:
    """--rounds 2: pairs sampled from the policy as it is now, also written to the run folder."""
    pairs, _ = build_pairs(run, run.config.seed + PAIR_SEED_OFFSET + 1)
    write_pairs(run.logger.run_dir / "pairs_round2.jsonl", pairs)
    return pairs


@torch.no_grad()
def evaluate(
    run: TrainingRun, start: PolicyValueModel, step: int
) -> tuple[dict[str, torch.Tensor], list[str], list[str], torch.Tensor]:
    """Sample one reply to each of a batch of prompts from the policy and measure it: the task's reward,
    the length, and kl/ref = mean over the replies of log pi(y|x) - log pi_start(y|x), each a sum over
    the reply's tokens (an unbiased estimate of KL(pi || pi_start) per reply, in nats). Returns the
    metrics and the prompts, replies and rewards (for the samples log)."""
    input_ids, attention_mask, prompts = run.next_prompts()  # (B, P): this process's share under a launcher
    generation = run.generate(input_ids, attention_mask)
    replies, rewards = run.score_replies(generation, prompts)  # (B,)
    new = run.policy.evaluate_sequences(generation)
    kl_ref = (new.logprobs - start.evaluate_sequences(generation).logprobs).mean()
    all_rewards = run.gather(rewards)  # the rewards of every process (these ones in one process)
    metrics = {
        "reward/mean": all_rewards.mean(),
        "reward/std": all_rewards.std(),
        "response/length": generation.response_mask.sum(dim=1).float().mean(),
        "kl/ref": kl_ref,
        "policy/entropy": new.entropy,
        **run.task_metrics(step, prompts, replies),  # --task sort/add: reward parts, accuracy/heldout
    }
    return metrics, prompts, replies, rewards


if __name__ == "__main__":
    run_main(main)
