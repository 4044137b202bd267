"""Benchmark both training scripts end to end and print the figures as JSON.

    python scripts/benchmark.py                           # tiny preset, your rl/ functions, both algorithms
    python scripts/benchmark.py --preset gpt2 --algorithms ppo
    python scripts/benchmark.py --extra --num_steps 20    # extra flags go to both scripts
    python scripts/benchmark.py --level token --seeds 0 1 2 --impl answer   # token level, three seeds

Each script runs as its own process, exactly as a user starts it, so the wall time includes
start-up (imports, loading the model and data). Per algorithm it reports: wall time, steps per
second, generated tokens per second, the reward gain (mean of the first 10 % of steps vs the last
10 %), seconds and steps until the batch mean reward first reaches --target, and peak memory (GPU
memory allocated by torch on CUDA, resident memory on a CPU), and at the token level the final KL
to the reference (``kl/ref``, mean of the last 10 % of steps). With several ``--seeds``, each seed's
figures and their median. Nothing here is a test: it prints.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rlhf_practice.tracking import final_mean, load_run  # noqa: E402


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
        if proc.returncode != 0:
            return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"}
        run = load_run(Path(tmp) / "bench")

    m = run.metrics
    rows_per_step = run.config["train_batch_size"] * run.config.get("grpo_group_size", 1)
    train_seconds = sum(m["time/step_s"])
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algorithms", nargs="+", default=["ppo", "grpo"], choices=["ppo", "grpo"])
    parser.add_argument("--preset", default="tiny", choices=["auto", "tiny", "gpt2"])
    parser.add_argument(
        "--impl",
        default=os.environ.get("RLHF_IMPL", "student"),
        help='whose rl/ functions the scripts run, as their --impl: "student" (default, as the scripts), "answer", a folder',
    )
    parser.add_argument("--target", type=float, default=0.8, help="reward level for steps/seconds_to_reward")
    parser.add_argument("--level", default="sequence", choices=["sequence", "token"], help="the scripts' --level")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0], help="one run per seed")
    parser.add_argument("--extra", nargs=argparse.REMAINDER, default=[], help="flags passed on to both scripts")
    args = parser.parse_args()
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
    print(json.dumps({"preset": args.preset, "level": args.level, "impl": args.impl, **results}, indent=2))


if __name__ == "__main__":
    main()
