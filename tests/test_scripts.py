"""Two-step smoke runs of both training scripts, and their error paths (not graded).

The scripts run in-process (runpy) on the tiny preset and the CPU, with a working implementation
(the one --impl names, your rlhf_practice/rl/ by default, once its functions are written; see conftest.py).
"""

from __future__ import annotations

import csv
import json
import os
import re
import runpy
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from _runs import ROOT, SCRIPT, _impl_folder, _metrics, run_script

from rlhf_practice import compare
from rlhf_practice.modeling import PolicyValueModel, load_tokenizer

SHARED_TAGS = {"reward/mean", "reward/std", "loss/policy", "adv/mean", "response/length", "time/step_s"}
PPO_TAGS = SHARED_TAGS | {"loss/value", "loss/total_no_kl", "loss/total_with_kl", "kl/approx", "ppo/clip_frac"}


def _readme_tags() -> set[str]:
    """The tags README.md's tag table explains (first column of its rows; TRL's frac_reward_zero_std has no group)."""
    rows = [line for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines() if line.startswith("| `")]
    return {tag for row in rows for tag in re.findall(r"`([a-z_]+(?:/[a-z_0-9]+)?)`", row.split("|")[1])}


@pytest.mark.parametrize("algorithm", ["ppo", "grpo"])
def test_two_step_smoke_run(tmp_path: Path, algorithm: str, capsys, working_impl: str) -> None:
    code, _, run = run_script(algorithm, tmp_path, "--impl", working_impl)
    err = capsys.readouterr().err
    assert code == 0, err
    assert "finished after 2 steps" in err and "policy saved to" in err

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # see tests/test_layers.py

    events = EventAccumulator(str(run))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    required = PPO_TAGS if algorithm == "ppo" else SHARED_TAGS | {"reward/group_std"}
    assert required <= tags, f"missing TensorBoard tags: {sorted(required - tags)}"
    assert [e.step for e in events.Scalars("reward/mean")] == [1, 2]
    assert any(tag.startswith("samples") for tag in events.Tags()["tensors"])

    assert "custom_scalars__config__" in events.Tags()["tensors"], "the reward-first layout is missing"

    rows = _metrics(run)
    assert [r["step"] for r in rows] == ["1", "2"]
    with open(run / "timing.csv", newline="") as f:
        columns = set(rows[0]) | set(next(csv.reader(f)))
    undocumented = sorted(columns - {"step"} - _readme_tags())
    assert not undocumented, f"README.md's tag table does not explain {undocumented}"
    assert (required - {"time/step_s"}) <= set(rows[0]), "metrics.csv lacks columns"
    assert {"time/step_s", "time/generate_s", "time/score_s"} <= columns, "timing.csv lacks the phases of a step"
    nan_ok = {"value/explained_variance"}  # NaN on a step whose rewards were all equal, as in CleanRL
    assert all(float(v) == float(v) for r in rows for k, v in r.items() if k not in nan_ok), "NaN in metrics.csv"

    config = json.loads((run / "config.json").read_text())
    assert config["impl"] == working_impl and config["num_steps"] == 2 and config["preset"] == "tiny"
    samples = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    assert samples and {"step", "prompt", "reply", "reward"} <= set(samples[0])
    summary = json.loads((run / "summary.json").read_text())
    assert summary["outcome"] == "finished" and summary["steps"] == 2

    compare.main([str(tmp_path), "--out", str(tmp_path / "compare.png")])
    table = capsys.readouterr().out
    assert f"| run | {algorithm} | sequence | 2 |" in table and (tmp_path / "compare.png").stat().st_size > 10_000

    policy = PolicyValueModel.from_pretrained(str(run / "policy"))
    tokenizer = load_tokenizer(str(run / "policy"))
    assert policy.value_head.weight.shape[1] == policy.lm.config.hidden_size and tokenizer.eos_token


