"""The verifiable tasks (task 11, not graded): ``--task sort`` and ``--task add``.

Their tokenizer, rewards on hand-worked replies, the held-out prompts, the defaults each task sets,
and two-step runs that write the tags TASKS.md §11 reads.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import torch
from _runs import run_script

from rlhf_practice.config import GRPOConfig, PPOConfig, parse_config, preset_config
from rlhf_practice.tasks import build_task
from rlhf_practice.tasks.verifiable import build_tokenizer


def _task(name: str):
    return build_task(preset_config(GRPOConfig, "tiny", name))


@pytest.mark.timeout(30)
def test_tokenizer_round_trip_with_left_padding() -> None:
    tokenizer = build_tokenizer()
    for text in ("3141:", "1134", "12+7=", "<answer>19</answer>"):
        ids = tokenizer(text).input_ids
        assert tokenizer.decode(ids) == text
    assert len(tokenizer("<answer>19</answer>").input_ids) == 4, "each answer tag is one token"
    batch = tokenizer(["1+2=", "12+34="], padding=True, return_tensors="pt")
    assert batch.attention_mask.tolist() == [[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]]
    assert batch.input_ids[0, 0] == tokenizer.pad_token_id != tokenizer.eos_token_id
    reply = tokenizer("1134").input_ids + [tokenizer.eos_token_id, tokenizer.pad_token_id]
    assert tokenizer.batch_decode([reply], skip_special_tokens=True) == ["1134"]


@pytest.mark.timeout(30)
def test_sort_reward_counts_right_positions() -> None:
    task = _task("sort")
    replies = ["1134", "1143", "4311", "11345", "113", "", "abcd"]
    expected = [1.0, 0.5, 0.0, 0.8, 0.75, 0.0, 0.0]  # "11345" does not stop: 4 right out of 5
    assert torch.allclose(task.reward(["3141:"] * len(replies), replies), torch.tensor(expected))
    assert task.solutions(["3141:", "9990:"]) == ["1134", "0999"]
    assert task.reward_parts(["3141:"], ["1134"]) == {}


@pytest.mark.timeout(30)
def test_add_reward_is_format_plus_answer() -> None:
    task = _task("add")
    cases = {  # reply to "12+7=": (format, answer)
        "<answer>19</answer>": (1.0, 1.0),
        "<answer>18</answer>": (1.0, 0.0),
        "<answer></answer>": (1.0, 0.0),
        "19": (0.0, 1.0),
        "<answer>19": (0.5, 1.0),
        "19</answer>": (0.5, 1.0),
        "</answer>19<answer>": (0.0, 1.0),
        "<answer>1+9</answer>": (1.0, 0.0),
        "": (0.0, 0.0),
    }
    prompts, replies = ["12+7="] * len(cases), list(cases)
    parts = task.reward_parts(prompts, replies)
    assert parts["reward/format"].tolist() == [f for f, _ in cases.values()]
    assert parts["reward/answer"].tolist() == [a for _, a in cases.values()]
    expected = torch.tensor([0.4 * f + a for f, a in cases.values()])
    assert torch.allclose(task.reward(prompts, replies), expected)
    assert task.solutions(["12+7=", "0+0="]) == ["<answer>19</answer>", "<answer>0</answer>"]


@pytest.mark.timeout(30)
@pytest.mark.parametrize("name", ["sort", "add"])
def test_heldout_prompts_are_fixed_and_never_trained_on(name: str) -> None:
    task = _task(name)
    heldout = task.heldout_prompts()
    assert len(heldout) == len(set(heldout)) == 256
    assert heldout == build_task(preset_config(GRPOConfig, "tiny", name)).heldout_prompts()
    tokenizer = task.load_tokenizer()
    for seed in (0, 1):
        batches = task.prompt_batches(tokenizer, 64, seed)
        seen = {p for _ in range(40) for p in next(batches)["prompt_text"]}
        assert not seen & set(heldout), "a held-out prompt was drawn for training"
    first, again = (next(task.prompt_batches(tokenizer, 8, seed=3)) for _ in range(2))
    assert torch.equal(first["input_ids"], again["input_ids"]) and first["prompt_text"] == again["prompt_text"]
    assert (first["attention_mask"][:, -1] == 1).all() and first["input_ids"].shape[1] <= task.max_prompt_length


@pytest.mark.timeout(30)
def test_task_defaults_switch_with_task_and_flags_override_them(capsys) -> None:
    sentiment = parse_config(GRPOConfig, ["--preset", "tiny"])
    sort = parse_config(GRPOConfig, ["--preset", "tiny", "--task", "sort"])
    add = parse_config(GRPOConfig, ["--preset", "tiny", "--task", "add"])
    assert (sentiment.num_steps, sentiment.grpo_group_size, sentiment.warmup_steps) == (80, 4, 0)
    assert (sort.num_steps, sort.grpo_group_size, sort.warmup_steps, sort.max_new_tokens) == (150, 8, 15, 5)
    assert (add.warmup_steps, add.max_new_tokens, add.learning_rate) == (0, 6, 3e-4)
    mine = parse_config(GRPOConfig, ["--task", "sort", "--preset", "tiny", "--num_steps", "7", "--warmup_steps", "0"])
    assert (mine.num_steps, mine.warmup_steps, mine.grpo_group_size) == (7, 0, 8)
    assert parse_config(PPOConfig, ["--preset", "tiny", "--task=sort"]).max_new_tokens == 5
    with pytest.raises(SystemExit):
        parse_config(GRPOConfig, ["--task", "sort", "--help"])
    assert "150" in capsys.readouterr().out


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.timeout(60)
def test_two_sort_steps_log_heldout_accuracy_and_the_warmup(tmp_path: Path, working_impl: str) -> None:
    code, _, run = run_script(
        "grpo", tmp_path, "--impl", working_impl, "--task", "sort", "--warmup_steps", "2", "--max_new_tokens", "5"
    )
    assert code == 0
    rows = _rows(run / "metrics.csv")
    assert [r["step"] for r in rows] == ["1", "2"] and all(0 <= float(r["accuracy/heldout"]) <= 1 for r in rows)
    assert [r["step"] for r in _rows(run / "warmup.csv")] == ["1", "2"]
    assert {"warmup/loss", "warmup/accuracy"} <= set(_rows(run / "warmup.csv")[0])
    assert (run / "policy" / "tokenizer.json").is_file()


@pytest.mark.timeout(60)
def test_two_add_steps_log_the_reward_parts(tmp_path: Path, working_impl: str) -> None:
    code, _, run = run_script("grpo", tmp_path, "--impl", working_impl, "--task", "add", "--eval_every", "5")
    assert code == 0
    rows = _rows(run / "metrics.csv")
    assert {"reward/format", "reward/answer", "accuracy/heldout"} <= set(rows[0])
    assert all(r["accuracy/heldout"] != "" for r in rows), "evaluated at step 1 and at the last step"
    assert not (run / "warmup.csv").exists(), "add has no warm-up by default"


@pytest.mark.timeout(30)
def test_unknown_task_and_warmup_without_solutions_are_one_line(tmp_path: Path, capsys, working_impl: str) -> None:
    code, _, _ = run_script("grpo", tmp_path / "runs", "--impl", working_impl, "--task", "sorting")
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert [line for line in err.splitlines() if line.startswith("error:")] == [
        'error: task=\'sorting\' is unknown; use "sentiment", "sort" or "add".'
    ]
    code, _, _ = run_script("grpo", tmp_path / "runs", "--impl", working_impl, "--warmup_steps", "3")
    err = capsys.readouterr().err
    assert code == 2 and "error: warmup_steps=3: the sentiment task has no correct replies" in err
    assert not (tmp_path / "runs").exists()
