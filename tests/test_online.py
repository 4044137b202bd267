"""Online RLHF (task 16, rlhf_practice/online_labels.py), not graded: the settings and their one-line errors, and
short runs of train_ppo.py and train_grpo.py whose reward model is refreshed (labels counted, the detector logged,
the labelled pairs kept) or only audited (then the run is bit for bit the run without labels). The runs need
finished rl/reward_model.py and rl/online.py (tasks 13 and 16); the graded functions of task 16 have their own
cases and laws."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from _runs import _metrics, _not_done, run_script

from rlhf_practice.config import GRPOConfig, PPOConfig, TokenGRPOConfig, TokenPPOConfig, parse_config
from rlhf_practice.course import Impl
from rlhf_practice.errors import ConfigError
from rlhf_practice.training import check_process_count

TINY_ONLINE = ["--online.labels_per_refresh", "6", "--online.rm_steps", "2", "--online.rm_batch_size", "4"]


@pytest.fixture(scope="session")
def rm_run(tmp_path_factory: pytest.TempPathFactory, make_reward_model) -> Path:
    """A folder as train_reward_model.py leaves it: reward_model/ and the pairs it was trained on beside it."""
    folder = tmp_path_factory.mktemp("rm_run")
    make_reward_model(folder / "reward_model")
    pairs = [
        {"prompt": "The film", "chosen": " was great and fun.", "rejected": " was dull.", "chosen_ended": True,
         "rejected_ended": False},
        {"prompt": "A movie", "chosen": " I loved.", "rejected": " bad, bad.", "chosen_ended": False,
         "rejected_ended": True},
    ]  # fmt: skip
    (folder / "train_pairs.jsonl").write_text("".join(json.dumps(p) + "\n" for p in pairs))
    return folder


@pytest.fixture(scope="session")
def online_impl(impl: Impl, working_token_impl: str) -> str:
    why = _not_done(impl, ("reward_model", "online"))
    if why:
        pytest.skip(f"runs train_ppo.py with a refreshed --reward_model: finish tasks 13 and 16 first ({why})")
    return working_token_impl


def test_off_by_default_and_one_line_errors() -> None:
    for cls in (PPOConfig, TokenPPOConfig, GRPOConfig, TokenGRPOConfig):
        assert cls().online.refresh_every == 0
    with pytest.raises(ConfigError, match=r"online.refresh_every=5 refreshes a learned reward model"):
        parse_config(TokenPPOConfig, ["--preset", "tiny", "--level", "token", "--online.refresh_every", "5"]).validate()
    args = [
        "--preset",
        "tiny",
        "--reward_model",
        "a",
        "--online.refresh_every",
        "5",
        "--online.selection",
        "disagreement",
    ]
    with pytest.raises(ConfigError, match=r"online.selection='disagreement' needs an ensemble"):
        parse_config(GRPOConfig, args).validate()
    config = parse_config(PPOConfig, ["--preset", "tiny", "--reward_model", "a", "--online.refresh_every", "5"])
    with pytest.raises(ConfigError, match="runs in one process, not 2"):
        check_process_count(config, 2)


def test_a_refreshed_run_counts_its_labels_and_logs_the_detector(
    tmp_path: Path, capsys, online_impl: str, rm_run: Path
) -> None:
    args = ["--reward_model", str(rm_run / "reward_model"), "--num_steps", "4", "--online.refresh_every", "1"]
    args += ["--online.max_refreshes", "2", *TINY_ONLINE]
    code, _, run = run_script("ppo", tmp_path, "--impl", online_impl, "--level", "token", *args)
    err = capsys.readouterr().err
    assert code == 0, err
    rows = _metrics(run)
    assert [r["labels/online"] for r in rows] == ["0", "6", "12", "12"], "6 labels at the start of steps 2 and 3"
    assert [r["labels/total"] for r in rows] == ["0", "6", "12", "12"], "the made folder records no num_pairs"
    assert [r["online/proxy_accuracy"] != "" for r in rows] == [False, True, True, False]
    assert [r["online/label_ties"] != "" for r in rows] == [False, True, True, False]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["online"]["refreshes"] == 2 and summary["online"]["labels_online"] == 12
    assert err.count("refresh ") == 2 and "online: every 1 steps, at most 2 times" in err
    pairs = (run / "online_pairs.jsonl").read_text().splitlines() if (run / "online_pairs.jsonl").exists() else []
    ties = sum(float(r["online/label_ties"]) for r in rows[1:3])
    assert len(pairs) == round(12 - 6 * ties), "every labelled pair that was not a tie is kept"


def test_an_audit_trains_nothing_and_changes_nothing(tmp_path: Path, capsys, online_impl: str, rm_run: Path) -> None:
    base = ["--impl", online_impl, "--level", "token", "--reward_model", str(rm_run / "reward_model")]
    base += ["--num_steps", "3"]
    audit = ["--online.refresh_every", "1", *TINY_ONLINE, "--online.rm_steps", "0"]
    code_plain, _, plain = run_script("ppo", tmp_path, *base, name="plain")
    code_audit, _, audited = run_script("ppo", tmp_path, *base, *audit, name="audited")
    assert (code_plain, code_audit) == (0, 0), capsys.readouterr().err
    for row_plain, row_audit in zip(_metrics(plain), _metrics(audited)):
        assert {k: row_audit[k] for k in row_plain} == row_plain, "the labels' sampling draws none of the run's numbers"
    assert _metrics(audited)[-1]["labels/online"] == "12"
    assert "online/rm_loss" not in _metrics(audited)[-1]


def test_a_retrained_refresh_starts_a_new_model(tmp_path: Path, capsys, online_impl: str, rm_run: Path) -> None:
    base = ["--impl", online_impl, "--level", "token", "--reward_model", str(rm_run / "reward_model")]
    base += ["--num_steps", "2", "--seed", "1", "--online.refresh_every", "1", *TINY_ONLINE]
    base += ["--online.rm_learning_rate", "1e-9"]  # the made model's head is drawn with seed 0, a new one with 1
    code_on, _, trained_on = run_script("ppo", tmp_path, *base, name="trained_on")
    code_new, _, retrained = run_script("ppo", tmp_path, *base, "--online.retrain", name="retrained")
    err = capsys.readouterr().err
    assert (code_on, code_new) == (0, 0), err
    assert "the reward model trained anew from the starting policy, 2 steps on every pair so far" in err
    (first_on, second_on), (first_new, second_new) = _metrics(trained_on), _metrics(retrained)
    assert first_new == first_on, "the same run until the first refresh"
    # At a learning rate of 1e-9 the model trained on scores as before; the retrained one is a new head's.
    assert second_new["reward/mean"] != second_on["reward/mean"], "the refresh started from the starting policy"
    assert second_new["reward/gold"] == second_on["reward/gold"], "the same replies, scored by another model"


def test_replay_needs_the_models_pairs(tmp_path: Path, capsys, online_impl: str, rm_run: Path) -> None:
    lonely = tmp_path / "lonely"
    shutil.copytree(rm_run / "reward_model", lonely / "reward_model")
    args = ["--impl", online_impl, "--reward_model", str(lonely / "reward_model"), "--online.refresh_every", "1"]
    code, _, _ = run_script("grpo", tmp_path, *args, *TINY_ONLINE)
    err = capsys.readouterr().err
    assert code == 2 and "online.replay: " in err and "--online.no_replay" in err, err
    code, _, run = run_script("grpo", tmp_path, *args, *TINY_ONLINE, "--online.no_replay", name="new_only")
    assert code == 0, capsys.readouterr().err
    assert _metrics(run)[-1]["labels/online"] == "6"


@pytest.mark.slow  # a reward model and a PPO run as subprocesses, ~1-2 minutes: in .ci/run's slow line
@pytest.mark.timeout(600)
def test_the_online_experiment_prints_its_table(tmp_path: Path, capsys, monkeypatch, online_impl: str) -> None:
    """scripts/experiments.py online_rlhf end to end on one row of the grid's kind, shrunk to two steps and one refresh
    of 6 labels: the table with the labels and the detector, the figure, the run kept in --out."""
    from test_overoptimization import TINY, overoptimization
    from test_scripts import _run_cli

    gold, rm_flags, _ = overoptimization.GRIDS["online_rlhf"]
    row = "refresh every step, 6 labels"
    flags = ["--beta", "0", "--online.refresh_every", "1", "--online.labels_per_refresh", "6"]
    flags += ["--online.rm_steps", "2", "--online.rm_batch_size", "4"]
    monkeypatch.setitem(overoptimization.GRIDS, "online_rlhf", (gold, rm_flags, [(row, 64, flags)]))
    command = ("scripts/experiments.py", "online_rlhf", "--seeds", "0", "--impl", online_impl, "--out", str(tmp_path))
    code = _run_cli(*command, "--extra", *TINY)
    out = capsys.readouterr()
    assert code == 0, out.err
    header = next(line for line in out.out.splitlines() if line.startswith("| run |"))
    assert "labels trained on" in header and "detector, first" in header and "ends above static peak" in header
    (line,) = [line for line in out.out.splitlines() if line.startswith(f"| {row}")]
    cells = dict(zip(header.split(" | "), line.split(" | ")))
    assert cells["labels trained on"].split()[0] == str(64 + 6), cells  # the model's pairs and one refresh's labels
    assert cells["ends above static peak"].strip() == "–", "no static row in this table"
    (record,) = [json.loads(line) for line in (tmp_path / "online_rlhf.jsonl").read_text().splitlines()]
    assert record["refresh_steps"] == [2.0] and len(record["detector"]) == 1, record  # NaN where all 6 labels tied
    assert (tmp_path / "online_rlhf.png").is_file() and len(list((tmp_path / "runs").glob("*.json"))) == 1
