"""train_reward_model.py end to end (not graded): two-step runs on the tiny preset, the folder it saves,
the pairs it splits, flips and reuses, and its one-line errors. The runs need a finished
rl/reward_model.py (task 13)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from _runs import ROOT, _metrics, run_script

from rlhf_practice.course import Impl
from rlhf_practice.errors import ConfigError
from rlhf_practice.preferences import read_pairs, split_pairs

# TRL RewardTrainer's names (trl/trainer/reward_trainer.py), and its evaluation's, eval_-prefixed.
TRL_TAGS = {"loss", "accuracy", "margin", "mean_reward", "min_reward", "max_reward", "num_tokens"}
EVAL_TAGS = {f"eval_{t}" for t in TRL_TAGS - {"num_tokens"}} | {"eval_gold_correlation"}
RECORD_KEYS = {
    "task",
    "score_mean",
    "score_std",
    "normalization_samples",
    "heldout_accuracy",
    "gold_correlation",
    "num_pairs",
    "label_noise",
    "num_layers",
    "reward",
    "seed",
    "command",
}


@pytest.fixture(scope="session")
def working_rm_impl(impl: Impl, working_impl: str) -> str:
    """--impl value for the runs: the implementation under test, once rl/reward_model.py (task 13) is done."""
    try:
        impl.check_implemented("reward_model")
    except (NotImplementedError, ConfigError):  # a stub, or a folder without reward_model.py
        pytest.skip("runs train_reward_model.py end to end: finish the functions of task 13 first")
    return working_impl


def _rm(tmp_path: Path, impl: str, *args: str, name: str = "run") -> tuple[int, Path]:
    code, _, run = run_script("rm", tmp_path, "--impl", impl, *args, name=name)
    return code, run


def _readme_table_names() -> set[str]:
    """Every name in the first column of README.md's tables (the tag table's TRL names have no slash)."""
    rows = [line for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines() if line.startswith("| `")]
    return {name for row in rows for name in re.findall(r"`([a-z_/0-9]+)`", row.split("|")[1])}


@pytest.mark.timeout(60)
def test_two_step_run_logs_trl_tags_and_saves_a_loadable_model(tmp_path: Path, capsys, working_rm_impl: str) -> None:
    from transformers import AutoModelForSequenceClassification

    code, run = _rm(tmp_path, working_rm_impl, "--eval_every", "5")
    err = capsys.readouterr().err
    assert code == 0, err
    assert "finished after 2 steps" in err and "pairs: built" in err
    rows = _metrics(run)
    assert [r["step"] for r in rows] == ["1", "2"]
    assert TRL_TAGS | EVAL_TAGS <= set(rows[0]), f"metrics.csv lacks {sorted(TRL_TAGS | EVAL_TAGS - set(rows[0]))}"
    assert all(rows[1][tag] != "" for tag in EVAL_TAGS), "the last step evaluates"
    undocumented = sorted(set(rows[0]) - {"step"} - _readme_table_names())
    assert not undocumented, f"README.md's tag table does not explain {undocumented}"
    assert float(rows[0]["eval_accuracy"]) <= 1 and -1 <= float(rows[0]["eval_gold_correlation"]) <= 1

    folder = run / "reward_model"
    model = AutoModelForSequenceClassification.from_pretrained(folder)
    assert type(model).__name__ == "GPT2ForSequenceClassification" and model.config.num_labels == 1
    assert model.config.pad_token_id is not None
    record = json.loads((folder / "reward_model.json").read_text())
    assert set(record) == RECORD_KEYS and record["task"] == "sentiment" and record["normalization_samples"] == 8
    assert record["score_std"] > 0 and record["label_noise"] == 0.0 and record["num_layers"] == 4
    assert not (run / "policy").exists(), "the policy is not trained here: nothing to save"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["outcome"] == "finished" and summary["pairs_s"] > 0

    train, heldout = read_pairs(run / "train_pairs.jsonl", "t"), read_pairs(run / "heldout_pairs.jsonl", "h")
    assert len(train) == record["num_pairs"] > 0 and len(heldout) >= 6
    assert not {p["prompt"] for p in train} & {p["prompt"] for p in heldout}, "held out by prompt"
    assert all(p["chosen_reward"] > p["rejected_reward"] for p in train + heldout), "no noise: the gold label"


@pytest.mark.timeout(90)
def test_built_pairs_are_reused_and_shared_with_dpo(tmp_path: Path, capsys, working_rm_impl: str) -> None:
    assert _rm(tmp_path, working_rm_impl, name="a")[0] == 0
    assert "pairs: built" in capsys.readouterr().err
    assert _rm(tmp_path, working_rm_impl, "--learning_rate", "1e-3", "--num_pairs", "5", name="b")[0] == 0
    err = capsys.readouterr().err
    assert "pairs: built" not in err and "read from" in err
    assert len(read_pairs(tmp_path / "b" / "train_pairs.jsonl", "t")) == 5
    assert len(list((tmp_path / "pairs").glob("*.jsonl"))) == 1


@pytest.mark.timeout(60)
def test_label_noise_flips_the_stated_share_of_training_pairs(tmp_path: Path, capsys, working_rm_impl: str) -> None:
    code, run = _rm(tmp_path, working_rm_impl, "--label_noise", "0.25")
    assert code == 0, capsys.readouterr().err
    train = [json.loads(line) for line in (run / "train_pairs.jsonl").read_text().splitlines()]
    flipped = [p for p in train if p["label_flipped"]]
    assert len(flipped) == round(0.25 * len(train)) > 0
    assert all(p["chosen_reward"] < p["rejected_reward"] for p in flipped)
    assert all(p["chosen_reward"] > p["rejected_reward"] for p in train if not p["label_flipped"])
    heldout = read_pairs(run / "heldout_pairs.jsonl", "h")
    assert all(p["chosen_reward"] > p["rejected_reward"] for p in heldout), "held-out pairs keep the gold label"


def test_split_is_by_prompt_and_seeded() -> None:
    pairs = [
        {"prompt": f"p{i // 3}", "chosen": "a", "rejected": "b", "chosen_reward": 1.0, "rejected_reward": 0.0}
        for i in range(30)
    ]
    train, heldout = split_pairs(pairs, 5, 0, 0.5, seed=0)
    assert len(heldout) == 6 and len(train) == 24, "whole prompts (3 pairs each) until at least 5 are held out"
    assert not {p["prompt"] for p in train} & {p["prompt"] for p in heldout}
    assert sum(p["label_flipped"] for p in train) == 12
    assert split_pairs(pairs, 5, 0, 0.5, seed=0) == (train, heldout)
    assert split_pairs(pairs, 5, 0, 0.5, seed=1) != (train, heldout)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("args", "files", "message"),
    [
        (["--pairs_file", "missing.jsonl"], {}, "error: pairs_file='missing.jsonl': no such file"),
        (["--pairs_file", "p.csv"], {"p.csv": "prompt,chosen\nHi, there\n"}, "row 1 has no column 'rejected'"),
        (["--label_noise", "0.5"], {}, "error: label_noise=0.5 must lie in [0, 0.5)"),
        (["--num_pairs", "100000"], {}, "error: num_pairs=100000: only"),
        (["--level", "token"], {}, "error: level='token': train_reward_model.py has only --level sequence"),
        (["--num_layers", "9"], {}, "error: num_layers=9 is more than the policy's 4 blocks; give 1 to 4"),
    ],
)
def test_bad_settings_are_one_line(tmp_path, capsys, monkeypatch, working_rm_impl, args, files, message) -> None:
    monkeypatch.chdir(tmp_path)
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    code, _ = _rm(tmp_path, working_rm_impl, *args)
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err, err


@pytest.mark.timeout(60)
def test_num_layers_keeps_the_policys_first_blocks(tmp_path: Path, capsys, working_rm_impl: str) -> None:
    """--num_layers 1 (task 15's reward models): the policy's embeddings and first block, trained, saved as a
    one-block GPT2ForSequenceClassification that loads as a reward model."""
    from transformers import AutoModelForSequenceClassification

    from rlhf_practice.learned_reward import check_reward_model

    code, run = _rm(tmp_path, working_rm_impl, "--num_layers", "1")
    assert code == 0, capsys.readouterr().err
    model = AutoModelForSequenceClassification.from_pretrained(run / "reward_model")
    assert model.config.n_layer == 1 and len(model.transformer.h) == 1
    assert json.loads((run / "reward_model" / "reward_model.json").read_text())["num_layers"] == 1
    assert check_reward_model(str(run / "reward_model"), "sentiment").config.n_layer == 1


@pytest.mark.timeout(90)
def test_gpt2_preset_path_on_a_local_copy(tmp_path: Path, capsys, working_rm_impl: str) -> None:
    """The gpt2 preset's loading code (a model folder by name, its tokenizer) on a local copy of the tiny policy."""
    from transformers import AutoModelForSequenceClassification

    from rlhf_practice.modeling import TINY_MODEL_DIR, PolicyValueModel, load_tokenizer

    local = tmp_path / "local_gpt2"
    PolicyValueModel.from_pretrained(str(TINY_MODEL_DIR), "cpu").lm.save_pretrained(local)
    load_tokenizer(str(TINY_MODEL_DIR)).save_pretrained(local)
    args = ["--preset", "gpt2", "--model.model_name", str(local), "--data.dataset_name", "tiny", "--device", "cpu"]
    code, run = _rm(tmp_path, working_rm_impl, *args, "--max_new_tokens", "6", "--data.max_samples", "256")
    err = capsys.readouterr().err
    assert code == 0, err
    assert json.loads((run / "config.json").read_text())["preset"] == "gpt2"
    model = AutoModelForSequenceClassification.from_pretrained(run / "reward_model")
    assert model.config.num_labels == 1 and model.config.n_layer == 4


@pytest.mark.timeout(60)
def test_help_lists_the_reward_model_settings(capsys) -> None:
    import runpy
    import sys

    old_argv, sys.argv = sys.argv, ["train_reward_model.py", "--help"]
    try:
        with pytest.raises(SystemExit):
            runpy.run_path(str(ROOT / "train_reward_model.py"), run_name="__main__")
    finally:
        sys.argv = old_argv
    out = capsys.readouterr().out
    flags = ["--num_pairs", "--label_noise", "--heldout_pairs", "--pairs_file", "--pair_prompts", "--pair_samples"]
    flags += ["--pair_mode", "--pairs_dir", "--center_rewards_coefficient", "--normalization_samples", "--num_steps"]
    missing = [f for f in flags if f not in out]
    assert not missing, f"--help lacks {missing}"


@pytest.mark.timeout(90)
def test_sort_task_starts_from_the_warmed_up_policy(tmp_path: Path, capsys, working_rm_impl: str) -> None:
    args = ["--task", "sort", "--warmup_steps", "2", "--pair_samples", "8", "--heldout_pairs", "4"]
    code, run = _rm(tmp_path, working_rm_impl, *args)
    err = capsys.readouterr().err
    assert code == 0, err
    assert (run / "warmup.csv").is_file() and list((tmp_path / "pairs").glob("sort-*.jsonl"))
    assert json.loads((run / "reward_model" / "reward_model.json").read_text())["task"] == "sort"


def test_a_launcher_is_refused_before_anything_is_made() -> None:
    from rlhf_practice.config import RewardModelConfig, preset_config
    from rlhf_practice.training import check_process_count

    config = preset_config(RewardModelConfig, "tiny")
    check_process_count(config, 1)
    with pytest.raises(ConfigError, match="train_reward_model.py runs in one process, not 2"):
        check_process_count(config, 2)