@pytest.mark.parametrize("algorithm", ["ppo", "grpo"])
def test_token_level_two_step_smoke_run(tmp_path: Path, algorithm: str, capsys, working_token_impl: str) -> None:
    extra = (
        ["--kl_target", "0.5", "--kl_horizon", "16"]
        if algorithm == "ppo"
        else ["--beta", "0", "--loss_type", "dr_grpo"]
    )
    code, _, run = run_script(algorithm, tmp_path, "--impl", working_token_impl, "--level", "token", *extra)
    err = capsys.readouterr().err
    assert code == 0, err
    assert "level=token" in err and "finished after 2 steps" in err

    rows = _metrics(run)
    assert [r["step"] for r in rows] == ["1", "2"]
    required = {"reward/mean", "loss/policy", "kl/ref", "ppo/clip_frac", "policy/entropy", "response/length"}
    if algorithm == "ppo":
        required |= {"loss/value", "loss/value_clipped_frac", "loss/total", "kl/beta", "value/explained_variance"}
    assert required <= set(rows[0]), f"metrics.csv lacks {sorted(required - set(rows[0]))}"
    undocumented = sorted(set(rows[0]) - {"step"} - _readme_tags())
    assert not undocumented, f"README.md's tag table does not explain {undocumented}"
    nan_ok = {"value/explained_variance"}
    assert all(float(v) == float(v) for r in rows for k, v in r.items() if k not in nan_ok), "NaN in metrics.csv"
    assert all(float(r["kl/ref"]) >= 0 for r in rows), "kl/ref is a sum of k3 terms: never negative"
    if algorithm == "ppo":  # step 1's KL to the reference is 0: error -1, clipped to -0.2; 8 replies, horizon 16
        assert [float(r["kl/beta"]) for r in rows] == pytest.approx([0.05, 0.05 * (1 - 0.2 * 8 / 16)])
    assert json.loads((run / "config.json").read_text())["level"] == "token"


def test_kl_controller_moves_beta_in_proportion_to_the_error() -> None:
    """beta * (1 + clip(KL / target - 1, -0.2, 0.2) * n / horizon), kept in [BETA_MIN, BETA_MAX]; target 0: fixed."""
    controller_class = runpy.run_path(str(ROOT / "train_ppo.py"), run_name="train_ppo")["KLController"]

    def beta_after(kl: float, n: int = 10, beta: float = 0.1, target: float = 2.0, horizon: int = 100) -> float:
        controller = controller_class(beta, target, horizon)
        controller.update(kl, n)
        return controller.beta

    assert beta_after(2.0) == pytest.approx(0.1), "KL on target: beta stays"
    assert beta_after(2.2) == pytest.approx(0.1 * (1 + 0.1 * 10 / 100)), (
        "10 % too much KL: beta grows by 0.1 * n / horizon"
    )
    assert beta_after(1.8) == pytest.approx(0.1 * (1 - 0.1 * 10 / 100)), "10 % too little KL: beta shrinks as much"
    assert beta_after(2.2, n=20) == pytest.approx(0.1 * (1 + 0.1 * 20 / 100)), "twice the replies: twice the move"
    assert beta_after(100.0) == pytest.approx(0.1 * (1 + 0.2 * 10 / 100)), "the error is clipped at +0.2"
    assert beta_after(0.0) == pytest.approx(0.1 * (1 - 0.2 * 10 / 100)), "the error is clipped at -0.2"
    low, high = controller_class.BETA_MIN, controller_class.BETA_MAX
    assert 0 < low < 0.05 < high
    assert beta_after(100.0, n=1000, horizon=1) == high, "beta never exceeds BETA_MAX"
    assert beta_after(0.0, n=1000, horizon=1) == low, "beta never falls below BETA_MIN (nor to 0 or below)"
    assert [beta_after(kl, target=0.0) for kl in (0.0, 1.0, 1e6)] == [0.1, 0.1, 0.1], "target 0 keeps beta fixed"


@pytest.mark.parametrize("algorithm", ["ppo", "grpo"])
def test_same_seed_same_metrics_on_cpu(tmp_path: Path, algorithm: str, working_impl: str) -> None:
    """The same seed twice gives the same metrics.csv; so does sampling with the static KV cache
    (--decoding static, the default path of GPT-2 models) instead of Hugging Face generate."""
    runs = [
        run_script(algorithm, tmp_path, "--impl", working_impl, "--seed", "3", "--decoding", decoding, name=f"r{i}")[2]
        for i, decoding in enumerate(["hf", "hf", "static"])
    ]
    first, second, static = (_metrics(run) for run in runs)
    assert first == second
    assert static == first, "--decoding static sampled other replies than --decoding hf"
    summaries = [json.loads((run / "summary.json").read_text()) for run in runs]
    assert [s["decoding"] for s in summaries] == ["hf", "hf", "static"] and summaries[2]["decode_capture_s"] == 0


