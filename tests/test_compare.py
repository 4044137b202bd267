"""The run comparison tool (not graded), on hand-written run folders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rlhf_practice.compare import find_runs, main, plot, smooth
from rlhf_practice.modeling import Generation
from rlhf_practice.tracking import final_heldout, final_mean, load_run, mean_metrics, rollout_stats


def _fake_run(folder: Path, algorithm: str, rewards: list[float], level: str = "sequence") -> Path:
    """A run folder as the scripts write it: PPO logs kl/k3 and a critic; token level adds kl/ref."""
    folder.mkdir(parents=True)
    tags = ["reward/mean", "loss/policy", "policy/entropy", "response/length"]
    tags += ["kl/k3", "ppo/clip_frac", "value/explained_variance"] if algorithm == "ppo" else []
    tags += ["kl/ref"] if level == "token" else []
    rows = []
    for i, r in enumerate(rewards):
        other = {"kl/k3": 0.01 * (i + 1), "kl/ref": 0.5 * (i + 1), "value/explained_variance": float("nan")}
        rows.append(",".join([str(i + 1), str(r), *(str(other.get(t, 1.5)) for t in tags[1:])]))
    (folder / "metrics.csv").write_text("\n".join([",".join(["step", *tags]), *rows]) + "\n")
    timing = [f"{i + 1},2.0,{2.0 * (i + 1)}" for i in range(len(rewards))]
    (folder / "timing.csv").write_text("\n".join(["step,time/step_s,time/elapsed_s", *timing]) + "\n")
    (folder / "summary.json").write_text(json.dumps({"algorithm": algorithm, "wall_s": 12.5}))
    (folder / "config.json").write_text(json.dumps({"algorithm": algorithm, "level": level}))
    return folder


def test_table_and_figure(tmp_path: Path, capsys) -> None:
    _fake_run(tmp_path / "runs/ppo-a", "ppo", [0.0] * 10 + [0.5] * 9 + [0.9])
    _fake_run(tmp_path / "runs/grpo-b", "grpo", [0.1, 0.2, 0.3])
    out = tmp_path / "fig.png"
    main([str(tmp_path / "runs"), "--out", str(out), "--smooth", "0"])
    captured = capsys.readouterr()
    table = captured.out.splitlines()
    assert table[0] == (
        "| run | algorithm | level | steps | final reward | steps to reward 0.8 | seconds to reward 0.8 "
        "| final kl/ref (nats per reply) | final policy/entropy | final response/length | wall time (s) |"
    )
    assert "| grpo-b | grpo | sequence | 3 | 0.300 | never | never | n/a | 1.5 | 1.5 | 12.5 |" in table
    assert "| ppo-a | ppo | sequence | 20 | 0.700 | 20 | 40.0 | n/a | 1.5 | 1.5 | 12.5 |" in table
    assert "the table is not" in captured.out  # the caption says which of table and figure is smoothed
    assert out.read_bytes()[:4] == b"\x89PNG"
    # No kl/ref panel: no run has it. A NaN explained variance is a gap, not an empty panel.
    drawn = captured.err.split("figure saved to")[1]
    assert "kl/ref" not in drawn and "value/explained_variance" in drawn and "kl/k3 (sequence level)" in drawn
    main([str(tmp_path / "runs"), "--out", str(out), "--threshold", "0.25"])
    assert "| grpo-b | grpo | sequence | 3 | 0.300 | 3 | 6.0 | n/a | 1.5 | 1.5 | 12.5 |" in capsys.readouterr().out


def test_the_table_names_task_14_s_method_and_shows_the_gold(tmp_path: Path, capsys) -> None:
    """Task 14's runs differ only in their options: the algorithm column shows those set. A run against a learned
    reward logs the task's own reward as reward/gold: a column beside the proxy (reward/mean)."""
    options = {
        "plain": {},
        "rloo": {"advantage": "rloo"},
        "gspo": {"importance_sampling_level": "sequence", "grpo_clip_range": 3e-4, "grpo_clip_range_high": 4e-4},
        "dapo": {"grpo_clip_range_high": 0.28, "dynamic_sampling": True, "loss_type": "dapo"},
    }
    for name, settings in options.items():
        folder = _fake_run(tmp_path / "runs" / name, "grpo", [0.5, 0.9], level="token")
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**config, "advantage": "grpo", **settings}))
    gold = _fake_run(tmp_path / "runs" / "rm", "ppo", [1.0, 2.0], level="token")
    metrics = (gold / "metrics.csv").read_text().splitlines()
    rows = [metrics[0] + ",reward/gold", metrics[1] + ",0.25", metrics[2] + ",0.75"]
    (gold / "metrics.csv").write_text("\n".join(rows) + "\n")
    main([str(tmp_path / "runs"), "--out", str(tmp_path / "fig.png")])
    table = capsys.readouterr().out.splitlines()
    assert "| final reward | final reward/gold | steps to reward 0.8 |" in table[0]
    cells = {line.split(" | ")[0][2:]: line.split(" | ")[1:6] for line in table[2:] if line.startswith("| ")}
    assert cells["plain"][0] == "grpo" and cells["rloo"][0] == "grpo --advantage rloo"
    assert (
        cells["gspo"][0]
        == "grpo --importance_sampling_level sequence --grpo_clip_range 0.0003 --grpo_clip_range_high 0.0004"
    )
    assert cells["dapo"][0] == "grpo --loss_type dapo --grpo_clip_range_high 0.28 --dynamic_sampling"
    assert cells["rm"][0] == "ppo" and cells["rm"][3:5] == ["2.000", "0.750"], "the proxy, then the gold"
    assert cells["plain"][4] == "n/a", "no gold in a run against the task's own reward"


