"""The run comparison tool (not graded), on hand-written run folders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlhf_practice.compare import find_runs, main, smooth
from rlhf_practice.modeling import Generation
from rlhf_practice.tracking import final_mean, load_run, mean_metrics, rollout_stats


def _fake_run(folder: Path, algorithm: str, rewards: list[float], kl: bool) -> Path:
    folder.mkdir(parents=True)
    header = "step,reward/mean,loss/policy,response/length" + (",kl/approx" if kl else "")
    rows = [f"{i + 1},{r},{-r / 10},12" + (f",{0.01 * (i + 1)}" if kl else "") for i, r in enumerate(rewards)]
    (folder / "metrics.csv").write_text("\n".join([header, *rows]) + "\n")
    timing = [f"{i + 1},2.0,{2.0 * (i + 1)}" for i in range(len(rewards))]
    (folder / "timing.csv").write_text("\n".join(["step,time/step_s,time/elapsed_s", *timing]) + "\n")
    (folder / "summary.json").write_text(json.dumps({"algorithm": algorithm, "wall_s": 12.5}))
    (folder / "config.json").write_text("{}")
    return folder


def test_table_and_figure(tmp_path: Path, capsys) -> None:
    _fake_run(tmp_path / "runs/ppo-a", "ppo", [0.0] * 10 + [0.5] * 9 + [0.9], kl=True)
    _fake_run(tmp_path / "runs/grpo-b", "grpo", [0.1, 0.2, 0.3], kl=False)
    out = tmp_path / "fig.png"
    main([str(tmp_path / "runs"), "--out", str(out), "--smooth", "0"])
    table = capsys.readouterr().out.splitlines()
    assert table[0] == (
        "| run | algorithm | steps | final reward | steps to 0.8 | seconds to 0.8 | wall time (s) | final kl/approx |"
    )
    assert "| grpo-b | grpo | 3 | 0.300 | never | never | 12.5 | n/a |" in table
    assert "| ppo-a | ppo | 20 | 0.700 | 20 | 40.0 | 12.5 | 0.2000 |" in table
    main([str(tmp_path / "runs"), "--out", str(out), "--threshold", "0.25"])
    assert "| grpo-b | grpo | 3 | 0.300 | 3 | 6.0 | 12.5 | n/a |" in capsys.readouterr().out
    assert out.read_bytes()[:4] == b"\x89PNG"


def test_find_and_load(tmp_path: Path) -> None:
    run = _fake_run(tmp_path / "r", "ppo", [0.2, 0.4], kl=True)
    assert find_runs([run]) == [run] and find_runs([tmp_path]) == [run]
    loaded = load_run(run)
    assert loaded.steps == [1, 2] and loaded.metrics["reward/mean"] == [0.2, 0.4] and loaded.algorithm == "ppo"


def test_smooth() -> None:
    assert smooth([1.0, 0.0, 0.0], 0.5) == [1.0, 0.5, 0.25]
    assert smooth([1.0, 2.0], 0.0) == [1.0, 2.0]


def test_no_runs_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([str(tmp_path)])
    assert exit_.value.code == 2


def test_final_mean_is_the_last_tenth() -> None:
    assert final_mean([0.0] * 18 + [1.0, 3.0]) == 2.0 and final_mean([5.0]) == 5.0
    assert final_mean([]) != final_mean([])  # NaN


def test_metric_helpers() -> None:
    import torch

    stats = [{"a": torch.tensor(1.0), "b": torch.tensor(2.0)}, {"a": torch.tensor(3.0), "b": torch.tensor(2.0)}]
    assert {k: v.item() for k, v in mean_metrics(stats).items()} == {"a": 2.0, "b": 2.0}
    rewards = torch.tensor([1.0, 0.0, 0.5, 0.5])
    # Rows 0 and 1 are the same reply "5 EOS" (EOS = 0); they differ only after it. Row 3 repeats row 2.
    replies = torch.tensor([[5, 0, 7], [5, 0, 3], [5, 6, 4], [5, 6, 4]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]])
    generation = Generation(torch.cat([torch.ones(4, 2).long(), replies], 1), torch.ones(4, 5), mask, 2)
    out = rollout_stats(rewards, rewards - 0.5, generation, group_size=2)
    assert out["response/length"].item() == 2.5 and out["adv/mean"].item() == 0.0
    assert out["response/distinct"].item() == 0.5  # two different replies among four
    generation.sequences[3, 4] = 9
    assert rollout_stats(rewards, rewards, generation)["response/distinct"].item() == 0.75
    assert out["reward/group_std"].item() == pytest.approx((0.5**0.5 + 0.0) / 2)
