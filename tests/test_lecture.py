"""The lecture's model and training loop (rlhf_practice/lecture.py, task 10) and its experiment grid
(not graded). The runs use the implementation --impl names, once its rl/lecture.py is written."""

from __future__ import annotations

import inspect
import runpy
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from _runs import ROOT

from rlhf_practice.course import Impl
from rlhf_practice.lecture import (
    LectureConfig,
    Model,
    compute_log_probs,
    exact_sort_accuracy,
    generate_responses,
    heldout_prompts,
    main,
    run_policy_gradient,
    sample_prompts,
)
from rlhf_practice.training import run_main

# The lecture's ratio, log_probs / old_log_probs, in place of exp(log_probs - old_log_probs) (TASKS.md §10.3).
SLIP = """
def compute_loss(log_probs, deltas, mode, old_log_probs=None, clip_range=0.01):
    ratio = log_probs / (log_probs.detach() if old_log_probs is None else old_log_probs)
    return -(ratio * deltas.unsqueeze(-1)).mean()
"""
STUB = """
def sort_distance_reward(prompt, response):
    raise NotImplementedError("sort_distance_reward is not implemented yet: see TASKS.md §10.1.")
"""


def _run_module(*args: str) -> int:
    """``python -m rlhf_practice.lecture args``, in this process; returns its exit code."""
    try:
        run_main(lambda: main(list(args)))
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else 1
    return 0


def _lecture_folder(folder: Path, lecture_source: str, patch: str) -> Path:
    """An --impl folder: the student's ppo.py and grpo.py (only loaded), and ``lecture_source`` + ``patch``."""
    folder.mkdir()
    for module in ("ppo", "grpo"):
        (folder / f"{module}.py").write_text((ROOT / f"rlhf_practice/rl/{module}.py").read_text())
    (folder / "lecture.py").write_text(lecture_source + "\n" + patch)
    return folder


def test_model_and_sampling_shapes() -> None:
    torch.manual_seed(0)
    model = Model(vocab_size=5, embedding_dim=10, prompt_length=3, response_length=3)
    prompts = torch.tensor([[1, 0, 2], [3, 2, 4], [1, 2, 3], [1, 2, 4]])  # the lecture's prompts
    assert model(prompts).shape == (4, 3, 5)
    responses = generate_responses(prompts, model, trials=7)
    assert responses.shape == (4, 7, 3) and responses.dtype == torch.long
    assert 0 <= responses.min() and responses.max() < 5
    log_probs = compute_log_probs(prompts, responses, model)
    assert log_probs.shape == (4, 7, 3) and (log_probs <= 0).all()
    log_probs.sum().backward()
    assert model.encode_weights.grad is not None and model.decode_weights.grad.abs().sum() > 0


def test_log_probs_are_those_of_the_sampled_numbers() -> None:
    torch.manual_seed(0)
    model = Model(vocab_size=5, embedding_dim=10, prompt_length=3, response_length=3)
    prompts = torch.tensor([[4, 0, 2], [1, 1, 3]])
    with torch.no_grad():
        responses = generate_responses(prompts, model, trials=4000)  # [batch, trial, pos]
        log_probs = compute_log_probs(prompts, responses, model)
        table = F.log_softmax(model(prompts), dim=-1)  # [batch, pos, vocab]
    for b, t, p in [(0, 0, 0), (0, 17, 2), (1, 3999, 1), (1, 5, 0)]:
        assert log_probs[b, t, p] == table[b, p, responses[b, t, p]]
    # Each position is sampled from its own distribution: the frequencies follow exp(log-probs).
    frequencies = F.one_hot(responses, 5).float().mean(dim=1)  # [batch, pos, vocab]
    assert torch.allclose(frequencies, table.exp(), atol=0.03), (frequencies, table.exp())


