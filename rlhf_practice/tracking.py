"""One run = one folder under ``runs/``: TensorBoard events, metrics.csv, samples, config, policy.

Files of a run folder:

- ``events.out.tfevents.*``: TensorBoard scalars (tags such as ``reward/mean``) and text samples;
- ``metrics.csv``: one row per step, the same scalars (deterministic on a CPU for a given seed);
- ``timing.csv``: ``time/step_s`` and ``time/elapsed_s`` per step (wall-clock, so never deterministic);
- ``samples.jsonl``: prompt, reply and reward of a few rollouts every ``sample_every`` steps;
- ``config.json``: the resolved configuration;
- ``summary.json``: written at the end (steps done, wall time, final reward, how the run ended);
- ``policy/``: the final policy and tokenizer, saved with ``save_pretrained``.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import time
from pathlib import Path

from torch.utils.tensorboard import SummaryWriter

TIME_TAGS = ("time/step_s", "time/elapsed_s")


class RunLogger:
    """Writes scalars and samples to TensorBoard and to plain files, flushing after every step."""

    def __init__(self, run_dir: Path, config: object):
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=False)
        (self.run_dir / "config.json").write_text(json.dumps(dataclasses.asdict(config), indent=2) + "\n")
        self.writer = SummaryWriter(log_dir=str(self.run_dir))
        self._files = {name: open(self.run_dir / name, "w", newline="") for name in ("metrics.csv", "timing.csv")}
        self._csv: dict[str, csv.DictWriter] = {}
        self._samples = open(self.run_dir / "samples.jsonl", "w", encoding="utf-8")
        self.start_time = time.time()

    def log_scalars(self, step: int, metrics: dict[str, float]) -> None:
        """Log one step's scalars; time tags go to timing.csv, the rest to metrics.csv."""
        for tag, value in metrics.items():
            self.writer.add_scalar(tag, value, step)
        self._write_row("metrics.csv", step, {k: v for k, v in metrics.items() if k not in TIME_TAGS})
        self._write_row("timing.csv", step, {k: v for k, v in metrics.items() if k in TIME_TAGS})
        self.flush()

    def _write_row(self, name: str, step: int, row: dict[str, float]) -> None:
        if name not in self._csv:
            self._csv[name] = csv.DictWriter(self._files[name], fieldnames=["step", *row])
            self._csv[name].writeheader()
        self._csv[name].writerow({"step": step, **{k: f"{v:.6g}" for k, v in row.items()}})

    def log_samples(self, step: int, prompts: list[str], replies: list[str], rewards: list[float]) -> None:
        """Log prompt/reply/reward triples to TensorBoard (as a Markdown table) and samples.jsonl."""
        rows = ["| prompt | reply | reward |", "|---|---|---|"]
        for prompt, reply, reward in zip(prompts, replies, rewards):
            cell = lambda s: s.replace("|", "\\|").replace("\n", " ")  # noqa: E731
            rows.append(f"| {cell(prompt)} | {cell(reply)} | {reward:+.2f} |")
            self._samples.write(json.dumps({"step": step, "prompt": prompt, "reply": reply, "reward": reward}) + "\n")
        self.writer.add_text("samples", "\n".join(rows), step)

    def write_summary(self, summary: dict) -> None:
        (self.run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")

    def flush(self) -> None:
        self.writer.flush()
        for f in self._files.values():
            f.flush()
        self._samples.flush()

    def close(self) -> None:
        self.flush()
        self.writer.close()
        for f in (*self._files.values(), self._samples):
            f.close()