STUB = 'def compute_advantages(*args, **kwargs):\n    raise NotImplementedError("compute_advantages is not implemented yet: see TASKS.md §1.2.")\n'


def test_unfinished_stub_is_one_friendly_line(tmp_path: Path, capsys) -> None:
    rl = {f"{m}.py": (ROOT / f"rlhf_practice/rl/{m}.py").read_text() for m in ("ppo", "grpo")}
    stub = _impl_folder(tmp_path / "stub_impl", rl, STUB)  # a stub, whether or not yours are finished
    # A model that cannot load: the stub must be reported first, before anything is loaded.
    code, _, run = run_script("ppo", tmp_path, "--impl", str(stub), "--model.model_name", str(tmp_path / "no_model"))
    err = capsys.readouterr().err
    assert code == 3 and not run.exists(), "no empty run folder should be left behind"
    assert "no such folder" not in err, "the stub check must come before loading the model"
    line = next(line for line in err.splitlines() if line.startswith("error:"))
    assert "compute_advantages" in line and "TASKS.md §1.2" in line and "pytest -m graded" in line
    assert "Traceback" not in err


FIRST_CHECKED = {"ppo": ("ppo.py", "compute_advantages"), "grpo": ("grpo.py", "compute_group_advantages")}
FIRST_CHECKED["dpo"] = ("dpo.py", "reply_logps")
FIRST_CHECKED["rm"] = ("reward_model.py", "get_reward")


@pytest.mark.parametrize("algorithm", ["ppo", "grpo", "dpo", "rm"])
def test_the_preset_line_comes_first_even_before_any_function_is_written(
    algorithm: str, tmp_path: Path, capsys
) -> None:
    """README: a script's first line names the preset; that holds when the stub check stops it."""
    folder = tmp_path / "stub_impl"
    folder.mkdir()
    for source in (ROOT / "rlhf_practice/rl").glob("[!_]*.py"):
        (folder / source.name).write_text(source.read_text())
    file, function = FIRST_CHECKED[algorithm]
    stub = f'def {function}(*args, **kwargs):\n    raise NotImplementedError("{function} is not implemented yet.")\n'
    (folder / file).write_text((folder / file).read_text() + "\n" + stub)
    argv = [SCRIPT[algorithm], "--impl", str(folder), "--run_dir", str(tmp_path / "runs")]
    old_argv, sys.argv = sys.argv, argv
    try:
        with pytest.raises(SystemExit) as exit_:
            runpy.run_path(str(ROOT / SCRIPT[algorithm]), run_name="__main__")
    finally:
        sys.argv = old_argv
    lines = capsys.readouterr().err.splitlines()
    assert exit_.value.code == 3 and lines[0].startswith("preset: "), lines[:2]
    assert function in lines[1]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--ppo_clip_range", "1.5"], "error: ppo_clip_range=1.5 must lie in (0, 1)"),
        (["--ppo_num_minibatches", "3"], "error: train_batch_size=8 must be divisible by ppo_num_minibatches (3)"),
        (["--impl", "nowhere"], "error: impl='nowhere' is neither"),
        (["--data.dataset_name", "missing.csv"], "no such file"),
    ],
)
def test_bad_setting_is_one_line(tmp_path: Path, capsys, args: list[str], message: str, working_impl: str) -> None:
    code, _, _ = run_script("ppo", tmp_path, "--impl", working_impl, *args)
    err = capsys.readouterr().err
    assert code in (1, 2) and message in err and "Traceback" not in err


def test_bad_group_size_is_one_line(tmp_path: Path, capsys, working_impl: str) -> None:
    code, _, _ = run_script("grpo", tmp_path, "--impl", working_impl, "--grpo_group_size", "1")
    err = capsys.readouterr().err
    assert code == 2 and "error: grpo_group_size=1 must be >= 2" in err


def _run_cli(script: str, *args: str) -> int:
    """Run ``script`` with ``args`` in this process, as ``python script args`` would; returns its exit code. The
    thread count a script sets (experiments.py pins it, --jobs) is this process's own again afterwards."""
    old_argv, sys.argv = sys.argv, [script, *args]
    threads, told = torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS")
    try:
        runpy.run_path(str(ROOT / script), run_name="__main__")
    except SystemExit as exit_:
        if isinstance(exit_.code, int):
            return exit_.code
        print(exit_.code, file=sys.stderr)  # sys.exit("message"), as Python prints it
        return 1
    finally:
        sys.argv = old_argv
        torch.set_num_threads(threads)
        if told is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = told
    return 0


