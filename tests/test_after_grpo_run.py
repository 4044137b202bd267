"""train_grpo.py --level token with task 14's options (not graded): each option runs and logs its tags,
dynamic sampling drops and refills groups, the bad combinations are one line before anything is written,
and a run checks (and opens) only the functions of rl/after_grpo.py that it calls. Two-step runs of
--task sort with a one-step warm-up; the option runs need a finished rl/after_grpo.py (task 14)."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest
import torch
from _runs import _metrics, _not_done, run_script
from test_scripts import _readme_tags

from rlhf_practice.config import TokenGRPOConfig, preset_config
from rlhf_practice.course import GRADED, Impl
from rlhf_practice.errors import ConfigError
from rlhf_practice.modeling import Generation
from rlhf_practice.tasks.verifiable import VerifiableTask
from rlhf_practice.training import check_process_count

SORT = ["--level", "token", "--task", "sort", "--warmup_steps", "1"]
CLIP_TAGS = {"clip_ratio/low_mean", "clip_ratio/high_mean", "clip_ratio/region_mean", "frac_reward_zero_std"}
SAMPLING_TAGS = {"dynamic_sampling/gen_batches", "dynamic_sampling/groups_dropped"}
OPTIONS = {
    "rloo": ["--advantage", "rloo"],
    "dr_grpo": ["--advantage", "dr_grpo"],
    "gspo": ["--importance_sampling_level", "sequence", "--grpo_clip_range", "3e-4", "--grpo_clip_range_high", "4e-4"],
    "cispo": ["--loss_type", "cispo"],
    "clip_higher": ["--grpo_clip_range_high", "0.28"],
    "dapo": ["--grpo_clip_range_high", "0.28", "--dynamic_sampling", "--loss_type", "dapo"],
}


@pytest.fixture(scope="session")
def working_after_grpo_impl(impl: Impl, working_token_impl: str) -> str:
    """--impl value for the runs with task 14's options: the implementation under test, once rl/after_grpo.py is done."""
    why = _not_done(impl, ("after_grpo",))
    if why:
        pytest.skip(
            f"runs train_grpo.py with task 14's options: finish the functions of rl/after_grpo.py first ({why})"
        )
    return working_token_impl


def _run(tmp_path: Path, impl: str, *args: str, name: str = "run") -> tuple[int, Path]:
    code, _, run = run_script("grpo", tmp_path, "--impl", impl, *SORT, *args, name=name)
    return code, run


def _folder(tmp_path: Path, impl: Impl, after_grpo: str | None) -> str:
    """A copy of the working ppo.py, grpo.py and token_level.py with ``after_grpo`` as after_grpo.py (none if None)."""
    folder = tmp_path / "impl"
    folder.mkdir()
    for module in ("ppo", "grpo", "token_level"):
        (folder / f"{module}.py").write_text(inspect.getsource(impl.module(module)))
    if after_grpo is not None:
        (folder / "after_grpo.py").write_text(after_grpo)
    return str(folder)


# An unfinished after_grpo.py, made here rather than read from rl/ (the student's own file, finished or not):
# every graded function of it raises as the release's stubs do.
STUB = "import torch\n" + "".join(
    f"\n\ndef {g.function}(*args, **kwargs):\n"
    f'    raise NotImplementedError("{g.function} is not implemented yet: see TASKS.md {g.section}.")\n'
    for g in GRADED
    if g.module == "after_grpo"
)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("option", OPTIONS)
def test_each_option_runs_and_logs_its_tags(tmp_path: Path, capsys, working_after_grpo_impl: str, option: str) -> None:
    code, run = _run(tmp_path, working_after_grpo_impl, *OPTIONS[option])
    err = capsys.readouterr().err
    assert code == 0, err
    rows = _metrics(run)
    expected = CLIP_TAGS | (SAMPLING_TAGS if "--dynamic_sampling" in OPTIONS[option] else set())
    assert expected <= set(rows[0]), f"metrics.csv lacks {sorted(expected - set(rows[0]))}"
    assert not SAMPLING_TAGS & set(rows[0]) or "--dynamic_sampling" in OPTIONS[option]
    undocumented = sorted(set(rows[0]) - {"step"} - _readme_tags())
    assert not undocumented, f"README.md's tag table does not explain {undocumented}"
    for row in rows:
        values = {tag: float(row[tag]) for tag in CLIP_TAGS}
        assert all(0 <= v <= 1 for v in values.values()), values
        low, high, region = (values[f"clip_ratio/{k}_mean"] for k in ("low", "high", "region"))
        assert region == pytest.approx(low + high, abs=1e-5), "a ratio is clipped low or high, never both"
    if option == "cispo":
        assert all(float(r["clip_ratio/low_mean"]) == 0 for r in rows), "CISPO's weight has no floor"


