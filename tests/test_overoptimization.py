"""Task 15's experiments (scripts/best_of_n.py, scripts/overoptimization.py), not graded: the figures they read
off curves (Gao's fits, the bootstrap interval of a fall, "rose then fell"), and one tiny end-to-end run of
each that prints its table."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch
from _runs import ROOT
from test_scripts import _run_cli

from rlhf_practice.errors import ConfigError

sys.path.insert(0, str(ROOT / "scripts"))
import best_of_n  # noqa: E402
import overoptimization  # noqa: E402

# Flags of both train_reward_model.py and train_ppo.py: two steps, short replies (the figures mean nothing here;
# the plumbing is what is tested).
TINY = ["--num_steps", "2", "--train_batch_size", "4", "--max_new_tokens", "6", "--data.max_samples", "256"]
TINY += ["--device", "cpu"]


@pytest.mark.parametrize(("form", "alpha", "beta"), [("bon", 0.6, 0.15), ("rl", 0.3, 0.12)])
def test_gao_fits_recover_their_own_curves(form: str, alpha: float, beta: float) -> None:
    d = [0.0] + [0.1 * k for k in range(1, 60)]
    second = [x * x if form == "bon" else (x * math.log(x) if x > 0 else 0.0) for x in d]
    gain = [alpha * x - beta * s for x, s in zip(d, second)]
    fit = overoptimization.fit_gao(d, gain, form)
    assert fit["α"] == pytest.approx(alpha, abs=1e-9) and fit["β"] == pytest.approx(beta, abs=1e-9)
    assert fit["R²"] == pytest.approx(1.0, abs=1e-12)


def test_the_bootstrap_interval_of_a_fall() -> None:
    """A curve that falls on every prompt: the interval lies above 0; a flat one (noise only): it holds 0."""
    g = torch.Generator().manual_seed(0)
    n = torch.arange(1, 65, dtype=torch.float64)
    falling = (1 - ((n - 20) / 40) ** 2) + 0.05 * torch.randn(128, 64, generator=g, dtype=torch.float64)
    low, high = best_of_n.bootstrap_fall(falling, 19, torch.Generator().manual_seed(1))
    assert 0 < low < high
    flat = torch.randn(128, 64, generator=g, dtype=torch.float64)  # noise around 0: no fall from column 19
    low, high = best_of_n.bootstrap_fall(flat, 19, torch.Generator().manual_seed(1))
    assert low < 0 < high


def test_rose_then_fell_needs_a_third_of_the_rise_back_and_the_proxy_still_rising() -> None:
    steps = range(40)
    up_down = [min(s, 20) / 20 - max(0, s - 20) / 40 for s in steps]  # rises 1, falls 0.5
    curves = {"gold": up_down, "proxy": [s / 40 for s in steps], "sqrt_kl": [s / 10 for s in steps]}
    figures = overoptimization.overoptimization_figures(curves, 0.9)
    assert figures["step of peak"] == 21 and figures["rose then fell"] == 1.0
    assert figures["fall"] == pytest.approx(figures["gold peak"] - figures["gold at end"])
    flat_proxy = {**curves, "proxy": [min(s, 20) / 20 for s in steps]}  # the proxy stopped with the gold
    assert overoptimization.overoptimization_figures(flat_proxy, 0.9)["rose then fell"] == 0.0
    kept = {**curves, "gold": [min(s, 20) / 20 - max(0, s - 20) / 400 for s in steps]}  # gives back 5 %
    assert overoptimization.overoptimization_figures(kept, 0.9)["rose then fell"] == 0.0
    # falls by 0.8 while the proxy rises, then recovers once the proxy stops: the fall counts, the end shows it
    dip = [min(s, 20) / 20 - 0.8 * max(0, min(s, 30) - 20) / 10 + 0.7 * max(0, s - 30) / 9 for s in steps]
    recovering = {"gold": dip, "proxy": [min(s, 30) / 30 for s in steps], "sqrt_kl": curves["sqrt_kl"]}
    figures = overoptimization.overoptimization_figures(recovering, 0.9)
    assert figures["step of low"] == 31 and figures["gold low after peak"] == pytest.approx(0.2)
    assert figures["fall ÷ rise"] == pytest.approx(0.8 / 0.9) and figures["rose then fell"] == 1.0  # rise from step 3
    assert figures["gold at end"] > 0.75 and figures["fall"] < 0.25, "the end has recovered; the low still counts"


@pytest.mark.slow  # reward models and PPO runs as subprocesses, ~2 minutes: in .ci/run's slow line
def test_task_15_experiments_print_their_tables(
    tmp_path: Path, capsys, monkeypatch, working_token_impl: str, impl
) -> None:
    try:
        impl.check_implemented("best_of_n")
        impl.check_implemented("reward_model")
    except (NotImplementedError, ConfigError):
        pytest.skip("runs task 15's experiments: finish rl/reward_model.py and rl/best_of_n.py first")
    monkeypatch.setattr(best_of_n, "POOL_PROMPTS", 2)
    monkeypatch.setattr(best_of_n, "POOL_REPLIES", 8)
    monkeypatch.setattr(best_of_n, "POOL_CHUNK", 1)
    columns, rows = best_of_n.best_of_n([0], working_token_impl, TINY, tmp_path, ["RM on 64 pairs"], jobs=2)
    assert "fitted to the mean curve" in capsys.readouterr().out
    # the pool does not depend on how many processes sampled it: each chunk of prompts has its own seed
    pool, _ = best_of_n.sample_pool(tmp_path / "one_process", 1)
    two, _ = best_of_n.sample_pool(tmp_path, 2)  # read back from the run above
    assert all(torch.equal(pool[k], two[k]) for k in ("rows", "mask", "prompt_lengths", "index", "gold"))
    assert pool["replies"] == two["replies"]
    assert [label for label, _ in rows] == ["RM on 64 pairs"]
    assert all(len(values) == len(columns) and len(values[0]) == 1 for _, values in rows)
    assert (tmp_path / "best_of_n.png").is_file() and (tmp_path / "best_of_n.jsonl").is_file()
    figures = dict(zip(columns, (v[0] for v in rows[0][1])))
    assert 1 <= figures["n at peak"] <= 8 and figures["d at peak"] <= math.sqrt(math.log(8) - 7 / 8) + 1e-9
    # overoptimization through the command line, reusing the reward models kept in --out
    models = sorted(p.name for p in (tmp_path / "reward_models").iterdir())
    command = (
        "scripts/experiments.py", "overoptimization", "--seeds", "0", "--impl", working_token_impl,
        "--out", str(tmp_path), "--rows", "64 pairs", "--extra", *TINY,
    )  # fmt: skip
    code = _run_cli(*command)
    out = capsys.readouterr()
    assert code == 0, out.err
    assert "about" in out.err and "minutes on our 2-core machine" in out.err
    assert sorted(p.name for p in (tmp_path / "reward_models").iterdir()) == models, "the kept model was reused"
    header = next(line for line in out.out.splitlines() if line.startswith("| run |"))
    assert "rose then fell" in header and "R²" in header
    assert [line.split(" | ")[0] for line in out.out.splitlines() if line.startswith("| RM")] == [
        "| RM on 64 pairs, --beta 0"
    ]
    # the same command again: the PPO run is read from --out (runs/), not run or logged again
    table = [line for line in out.out.splitlines() if line.startswith("| RM")]
    code = _run_cli(*command)
    again = capsys.readouterr()
    assert code == 0, again.err
    assert [line for line in again.out.splitlines() if line.startswith("| RM")] == table
    kept = sorted(p.name for p in (tmp_path / "runs").iterdir())  # the run's figures and the replies it wrote
    assert len(kept) == 2 and kept[0].endswith(".json") and kept[1] == kept[0].replace(".json", ".samples.jsonl")
    assert "the replies each run wrote" in again.err and kept[1] in again.err
    assert len((tmp_path / "overoptimization.jsonl").read_text().splitlines()) == 1