def test_flag_of_wrong_type_is_reported_by_the_cli(capsys) -> None:
    code = _run_cli("train_ppo.py", "--train_batch_size", "many")
    out = capsys.readouterr()
    assert code == 2 and "train_batch_size" in out.out + out.err and "Traceback" not in out.out + out.err


def test_nan_loss_stops_with_one_line_and_keeps_the_logs(tmp_path: Path, capsys, working_sources) -> None:
    patch = (
        "_calls = []\n_clip_loss = ppo_clip_loss\n\n\n"
        "def ppo_clip_loss(*args):\n"
        "    _calls.append(1)  # call 1: the start-up check; 2-3: step 1 (2 epochs); 4: step 2\n"
        "    return _clip_loss(*args) * (float('nan') if len(_calls) > 3 else 1.0)\n"
    )
    impl = _impl_folder(tmp_path / "nan_impl", working_sources, patch)
    code, _, run = run_script("ppo", tmp_path, "--impl", str(impl))
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    assert "error: step 2: loss/total_with_kl is nan (not finite)" in err
    assert [r["step"] for r in _metrics(run)] == ["1"], "the step before the NaN must stay logged"
    assert json.loads((run / "summary.json").read_text())["outcome"] == "failed"


def test_ctrl_c_saves_the_policy_and_flushes(tmp_path: Path, capsys, working_sources) -> None:
    patch = (
        "_calls = []\n_clip_loss = ppo_clip_loss\n\n\n"
        "def ppo_clip_loss(*args):\n"
        "    _calls.append(1)  # call 1: the start-up check; 2-4: step 1 (2 epochs, then the logged loss)\n"
        "    if len(_calls) > 4:\n"
        "        raise KeyboardInterrupt\n"
        "    return _clip_loss(*args)\n"
    )
    impl = _impl_folder(tmp_path / "interrupt_impl", working_sources, patch)
    code, _, run = run_script("ppo", tmp_path, "--impl", str(impl), "--num_steps", "5")
    err = capsys.readouterr().err
    assert code == 0 and "interrupted (Ctrl-C) at step 2" in err and "policy saved to" in err
    assert [r["step"] for r in _metrics(run)] == ["1"]
    assert (run / "policy" / "value_head.pt").is_file()
    assert json.loads((run / "summary.json").read_text())["outcome"] == "interrupted"


@pytest.mark.parametrize("script", ["train_ppo.py", "train_grpo.py"])
def test_help_lists_every_setting(script: str, capsys) -> None:
    assert _run_cli(script, "--help") == 0
    out = capsys.readouterr().out
    flags = ["--impl", "--preset", "--model.model_name", "--data.dataset_name", "--train_batch_size"]
    flags += ["--max_new_tokens", "--temperature", "--learning_rate", "--seed", "--device", "--run_dir", "--num_steps"]
    flags += ["--ppo_clip_range", "--ppo_epochs", "--value_loss_coef", "--kl_coef"] if "ppo" in script else []
    flags += ["--grpo_group_size"] if "grpo" in script else []
    missing = [f for f in flags if f not in out]
    assert not missing, f"--help lacks {missing}"
    assert "default: 0.2" in out or "grpo" in script, "--help must show the defaults"


def test_too_long_replies_are_a_setting_error_before_the_run_folder(tmp_path: Path, capsys, working_impl) -> None:
    code, _, run = run_script("grpo", tmp_path, "--impl", working_impl, "--max_new_tokens", "100000")
    err = capsys.readouterr().err
    assert code == 2 and not run.exists() and "Traceback" not in err
    assert "error: max_new_tokens=100000 plus data.max_prompt_length=6 exceed the model's" in err


def test_unreachable_hub_fails_at_once_with_the_way_out(tmp_path: Path, capsys, monkeypatch, working_impl) -> None:
    """A hub that does not answer: one short knock, then offline mode and the one-line hint."""
    from huggingface_hub import constants

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")  # the discard port: nothing listens
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))  # an empty cache
    code, _, run = run_script(
        "ppo", tmp_path, "--impl", working_impl, "--model.model_name", "no-such-org/no-such-model"
    )
    err = capsys.readouterr().err
    assert "did not answer within 3 s; working offline" in err
    assert code == 2 and "Traceback" not in err and "--preset tiny" in err and "HF_ENDPOINT" in err
    assert "Retrying" not in err and not run.exists()


