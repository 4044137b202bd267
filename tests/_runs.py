"""Helpers of the end-to-end tests: run a training script in this process, read its metrics, and
make a patched copy of a working implementation."""

from __future__ import annotations

import csv
import runpy
import sys
from pathlib import Path

from rlhf_practice import PACKAGE_DIR
from rlhf_practice.course import Impl
from rlhf_practice.errors import ConfigError, ImplementationError

ROOT = PACKAGE_DIR.parent
SMALL = ["--preset", "tiny", "--device", "cpu", "--num_steps", "2", "--max_new_tokens", "6", "--sample_every", "1"]
# A run tokenizes its prompt set before the first step: all 12,000 reviews took most of a tiny run's second.
SMALL += ["--data.max_samples", "256"]
SIZES = {
    "ppo": ["--train_batch_size", "8", "--ppo_epochs", "2"],
    "grpo": ["--train_batch_size", "4"],
    "dpo": ["--train_batch_size", "4", "--pair_prompts", "16"],
    "rm": ["--train_batch_size", "4", "--pair_prompts", "24", "--heldout_pairs", "6", "--normalization_samples", "8"],
}
SCRIPT = {"ppo": "train_ppo.py", "grpo": "train_grpo.py", "dpo": "train_dpo.py", "rm": "train_reward_model.py"}


def run_script(algorithm: str, run_dir: Path, *args: str, name: str = "run") -> tuple[int, str, Path]:
    """Run the script of ``algorithm`` (:data:`SCRIPT`) in this process; returns (exit code, stderr, run folder)."""
    argv = [SCRIPT[algorithm], *SMALL, *SIZES[algorithm], "--run_dir", str(run_dir), "--run_name", name, *args]
    if (
        algorithm in ("dpo", "rm") and "--pairs_dir" not in args
    ):  # pairs built under run_dir, never in the repository's pairs/
        argv += ["--pairs_dir", str(run_dir / "pairs")]
    old_argv = sys.argv
    sys.argv = argv
    code = 0
    try:
        runpy.run_path(str(ROOT / SCRIPT[algorithm]), run_name="__main__")
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    finally:
        sys.argv = old_argv
    return code, "", run_dir / name


def _metrics(run: Path) -> list[dict[str, str]]:
    with open(run / "metrics.csv", newline="") as f:
        return list(csv.DictReader(f))


def _impl_folder(folder: Path, sources: dict[str, str], patch: str) -> Path:
    """A copy of a working implementation with ``patch`` appended to ppo.py (to inject failures)."""
    folder.mkdir()
    (folder / "ppo.py").write_text(sources["ppo.py"] + "\n" + patch)
    (folder / "grpo.py").write_text(sources["grpo.py"])
    return folder


def _not_done(impl: Impl, modules: tuple[str, ...]) -> str | None:
    """None when every graded function of ``modules`` runs on its tiny start-up input; else why not, in a few
    words for a skip message: unfinished (a stub, or a folder without the file), or the one line of a function
    that raises there (its tests say what is wrong: these end-to-end tests need it working)."""
    try:
        for module in modules:
            impl.check_implemented(module)
    except (NotImplementedError, ConfigError):  # a stub, or a folder without token_level.py
        return "unfinished"
    except ImplementationError as err:
        return f"unfinished: {err}"
    return None
