"""train_ppo.py and train_grpo.py against a learned reward model (``--reward_model``, task 13), not graded:
two-step runs on the tiny preset at both levels, the proof that the task's reward (reward/gold) never
reaches the update, the rows a reward model reads, and the one-line errors of a bad folder. The runs
need a finished rl/reward_model.py (task 13); the reward-model folders are made without training
(the make_reward_model fixture of tests/conftest.py)."""

from __future__ import annotations

import inspect
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from _runs import _impl_folder, _metrics, _not_done, run_script
from test_scripts import _readme_tags

from rlhf_practice.config import DPOConfig, GRPOConfig, PPOConfig, TokenGRPOConfig, TokenPPOConfig, field_bound
from rlhf_practice.course import Impl
from rlhf_practice.errors import ConfigError, ImplementationError
from rlhf_practice.learned_reward import LearnedReward, RewardEnsemble, RewardModelFolder, pack_flush_left
from rlhf_practice.modeling import TINY_MODEL_DIR, Generation

RUNS = [("ppo", "sequence"), ("ppo", "token"), ("grpo", "sequence"), ("grpo", "token")]


@pytest.fixture(scope="session")
def working_rm_impl(impl: Impl, working_impl: str) -> str:
    """--impl value for the runs with --reward_model: the implementation under test, once rl/reward_model.py
    (task 13) is done."""
    why = _not_done(impl, ("reward_model",))  # a stub, a folder without reward_model.py, or one that raises
    if why:
        pytest.skip(
            f"runs train_ppo.py / train_grpo.py with --reward_model: finish the functions of task 13 first ({why})"
        )
    return working_impl


def _impl_for(request: pytest.FixtureRequest, level: str) -> str:
    impl = request.getfixturevalue("working_rm_impl")
    return request.getfixturevalue("working_token_impl") if level == "token" else impl


def _run(tmp_path: Path, algorithm: str, level: str, impl: str, *args: str, name: str = "run") -> tuple[int, Path]:
    code, _, run = run_script(algorithm, tmp_path, "--impl", impl, "--level", level, *args, name=name)
    return code, run


def test_the_setting_is_train_ppo_and_train_grpo_s_only() -> None:
    for cls in (PPOConfig, TokenPPOConfig, GRPOConfig, TokenGRPOConfig):
        assert cls().reward_model == "" and field_bound(cls, "reward_model") is not None
    assert "reward_model" not in {name for name in DPOConfig.__dataclass_fields__}, "DPO needs no reward"


def test_rows_are_packed_flush_left_with_the_eos_kept() -> None:
    eos, pad = 0, 1
    sequences = torch.tensor(
        [
            [pad, 5, 6, 7, eos, eos, eos],  # a short prompt, a reply that ended: its EOS is a real token
            [4, 5, 6, 8, 9, 10, 11],  # a full prompt, a reply cut at max_new_tokens (no EOS)
            [pad, pad, 6, eos, eos, eos, eos],  # a reply that is only its EOS
        ]
    )
    response_mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]], dtype=torch.float)
    prompt_mask = torch.tensor([[0, 1, 1], [1, 1, 1], [0, 0, 1]])
    attention_mask = torch.cat([prompt_mask, response_mask.long()], dim=1)
    generation = Generation(sequences, attention_mask, response_mask, prompt_length=3)
    before = sequences.clone()
    input_ids, mask, prompt_lengths = pack_flush_left(generation, pad)
    assert input_ids.tolist() == [
        [5, 6, 7, eos, pad, pad, pad],
        [4, 5, 6, 8, 9, 10, 11],
        [6, eos, pad, pad, pad, pad, pad],
    ]
    assert mask.tolist() == [[1, 1, 1, 1, 0, 0, 0], [1] * 7, [1, 1, 0, 0, 0, 0, 0]]
    assert prompt_lengths.tolist() == [2, 3, 1]
    assert torch.equal(generation.sequences, before), "the generation is not modified"
    # Only as wide as the longest row: the cut reply is gone, the rest is still flush left.
    input_ids, mask, _ = pack_flush_left(generation[torch.tensor([0, 2])], pad)
    assert input_ids.tolist() == [[5, 6, 7, eos], [6, eos, pad, pad]] and mask.sum(dim=1).tolist() == [4, 2]