def _fake_correct(keep_per_round: list[int], group_size: int = 8):
    """Task.correct that makes the first ``keep_per_round[n]`` groups of the n-th batch of each step
    (counting round after round) differ in correctness (one right reply), every other group all wrong."""
    calls = []

    def correct(self, prompts, replies) -> torch.Tensor:
        keep = keep_per_round[len(calls) % len(keep_per_round)]
        calls.append(len(prompts))
        out = torch.zeros(len(prompts))
        out[torch.arange(keep) * group_size] = 1.0
        return out

    return correct, calls


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("keep_per_round", "max_batches", "batches", "dropped", "trained"),
    [
        ([1, 2, 2], 4, 3, 3 * 4 - 4, 4),  # refilled: 1 + 2 + 2 >= B = 4 groups after 3 batches, the first 4 train
        ([1, 1], 2, 2, 2 * 4 - 2, 2),  # too few after the last batch: the 2 kept groups train
        ([0], 3, 3, 2 * 4, 4),  # none kept: the last batch trains unfiltered
    ],
    ids=["refill", "fewer", "none"],
)
def test_dynamic_sampling_drops_and_refills(
    tmp_path: Path,
    capsys,
    monkeypatch,
    working_after_grpo_impl: str,
    keep_per_round: list[int],
    max_batches: int,
    batches: int,
    dropped: int,
    trained: int,
) -> None:
    correct, calls = _fake_correct(keep_per_round)
    monkeypatch.setattr(VerifiableTask, "correct", correct)
    code, run = _run(
        tmp_path,
        working_after_grpo_impl,
        "--dynamic_sampling",
        "--max_num_gen_batches",
        str(max_batches),
        "--num_logged_samples",
        "1000",
    )
    err = capsys.readouterr().err
    assert code == 0, err
    rows = _metrics(run)
    assert [float(r["dynamic_sampling/gen_batches"]) for r in rows] == [batches] * 2
    assert [float(r["dynamic_sampling/groups_dropped"]) for r in rows] == [dropped] * 2
    assert calls == [4 * 8] * (2 * batches), "each batch is B = 4 prompts x K = 8 replies, judged once"
    samples = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    trained_rows = [sum(s["step"] == step for s in samples) for step in (1, 2)]
    assert trained_rows == [trained * 8] * 2, "every reply trained on is logged (--num_logged_samples 1000)"


def test_generations_of_different_widths_concatenate() -> None:
    pad = 9
    a = Generation(torch.tensor([[1, 2, 3, 4]]), torch.ones(1, 4, dtype=torch.long), torch.tensor([[1.0, 1.0]]), 2)
    b = Generation(
        torch.tensor([[5, 6, 7, 8, 0]]),
        torch.tensor([[1, 1, 1, 1, 0]]),
        torch.tensor([[1.0, 1.0, 0.0]]),
        2,
    )
    c = Generation(torch.tensor([[4, 1]]), torch.tensor([[1, 1]]), torch.tensor([[1.0]]), 1)
    both = Generation.cat([a, b, c], pad)
    assert both.prompt_length == 2 and len(both) == 3
    assert both.sequences.tolist() == [[1, 2, 3, 4, pad], [5, 6, 7, 8, 0], [pad, 4, 1, pad, pad]]
    assert both.attention_mask.tolist() == [[1, 1, 1, 1, 0], [1, 1, 1, 1, 0], [0, 1, 1, 0, 0]]
    assert both.response_mask.tolist() == [[1, 1, 0], [1, 1, 0], [1, 0, 0]]


BAD = [
    (
        ["--importance_sampling_level", "sequence", "--loss_type", "cispo"],
        "importance_sampling_level='sequence' (GSPO) averages one term per reply",
    ),
    (
        ["--importance_sampling_level", "sequence", "--loss_type", "dapo"],
        "importance_sampling_level='sequence' (GSPO) averages one term per reply",
    ),
    (["--task", "sentiment", "--warmup_steps", "0", "--dynamic_sampling"], "dynamic_sampling=True keeps groups"),
    (
        ["--dynamic_sampling", "--reward_model", "some_folder"],
        "dynamic_sampling=True filters on the task's correctness",
    ),
    (["--grpo_clip_range_high", "0"], "grpo_clip_range_high=0.0 must be > 0"),
    (["--max_num_gen_batches", "0"], "max_num_gen_batches=0 must be a positive integer"),
    (["--advantage", "ppo"], "advantage='ppo' is unknown"),
]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("args", "message"), BAD, ids=[" ".join(a) for a, _ in BAD])
def test_a_bad_combination_is_one_line(tmp_path: Path, capsys, impl: Impl, args: list[str], message: str) -> None:
    code, run = _run(tmp_path, _folder(tmp_path, impl, STUB), *args)
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err
    (line,) = [line for line in err.splitlines() if line.startswith("error:")]
    assert message in line, line
    assert not run.exists() and not (tmp_path / "run").exists(), "nothing is written before the settings are checked"


