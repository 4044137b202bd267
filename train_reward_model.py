"""Train a reward model on preference pairs ranked by the reward of a task (``--task``; sentiment by default).

    python train_reward_model.py                       # tiny preset on a CPU, GPT-2 + IMDB on a GPU
    python train_reward_model.py --impl FOLDER         # run the rl/ files in FOLDER instead of rlhf_practice/rl/
    python train_reward_model.py --label_noise 0.2     # a fifth of the training pairs labelled the wrong way
    python train_reward_model.py --num_pairs 200       # fewer pairs (the over-optimization experiment)
    python train_reward_model.py --num_layers 1        # a smaller model: the policy's first block only (task 15)
    python train_reward_model.py --pairs_file FILE     # your own pairs: prompt, chosen, rejected (.jsonl, .json, .csv)
    python train_reward_model.py --help                # every setting, with its default

The task's rule reward plays the human annotator: of two replies to a prompt it prefers the one with
the higher reward ("gold"), and the model learns to agree from the comparisons alone. Before the loop:
the same pairs as train_dpo.py's (rlhf_practice/preferences.py: built once from the starting policy,
kept in pairs_dir, or read from --pairs_file), split by prompt into training and held-out pairs
(--heldout_pairs), cut to --num_pairs, a --label_noise share flipped; and --normalization_samples fresh
replies of the starting policy to new prompts, with their gold reward. All of it is timed apart
(summary.json's ``pairs_s``). The model is GPT2ForSequenceClassification (one label) started from the
policy's weights, its score head new; ``--num_layers N`` keeps the policy's first N blocks only (task 15's
smaller reward models).

One step: a batch of pairs (chosen rows, then rejected rows) -> get_reward (each row's score at its
last real token) -> reward_loss (Bradley-Terry) -> Adam step -> log TRL RewardTrainer's names (loss,
accuracy, margin, mean_reward, min_reward, max_reward, num_tokens). Every eval_every steps (and at the
first and last): the same on the held-out pairs, ``eval_``-prefixed, and eval_gold_correlation, the
Pearson correlation of the model's scores with the gold reward on the fresh replies. At the end:
<run folder>/reward_model/ (save_pretrained: loads with AutoModelForSequenceClassification.from_pretrained)
with reward_model.json beside its config, and train_pairs.jsonl / heldout_pairs.jsonl (train_dpo.py
--pairs_file train_pairs.jsonl learns from the very same pairs). The functions you write come from
``run.impl.reward_model`` (``--impl``): rlhf_practice/rl/reward_model.py.
"""

import json
import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path
from types import ModuleType

import torch
from transformers import GPT2ForSequenceClassification

from rlhf_practice.config import RewardModelConfig, parse_config
from rlhf_practice.preferences import (
    PairBatch,
    PairData,
    cached_pairs,
    flush_left,
    load_pairs,
    pair_stats,
    reward_model_from_policy,
    reward_step,
    split_pairs,
    write_pairs,
)
from rlhf_practice.training import TrainingRun, run_main, training_run

EVAL_BATCH_PAIRS = 64  # held-out pairs per forward pass of an evaluation (no gradient)


