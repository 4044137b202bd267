"""Compare training runs: their curves on one figure (PNG) and a Markdown table of the results.

    python -m rlhf_practice.compare runs/ppo-demo runs/grpo-demo
    python -m rlhf_practice.compare runs/clip0.1 runs/clip0.2 runs/clip0.3 --out clip.png
    python -m rlhf_practice.compare runs                     # every run folder inside runs/
    python -m rlhf_practice.compare runs/ppo runs/grpo runs/dpo --x time   # against seconds, not steps

Each argument is a run folder (one with a ``metrics.csv``) or a folder of run folders. The figure
draws against the step (``--x time``: against the seconds since the run started, ``time/elapsed_s``,
since a step is different work in each algorithm), lightly smoothed (``--smooth``), one panel per
quantity in :data:`PANELS` that at least one of the runs logged: ``reward/mean``, ``reward/gold`` (a
run against a learned reward model, task 13: the task's own reward beside the model's), the verifiable
tasks' ``accuracy/heldout``, ``reward/format`` and ``reward/answer``, ``kl/ref`` (every run:
KL to the frozen reference, nats per reply), DPO's ``rewards/margins``, ``rewards/accuracies`` and
``logps/chosen`` with ``logps/rejected`` (dashed) on its training pairs, ``policy/entropy`` (nats per
reply token), ``value/explained_variance``
(PPO's critic), ``response/length`` (tokens), then PPO's ``ppo/clip_frac`` and ``kl/k3`` (how far a
step's updates moved the policy from the one that sampled; log scale). These two count per reply at
the sequence level and per token at the token level, so each level gets its own panel: no axis
mixes two units. ``kl/approx`` and the losses are in TensorBoard.

The table lists, per run: algorithm (for train_grpo.py --level token, with the flags of :data:`METHOD_SETTINGS`
the run set: task 14's method, e.g. ``grpo --advantage rloo``), level, steps, final reward (``reward/mean``;
beside it ``reward/gold`` when some run trained against a learned reward model), the step and the second at which
the training reward ``reward/mean`` first reached ``--threshold`` (0.8: "steps to reward 0.8", not the held-out
accuracy), final ``kl/ref``, final ``policy/entropy``,
final ``response/length`` and wall time; "final" is the mean over the last 10 % of steps of the raw,
unsmoothed values (the figure is smoothed, so its curves end lower or higher than the table's
numbers when a metric is still moving). When some run logs ``accuracy/heldout`` (``--task sort`` /
``add``), a column gives the final held-out accuracy, the accuracy/heldout of the run's last
evaluation, which is its last step (tracking.final_heldout, as scripts/experiments.py). When some run is
DPO, columns give its final ``rewards/accuracies`` and ``rewards/margins`` and the seconds it spent
building preference pairs before its first step; a DPO row has no level ("–"), and its final
reward, ``kl/ref`` and length are those of its last evaluations.
"""

from __future__ import annotations

import argparse
import dataclasses
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
    dashed: str = ""  # a second tag drawn dashed in the run's colour (logps/rejected beside logps/chosen)

    def draws(self, run: Run) -> bool:
        return self.tag in run.metrics and self.level in (None, run.level)