def test_dynamic_sampling_runs_in_one_process() -> None:
    config = preset_config(TokenGRPOConfig, "tiny", "sort")
    check_process_count(config, 2)  # without it: two processes are fine
    config.dynamic_sampling = True
    with pytest.raises(ConfigError, match=r"dynamic_sampling=True runs in one process, not 2"):
        check_process_count(config, 2)


def test_help_lists_the_flags(capsys) -> None:
    code, _, _ = run_script("grpo", Path("unused"), "--level", "token", "--help")
    out = capsys.readouterr().out
    assert code == 0, out
    for flag in ("--advantage", "--importance_sampling_level", "--grpo_clip_range_high", "--dynamic_sampling"):
        assert flag in out, flag
    assert "--max_num_gen_batches" in out and "cispo" in out


@pytest.mark.parametrize(
    ("settings", "functions"),
    [
        ({}, []),
        ({"advantage": "dr_grpo"}, []),
        ({"advantage": "rloo"}, ["compute_rloo_advantages"]),
        ({"grpo_clip_range_high": 0.28}, ["clip_higher_loss"]),
        ({"importance_sampling_level": "sequence", "grpo_clip_range_high": 4e-4}, ["gspo_loss"]),
        ({"loss_type": "cispo", "grpo_clip_range_high": 0.28}, ["cispo_loss"]),
        ({"dynamic_sampling": True, "loss_type": "dapo"}, ["filter_groups"]),
    ],
)
def test_a_run_needs_only_the_functions_it_calls(settings: dict, functions: list[str]) -> None:
    config = preset_config(TokenGRPOConfig, "tiny", "sort")
    for key, value in settings.items():
        setattr(config, key, value)
    config.validate()
    assert config.after_grpo_functions() == functions


@pytest.mark.timeout(120)
def test_a_plain_run_never_opens_after_grpo(tmp_path: Path, capsys, impl: Impl, working_token_impl: str) -> None:
    code, run = _run(tmp_path, _folder(tmp_path, impl, None))  # no after_grpo.py at all
    err = capsys.readouterr().err
    assert code == 0, err
    assert "Writing model shards" not in err, "Hugging Face's progress bar when the policy is saved"
    assert not SAMPLING_TAGS & set(_metrics(run)[0])


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("args", "function", "section"),
    [
        (["--advantage", "rloo"], "compute_rloo_advantages", "§14.2"),
        (["--grpo_clip_range_high", "0.28"], "clip_higher_loss", "§14.3"),
        (["--importance_sampling_level", "sequence"], "gspo_loss", "§14.4"),
        (["--loss_type", "cispo"], "cispo_loss", "§14.5"),
        (["--dynamic_sampling"], "filter_groups", "§14.6"),
    ],
)
def test_an_unfinished_stub_is_one_friendly_line(
    tmp_path: Path, capsys, impl: Impl, working_token_impl: str, args: list[str], function: str, section: str
) -> None:
    code, run = _run(tmp_path, _folder(tmp_path, impl, STUB), *args)
    err = capsys.readouterr().err
    assert code == 3 and not run.exists() and "Traceback" not in err, err
    line = next(line for line in err.splitlines() if line.startswith("error:"))
    assert function in line and f"TASKS.md {section}" in line and "pytest -m graded" in line, line


@pytest.mark.timeout(120)
def test_rloo_alone_is_enough_for_advantage_rloo(tmp_path: Path, capsys, impl: Impl, working_after_grpo_impl) -> None:
    """A student who wrote compute_rloo_advantages only can run --advantage rloo; --loss_type cispo still stops."""
    rloo = inspect.getsource(impl.after_grpo.compute_rloo_advantages)
    folder = _folder(tmp_path, impl, STUB + "\n\n" + rloo)
    code, _ = _run(tmp_path, folder, "--advantage", "rloo")
    err = capsys.readouterr().err
    assert code == 0, err
    code, _ = _run(tmp_path, folder, "--advantage", "rloo", "--loss_type", "cispo", name="cispo")
    err = capsys.readouterr().err
    assert code == 3 and "cispo_loss" in err and "§14.5" in err, err