@pytest.mark.slow  # two subprocess runs, ~10 s: in .ci/run's slow line, out of the 2-minute default suite
def test_experiments_command_prints_its_table(capsys, working_token_impl: str) -> None:
    """scripts/experiments.py (the tables of TASKS.md's experiments), on two tiny steps per run; it
    starts each run as a subprocess, as a user would."""
    tiny = ["--num_steps", "2", "--train_batch_size", "8", "--max_new_tokens", "6", "--device", "cpu"]
    tiny += ["--data.max_samples", "256"]
    code = _run_cli("scripts/experiments.py", "kl_ref", "--seeds", "0", "--impl", working_token_impl, "--extra", *tiny)
    out = capsys.readouterr()
    assert code == 0, out.err
    header = next(line for line in out.out.splitlines() if line.startswith("| run |"))
    assert "final kl/ref" in header and "final response/distinct" in header, header
    rows = [line for line in out.out.splitlines() if line.startswith("| PPO token --beta")]
    assert len(rows) == 2 and all(row.count("|") == header.count("|") for row in rows), out.out


def _without_wall(table: str) -> list[str]:
    """The table's lines, each row without its last cell (wall s: seconds differ from run to run)."""
    return [re.sub(r"\| [^|]* \|$", "|", line) for line in table.splitlines() if line.startswith("|")]


@pytest.mark.slow  # 2 + 2 subprocess runs and 2 x 6 lecture runs, ~40 s: in .ci/run's slow line
def test_jobs_do_not_change_the_figures(
    capsys, monkeypatch, working_token_impl: str, working_lecture_impl: str
) -> None:
    """--jobs 2 (two runs at a time, in worker processes) prints the table of --jobs 1, bit for bit, at one thread:
    the subprocess runs, the KL measured after them in the worker, and the lecture's runs in the workers."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    tiny = ["--num_steps", "2", "--train_batch_size", "8", "--max_new_tokens", "6", "--device", "cpu"]
    tiny += ["--data.max_samples", "256"]
    commands = {
        "dpo_vs_rl": ["--rows", "PPO --level token", "--impl", working_token_impl, "--extra", *tiny],
        "lecture": [
            *("--rows", "rewards + naive", "centered_rewards + clipped", "--impl", working_lecture_impl),
            *("--extra", "--epochs", "3"),
        ],
    }
    for name, args in commands.items():
        tables = []
        for jobs in ("1", "2"):
            code = _run_cli("scripts/experiments.py", name, "--seeds", "0", "1", "--jobs", jobs, *args)
            out = capsys.readouterr()
            assert code == 0, out.err
            assert f"{jobs} at a time" in out.err
            tables.append(_without_wall(out.out))
        assert len(tables[0]) >= 3 and tables[0] == tables[1], name


def _experiments():
    """scripts/experiments.py as a module (it puts scripts/ on sys.path for its neighbours)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import experiments

    return experiments


def test_every_row_of_every_experiment_can_run_alone() -> None:
    """--rows with a row's whole label runs that row only, in every experiment (no label holds another)."""
    experiments = _experiments()
    names = [*experiments.EXPERIMENTS, *experiments.LECTURE, *experiments.REWARD_MODEL]
    for name in names:
        labels = experiments.experiment_rows(name)
        assert labels and experiments.pick_rows(name, []) == labels, name
        for label in labels:
            assert experiments.pick_rows(name, [label]) == [label], (name, label)
    # words of a label: whole words only ("--beta 0" is not the start of "--beta 0.1")
    assert experiments.pick_rows("overoptimization_sentiment", ["--beta 0"]) == [
        "RM on 16 pairs, PPO --beta 0",
        "RM on 1024 pairs, PPO --beta 0",
    ]
    assert experiments.pick_rows("overoptimization", ["64 pairs"]) == ["RM on 64 pairs, --beta 0"]
    assert experiments.pick_rows("levels", ["token"]) == ["PPO --level token"]
    assert experiments.pick_rows("rm_vs_dpo", ["DPO"]) == ["DPO on the same pairs"]


