"""scripts/gpu_check.py where there is no GPU (not graded): its one-line refusal, its table, and how it
judges a run folder. Its checks themselves need CUDA (``--device cpu`` dry-runs them, in minutes)."""

from __future__ import annotations

import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from _runs import ROOT

from rlhf_practice.tracking import Run

GPU_CHECK = runpy.run_path(str(ROOT / "scripts/gpu_check.py"), run_name="gpu_check")
Check = GPU_CHECK["Check"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="it refuses only where CUDA is missing")
def test_without_cuda_it_says_so_in_one_line_and_exits_2(tmp_path: Path) -> None:
    """Run as the GPU machine runs it (no pip install -e: only the file's path), from another folder."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = tmp_path / "table.md"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts/gpu_check.py"), "--out", str(out)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == GPU_CHECK["NO_CUDA_EXIT"] == 2
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and "no CUDA device" in lines[0] and proc.stdout == ""
    assert out.read_text() == lines[0] + "\n", "--out holds the same line"


def test_table_has_one_row_per_check_and_a_total() -> None:
    checks = [
        Check("train_ppo.py", True, "3 steps, 12 s"),
        Check("fp32: static+graph = generate", False, "plain: tokens differ | at row 1", "the traceback"),
    ]
    lines = GPU_CHECK["format_table"](checks, 61.4).splitlines()
    assert lines[0].split("|")[1:4] == [" check                         ", " status ", " figure "]
    assert set(lines[1]) == {"|", "-"}
    assert lines[2].startswith("| train_ppo.py ") and lines[2].endswith("| ok     | 3 steps, 12 s |")
    assert "| FAIL   | plain: tokens differ \\| at row 1 |" in lines[3], "a | in a figure is escaped"
    bars = [[i for i, c in enumerate(line) if c == "|" and line[i - 1] != "\\"][:3] for line in lines[:4]]
    assert all(row == bars[0] for row in bars), "the first two columns align"
    assert lines[4:] == ["", "2 checks, 1 failed, 61 s"]
    report = GPU_CHECK["report"](checks)
    assert "## fp32: static+graph = generate\n\n```\nthe traceback\n```" in report and "## train_ppo.py" not in report


def test_exit_code_is_0_only_when_every_check_passed() -> None:
    exit_code = GPU_CHECK["exit_code"]
    assert exit_code([Check("a", True, ""), Check("b", True, "")]) == 0
    assert exit_code([Check("a", True, ""), Check("b", False, "")]) == 1
    assert exit_code([]) == 1, "no check at all is no success"


def _run(metrics: dict[str, list[float]], steps: int = 3, **summary: object) -> Run:
    summary = {"outcome": "finished", "decoding": "static", **summary}
    return Run("run", Path("run"), {"num_steps": steps}, summary, metrics, list(range(1, steps + 1)))


def test_a_run_folder_passes_with_finite_metrics_and_the_static_path() -> None:
    problems = GPU_CHECK["run_problems"]
    stderr = "ppo | device=cuda | run folder x\nsampling: static KV cache + CUDA graph\n"
    metrics = {"reward/mean": [0.1, 0.2, 0.3], "value/explained_variance": [float("nan")] * 3}
    assert problems(_run(metrics), 3, ("reward/mean",), stderr, "cuda") == [], "NaN explained variance is allowed"
    assert problems(_run(metrics), 3, (), "", "cpu") == [], "on a CPU no graph is asked for"

    broken = {"reward/mean": [0.1, float("inf"), 0.3], "loss/policy": [0.0, float("nan"), 0.0]}
    found = problems(_run(broken, decoding="hf"), 4, ("kl/ref",), "note: " + GPU_CHECK["GRAPH_FALLBACK"], "cuda")
    assert found == [
        "metrics.csv steps [1, 2, 3], expected 1..4",
        "no kl/ref in metrics.csv",
        "not finite: loss/policy, reward/mean",
        "decoding 'hf', not the static KV cache",
        "the run did not say device=cuda",
        "decoded without its CUDA graph",
    ]
