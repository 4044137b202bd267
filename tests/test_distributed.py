"""Data-parallel runs: 2 processes on the CPU (gloo), started with torchrun (not graded).

The tests that start processes are marked ``processes`` and left out of the default run: each starts
torchrun, and on 2 CPU cores two processes take several seconds just to import torch. Run them with

    pytest -m processes

(about a minute on 2 cores; with the implementation --impl names, once its functions are written).
Nothing here needs a GPU; nothing here checks one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from _runs import ROOT, SMALL, _metrics

from rlhf_practice.config import GRPOConfig, PPOConfig, TokenGRPOConfig
from rlhf_practice.errors import ConfigError
from rlhf_practice.modeling import load_tokenizer
from rlhf_practice.preferences import PairBatch, PairData
from rlhf_practice.training import check_process_count

TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
# One update of 2 processes against 1 on the same global batch. Sequence-level GRPO and PPO average
# per reply, and so does GRPO-clip's loss_type "grpo" (token mean per reply, then over replies):
# equal shards of replies make the mean of the 2 processes' losses, and DDP's mean of their
# gradients, the 1-process ones, up to float rounding (other sums in another order). Tolerances:
# 1e-5 for the metrics, lr / 10 for every parameter after the step (Adam's first step moves each
# parameter by about lr). Measured on this CPU: metrics equal to the last bit, parameters at most
# 1.6e-6 apart (lr 2e-4 and 1e-4), while a run whose processes skip DDP is 3e-4 apart.
METRIC_TOLERANCE = 1e-5


def _launch(*args: str, processes: int = 2, timeout: int = 120) -> subprocess.CompletedProcess:
    command = [*(TORCHRUN if processes == 2 else [sys.executable]), *args]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def _rows(batch: PairBatch) -> list[list[int]]:
    """The token ids of each row of a pairs batch without padding (chosen rows, then rejected)."""
    return [ids[mask > 0].tolist() for ids, mask in zip(batch.input_ids, batch.attention_mask)]


def test_pair_batches_split_over_processes() -> None:
    """DPO: each process's share of a pairs batch, in process order, is the 1-process batch."""
    pairs = [
        {
            "prompt": f"p{i}",
            "chosen": "a" * (i % 3 + 1),
            "rejected": "b",
            "chosen_ended": True,
            "rejected_ended": i % 2 == 0,
        }
        for i in range(10)
    ]
    data = PairData(pairs, load_tokenizer("tiny"), 64, "test")
    one = data.batches(4, seed=1)
    shares = [data.batches(4, 1, process_index=r, num_processes=2) for r in range(2)]
    for _ in range(4):  # past the end of a pass: topped up from the next
        whole, first, second = _rows(next(one)), _rows(next(shares[0])), _rows(next(shares[1]))
        assert first[:2] + second[:2] == whole[:4] and first[2:] + second[2:] == whole[4:]  # chosen, rejected


def test_batches_that_do_not_split_over_processes() -> None:
    check_process_count(GRPOConfig(train_batch_size=4), 2)
    with pytest.raises(ConfigError, match=r"^train_batch_size=6 does not split over 4 processes"):
        check_process_count(GRPOConfig(train_batch_size=6), 4)
    with pytest.raises(ConfigError, match=r"^ppo_num_minibatches=4 must divide the 2 replies"):
        check_process_count(PPOConfig(train_batch_size=4, ppo_num_minibatches=4), 2)
    check_process_count(TokenGRPOConfig(train_batch_size=2, grpo_group_size=4, grpo_num_minibatches=4), 2)


@pytest.fixture(scope="module")
def updates(tmp_path_factory: pytest.TempPathFactory, working_token_impl: str) -> dict[int, dict]:
    """The worker's results (tests/_ddp_worker.py) in 1 process and in 2."""
    folder = tmp_path_factory.mktemp("ddp")
    results = {}
    for processes in (1, 2):
        out = folder / f"{processes}.pt"
        done = _launch("tests/_ddp_worker.py", str(out), "--impl", working_token_impl, processes=processes)
        assert done.returncode == 0, done.stderr[-3000:]
        results[processes] = torch.load(out)
    return results


@pytest.mark.processes
@pytest.mark.timeout(240)
@pytest.mark.parametrize("case", ["grpo", "grpo_token", "ppo"])
def test_two_processes_update_like_one(updates: dict[int, dict], case: str) -> None:
    one, two = updates[1][case], updates[2][case]
    assert (one["processes"], two["processes"]) == (1, 2)
    # Means over each process's reply tokens, then over the processes: the 1-process value only when
    # the processes hold equally many tokens, which these replies do not (docs/GUIDE.md: per process).
    clip_tags = {"ppo/clip_frac", "clip_ratio/low_mean", "clip_ratio/high_mean", "clip_ratio/region_mean"}
    token_means = {"policy/entropy"} | (clip_tags if case == "grpo_token" else set())
    same = {tag: value for tag, value in one["metrics"].items() if tag not in token_means}
    assert "loss/policy" in same
    assert {tag: two["metrics"][tag] for tag in same} == pytest.approx(same, abs=METRIC_TOLERANCE)
    lr = one["learning_rate"]
    assert one["moved"] > lr / 2  # the update moved the parameters: the comparison below means something
    assert torch.allclose(two["params"], one["params"], rtol=0, atol=lr / 10), (
        f"largest difference {(two['params'] - one['params']).abs().max():.3g}"
    )


