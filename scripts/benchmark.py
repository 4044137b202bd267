"""Benchmark both training scripts end to end and print the figures as JSON.

    python scripts/benchmark.py                           # tiny preset, your rl/ functions, both algorithms
    python scripts/benchmark.py --preset gpt2 --algorithms ppo
    python scripts/benchmark.py --extra --num_steps 20    # extra flags go to both scripts
    python scripts/benchmark.py --level token --seeds 0 1 2       # token level, three seeds
    python scripts/benchmark.py --gpt2-shape --algorithms grpo --extra --num_steps 20   # GPU speed, no hub
    python scripts/benchmark.py --against-trl                     # GRPO step time: ours vs TRL's GRPOTrainer

Each script runs as its own process, exactly as a user starts it, so the wall time includes
start-up (imports, loading the model and data). Per algorithm it reports: wall time, start-up,
steps per second, the mean step split into its phases (generate, score, update: everything after
scoring), generated tokens per second, the reward gain (mean of the first 10 % of steps vs the last
10 %), seconds and steps until the batch mean reward first reaches --target, peak memory (GPU
memory allocated by torch on CUDA, resident memory on a CPU), the sampling path and what recording
its CUDA graph cost (paid once per run, not part of any step), and at the token level the final KL
to the reference (``kl/ref``, mean of the last 10 % of steps). With several ``--seeds``, each seed's
figures and their median.

``--gpt2-shape`` trains a randomly initialised model of GPT-2-124M's shape (12 layers, 768 wide,
50257-token embedding) with the tiny tokenizer and prompts, built locally: GPU speed without the hub.

``--against-trl`` also runs TRL's ``GRPOTrainer`` (``pip install trl``; a benchmark-only dependency,
not in requirements.txt) on the same model, prompts, reward, batch shape (train_batch_size prompts x
grpo_group_size replies of max_new_tokens), learning rate and number of steps, one update per batch
and no reference model, as train_grpo.py does, and prints both mean step times (first step left out)
and their ratio. Nothing here is a test: it prints.

A run that cannot start (a bad setting, or one of your functions not written yet) stops the benchmark
with the script's own one-line error and exit code (2 or 3), before any figures are printed.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rlhf_practice.tracking import final_mean, load_run  # noqa: E402

CANNOT_START = (2, 3)  # the scripts' exit codes for a bad setting and for an unwritten function (run_main)


def _median(values: list[float]) -> float | None:
    """Median of the finite values (explained variance is NaN on steps whose rewards were all equal)."""
    finite = sorted(v for v in values if v == v)
    return round(finite[len(finite) // 2], 3) if finite else None


def benchmark(algorithm: str, preset: str, impl: str, target: float, extra: list[str]) -> dict:
    """One run of train_<algorithm>.py (``extra`` flags appended); its figures."""
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, f"train_{algorithm}.py", "--preset", preset, "--impl", impl]
        command += ["--run_dir", tmp, "--run_name", "bench", *extra]
        start = time.perf_counter()
        proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        wall = time.perf_counter() - start
        error = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"
        if proc.returncode in CANNOT_START:  # every other run would stop the same way
            print(error, file=sys.stderr)
            sys.exit(proc.returncode)
        if proc.returncode != 0:
            return {"error": error}
        run = load_run(Path(tmp) / "bench")

    m = run.metrics
    rows_per_step = run.config["train_batch_size"] * run.config.get("grpo_group_size", 1)
    train_seconds = sum(m["time/step_s"])
    mean = lambda tag: round(sum(m[tag]) / len(m[tag]), 4) if m.get(tag) else None  # noqa: E731
    phases = {"generate": mean("time/generate_s"), "score": mean("time/score_s")}
    if None not in phases.values():
        phases["update"] = round(mean("time/step_s") - phases["generate"] - phases["score"], 4)
    tokens = sum(length * rows_per_step for length in m["response/length"])
    rewards = m["reward/mean"]
    first, last = final_mean(rewards[::-1]), final_mean(rewards)  # first and last 10 % of steps
    reached = run.first_reaching(target)
    return {
        "device": "cuda" if "device=cuda" in proc.stderr else "cpu",
        "steps": len(run.steps),
        "rows_per_step": rows_per_step,
        "wall_s": round(wall, 1),
        "train_s": round(train_seconds, 1),
        "startup_s": round(wall - train_seconds, 1),
        "steps_per_s": round(len(run.steps) / train_seconds, 2),
        "step_s": mean("time/step_s"),
        "step_s_after_first": round(sum(m["time/step_s"][1:]) / max(1, len(m["time/step_s"]) - 1), 4),
        "phase_s": phases,
        "decoding": run.summary.get("decoding"),
        "decode_capture_s": run.summary.get("decode_capture_s"),
        "generated_tokens_per_s": round(tokens / train_seconds, 1),
        "reward_first_10pct": round(first, 3),
        "reward_last_10pct": round(last, 3),
        "reward_gain": round(last - first, 3),
        f"steps_to_reward_{target}": None if reached is None else reached[0],
        f"seconds_to_reward_{target}": None if reached is None else round(reached[1], 1),
        "peak_memory_mb": run.summary["peak_memory_mb"],
        "final_kl_approx": m["kl/approx"][-1] if "kl/approx" in m else None,
        "value_explained_variance_median": _median(m.get("value/explained_variance", [])),
        "final_kl_ref": round(run.final("kl/ref"), 3) if "kl/ref" in m else None,
    }


def build_gpt2_shape(folder: Path) -> Path:
    """A randomly initialised GPT-2-124M-shaped model with the tiny tokenizer, saved to ``folder``."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from rlhf_practice.modeling import load_tokenizer

    tokenizer = load_tokenizer("tiny")
    torch.manual_seed(0)
    config = GPT2Config(
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id
    )  # the defaults are GPT-2-124M's: 12 layers, 12 heads, 768 wide, 1024 positions, 50257 tokens
    GPT2LMHeadModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def trl_grpo(preset: str, flags: list[str]) -> dict:
    """Mean step time of TRL's GRPOTrainer on train_grpo.py's work; the first step is left out."""
    import warnings

    import trl
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, TrainerCallback
    from transformers.utils import logging as hf_logging

    warnings.filterwarnings("ignore", category=FutureWarning)
    hf_logging.disable_progress_bar()

    from rlhf_practice.config import GRPOConfig, parse_config
    from rlhf_practice.data import build_prompt_dataloader
    from rlhf_practice.modeling import load_tokenizer, resolve_model_name
    from rlhf_practice.reward import build_reward
    from rlhf_practice.training import resolve_device

    ours = parse_config(GRPOConfig, ["--preset", preset, *flags])  # train_grpo.py's settings for these flags
    model_name = ours.model.model_name
    device = resolve_device(ours.device)
    tokenizer = load_tokenizer(model_name)
    prompts = [
        t for batch in build_prompt_dataloader(ours.data, tokenizer, 256, ours.seed) for t in batch["prompt_text"]
    ]
    reward_fn = build_reward(ours.reward)
    on_cuda = device.type == "cuda"

    def sentiment(completions: list[str], **_: object) -> list[float]:
        return [reward_fn.score(text) for text in completions]

    step_times: list[float] = []

    class StepTimer(TrainerCallback):
        def on_step_begin(self, *args, **kwargs):
            self.start = time.perf_counter()

        def on_step_end(self, *args, **kwargs):
            if on_cuda:
                torch.cuda.synchronize()
            step_times.append(time.perf_counter() - self.start)

    rows = ours.train_batch_size * ours.grpo_group_size
    args = trl.GRPOConfig(
        output_dir=tempfile.mkdtemp(prefix="trl-bench-"),
        per_device_train_batch_size=rows,
        num_generations=ours.grpo_group_size,
        max_completion_length=ours.max_new_tokens,
        learning_rate=ours.learning_rate,
        max_grad_norm=ours.max_grad_norm,
        temperature=ours.temperature,
        beta=0.0,
        num_iterations=1,
        gradient_checkpointing=False,  # train_grpo.py keeps activations; so must TRL, for the same work
        max_steps=ours.num_steps,
        seed=ours.seed,
        use_cpu=not on_cuda,
        bf16=on_cuda and ours.mixed_precision,
        logging_steps=10**6,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
    )
    model = AutoModelForCausalLM.from_pretrained(resolve_model_name(model_name), dtype=torch.float32)
    trainer = trl.GRPOTrainer(
        model=model,
        reward_funcs=sentiment,
        args=args,
        train_dataset=Dataset.from_dict({"prompt": prompts}),
        processing_class=tokenizer,
        callbacks=[StepTimer()],
    )
    with contextlib.redirect_stdout(sys.stderr):  # TRL prints its own summary; stdout is our JSON
        trainer.train()
    later = step_times[1:] or step_times
    return {
        "trl_version": trl.__version__,
        "steps": len(step_times),
        "step_s_after_first": round(sum(later) / len(later), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algorithms", nargs="+", default=["ppo", "grpo"], choices=["ppo", "grpo"])
    parser.add_argument("--preset", default="tiny", choices=["auto", "tiny", "gpt2"])
    parser.add_argument(
        "--impl",
        default=os.environ.get("RLHF_IMPL", "student"),
        help='whose rl/ functions the scripts run, as their --impl: "student" (your rlhf_practice/rl/; the default, as the scripts) or a folder',
    )
    parser.add_argument("--target", type=float, default=0.8, help="reward level for steps/seconds_to_reward")
    parser.add_argument("--level", default="sequence", choices=["sequence", "token"], help="the scripts' --level")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0], help="one run per seed")
    parser.add_argument("--gpt2-shape", action="store_true", help="a random GPT-2-124M-shaped model, built locally")
    parser.add_argument("--against-trl", action="store_true", help="also time TRL's GRPOTrainer on the same GRPO work")
    parser.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="flags passed on to both scripts")
    args = parser.parse_args()
    if args.against_trl:
        args.algorithms = ["grpo"]
        if importlib.util.find_spec("trl") is None:
            sys.exit("error: --against-trl needs TRL, a benchmark-only dependency: pip install trl==1.16.0")
    if args.gpt2_shape:  # the folder lives until main returns
        model_dir = tempfile.TemporaryDirectory(prefix="gpt2-shape-")
        args.extra = ["--model.model_name", str(build_gpt2_shape(Path(model_dir.name))), *args.extra]
    results = {}
    for algorithm in args.algorithms:
        runs = {}
        for seed in args.seeds:
            print(f"running train_{algorithm}.py --level {args.level} --seed {seed} ...", file=sys.stderr, flush=True)
            flags = ["--level", args.level, "--seed", str(seed), *args.extra]
            runs[seed] = benchmark(algorithm, args.preset, args.impl, args.target, flags)
        if len(runs) == 1:
            results[algorithm] = runs[args.seeds[0]]
            continue
        numbers = [k for k, v in runs[args.seeds[0]].items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
        medians = {k: _median([r[k] for r in runs.values() if r.get(k) is not None]) for k in numbers}
        results[algorithm] = {"median": medians, **{f"seed_{s}": r for s, r in runs.items()}}
    if args.against_trl:
        ours = results["grpo"].get("median", results["grpo"])  # one seed: the run itself
        print("running TRL's GRPOTrainer on the same work ...", file=sys.stderr, flush=True)
        theirs = trl_grpo(args.preset, ["--level", args.level, "--seed", str(args.seeds[0]), *args.extra])
        results["trl_grpo"] = theirs
        results["trl_step_s / our_step_s"] = round(theirs["step_s_after_first"] / ours["step_s_after_first"], 2)
    print(json.dumps({"preset": args.preset, "level": args.level, "impl": args.impl, **results}, indent=2))


if __name__ == "__main__":
    main()