def test_panels_keep_units_apart(tmp_path: Path) -> None:
    """kl/k3 is per reply at the sequence level and per token at the token level: two panels.
    kl/ref (nats per reply) and policy/entropy (nats per token) mean the same in every run that logs
    them: one panel each. A panel only exists if some run has data for it."""
    runs = [
        load_run(_fake_run(tmp_path / "seq", "ppo", [0.1, 0.9])),
        load_run(_fake_run(tmp_path / "tok", "ppo", [0.2, 0.8], level="token")),
        load_run(_fake_run(tmp_path / "grpo", "grpo", [0.3, 0.4], level="token")),
    ]
    panels = plot(runs, tmp_path / "fig.png", 0.0)
    drawn = {(p.tag, p.level): [r.name for r in runs if p.draws(r)] for p in panels}
    assert drawn[("kl/k3", "sequence")] == ["seq"] and drawn[("kl/k3", "token")] == ["tok"]
    assert drawn[("kl/ref", None)] == ["tok", "grpo"] and drawn[("policy/entropy", None)] == ["seq", "tok", "grpo"]
    assert drawn[("value/explained_variance", None)] == ["seq", "tok"]
    assert all(names for names in drawn.values()), "an empty panel"
    only_grpo = plot(runs[2:], tmp_path / "fig.png", 0.0)
    assert [p.tag for p in only_grpo] == ["reward/mean", "kl/ref", "policy/entropy", "response/length"]


def test_find_and_load(tmp_path: Path) -> None:
    run = _fake_run(tmp_path / "r", "ppo", [0.2, 0.4])
    assert find_runs([run]) == [run] and find_runs([tmp_path]) == [run]
    loaded = load_run(run)
    assert loaded.steps == [1, 2] and loaded.metrics["reward/mean"] == [0.2, 0.4] and loaded.algorithm == "ppo"


def test_smooth() -> None:
    assert smooth([1.0, 0.0, 0.0], 0.5) == [1.0, 0.5, 0.25]
    assert smooth([1.0, 2.0], 0.0) == [1.0, 2.0]
    gap = smooth([1.0, float("nan"), 0.0], 0.5)  # a NaN step is a gap and leaves the average alone
    assert gap[0] == 1.0 and gap[1] != gap[1] and gap[2] == 0.5


def test_no_runs_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([str(tmp_path)])
    assert exit_.value.code == 2


def test_final_mean_is_the_last_tenth() -> None:
    assert final_mean([0.0] * 18 + [1.0, 3.0]) == 2.0 and final_mean([5.0]) == 5.0
    assert final_mean([]) != final_mean([])  # NaN


def test_final_heldout_is_the_last_evaluation(tmp_path: Path) -> None:
    """One definition of the final held-out accuracy, the last evaluation, whatever the number of evaluations."""
    evaluations = [0.3] + [0.1] * 20 + [0.5, 0.9]
    assert final_heldout(evaluations) == 0.9 and final_heldout([]) != final_heldout([])
    folder = _fake_run(tmp_path / "sort", "grpo", [0.5] * len(evaluations))
    rows = (folder / "metrics.csv").read_text().splitlines()
    rows = [rows[0] + ",accuracy/heldout", *(f"{row},{v}" for row, v in zip(rows[1:], evaluations))]
    (folder / "metrics.csv").write_text("\n".join(rows) + "\n")
    assert load_run(folder).final("accuracy/heldout") == 0.9