@pytest.mark.processes
@pytest.mark.timeout(120)
def test_torchrun_grpo_writes_one_run_folder(tmp_path: Path, working_impl: str) -> None:
    done = _launch(
        "train_grpo.py", *SMALL, "--impl", working_impl, "--num_steps", "4", "--train_batch_size", "4",
        "--run_dir", str(tmp_path),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    folders = list(tmp_path.iterdir())
    assert len(folders) == 1, folders
    assert [r["step"] for r in _metrics(folders[0])] == ["1", "2", "3", "4"]
    summary = json.loads((folders[0] / "summary.json").read_text())
    assert summary["processes"] == 2 and len(set(summary["process_seeds"])) == 2
    assert json.loads((folders[0] / "config.json").read_text())["processes"] == 2
    assert done.stderr.count("finished after 4 steps") == 1  # the main process reports


@pytest.mark.processes
@pytest.mark.timeout(120)
def test_batch_that_does_not_split_is_one_line(tmp_path: Path, working_impl: str) -> None:
    done = _launch(
        "train_grpo.py", *SMALL, "--impl", working_impl, "--train_batch_size", "3", "--run_dir", str(tmp_path)
    )
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert errors == ["error: train_batch_size=3 does not split over 2 processes; use a multiple of 2 "
                      "(each process takes an equal share of the prompts)."]  # fmt: skip
    assert not list(tmp_path.iterdir())


@pytest.mark.processes
@pytest.mark.timeout(240)
def test_dpo_sort_and_token_level_under_torchrun(tmp_path: Path, working_token_impl: str) -> None:
    """Smokes: DPO on sort (warm-up, held-out accuracy, pairs built by the main process and sent,
    --rounds 2) and PPO at the token level (whitening and KL over the gathered batch)."""
    pairs = tmp_path / "pairs"
    dpo = ["train_dpo.py", "--task", "sort", "--rounds", "2", "--num_steps", "2", "--train_batch_size", "4"]
    dpo += ["--pair_prompts", "16", "--pairs_dir", str(pairs), "--eval_every", "1", "--warmup_steps", "2"]
    ppo = ["train_ppo.py", *SMALL, "--level", "token", "--train_batch_size", "4", "--ppo_epochs", "1"]
    for name, args in (("dpo", dpo), ("ppo", ppo)):
        done = _launch(*args, "--impl", working_token_impl, "--run_dir", str(tmp_path), "--run_name", name)
        assert done.returncode == 0, done.stderr[-3000:]
        rows = _metrics(tmp_path / name)
        assert [r["step"] for r in rows] == ["1", "2"]
    assert rows[0]["kl/ref"] != ""
    dpo_rows = _metrics(tmp_path / "dpo")
    assert all(r["accuracy/heldout"] != "" for r in dpo_rows)
    assert (tmp_path / "dpo" / "pairs_round2.jsonl").is_file() and (tmp_path / "dpo" / "warmup.csv").is_file()
    shutil.rmtree(pairs)


@pytest.mark.processes
@pytest.mark.timeout(60)
def test_a_launched_process_leaves_with_its_exit_code_and_everything_flushed(tmp_path: Path) -> None:
    """Under a launcher (WORLD_SIZE > 1) run_main ends the process with os._exit, skipping the interpreter's
    finalization (where gloo's threads can abort it): the exit code is still the script's, what it printed
    without a newline still arrives, and a file it wrote is there."""
    script = (
        "import os, sys\n"
        "from rlhf_practice.errors import ConfigError\n"
        "from rlhf_practice.training import run_main\n"
        "def main():\n"
        "    print('unflushed', end='')\n"
        "    with open(sys.argv[2], 'w') as f:\n"
        "        f.write('written')\n"
        "    if sys.argv[1] == 'setting':\n"
        "        raise ConfigError('a bad setting')\n"
        "    if sys.argv[1] == 'exit':\n"
        "        sys.exit(5)\n"
        "run_main(main)\n"
        "print('not reached: run_main left the process')\n"
    )
    for case, code in (("finished", 0), ("setting", 2), ("exit", 5)):
        out = tmp_path / f"{case}.txt"
        done = subprocess.run(
            [sys.executable, "-c", script, case, str(out)],
            cwd=ROOT,
            env={**os.environ, "WORLD_SIZE": "2", "RANK": "0"},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == code, (case, done.stderr[-2000:])
        assert done.stdout == "unflushed" and out.read_text() == "written", case
        assert ("error: a bad setting" in done.stderr) == (case == "setting")
