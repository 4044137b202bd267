"""One update of each training script's real step function on one fixed global batch, in one process
(``python tests/_ddp_worker.py OUT --impl X``) or in several (``torchrun --nproc_per_node 2
tests/_ddp_worker.py OUT --impl X``): tests/test_distributed.py compares what the two write to OUT.

Every process samples the same global batch (same weights, same seed), keeps its rows
(``run.shard``), computes the advantages over the gathered batch (``run.gather``) as the scripts
do, and takes one update through ``run.prepare``'s model (DistributedDataParallel under a launcher).
The main process saves, per case, the loss averaged over the processes and every parameter after
the update.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import train_grpo  # noqa: E402  (the scripts sit at the repository root)
import train_ppo  # noqa: E402
from rlhf_practice.config import GRPOConfig, PPOConfig, parse_config  # noqa: E402
from rlhf_practice.training import TrainingRun, run_main, start_run  # noqa: E402

SIZES = ["--preset", "tiny", "--device", "cpu", "--data.max_samples", "64", "--max_new_tokens", "6"]
CASES = {
    "grpo": (GRPOConfig, ["--train_batch_size", "4", "--grpo_group_size", "4"]),
    "grpo_token": (GRPOConfig, ["--level", "token", "--train_batch_size", "4", "--grpo_group_size", "4"]),
    "ppo": (PPOConfig, ["--train_batch_size", "8", "--ppo_num_minibatches", "1"]),
}


def update(run: TrainingRun, case: str) -> dict[str, float]:
    """Sample the global batch, keep this process's rows, take one update; the step's metrics
    (losses, KL, entropy), each averaged over the processes as the run's logger does."""
    config, policy = run.config, run.policy
    k = getattr(config, "grpo_group_size", 1)
    torch.manual_seed(1234)  # the same global batch in every process
    batch = next(run.prompts)  # all train_batch_size prompts (run.next_prompts() would shard them)
    prompts = [p for p in batch["prompt_text"] for _ in range(k)]
    everything = run.sampler.sample(
        batch["input_ids"].repeat_interleave(k, 0), batch["attention_mask"].repeat_interleave(k, 0)
    )
    rows = run.shard(torch.arange(len(everything)))  # this process's rows (all of them in one process)
    generation = everything[rows]
    _, rewards = run.score_replies(generation, [prompts[i] for i in rows])
    if case.startswith("grpo"):
        policy.value_head.requires_grad_(False)
        reference = policy.reference_model()
    optimizer = torch.optim.Adam(policy.trainable_parameters(), lr=config.learning_rate)
    model, optimizer = run.prepare(policy, optimizer)
    if case == "ppo":
        ppo = run.impl.ppo
        with torch.no_grad():
            old = policy.evaluate_sequences(generation)
        advantages = run.shard(ppo.compute_advantages(run.gather(rewards), run.gather(old.values), normalize=True))
        stats = train_ppo.ppo_step(ppo, model, optimizer, generation, old.logprobs, advantages, rewards, config)
    else:
        advantages = run.shard(run.impl.grpo.compute_group_advantages(run.gather(rewards), k, normalize=True))
        if case == "grpo":
            stats = train_grpo.grpo_step(run.impl.grpo, model, optimizer, generation, advantages, config)
        else:
            stats = train_grpo.token_level_update(run, model, optimizer, reference, generation, advantages, config)
    return {tag: run.mean_over_processes(value).item() for tag, value in stats.items()}


def main() -> None:
    out, *flags = sys.argv[1:]
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        for case, (cls, sizes) in CASES.items():
            config = parse_config(cls, [*SIZES, *sizes, *flags, "--run_dir", folder, "--run_name", case])
            run = start_run(config)
            before = torch.cat([p.detach().flatten() for p in run.policy.parameters()])
            metrics = update(run, case)
            params = torch.cat([p.detach().flatten() for p in run.policy.parameters()])
            results[case] = {
                "metrics": metrics,
                "moved": (params - before).abs().max().item(),
                "params": params,
                "learning_rate": config.learning_rate,
                "processes": run.num_processes,
            }
            run.logger.close()
    if int(os.environ.get("RANK", "0")) == 0:  # the main process
        torch.save(results, out)


if __name__ == "__main__":
    run_main(main)  # as the training scripts: under torchrun, a process leaves without the interpreter's finalization