def test_scores_are_normalised_by_reward_model_json() -> None:
    """reward = (score - score_mean) / score_std; get_reward sees the packed rows."""
    seen = {}

    def get_reward(model, input_ids, attention_mask, prompt_lengths):
        seen.update(input_ids=input_ids, attention_mask=attention_mask, prompt_lengths=prompt_lengths)
        return None, torch.tensor([3.0, 5.0]), None

    generation = Generation(
        torch.tensor([[1, 4, 5, 0], [3, 4, 6, 7]]),
        torch.tensor([[0, 1, 1, 0], [1, 1, 1, 1]]),
        torch.tensor([[1.0, 0.0], [1.0, 1.0]]),  # row 0: prompt 4, reply 5 (the 0 after it is no reply token)
        prompt_length=2,
    )
    folder = RewardModelFolder("rm", Path("rm"), None, (1.0, 2.0), {})
    rewards = LearnedReward(folder, None, pad_token_id=1).score(generation, SimpleNamespace(get_reward=get_reward))
    assert rewards.tolist() == [1.0, 2.0]
    assert seen["input_ids"].tolist() == [[4, 5, 1, 1], [3, 4, 6, 7]] and seen["prompt_lengths"].tolist() == [1, 2]
    raw = LearnedReward(RewardModelFolder("rm", Path("rm"), None, None, {}), None, 1)
    assert raw.score(generation, SimpleNamespace(get_reward=get_reward)).tolist() == [3.0, 5.0], "no json: raw scores"


@pytest.mark.timeout(240)
@pytest.mark.parametrize(("algorithm", "level"), RUNS)
def test_runs_log_the_proxy_and_the_gold_reward(
    tmp_path: Path, capsys, request, reward_model_dir: Path, algorithm: str, level: str
) -> None:
    code, run = _run(tmp_path, algorithm, level, _impl_for(request, level), "--reward_model", str(reward_model_dir))
    err = capsys.readouterr().err
    assert code == 0, err
    assert f"reward: the learned model in {reward_model_dir}" in err
    rows = _metrics(run)
    assert {"reward/mean", "reward/gold", "kl/ref"} <= set(rows[0])
    undocumented = sorted(set(rows[0]) - {"step"} - _readme_tags())
    assert not undocumented, f"README.md's tag table does not explain {undocumented}"
    assert all(float(r["reward/mean"]) != float(r["reward/gold"]) for r in rows), rows
    assert float(rows[0]["kl/ref"]) == 0 and float(rows[1]["kl/ref"]) > 0, "policy = reference at step 1, then moves"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["reward_model"]["folder"] == str(reward_model_dir) and summary["reward_model"]["task"] == "sentiment"


@pytest.mark.timeout(240)
@pytest.mark.parametrize(("algorithm", "level"), RUNS)
def test_the_update_never_sees_the_gold_reward(
    tmp_path: Path, capsys, request, make_reward_model, algorithm: str, level: str
) -> None:
    """A reward model that scores every reply 0: the update sees rewards that are all 0, so the advantages
    are 0 and the policy does not move (kl/ref stays 0 at step 2), while the task's reward (reward/gold)
    varies. Were the gold reward to reach the update, the policy would move. PPO's sequence level runs
    with --kl_coef 0: its kl/approx term moves the policy whatever the reward."""
    folder = make_reward_model(tmp_path / "zero", zero_head=True)
    extra = ["--kl_coef", "0"] if (algorithm, level) == ("ppo", "sequence") else []
    code, run = _run(tmp_path, algorithm, level, _impl_for(request, level), "--reward_model", str(folder), *extra)
    err = capsys.readouterr().err
    assert code == 0, err
    rows = _metrics(run)
    assert all(float(r["reward/mean"]) == 0 and float(r["reward/std"]) == 0 for r in rows)
    assert all(float(r["adv/std"]) == 0 for r in rows), "rewards all alike: no advantage anywhere"
    assert any(float(r["reward/gold"]) != 0 for r in rows), "the gold reward must vary for this test to mean something"
    assert float(rows[1]["kl/ref"]) == 0, "the policy moved: something other than the learned model's score got in"