def main() -> None:
    config = parse_config(RewardModelConfig)
    with training_run(config) as run:
        rm = run.impl.reward_model
        # 0. Pairs (split by prompt, cut, some flipped) and fresh replies with their gold reward: timed apart.
        with run.logger.set_aside("pairs"):
            pool, source = load_pairs(config) if config.pairs_file else cached_pairs(run)
            train_pairs, heldout_pairs = split_pairs(
                pool, config.heldout_pairs, config.num_pairs, config.label_noise, config.seed
            )
            write_pairs(run.logger.run_dir / "train_pairs.jsonl", train_pairs)
            write_pairs(run.logger.run_dir / "heldout_pairs.jsonl", heldout_pairs)
            train = PairData(train_pairs, run.tokenizer, run.policy.max_length, str(source))
            heldout = PairData(heldout_pairs, run.tokenizer, run.policy.max_length, str(source))
            fresh, gold, prompts, replies = fresh_samples(run)
        flipped = sum(p["label_flipped"] for p in train_pairs)
        print(
            f"pairs: {len(train)} to train on ({flipped} flipped), {len(heldout)} held out; "
            f"{len(gold)} fresh replies; pairs_s = {run.logger.set_aside_seconds['pairs']:.1f} s (summary.json)",
            file=sys.stderr,
        )
        run.logger.notes.update(pairs_file=str(source), train_pairs=len(train), heldout_pairs=len(heldout))

        model = reward_model_from_policy(run.policy.lm, run.tokenizer.pad_token_id, config.num_layers, config.seed)
        model.to(run.device)
        optimizer = torch.optim.Adam(model.parameters(), lr=config.learning_rate)
        batches = train.batches(config.train_batch_size, config.seed)
        tokens = 0
        for step in run.logger.steps(range(1, config.num_steps + 1)):
            # 1. Every eval_every steps (and at the first and last): the held-out pairs and the fresh
            #    replies, scored by the model before this step's update.
            evaluated, scores = ({}, None)
            if run.is_eval_step(step):
                with run.logger.timed("eval"):
                    evaluated, scores = evaluate(rm, model, heldout, fresh, gold, config)

            # 2. The update on a batch of pairs (your get_reward and reward_loss).
            batch = next(batches).to(run.device)
            tokens += int(batch.attention_mask.sum())
            stats = reward_step(rm, model, optimizer, batch, config.center_rewards_coefficient, config.max_grad_norm)
            stats["num_tokens"] = torch.tensor(float(tokens), device=run.device)

            # 3. Log (at an evaluation, the samples log shows fresh replies with the model's score).
            shown = (prompts, replies, scores) if scores is not None else ([], [], None)
            run.logger.log(step, {**stats, **evaluated}, *shown)
        save_reward_model(run, model, heldout, fresh, gold)