PANELS = [
    Panel("reward/mean", "reward/mean (higher is better)"),
    Panel("reward/gold", "reward/gold (--reward_model): the task's own reward, which the update never sees"),
    Panel("accuracy/heldout", "accuracy/heldout (sort, add): greedy exact match on held-out prompts"),
    Panel("reward/format", "reward/format (add): share of the answer tags in place"),
    Panel("reward/answer", "reward/answer (add): share of replies with the right sum"),
    Panel("kl/ref", "kl/ref: KL to the reference, nats per reply"),
    Panel("rewards/margins", "rewards/margins (DPO): chosen minus rejected reward, training pairs"),
    Panel("rewards/accuracies", "rewards/accuracies (DPO): share of training pairs ranked right"),
    Panel("logps/chosen", "logps/chosen, logps/rejected dashed (DPO): nats per reply", dashed="logps/rejected"),
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
# train_grpo.py --level token's settings that tell task 14's methods apart (the algorithm column shows those set)
METHOD_SETTINGS = (
    "advantage",
    "loss_type",
    "importance_sampling_level",
    "grpo_clip_range",
    "grpo_clip_range_high",
    "dynamic_sampling",
)
DPO_TAGS = ("rewards/accuracies", "rewards/margins")  # the DPO columns' "final" values, on the training pairs


def _final(run: Run, tag: str, digits: str = ".3g") -> str:
    return f"{run.final(tag):{digits}}" if tag in run.metrics else "n/a"


def method(run: Run) -> str:
    """The run's algorithm and the settings that make it one of task 14's methods (train_grpo.py --level token),
    as the flags that set them: "grpo --advantage rloo", "grpo --loss_type cispo"; the algorithm alone otherwise."""
    from rlhf_practice.config import TokenGRPOConfig

    if run.algorithm != "grpo" or run.level != "token":
        return run.algorithm
    defaults = {f.name: f.default for f in dataclasses.fields(TokenGRPOConfig)}
    flags = []
    for name in METHOD_SETTINGS:
        value = run.config.get(name, defaults[name])
        if value != defaults[name]:
            flags.append(
                f"--{name}"
                if value is True
                else f"--{name} {value:g}"
                if isinstance(value, float)
                else f"--{name} {value}"
            )
    return " ".join([run.algorithm, *flags])


def markdown_table(runs: list[Run], threshold: float = 0.8) -> str:
    """One row per run, from the raw (unsmoothed) values; a "final reward/gold" column when some run trained
    against a learned reward (reward/mean is then the model's score), a "final accuracy/heldout" column (the
    last evaluation) when some run has it, DPO's columns (final rewards/accuracies and rewards/margins, seconds
    spent building pairs) when some run is DPO. The "to ``threshold``" columns read reward/mean."""
    gold = any("reward/gold" in run.metrics for run in runs)
    accuracy = any("accuracy/heldout" in run.metrics for run in runs)
    dpo = any(run.algorithm == "dpo" for run in runs)
    dpo_header = "final rewards/accuracies | final rewards/margins | pair building (s) | " * dpo
    lines = [
        f"| run | algorithm | level | steps | final reward | {'final reward/gold | ' * gold}"
        f"{'final accuracy/heldout | ' * accuracy}steps to reward {threshold:g} | seconds to reward {threshold:g} "
        f"| final kl/ref (nats per reply) | final policy/entropy | final response/length | {dpo_header}wall time (s) |",
        "|---|---|---|---:|---:|"
        + "---:|" * (gold + accuracy)
        + "---:|---:|---:|---:|---:|"
        + "---:|" * (3 * dpo)
        + "---:|",
    ]
    for run in runs:
        final = {tag: _final(run, tag) for tag in TABLE_TAGS}
        reached = run.first_reaching(threshold)
        step_text, seconds_text = (str(reached[0]), f"{reached[1]:.1f}") if reached else ("never", "never")
        gold_cell = f"{_final(run, 'reward/gold', '.3f')} | "
        held = f"{_final(run, 'accuracy/heldout', '.3f')} | "
        pairs = run.summary.get("pairs_s")
        dpo_cells = [_final(run, tag) for tag in DPO_TAGS] + ["n/a" if pairs is None else f"{pairs:.1f}"]
        level = "–" if run.algorithm == "dpo" else run.level
        lines.append(
            f"| {run.name} | {method(run)} | {level} | {len(run.steps)} | {run.final('reward/mean'):.3f} "
            f"| {gold_cell * gold}{held * accuracy}{step_text} | {seconds_text} | {' | '.join(final.values())} "
            f"| {''.join(c + ' | ' for c in dpo_cells) * dpo}{run.wall_seconds():.1f} |"
        )
    return "\n".join(lines)


def elapsed_at(run: Run, steps: list[int]) -> list[float]:
    """``time/elapsed_s`` at each of ``steps`` (NaN where timing.csv has no row for it)."""
    seconds = dict(zip(run.steps_of("time/elapsed_s"), run.metrics.get("time/elapsed_s", [])))
    return [seconds.get(step, math.nan) for step in steps]


def plot(runs: list[Run], out: Path, weight: float, x: str = "step") -> list[Panel]:
    """Draw the panels that some run has data for, against the step or (``x="time"``) the seconds
    since the run started; returns them. A run keeps its colour in every panel."""
    import matplotlib

    matplotlib.use("Agg")  # files only: works without a display
    import matplotlib.pyplot as plt

    panels = [panel for panel in PANELS if any(panel.draws(run) for run in runs)]
    columns = min(len(panels), 2 if len(panels) <= 4 else 3)
    rows = math.ceil(len(panels) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(5 * columns, 3.6 * rows), squeeze=False)
    for ax, panel in zip(axes.flat, panels):
        for i, run in enumerate(runs):
            if not panel.draws(run):
                continue
            for tag, style in ((panel.tag, "-"), (panel.dashed, "--")):
                if tag not in run.metrics:
                    continue
                sparse = tag in run.tag_steps  # a few evaluations (accuracy/heldout, DPO's samples): as they are
                steps, values = run.steps_of(tag), smooth(run.metrics[tag], 0 if sparse else weight)
                xs = elapsed_at(run, steps) if x == "time" else steps
                ax.plot(
                    xs,
                    values,
                    style,
                    color=f"C{i % 10}",
                    label=run.name if style == "-" else None,
                    marker="." if len(steps) < 40 else None,
                )
        ax.set_title(panel.title, fontsize=9)
        if panel.log:
            ax.set_yscale("log")
        ax.set_xlabel("seconds since the start (time/elapsed_s)" if x == "time" else "step")
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
    parser.add_argument(
        "--threshold", type=float, default=0.8, help="reward/mean level for the 'steps/seconds to reward' columns"
    )
    parser.add_argument(
        "--x", choices=("step", "time"), default="step", help="x-axis: the step, or seconds since the run started"
    )
    args = parser.parse_args(argv)
    if not 0 <= args.smooth < 1:
        parser.error(f"--smooth {args.smooth} must lie in [0, 1)")
    folders = find_runs(args.runs)
    if not folders:
        parser.error(f"no run folder (one with metrics.csv) in: {', '.join(map(str, args.runs))}")
    runs = [load_run(folder) for folder in folders]
    print(markdown_table(runs, args.threshold))
    print(
        f"\nfinal: the mean of the last 10 % of steps, raw values (the figure is smoothed, --smooth {args.smooth:g}; "
        "the table is not); final accuracy/heldout: the last evaluation."
    )
    panels = plot(runs, args.out, args.smooth, args.x)
    drawn = ", ".join(p.tag if p.level is None else f"{p.tag} ({p.level} level)" for p in panels)
    print(f"\nfigure saved to {args.out}: {drawn}", file=sys.stderr)


if __name__ == "__main__":
    main()
