"""Compare training runs: their curves on one figure (PNG) and a Markdown table of the results.

    python -m rlhf_practice.compare runs/ppo-demo runs/grpo-demo
    python -m rlhf_practice.compare runs/clip0.1 runs/clip0.2 runs/clip0.3 --out clip.png
    python -m rlhf_practice.compare runs                     # every run folder inside runs/

Each argument is a run folder (one with a ``metrics.csv``) or a folder of run folders. The figure
draws against the step, lightly smoothed (``--smooth``), one panel per quantity in :data:`PANELS`
that at least one of the runs logged: ``reward/mean``, the verifiable tasks' ``accuracy/heldout``
(drawn unsmoothed at the steps it was evaluated), ``reward/format`` and ``reward/answer``, ``kl/ref`` (token level: KL to the frozen
reference, nats per reply), ``policy/entropy`` (nats per reply token), ``value/explained_variance``
(PPO's critic), ``response/length`` (tokens), then PPO's ``ppo/clip_frac`` and ``kl/k3`` (how far a
step's updates moved the policy from the one that sampled; log scale). These two count per reply at
the sequence level and per token at the token level, so each level gets its own panel: no axis
mixes two units. ``kl/approx`` and the losses are in TensorBoard.

The table lists, per run: algorithm, level, steps, final reward, the step and the second at which
``reward/mean`` first reached ``--threshold`` (0.8), final ``kl/ref``, final ``policy/entropy``,
final ``response/length`` and wall time; "final" is the mean over the last 10 % of steps. When some
run logs ``accuracy/heldout`` (``--task sort`` / ``add``), a column gives its final value (the mean of
the last 10 % of its evaluations: with the default 16 evaluations, the last one).
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path

from rlhf_practice.tracking import Run, load_run


@dataclass(frozen=True)
class Panel:
    """One axis of the figure: a tag, its title (with its unit), the level whose runs it draws
    (``None``: every run that logs the tag, the tag meaning the same at both levels), its y scale."""

    tag: str
    title: str
    level: str | None = None
    log: bool = False  # a log y-axis: a KL that spans orders of magnitude (checkpoint 2's unsafe runs reach 1e3)

    def draws(self, run: Run) -> bool:
        return self.tag in run.metrics and self.level in (None, run.level)


PANELS = [
    Panel("reward/mean", "reward/mean (higher is better)"),
    Panel("accuracy/heldout", "accuracy/heldout (sort, add): greedy exact match on held-out prompts"),
    Panel("reward/format", "reward/format (add): share of the answer tags in place"),
    Panel("reward/answer", "reward/answer (add): share of replies with the right sum"),
    Panel("kl/ref", "kl/ref: KL to the reference, nats per reply (token level)"),
    Panel("policy/entropy", "policy/entropy: nats per reply token"),
    Panel("value/explained_variance", "value/explained_variance (PPO): 1 = perfect critic, 0 = a constant"),
    Panel("response/length", "response/length (tokens)"),
    Panel("ppo/clip_frac", "ppo/clip_frac, sequence level: share of replies clipped", "sequence"),
    Panel("ppo/clip_frac", "ppo/clip_frac, token level: share of reply tokens clipped", "token"),
    Panel("kl/k3", "kl/k3: KL between old and new policy, sequence level: nats per reply", "sequence", log=True),
    Panel("kl/k3", "kl/k3: KL between old and new policy, token level: nats per token", "token", log=True),
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
    """Exponential moving average, as TensorBoard's smoothing slider does (weight 0 = raw). A NaN
    (``value/explained_variance`` on a step whose rewards were all equal) stays a gap in the curve
    and does not enter the average."""
    out: list[float] = []
    last = None
    for v in values:
        if math.isnan(v):
            out.append(v)
            continue
        last = v if last is None else weight * last + (1 - weight) * v
        out.append(last)
    return out


TABLE_TAGS = ("kl/ref", "policy/entropy", "response/length")  # the table's "final" columns: one unit at both levels


def markdown_table(runs: list[Run], threshold: float = 0.8) -> str:
    """One row per run; a "final accuracy/heldout" column (the last evaluations) when some run has it."""
    accuracy = any("accuracy/heldout" in run.metrics for run in runs)
    lines = [
        f"| run | algorithm | level | steps | final reward | {'final accuracy/heldout | ' * accuracy}steps to {threshold:g} "
        f"| seconds to {threshold:g} | final kl/ref (nats per reply) | final policy/entropy | final response/length "
        "| wall time (s) |",
        "|---|---|---|---:|---:|" + "---:|" * accuracy + "---:|---:|---:|---:|---:|---:|",
    ]
    for run in runs:
        final = {tag: f"{run.final(tag):.3g}" if tag in run.metrics else "n/a" for tag in TABLE_TAGS}
        reached = run.first_reaching(threshold)
        step_text, seconds_text = (str(reached[0]), f"{reached[1]:.1f}") if reached else ("never", "never")
        held = f"{run.final('accuracy/heldout'):.3f} | " if "accuracy/heldout" in run.metrics else "n/a | "
        lines.append(
            f"| {run.name} | {run.algorithm} | {run.level} | {len(run.steps)} | {run.final('reward/mean'):.3f} "
            f"| {held * accuracy}{step_text} | {seconds_text} | {' | '.join(final.values())} | {run.wall_seconds():.1f} |"
        )
    return "\n".join(lines)


def plot(runs: list[Run], out: Path, weight: float) -> list[Panel]:
    """Draw the panels that some run has data for; returns them. A run keeps its colour in every panel."""
    import matplotlib

    matplotlib.use("Agg")  # files only: works without a display
    import matplotlib.pyplot as plt

    panels = [panel for panel in PANELS if any(panel.draws(run) for run in runs)]
    columns = min(len(panels), 2 if len(panels) <= 4 else 3)
    rows = math.ceil(len(panels) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(5 * columns, 3.6 * rows), squeeze=False)
    for ax, panel in zip(axes.flat, panels):
        for i, run in enumerate(runs):
            if panel.draws(run):
                sparse = panel.tag in run.tag_steps  # a few evaluations (accuracy/heldout): drawn as they are
                steps, values = run.steps_of(panel.tag), smooth(run.metrics[panel.tag], 0 if sparse else weight)
                ax.plot(steps, values, color=f"C{i % 10}", label=run.name, marker="." if len(steps) < 40 else None)
        ax.set_title(panel.title, fontsize=9)
        if panel.log:
            ax.set_yscale("log")
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in axes.flat[len(panels) :]:
        fig.delaxes(ax)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return panels


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
    panels = plot(runs, args.out, args.smooth)
    drawn = ", ".join(p.tag if p.level is None else f"{p.tag} ({p.level} level)" for p in panels)
    print(f"\nfigure saved to {args.out}: {drawn}", file=sys.stderr)


if __name__ == "__main__":
    main()