def test_heldout_prompts_are_fixed_and_never_trained_on() -> None:
    config = LectureConfig(vocab_size=3, n=2, heldout_size=4, batch_size=64)  # 9 prompts, 4 held out
    heldout = heldout_prompts(config)
    assert heldout.shape == (4, 2) and len({tuple(p) for p in heldout.tolist()}) == 4
    assert torch.equal(heldout, heldout_prompts(LectureConfig(vocab_size=3, n=2, heldout_size=4, seed=7)))
    torch.manual_seed(0)
    seen = {tuple(p) for _ in range(20) for p in sample_prompts(config, heldout).tolist()}
    assert not seen & {tuple(p) for p in heldout.tolist()}, "a held-out prompt was drawn for training"
    assert len(seen) == 9 - 4, "every other prompt should be drawn"


def test_exact_sort_takes_the_most_likely_number_at_each_position() -> None:
    prompts = torch.tensor([[0, 2, 1], [1, 1, 3], [4, 0, 0], [0, 3, 4]])  # 2 of the 4 already sorted

    def sorter(prompts: torch.Tensor) -> torch.Tensor:  # logits [batch, pos, vocab] that favour the sorted prompt
        return F.one_hot(prompts.sort(dim=-1).values, 5).float() + 0.1

    def copier(prompts: torch.Tensor) -> torch.Tensor:  # favours the prompt as it is
        return F.one_hot(prompts, 5).float()

    assert exact_sort_accuracy(prompts, sorter) == 1.0 and exact_sort_accuracy(prompts, copier) == 0.5


def test_a_short_run_learns_to_sort_with_centered_rewards(impl: Impl, working_lecture_impl: str) -> None:
    """60 epochs (about half a second): centered rewards with the clipped loss sort a third of the
    held-out prompts or more; raw rewards almost none (the lecture's first two experiments)."""
    centered = run_policy_gradient(LectureConfig(epochs=60, seed=0), impl.lecture)
    raw = run_policy_gradient(LectureConfig(deltas="rewards", epochs=60, seed=0), impl.lecture)
    assert not centered.stopped and centered.epochs[-1] == 60 and len(centered.heldout) == 6
    assert centered.heldout[-1] >= 0.3 and raw.heldout[-1] <= 0.12, (centered.heldout, raw.heldout)


def test_the_lectures_ratio_stops_the_run_with_one_line(tmp_path: Path, capsys, impl: Impl, working_lecture_impl):
    folder = _lecture_folder(tmp_path / "slip", inspect.getsource(impl.lecture), SLIP)
    code = _run_module("--impl", str(folder), "--loss", "unclipped", "--epochs", "30")
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err, err
    assert err.startswith("error: the loss is nan at epoch ") and "(not finite)" in err and err.count("\n") == 1


def test_unfinished_stub_is_one_friendly_line(tmp_path: Path, capsys) -> None:
    folder = _lecture_folder(tmp_path / "stub", (ROOT / "rlhf_practice/rl/lecture.py").read_text(), STUB)
    code = _run_module("--impl", str(folder))
    out = capsys.readouterr()
    assert code == 3 and not out.out and "Traceback" not in out.err, out
    assert out.err.startswith("error: sort_distance_reward is not implemented yet: see TASKS.md §10.1.")
    assert out.err.count("\n") == 1


def test_lecture_experiment_prints_its_table_and_draws_its_curves(tmp_path: Path, capsys, working_lecture_impl) -> None:
    argv = ["experiments.py", "lecture", "--seeds", "0", "--impl", working_lecture_impl, "--out", str(tmp_path)]
    old_argv, sys.argv = sys.argv, [*argv, "--extra", "--epochs", "6", "--eval_every", "3"]
    try:
        runpy.run_path(str(ROOT / "scripts/experiments.py"), run_name="__main__")
    finally:
        sys.argv = old_argv
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("| run |"))
    assert "final held-out exact sort" in header and "epochs to 0.5" in header
    rows = [line for line in out.splitlines() if line.startswith(("| rewards + ", "| centered_rewards + "))]
    assert len(rows) == 4 and all(row.count("|") == header.count("|") for row in rows), out
    assert "| supervised" in out and (tmp_path / "lecture.png").stat().st_size > 10_000