def test_metric_helpers() -> None:
    import torch

    stats = [{"a": torch.tensor(1.0), "b": torch.tensor(2.0)}, {"a": torch.tensor(3.0), "b": torch.tensor(2.0)}]
    assert {k: v.item() for k, v in mean_metrics(stats).items()} == {"a": 2.0, "b": 2.0}
    rewards = torch.tensor([1.0, 0.0, 0.5, 0.5])
    # Rows 0 and 1 are the same reply "5 EOS" (EOS = 0); they differ only after it. Row 3 repeats row 2.
    replies = torch.tensor([[5, 0, 7], [5, 0, 3], [5, 6, 4], [5, 6, 4]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]])
    generation = Generation(torch.cat([torch.ones(4, 2).long(), replies], 1), torch.ones(4, 5), mask, 2)
    out = rollout_stats(rewards, rewards - 0.5, generation.response_ids, generation.response_mask, group_size=2)
    assert out["response/length"].item() == 2.5 and out["adv/mean"].item() == 0.0
    assert out["response/distinct"].item() == 0.5  # two different replies among four
    generation.sequences[3, 4] = 9
    assert (
        rollout_stats(rewards, rewards, generation.response_ids, generation.response_mask)["response/distinct"].item()
        == 0.75
    )
    assert out["reward/group_std"].item() == pytest.approx((0.5**0.5 + 0.0) / 2)


def _fake_dpo_run(folder: Path, rewards: dict[int, float], steps: int) -> Path:
    """A DPO run folder: the pair figures every step, reward/mean, kl/ref and length only at the
    steps whose fresh samples were scored (``rewards``), empty cells elsewhere."""
    folder.mkdir(parents=True)
    pair_tags = ["loss/policy", "rewards/accuracies", "rewards/margins", "logps/chosen", "logps/rejected"]
    sample_tags = ["reward/mean", "kl/ref", "response/length"]
    rows = []
    for step in range(1, steps + 1):
        pair = [0.6, 0.5 + 0.05 * step, 0.1 * step, -20.0 - step, -20.0 - 2 * step]
        sample = [rewards[step], 0.2 * step, 9.0] if step in rewards else ["", "", ""]
        rows.append(",".join(map(str, [step, *pair, *sample])))
    (folder / "metrics.csv").write_text("\n".join([",".join(["step", *pair_tags, *sample_tags]), *rows]) + "\n")
    timing = [f"{i},0.5,{3.0 + 0.5 * i}" for i in range(1, steps + 1)]
    (folder / "timing.csv").write_text("\n".join(["step,time/step_s,time/elapsed_s", *timing]) + "\n")
    (folder / "summary.json").write_text(json.dumps({"algorithm": "dpo", "wall_s": 9.0, "pairs_s": 4.25}))
    (folder / "config.json").write_text(json.dumps({"algorithm": "dpo", "beta": 0.1}))
    return folder


def test_dpo_beside_ppo_and_grpo(tmp_path: Path, capsys) -> None:
    """A DPO run shares reward/mean and kl/ref with the RL runs, drawn at the steps it sampled; its
    own panels appear only when some run is DPO, and its table row has the DPO columns, no level."""
    _fake_run(tmp_path / "runs/grpo-b", "grpo", [0.1, 0.2, 0.3], level="token")
    _fake_dpo_run(tmp_path / "runs/dpo-c", {1: 0.1, 5: 0.5, 10: 0.9}, steps=10)
    out = tmp_path / "fig.png"
    main([str(tmp_path / "runs"), "--out", str(out), "--x", "time"])
    captured = capsys.readouterr()
    table = [line for line in captured.out.splitlines() if line.startswith("|")]  # the caption follows it
    assert table[0].endswith(
        "| final response/length | final rewards/accuracies | final rewards/margins | pair building (s) | wall time (s) |"
    )
    assert "| dpo-c | dpo | – | 10 | 0.900 | 10 | 8.0 | 2 | n/a | 9 | 1 | 1 | 4.2 | 9.0 |" in table
    assert "| grpo-b | grpo | token | 3 | 0.300 | never | never | 1.5 | 1.5 | 1.5 | n/a | n/a | n/a | 12.5 |" in table
    assert len({line.count("|") for line in table}) == 1  # every row has every column
    drawn = captured.err.split("figure saved to")[1]
    for tag in ("reward/mean", "kl/ref", "rewards/margins", "rewards/accuracies", "logps/chosen"):
        assert tag in drawn
    runs = [load_run(tmp_path / "runs/dpo-c"), load_run(tmp_path / "runs/grpo-b")]
    assert runs[0].steps_of("reward/mean") == [1, 5, 10]
    only_grpo = plot(runs[1:], out, 0.0, x="time")
    assert not any(p.tag.startswith(("rewards/", "logps/")) for p in only_grpo)
    with pytest.raises(SystemExit):
        main([str(tmp_path / "runs"), "--x", "wall"])