@pytest.mark.parametrize("name", ["overoptimization", "lecture", "rm_vs_dpo", "best_of_n", "clip"])
def test_a_row_that_is_not_there_is_one_line_before_any_run(capsys, tmp_path: Path, name: str) -> None:
    code = _run_cli("scripts/experiments.py", name, "--rows", "128 pairs", "--out", str(tmp_path), "--seeds", "0")
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    (line,) = err.strip().splitlines()
    assert line.startswith(f"error: rows: '128 pairs' names no row of {name}; its rows are "), line
    assert not list(tmp_path.iterdir()), "nothing ran"


def test_task_outside_estimators_is_one_line(capsys, tmp_path: Path) -> None:
    """--task says which task estimators compares on; any other experiment refuses it rather than ignore it."""
    code = _run_cli("scripts/experiments.py", "clip", "--task", "add", "--out", str(tmp_path))
    err = capsys.readouterr().err
    assert code == 2 and err.strip() == "error: --task is for estimators only; clip runs its own task (drop --task)."
    assert not list(tmp_path.iterdir()), "nothing ran"


def test_benchmark_of_an_unfinished_stub_is_the_scripts_one_line(tmp_path: Path) -> None:
    """A function not written yet stops the benchmark as it stops the scripts: one line, exit 3, no figures."""
    rl = {f"{m}.py": (ROOT / f"rlhf_practice/rl/{m}.py").read_text() for m in ("ppo", "grpo")}
    stub = _impl_folder(tmp_path / "stub_impl", rl, STUB)
    command = [sys.executable, "scripts/benchmark.py", "--impl", str(stub), "--seeds", "0", "1"]
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    errors = [line for line in proc.stderr.splitlines() if not line.startswith("running ")]
    assert proc.returncode == 3 and not proc.stdout, (proc.returncode, proc.stdout)
    assert len(errors) == 1 and errors[0].startswith("error: compute_advantages is not implemented yet"), errors
    assert "TASKS.md §1.2" in errors[0] and proc.stderr.count("running ") == 1, "the first run stops the benchmark"


def test_experiment_figures_divide_the_reward_by_its_weight(tmp_path: Path) -> None:
    """Checkpoint 1's experiment compares runs whose reward was scaled by --reward.sentiment_weight."""
    experiments = runpy.run_path(str(ROOT / "scripts/experiments.py"), run_name="experiments")
    (tmp_path / "metrics.csv").write_text("step,reward/mean\n1,0.01\n2,0.09\n")
    (tmp_path / "samples.jsonl").write_text("")
    flags = ["--reward.sentiment_weight", "0.1", "--no_normalize_advantages"]
    assert experiments["reward_weight"](flags) == 0.1 and experiments["reward_weight"]([]) == 1.0
    figures = experiments["figures"](tmp_path, flags)
    assert figures["steps to 0.8·weight"] == 2 and figures["steps to 0.8"] is None
    assert figures["final reward ÷ weight"] == pytest.approx(0.9)
    cell = experiments["_cell"]
    assert cell([None, None], reach=True) == "never" and cell([None], reach=False) == "–"
    assert cell([3.0, None, 5.0], reach=True) == "5 [3, 5] (1 never)"


def test_experiment_figures_of_a_dpo_run(tmp_path: Path) -> None:
    """Task 12's columns: reward/mean only at the evaluations, pair building from summary.json (left
    out of the wall time), the pair figures of every step."""
    experiments = runpy.run_path(str(ROOT / "scripts/experiments.py"), run_name="experiments")
    rows = ["step,logps/chosen,logps/rejected,rewards/margins,reward/mean,kl/ref"]
    rows += [
        f"{i},{-10 - i},{-10 - 2 * i},{0.1 * i},{'' if i % 5 else 0.1 * i},{'' if i % 5 else i}" for i in range(1, 21)
    ]
    (tmp_path / "metrics.csv").write_text("\n".join(rows) + "\n")
    (tmp_path / "samples.jsonl").write_text("")
    (tmp_path / "summary.json").write_text(json.dumps({"algorithm": "dpo", "wall_s": 30.0, "pairs_s": 12.5}))
    figures = experiments["figures"](tmp_path, [])
    assert figures["pair building s"] == 12.5 and figures["wall s"] == 30.0
    assert figures["first logps/chosen"] == -11.5 and figures["final logps/chosen"] == -29.5  # first / last 2 of 20
    assert figures["final reward"] == 2.0 and figures["final kl/ref"] == 20.0  # the last of 4 evaluations
    assert figures["KL to the start, end"] is None  # run_once measures it after the run


