"""Compare training runs: their curves on one figure (PNG) and a Markdown table of the results.

    python -m rlhf_practice.compare runs/ppo-demo runs/grpo-demo
    python -m rlhf_practice.compare runs/clip0.1 runs/clip0.2 runs/clip0.3 --out clip.png
    python -m rlhf_practice.compare runs                     # every run folder inside runs/

Each argument is a run folder (one with a ``metrics.csv``) or a folder of run folders. The figure
shows ``reward/mean``, ``loss/policy``, ``kl/approx`` (PPO only) and ``response/length`` against the
step, lightly smoothed (``--smooth``). The table lists, per run: the algorithm, steps, final reward
(the mean of ``reward/mean`` over the last 10 % of steps), the step and the second at which
``reward/mean`` first reached ``--threshold`` (0.8), wall time and the final ``kl/approx``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rlhf_practice.tracking import Run, load_run

PANELS = [
    ("reward/mean", "reward/mean (higher is better)"),
    ("loss/policy", "loss/policy (not a progress score: watch reward/mean)"),
    ("kl/approx", "kl/approx = mean(old - new log-probs), PPO"),
    ("response/length", "response/length (tokens)"),
]


def find_runs(paths: list[Path]) -> list[Path]:
    """Run folders among ``paths``: each path itself if it holds metrics.csv, else its sub-folders that do."""
    found = []
    for path in paths:
        if (path / "metrics.csv").is_file():
            found.append(path)
        elif path.is_dir():
            found += sorted(p.parent for p in path.glob("*/metrics.csv"))
    return found


def smooth(values: list[float], weight: float) -> list[float]:
    """Exponential moving average, as TensorBoard's smoothing slider does (weight 0 = raw)."""
    out, last = [], None
    for v in values:
        last = v if last is None else weight * last + (1 - weight) * v
        out.append(last)
    return out


def markdown_table(runs: list[Run], threshold: float = 0.8) -> str:
    lines = [
        f"| run | algorithm | steps | final reward | steps to {threshold:g} | seconds to {threshold:g} "
        "| wall time (s) | final kl/approx |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for run in runs:
        kl = run.metrics.get("kl/approx")
        kl_text = f"{kl[-1]:.4f}" if kl else "n/a"
        reached = run.first_reaching(threshold)
        step_text, seconds_text = (str(reached[0]), f"{reached[1]:.1f}") if reached else ("never", "never")
        lines.append(
            f"| {run.name} | {run.algorithm} | {len(run.steps)} | {run.final('reward/mean'):.3f} | {step_text} "
            f"| {seconds_text} | {run.wall_seconds():.1f} | {kl_text} |"
        )
    return "\n".join(lines)


def plot(runs: list[Run], out: Path, weight: float) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only: works without a display
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    for ax, (tag, title) in zip(axes.flat, PANELS):
        for run in runs:
            if tag in run.metrics:
                ax.plot(run.steps, smooth(run.metrics[tag], weight), label=run.name)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=8)
        else:
            ax.text(0.5, 0.5, "not logged by these runs", ha="center", va="center", transform=ax.transAxes)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m rlhf_practice.compare",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("runs", nargs="+", type=Path, help="run folders, or folders that contain run folders")
    parser.add_argument("--out", type=Path, default=Path("compare.png"), help="where to save the figure")
    parser.add_argument("--smooth", type=float, default=0.6, help="EMA weight in [0, 1); 0 plots the raw values")
    parser.add_argument("--threshold", type=float, default=0.8, help="reward level for the 'steps/seconds to' columns")
    args = parser.parse_args(argv)
    if not 0 <= args.smooth < 1:
        parser.error(f"--smooth {args.smooth} must lie in [0, 1)")
    folders = find_runs(args.runs)
    if not folders:
        parser.error(f"no run folder (one with metrics.csv) in: {', '.join(map(str, args.runs))}")
    runs = [load_run(folder) for folder in folders]
    print(markdown_table(runs, args.threshold))
    plot(runs, args.out, args.smooth)
    print(f"\nfigure saved to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