def _config_only(folder: Path, **changes: object) -> None:
    """A folder with the tiny model's config.json, changed (no weights: the checks stop before them)."""
    folder.mkdir()
    config = json.loads((TINY_MODEL_DIR / "config.json").read_text())
    config.update(changes)
    (folder / "config.json").write_text(json.dumps(config))


def _bad_folder(tmp_path: Path, kind: str) -> str:
    folder = tmp_path / kind
    if kind == "missing":
        return str(folder)
    if kind == "file":
        folder.write_text("not a model")
    elif kind == "empty":
        folder.mkdir()
    elif kind == "policy":
        _config_only(folder, architectures=["GPT2LMHeadModel"])
    else:
        seq = {"architectures": ["GPT2ForSequenceClassification"], "id2label": {"0": "LABEL_0"}}
        if kind == "two_labels":
            seq["id2label"] = {"0": "LABEL_0", "1": "LABEL_1"}
        if kind == "vocabulary":
            seq["vocab_size"] = 100
        _config_only(folder, **seq)
        record = {"task": "sort" if kind == "task" else "sentiment", "score_mean": 0.0, "score_std": 1.0}
        if kind == "json":
            record = {"task": "sentiment"}
        (folder / "reward_model.json").write_text(json.dumps(record))
    return str(folder)


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("missing", "no such folder; give the folder train_reward_model.py wrote"),
        ("file", "is a file, not a folder; give the folder"),
        ("empty", "holds no config.json, so no saved model"),
        ("policy", "holds a GPT2LMHeadModel, not a sequence-classification model"),
        ("two_labels", "its head has 2 labels, a reward model has one score"),
        ("vocabulary", "its vocabulary (100 tokens) is not this run's tokenizer's"),
        ("task", "was trained for --task sort (reward_model.json), this run is --task sentiment"),
        ("json", "its reward_model.json could not be read (KeyError"),
        ("blank", "names a blank folder; give the folder train_reward_model.py wrote"),
    ],
)
def test_a_bad_reward_model_is_one_line(tmp_path: Path, capsys, working_rm_impl: str, kind: str, message: str) -> None:
    path = "  " if kind == "blank" else _bad_folder(tmp_path, kind)
    code, run = _run(tmp_path, "grpo", "sequence", working_rm_impl, "--reward_model", path)
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    (line,) = [line for line in err.splitlines() if line.startswith("error:")]
    assert line.startswith(f"error: reward_model={path!r}") and message in line, line
    assert not run.exists(), "nothing is written before the reward model is checked"


def test_a_missing_reward_model_json_is_a_note(tmp_path: Path, capsys, working_rm_impl: str, reward_model_dir) -> None:
    folder = tmp_path / "rm"
    shutil.copytree(reward_model_dir, folder)
    (folder / "reward_model.json").unlink()
    code, run = _run(tmp_path, "grpo", "sequence", working_rm_impl, "--reward_model", str(folder), "--num_steps", "1")
    err = capsys.readouterr().err
    assert code == 0, err
    assert "raw score (no reward_model.json: not normalised)" in err
    assert json.loads((run / "summary.json").read_text())["reward_model"] == {"folder": str(folder)}


def test_an_unfinished_get_reward_is_one_friendly_line(
    tmp_path: Path, capsys, impl: Impl, working_impl: str, reward_model_dir: Path
) -> None:
    sources = {f"{m}.py": inspect.getsource(impl.module(m)) for m in ("ppo", "grpo")}
    folder = _impl_folder(tmp_path / "stub_impl", sources, "")
    (folder / "reward_model.py").write_text(
        "def get_reward(*args, **kwargs):\n"
        '    raise NotImplementedError("get_reward is not implemented yet: see TASKS.md §13.2.")\n'
    )
    code, run = _run(tmp_path, "ppo", "sequence", str(folder), "--reward_model", str(reward_model_dir))
    err = capsys.readouterr().err
    assert code == 3 and not run.exists() and "Traceback" not in err, err
    line = next(line for line in err.splitlines() if line.startswith("error:"))
    assert "get_reward" in line and "TASKS.md §13.2" in line and "pytest -m graded" in line