def test_kl_to_start_of_the_starting_policy_is_zero(tmp_path: Path) -> None:
    """kl_to_start samples from the saved policy and compares with the task's starting policy: a run
    that saved the policy it started from is 0 nats away."""
    experiments = runpy.run_path(str(ROOT / "scripts/experiments.py"), run_name="experiments")
    PolicyValueModel.from_pretrained("tiny").save_pretrained(tmp_path / "policy")
    args = ["--preset", "tiny", "--max_new_tokens", "4", "--data.max_samples", "256"]
    assert experiments["kl_to_start"](tmp_path, "ppo", args) == 0.0
    assert experiments["kl_to_start"](tmp_path, "grpo", ["--task", "sort", "--preset", "tiny"]) is None  # warm-up


def test_benchmark_against_trl_without_trl_is_one_line(tmp_path: Path, monkeypatch) -> None:
    """TRL is a benchmark-only dependency: without it, --against-trl installs it into a cache folder of its
    own (never into the environment); where that fails, one line says why, and the project is timed alone."""
    benchmark = runpy.run_path(str(ROOT / "scripts/benchmark.py"), run_name="benchmark")
    import_trl = benchmark["import_trl"]
    monkeypatch.setitem(sys.modules, "trl", None)  # import trl raises ImportError; find_spec says None
    monkeypatch.setitem(import_trl.__globals__, "TRL_DIR", tmp_path / "trl")
    commands = []

    def offline_pip(command, **kwargs):
        commands.append(command)
        return subprocess.CompletedProcess(command, 1, "", "ERROR: No matching distribution found for trl==1.16.0\n")

    monkeypatch.setattr(subprocess, "run", offline_pip)
    assert import_trl() == "pip could not install trl==1.16.0 (ERROR: No matching distribution found for trl==1.16.0)"
    (command,) = commands
    assert command[-4:] == ["--no-deps", "--target", str(tmp_path / "trl"), "trl==1.16.0"]


def test_benchmark_against_trl_pairs_each_round(monkeypatch) -> None:
    """--against-trl: rounds of our run then TRL's; each round's ratio is TRL's median step over ours in that round
    (a machine that slows down in round 2 slows both sides of it), then their median and range."""
    benchmark = runpy.run_path(str(ROOT / "scripts/benchmark.py"), run_name="benchmark")
    against_trl = benchmark["against_trl"]
    ours = iter([0.2, 0.1])  # rounds 2 and 3 (round 1's run is given)
    theirs = iter([0.3, 0.4, 0.1, 0.3, 0.3, 0.1])  # per round: TRL's DPO, then with precompute_ref_log_probs
    step = lambda seconds: {"step_s_median": seconds, "pairs_file": "pairs.jsonl"}  # noqa: E731
    monkeypatch.setitem(against_trl.__globals__, "benchmark", lambda *args: step(next(ours)))
    monkeypatch.setitem(against_trl.__globals__, "trl_dpo", lambda *args: step(next(theirs)))
    args = SimpleNamespace(rounds=3, preset="tiny", impl="my_impl", target=0.8, dpo_extra=["--num_steps", "2"])
    out = against_trl("dpo", args, ["--seed", "0"], step(0.1))
    assert out["dpo: our median step s, per round"] == [0.1, 0.2, 0.1]
    assert out["trl_dpo: step_s / ours, paired"] == {
        "per_round": [3.0, 0.5, 3.0],
        "median": 3.0,
        "min": 0.5,
        "max": 3.0,
    }
    assert out["trl_dpo_precomputed_ref: step_s / ours, paired"]["per_round"] == [4.0, 1.5, 1.0]
    assert len(out["trl_dpo"]) == 3


def test_threads_runs_the_experiment_once_per_thread_count(tmp_path: Path) -> None:
    """--threads 1 2: the command without --threads, once per OMP_NUM_THREADS, each table under its count; the
    first failure stops it (here: a row that is not there, before any run)."""
    command = [sys.executable, "scripts/experiments.py", "rm_vs_dpo", "--threads", "1", "2", "--rows", "no such row"]
    proc = subprocess.run([*command, "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stdout.count("## OMP_NUM_THREADS=") == 1 and "## OMP_NUM_THREADS=1" in proc.stdout, proc.stdout
    assert "OMP_NUM_THREADS=1: " in proc.stderr and "experiments.py rm_vs_dpo --rows no such row" in proc.stderr