@torch.no_grad()
def evaluate(
    rm: ModuleType,
    model: torch.nn.Module,
    heldout: PairData,
    fresh: PairBatch,
    gold: torch.Tensor,
    config: RewardModelConfig,
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """The model on every held-out pair (TRL's eval_ metrics, its loss and accuracy from your
    reward_loss) and eval_gold_correlation: Pearson r of its scores of the fresh replies with their
    gold reward. Returns the metrics and those scores."""
    chosen, rejected = [], []
    for start in range(0, len(heldout), EVAL_BATCH_PAIRS):
        batch = heldout.collate(list(range(start, min(start + EVAL_BATCH_PAIRS, len(heldout))))).to(gold.device)
        c, r = rm.get_reward(model, batch.input_ids, batch.attention_mask, batch.prompt_lengths)[1].chunk(2)
        chosen.append(c)
        rejected.append(r)
    chosen, rejected = torch.cat(chosen), torch.cat(rejected)
    loss, accuracy = rm.reward_loss(chosen, rejected, None, config.center_rewards_coefficient or None)
    scores = score_rows(rm, model, fresh)
    stats = pair_stats(chosen, rejected)
    metrics = {
        "eval_loss": loss,
        "eval_accuracy": accuracy,
        "eval_margin": stats["margin"],
        "eval_mean_reward": stats["mean_reward"],
        "eval_min_reward": stats["min_reward"],
        "eval_max_reward": stats["max_reward"],
        "eval_gold_correlation": pearson(scores, gold),
    }
    return metrics, scores


@torch.no_grad()
def score_rows(rm: ModuleType, model: torch.nn.Module, rows: PairBatch) -> torch.Tensor:
    """(N,) the model's score of each flush-left row (your get_reward), in batches."""
    out = []
    for start in range(0, len(rows.input_ids), 2 * EVAL_BATCH_PAIRS):
        part = slice(start, start + 2 * EVAL_BATCH_PAIRS)
        out.append(rm.get_reward(model, rows.input_ids[part], rows.attention_mask[part], rows.prompt_lengths[part])[1])
    return torch.cat(out).float()


def pearson(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Pearson correlation of two (N,) tensors; 0 when either is constant."""
    x, y = x - x.mean(), y - y.mean()
    denominator = (x.norm() * y.norm()).clamp_min(1e-12)
    return (x * y).sum() / denominator


@torch.no_grad()
def fresh_samples(run: TrainingRun) -> tuple[PairBatch, torch.Tensor, list[str], list[str]]:
    """``normalization_samples`` replies of the starting policy to new prompts (the run's own prompt
    stream, not the pairs'), as flush-left rows, with their gold (task) reward: (rows, gold (N,),
    prompts, replies). Sampled with the run's random numbers forked, so training does not depend on them."""
    rows, gold, prompts, replies = [], [], [], []
    devices = [run.device] if run.device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        while len(prompts) < run.config.normalization_samples:
            input_ids, attention_mask, texts = run.next_prompts()
            generation = run.generate(input_ids, attention_mask)
            these, rewards = run.score_replies(generation, texts)
            rows.append(flush_left(generation, run.tokenizer.pad_token_id))
            gold.append(rewards)
            prompts += texts
            replies += these
    n = run.config.normalization_samples
    width = max(r.input_ids.shape[1] for r in rows)
    pad = lambda t, value: torch.nn.functional.pad(t, (0, width - t.shape[1]), value=value)  # noqa: E731
    batch = PairBatch(
        torch.cat([pad(r.input_ids, run.tokenizer.pad_token_id) for r in rows])[:n],
        torch.cat([pad(r.attention_mask, 0) for r in rows])[:n],
        torch.cat([r.prompt_lengths for r in rows])[:n],
    )
    return batch, torch.cat(gold)[:n].float(), prompts[:n], replies[:n]


def save_reward_model(
    run: TrainingRun, model: GPT2ForSequenceClassification, heldout: PairData, fresh: PairBatch, gold: torch.Tensor
) -> Path:
    """<run folder>/reward_model/: save_pretrained + the tokenizer + reward_model.json (the final model's
    held-out accuracy, and its score's mean and std over the fresh replies of the starting policy, for
    normalisation), written atomically (a partial save never has the name)."""
    config: RewardModelConfig = run.config
    final, scores = evaluate(run.impl.reward_model, model, heldout, fresh, gold, config)
    record = {
        "task": config.task,
        "score_mean": scores.mean().item(),
        "score_std": scores.std().item(),
        "normalization_samples": len(scores),
        "heldout_accuracy": final["eval_accuracy"].item(),
        "gold_correlation": final["eval_gold_correlation"].item(),
        "num_pairs": int(run.logger.notes["train_pairs"]),
        "label_noise": config.label_noise,
        "num_layers": model.config.n_layer,
        "reward": vars(config.reward),  # the annotator that labelled the pairs (the task's reward settings)
        "seed": config.seed,
        "command": shlex.join(["python", *sys.argv]),
    }
    folder = run.logger.run_dir
    partial = Path(tempfile.mkdtemp(prefix=".reward_model-partial-", dir=folder))
    try:
        model.save_pretrained(partial)
        run.tokenizer.save_pretrained(partial)
        (partial / "reward_model.json").write_text(json.dumps(record, indent=2) + "\n")
        os.replace(partial, folder / "reward_model")
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    run.logger.notes.update(
        reward_model_dir=str(folder / "reward_model"),
        heldout_accuracy=record["heldout_accuracy"],
        gold_correlation=record["gold_correlation"],
    )
    print(
        f"reward model saved to {folder / 'reward_model'}: held-out accuracy {record['heldout_accuracy']:.3f}, "
        f"gold correlation {record['gold_correlation']:.3f}",
        file=sys.stderr,
    )
    return folder / "reward_model"


if __name__ == "__main__":
    run_main(main)
