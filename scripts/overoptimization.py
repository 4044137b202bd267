"""Task 13's two experiments with a learned reward model (run through ``scripts/experiments.py``):

    python scripts/experiments.py overoptimization   # PPO against reward models of few / many pairs, beta 0 / > 0
    python scripts/experiments.py rm_vs_dpo          # a reward model + PPO against DPO, on the same pairs

overoptimization: for each seed, reward models are trained on FEW and MANY preference pairs (one pool of
pairs per seed, built once; the held-out pairs are the same for both), then token-level PPO trains
against each of them with the KL penalty to the reference off (beta 0) and on. Every step logs the
proxy (``reward/mean``: the reward model's score, normalised to mean 0 and std 1 over the starting
policy's replies), the gold reward (``reward/gold``: the task's rule reward, which the update never
sees) and ``kl/ref``. The figures read the curves smoothed over SMOOTH steps: the gold reward's peak,
where it ends (the mean of the last 10 % of steps), the drop between the two, the proxy at the gold
peak and at the end, and sqrt(kl/ref) at both; "over-optimized" counts the seeds whose gold ended at
least DROP below its peak while the proxy ended above its value at that peak. The curves, gold and
proxy against sqrt(KL) as Gao, Schulman & Hilton (2022) draw them, go to --out.

rm_vs_dpo: for each seed one reward model is trained on MANY pairs; DPO trains on exactly the pairs
the reward model was trained on (its ``train_pairs.jsonl``, through ``--pairs_file``), and token-level
PPO against the reward model. Both are judged on the reward model's held-out pairs (the reward model
by its scores; DPO by its implicit reward beta * (log pi - log pi_ref), whose sign on a pair is that of
the difference of the two log-ratios) and by the gold reward of fresh replies at the end.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
FEW, MANY = 16, 1024  # training pairs of the two reward models
BETAS = ("0", "0.1")  # token-level PPO's KL penalty to the reference: off, on
PPO_STEPS = 100
SMOOTH = 10  # steps in the moving average the figures read
DROP = 0.1  # "over-optimized": gold ended at least this far below its peak, while the proxy rose past it
COLUMNS = [
    "RM held-out accuracy",
    "gold peak",
    "gold at end",
    "gold drop",
    "proxy at gold peak",
    "proxy at end",
    "√KL at gold peak",
    "√KL at end",
    "over-optimized",
]
DPO_COLUMNS = ["held-out pair accuracy", "final gold reward", "final kl/ref", "wall s"]


def _run(script: str, args: list[str]) -> None:
    """``python <script> args`` from the repository root; its one-line error and exit code on failure."""
    command = [sys.executable, script, *args]
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if proc.returncode != 0:
        last = proc.stderr.strip().splitlines()[-1:] or [f"{' '.join(command[1:])} failed (exit {proc.returncode})"]
        print(last[0], file=sys.stderr)
        sys.exit(proc.returncode)


def train_reward_model(tmp: Path, name: str, seed: int, pairs: int, impl: str, extra: list[str]) -> Path:
    """A reward model trained on ``pairs`` pairs (pool and held-out pairs cached in ``tmp``/pairs); its run folder."""
    args = ["--preset", "tiny", "--impl", impl, "--seed", str(seed), "--run_dir", str(tmp), "--run_name", name]
    _run("train_reward_model.py", [*args, "--pairs_dir", str(tmp / "pairs"), "--num_pairs", str(pairs), *extra])
    return tmp / name


def train_policy(tmp: Path, name: str, algorithm: str, seed: int, impl: str, flags: list[str]) -> Path:
    args = ["--preset", "tiny", "--impl", impl, "--seed", str(seed), "--run_dir", str(tmp), "--run_name", name]
    _run(f"train_{algorithm}.py", [*args, *flags])
    return tmp / name


def smooth(values: list[float], window: int = SMOOTH) -> list[float]:
    """The moving average over the last ``window`` steps (fewer at the start)."""
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v - (values[i - window] if i >= window else 0.0)
        out.append(total / min(i + 1, window))
    return out


def final(values: list[float]) -> float:
    tail = values[-max(1, len(values) // 10) :]
    return sum(tail) / len(tail)


def curves(folder: Path) -> dict[str, list[float]]:
    """proxy, gold and sqrt(kl/ref) of a run, per step, smoothed."""
    from rlhf_practice.tracking import load_run

    metrics = load_run(folder).metrics
    return {
        "proxy": smooth(metrics["reward/mean"]),
        "gold": smooth(metrics["reward/gold"]),
        "sqrt_kl": smooth([max(v, 0.0) ** 0.5 for v in metrics["kl/ref"]]),
    }


def overoptimization_figures(c: dict[str, list[float]], rm_accuracy: float) -> dict[str, float]:
    peak = max(range(len(c["gold"])), key=c["gold"].__getitem__)
    gold_end, proxy_end = final(c["gold"]), final(c["proxy"])
    drop = c["gold"][peak] - gold_end
    return {
        "RM held-out accuracy": rm_accuracy,
        "gold peak": c["gold"][peak],
        "gold at end": gold_end,
        "gold drop": drop,
        "proxy at gold peak": c["proxy"][peak],
        "proxy at end": proxy_end,
        "√KL at gold peak": c["sqrt_kl"][peak],
        "√KL at end": final(c["sqrt_kl"]),
        "over-optimized": float(drop >= DROP and proxy_end > c["proxy"][peak]),
    }


Table = tuple[list[str], list[tuple[str, list[list[float]]]]]  # columns; (row label, each column's values over seeds)


def overoptimization(seeds: list[int], impl: str, extra: list[str], out: Path) -> Table:
    """Run the grid; draw its curves into ``out``; return its table."""
    settings = [(pairs, beta) for pairs in (FEW, MANY) for beta in BETAS]
    figures: dict[tuple[int, str], list[dict[str, float]]] = {s: [] for s in settings}
    drawn: dict[tuple[int, str], list[dict[str, list[float]]]] = {s: [] for s in settings}
    for seed in seeds:
        with tempfile.TemporaryDirectory() as name:
            tmp = Path(name)
            for pairs in (FEW, MANY):
                print(f"reward model on {pairs} pairs, seed {seed} ...", file=sys.stderr, flush=True)
                rm = train_reward_model(tmp, f"rm{pairs}", seed, pairs, impl, [])
                accuracy = json.loads((rm / "reward_model" / "reward_model.json").read_text())["heldout_accuracy"]
                for beta in BETAS:
                    print(f"  PPO --level token --beta {beta} against it ...", file=sys.stderr, flush=True)
                    flags = ["--level", "token", "--beta", beta, "--num_steps", str(PPO_STEPS)]
                    flags += ["--reward_model", str(rm / "reward_model"), *extra]
                    run = train_policy(tmp, f"ppo{pairs}-{beta}", "ppo", seed, impl, flags)
                    c = curves(run)
                    figures[pairs, beta].append(overoptimization_figures(c, accuracy))
                    drawn[pairs, beta].append(c)
                    this = figures[pairs, beta][-1]
                    print("  " + ", ".join(f"{k}: {v:.3g}" for k, v in this.items()), file=sys.stderr)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "overoptimization.png"
    plot(drawn, path, seeds)
    print(f"curves saved to {path}", file=sys.stderr)
    rows = [(f"RM on {p} pairs, PPO --beta {b}", [[f[c] for f in figures[p, b]] for c in COLUMNS]) for p, b in settings]
    return COLUMNS, rows


def plot(drawn: dict[tuple[int, str], list[dict[str, list[float]]]], path: Path, seeds: list[int]) -> None:
    """One panel per setting: gold (left axis) and proxy (right axis) against sqrt(kl/ref), one line per seed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(10, 7), squeeze=False)
    for ax, ((pairs, beta), runs) in zip(axes.flat, drawn.items()):
        right = ax.twinx()
        for i, c in enumerate(runs):
            ax.plot(c["sqrt_kl"], c["gold"], "-", color="C0", alpha=0.8, label="gold (rule reward)" if i == 0 else None)
            right.plot(
                c["sqrt_kl"], c["proxy"], "--", color="C1", alpha=0.8, label="proxy (reward model)" if i == 0 else None
            )
        ax.set_title(f"RM on {pairs} pairs, PPO --beta {beta}", fontsize=9)
        ax.set_xlabel("√ kl/ref (nats per reply, smoothed)")
        ax.set_ylabel("gold: reward/gold", color="C0")
        right.set_ylabel("proxy: reward/mean", color="C1")
        ax.grid(alpha=0.3)
        lines = ax.get_legend_handles_labels()[0] + right.get_legend_handles_labels()[0]
        ax.legend(lines, [line.get_label() for line in lines], fontsize=7, loc="lower right")
    fig.suptitle(f"gold and proxy against √KL, seeds {seeds} (one line per seed)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


@torch.no_grad()
def dpo_heldout_accuracy(run: Path, pairs_file: Path, seed: int, impl: str) -> float:
    """The share of held-out pairs on which DPO's implicit reward prefers the chosen reply:
    (log pi(c) - log pi_ref(c)) - (log pi(r) - log pi_ref(r)) > 0, pi the run's saved policy, pi_ref
    the starting policy (the tiny preset's, seeded as the run was)."""
    from rlhf_practice.config import DPOConfig, parse_config
    from rlhf_practice.course import load_impl
    from rlhf_practice.modeling import PolicyValueModel
    from rlhf_practice.preferences import PairData, read_pairs
    from rlhf_practice.tasks import build_task

    config = parse_config(DPOConfig, ["--preset", "tiny", "--seed", str(seed)])
    task = build_task(config)
    tokenizer = task.load_tokenizer()
    torch.manual_seed(seed)
    reference = task.load_policy(torch.device("cpu"))
    policy = PolicyValueModel.from_pretrained(str(run / "policy"))
    reply_logps = load_impl(impl).dpo.reply_logps
    data = PairData(read_pairs(pairs_file, "heldout pairs"), tokenizer, policy.max_length, str(pairs_file))
    right = 0
    for start in range(0, len(data), 64):
        batch = data.collate(list(range(start, min(start + 64, len(data)))))
        args = (batch.input_ids, batch.attention_mask, batch.prompt_lengths)
        ratio = reply_logps(policy.lm, *args) - reply_logps(reference.lm, *args)  # (2n,)
        chosen, rejected = ratio.chunk(2)
        right += int((chosen > rejected).sum())
    return right / len(data)


def rm_vs_dpo(seeds: list[int], impl: str, extra: list[str]) -> Table:
    """Run the comparison; return its table."""
    from rlhf_practice.tracking import final_mean, load_run

    figures: dict[str, list[dict[str, float]]] = {"reward model + PPO --level token": [], "DPO on the same pairs": []}
    for seed in seeds:
        with tempfile.TemporaryDirectory() as name:
            tmp = Path(name)
            print(f"reward model on {MANY} pairs, seed {seed} ...", file=sys.stderr, flush=True)
            rm = train_reward_model(tmp, "rm", seed, MANY, impl, [])
            record = json.loads((rm / "reward_model" / "reward_model.json").read_text())
            print("  PPO --level token against it ...", file=sys.stderr, flush=True)
            flags = ["--level", "token", "--num_steps", str(PPO_STEPS), "--reward_model", str(rm / "reward_model")]
            ppo = load_run(train_policy(tmp, "ppo", "ppo", seed, impl, [*flags, *extra]))
            figures["reward model + PPO --level token"].append(
                {
                    "held-out pair accuracy": record["heldout_accuracy"],
                    "final gold reward": final_mean(ppo.metrics["reward/gold"]),
                    "final kl/ref": final_mean(ppo.metrics["kl/ref"]),
                    "wall s": ppo.wall_seconds(),
                }
            )
            print("  DPO on its training pairs ...", file=sys.stderr, flush=True)
            folder = train_policy(
                tmp, "dpo", "dpo", seed, impl, ["--pairs_file", str(rm / "train_pairs.jsonl"), *extra]
            )
            dpo = load_run(folder)
            values = dpo.metrics["reward/mean"]  # fresh replies every eval_every steps: the gold reward
            kl = dpo.metrics["kl/ref"]
            figures["DPO on the same pairs"].append(
                {
                    "held-out pair accuracy": dpo_heldout_accuracy(folder, rm / "heldout_pairs.jsonl", seed, impl),
                    "final gold reward": sum(values[-2:]) / len(values[-2:]),
                    "final kl/ref": sum(kl[-2:]) / len(kl[-2:]),
                    "wall s": dpo.wall_seconds(),
                }
            )
            for label, rows in figures.items():
                print(f"  {label}: " + ", ".join(f"{k}: {v:.3g}" for k, v in rows[-1].items()), file=sys.stderr)
    return DPO_COLUMNS, [(label, [[f[c] for f in runs] for c in DPO_COLUMNS]) for label, runs in figures.items()]