# A get_reward with a mistake that raises: index sum(mask) without the - 1 (past the last column of a full row).
OFF_BY_ONE = """

def get_reward(model, input_ids, attention_mask, prompt_lengths):
    hidden = model.transformer(input_ids, attention_mask=attention_mask).last_hidden_state
    logits = model.score(hidden).squeeze(-1)
    lengths = attention_mask.sum(1)
    return logits, logits[torch.arange(len(logits)), lengths], lengths
"""
# One that passes the start-up's one-row probe and raises on a batch: the failure comes during training.
BATCH_ONLY = """

_right_get_reward = get_reward


def get_reward(model, input_ids, attention_mask, prompt_lengths):
    if len(input_ids) > 1:
        raise RuntimeError("The size of tensor a (8) must match the size of tensor b (7)")
    return _right_get_reward(model, input_ids, attention_mask, prompt_lengths)
"""


@pytest.mark.parametrize(("mistake", "when"), [(OFF_BY_ONE, "start-up"), (BATCH_ONLY, "step 1")])
def test_a_get_reward_that_raises_is_one_line(
    tmp_path: Path, capsys, impl: Impl, working_rm_impl: str, reward_model_dir: Path, mistake: str, when: str
) -> None:
    """The student's get_reward raising at start-up (the probe) or on the first replies: one line naming the
    function, the error, the line of reward_model.py it came from and the test to run; what was written stays."""
    sources = {f"{m}.py": inspect.getsource(impl.module(m)) for m in ("ppo", "grpo", "reward_model")}
    folder = _impl_folder(tmp_path / "impl", sources, "")
    (folder / "reward_model.py").write_text(sources["reward_model.py"] + mistake)
    code, run = _run(tmp_path, "ppo", "sequence", str(folder), "--reward_model", str(reward_model_dir))
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err, err
    (line,) = [line for line in err.splitlines() if line.startswith("error:")]
    error = "IndexError: index" if mistake == OFF_BY_ONE else "RuntimeError: The size of tensor a (8)"
    assert f"get_reward raised {error}" in line and f"{folder / 'reward_model.py'}, line " in line, line
    assert "pytest -m graded -k get_reward" in line and "TASKS.md §13.2" in line, line
    if when == "start-up":
        assert "on a tiny input at start-up" in line and not run.exists(), "stopped before anything was written"
    else:
        assert line.startswith("error: step 1: get_reward raised") and "scoring the replies with" in line, line
        assert json.loads((run / "summary.json").read_text())["outcome"] == "failed", "the run folder is kept"


def test_an_ensemble_combines_the_members_normalised_scores_with_ensemble_reward() -> None:
    """Task 15: each member's normalised score, stacked (k, N), goes through the implementation's
    ensemble_reward with the run's mode and coefficient; one model alone never calls it."""
    generation = Generation(
        torch.tensor([[4, 5, 0], [3, 6, 7]]), torch.tensor([[1, 1, 0], [1, 1, 1]]), torch.tensor([[1.0], [1.0]]), 2
    )
    raw = {"a": torch.tensor([3.0, 5.0]), "b": torch.tensor([1.0, 1.0])}
    reward_model = SimpleNamespace(get_reward=lambda model, *rows: (None, raw[model], None))
    calls = []

    def ensemble_reward(scores, mode, uncertainty_coef):
        calls.append((scores.tolist(), mode, uncertainty_coef))
        return scores.min(dim=0).values

    impl = SimpleNamespace(reward_model=reward_model, best_of_n=SimpleNamespace(ensemble_reward=ensemble_reward))
    members = [
        LearnedReward(RewardModelFolder("a", Path("a"), None, (1.0, 2.0), {}), "a", 1),
        LearnedReward(RewardModelFolder("b", Path("b"), None, (0.0, 0.5), {}), "b", 1),
    ]
    assert RewardEnsemble(members, "min", 0.3).score(generation, impl).tolist() == [1.0, 2.0]
    assert calls == [([[1.0, 2.0], [2.0, 2.0]], "min", 0.3)]
    assert RewardEnsemble(members[:1], "min", 0.3).score(generation, impl).tolist() == [1.0, 2.0]
    assert len(calls) == 1, "one model: its score as it is"