def _stubbed(tmp_path: Path, impl: Impl, stubs: list[str]) -> str:
    """A copy of the working ppo.py, grpo.py, token_level.py and after_grpo.py in which each of ``stubs`` raises as
    the release's stub does (the rest of its file as it is): what a student has who has not written those yet."""
    folder = tmp_path / "stubbed"
    folder.mkdir()
    for module in ("ppo", "grpo", "token_level", "after_grpo"):
        source = inspect.getsource(impl.module(module))
        for g in GRADED:
            if g.module == module and g.function in stubs:
                source += (
                    f"\n\ndef {g.function}(*args, **kwargs):\n"
                    f'    raise NotImplementedError("{g.function} is not implemented yet: see TASKS.md {g.section}.")\n'
                )
        (folder / f"{module}.py").write_text(source)
    return str(folder)


@pytest.mark.parametrize(
    ("script", "args", "functions"),
    [
        ("ppo", [], ["compute_advantages", "ppo_clip_loss"]),
        ("ppo", ["--level", "token"], ["masked_mean", "per_token_kl", "compute_gae", "token_ppo_loss"]),
        ("ppo", ["--reward_model", "a,b"], ["compute_advantages", "ppo_clip_loss", "get_reward", "ensemble_reward"]),
        ("grpo", [], ["compute_group_advantages", "grpo_loss"]),
        ("grpo", ["--level", "token"], ["compute_group_advantages", "masked_mean", "per_token_kl", "grpo_clip_loss"]),
        (
            "grpo",
            ["--level", "token", "--advantage", "rloo", "--loss_type", "cispo", "--reward_model", "a"],
            ["masked_mean", "per_token_kl", "compute_rloo_advantages", "cispo_loss", "get_reward"],
        ),
        (
            "grpo",
            ["--level", "token", "--task", "sort", "--dynamic_sampling", "--grpo_clip_range_high", "0.28"],
            ["compute_group_advantages", "masked_mean", "per_token_kl", "clip_higher_loss", "filter_groups"],
        ),
        ("dpo", [], ["reply_logps", "reference_logps", "dpo_loss"]),
        ("rm", [], ["get_reward", "reward_loss"]),
    ],
)
def test_a_run_checks_the_functions_it_calls(script: str, args: list[str], functions: list[str]) -> None:
    from rlhf_practice.config import CONFIGS, parse_config

    config = parse_config(CONFIGS[script, "sequence"], ["--preset", "tiny", *args])
    assert sorted(config.functions_called()) == sorted(functions)


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("script", "args", "stubs"),
    [
        # §13.6's PPO needs tasks 7-8 only: GRPO-clip (task 9) and the sequence-level functions unwritten
        ("ppo", ["--level", "token"], ["grpo_clip_loss", "compute_advantages", "ppo_clip_loss", "grpo_loss"]),
        # task 14 needs task 9's functions, not task 8's nor the sequence-level PPO's
        ("grpo", [*SORT, "--advantage", "rloo"], ["compute_gae", "token_ppo_loss", "compute_advantages", "grpo_loss"]),
        ("grpo", [*SORT, "--loss_type", "cispo"], ["compute_gae", "token_ppo_loss", "grpo_clip_loss"]),
    ],
    ids=["ppo-token", "grpo-rloo", "grpo-cispo"],
)
def test_a_run_starts_with_only_the_functions_it_calls(
    tmp_path: Path, capsys, impl: Impl, working_after_grpo_impl: str, script: str, args: list[str], stubs: list[str]
) -> None:
    code, _, run = run_script(script, tmp_path, "--impl", _stubbed(tmp_path, impl, stubs), *args)
    err = capsys.readouterr().err
    assert code == 0 and "Traceback" not in err, err
    assert len(_metrics(run)) == 2


@pytest.mark.timeout(120)
def test_a_function_the_run_calls_is_still_checked(tmp_path: Path, capsys, impl: Impl, working_after_grpo_impl) -> None:
    code, _, run = run_script("ppo", tmp_path, "--impl", _stubbed(tmp_path, impl, ["compute_gae"]), "--level", "token")
    err = capsys.readouterr().err
    assert code == 3 and not run.exists() and "Traceback" not in err, err
    (line,) = [line for line in err.splitlines() if line.startswith("error:")]
    assert line.startswith("error: compute_gae is not implemented yet: see TASKS.md §8.2."), line