@pytest.mark.timeout(240)
def test_a_run_trains_against_an_ensemble(
    tmp_path: Path, capsys, impl: Impl, working_rm_impl: str, reward_model_dir: Path, make_reward_model
) -> None:
    """--reward_model a,b --reward_ensemble uwo: both models load, the start-up says how they combine, and
    summary.json records both (task 15)."""
    try:
        impl.check_implemented("best_of_n", ["ensemble_reward"])
    except (NotImplementedError, ConfigError, ImplementationError) as err:
        pytest.skip(f"trains against an ensemble: finish ensemble_reward (task 15) first ({err})")
    other = make_reward_model(tmp_path / "other")
    both = f"{reward_model_dir},{other}"
    code, run = _run(tmp_path, "ppo", "sequence", working_rm_impl, "--reward_model", both, "--reward_ensemble", "uwo")
    err = capsys.readouterr().err
    assert code == 0, err
    assert "reward: ensemble_reward of the 2 models above, mode 'uwo', uncertainty_coef 0.5" in err
    record = json.loads((run / "summary.json").read_text())["reward_model"]
    assert record["ensemble"] == "uwo" and [m["folder"] for m in record["models"]] == [
        str(reward_model_dir),
        str(other),
    ]
    assert {"reward/mean", "reward/gold"} <= set(_metrics(run)[0])


def test_an_unfinished_ensemble_reward_is_one_friendly_line(
    tmp_path: Path, capsys, impl: Impl, working_rm_impl: str, reward_model_dir: Path
) -> None:
    """Several --reward_model folders need ensemble_reward (task 15); unfinished, the run stops in one line
    before anything is loaded. One folder never opens best_of_n.py."""
    sources = {f"{m}.py": inspect.getsource(impl.module(m)) for m in ("ppo", "grpo", "reward_model")}
    folder = _impl_folder(tmp_path / "impl", sources, "")
    (folder / "reward_model.py").write_text(sources["reward_model.py"])
    (folder / "best_of_n.py").write_text(
        "def ensemble_reward(*args, **kwargs):\n"
        '    raise NotImplementedError("ensemble_reward is not implemented yet: see TASKS.md §15.5.")\n'
    )
    both = f"{reward_model_dir},{reward_model_dir}"
    code, run = _run(tmp_path, "ppo", "sequence", str(folder), "--reward_model", both, name="two")
    err = capsys.readouterr().err
    assert code == 3 and not run.exists() and "Traceback" not in err, err
    line = next(line for line in err.splitlines() if line.startswith("error:"))
    assert "ensemble_reward" in line and "TASKS.md §15.5" in line


def test_a_model_labelled_by_other_reward_settings_is_a_note() -> None:
    """reward_model.json's ``reward`` (the annotator's settings) against the run's: a note per difference,
    nothing when they agree or the record has none (a model trained before the field existed)."""
    labelled = {"sentiment_weight": 1.0, "praise_penalty_weight": 0.5}
    member = LearnedReward(RewardModelFolder("rm", Path("rm"), None, None, {"reward": labelled}), None, 1)
    ensemble = RewardEnsemble([member], "mean", 0.5)
    note = ensemble.describe({"sentiment_weight": 1.0, "praise_penalty_weight": 0.0}).splitlines()[-1]
    assert note.startswith("note: rm learned from pairs labelled with --reward.praise_penalty_weight 0.5;")
    assert "uses --reward.praise_penalty_weight 0.0" in note
    assert "note:" not in ensemble.describe(labelled)
    bare = RewardEnsemble([LearnedReward(RewardModelFolder("rm", Path("rm"), None, None, {}), None, 1)], "mean", 0.5)
    assert "note:" not in bare.describe({"praise_penalty_weight": 0.0})
