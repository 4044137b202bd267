"""Bad input, interruptions and failed saves (not graded): one clear line each, and nothing lost.

Each case is the smallest run that shows it: settings are checked before anything is loaded, so most
cases take milliseconds; the ones that train run one or two tiny steps.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from _runs import ROOT, _impl_folder, _metrics, run_script

DATA_FILES = {
    "empty.csv": (b"", "the file is empty"),
    "empty.txt": (b"", "the file is empty"),
    "empty.jsonl": (b"", "the file is empty"),
    "blank.jsonl": (b"\n\n", "the file holds no rows"),
    "header_only.csv": (b"text\n", "the file holds no rows"),
    "latin1.csv": ("text\ncafé très bon\n".encode("latin-1"), "the file is not UTF-8 text"),
    "binary.txt": (b"\xff\xfe\x00bad", "the file is not UTF-8 text"),
    "malformed.json": (b'{"text": ', "could not read it as json"),
    "empty.parquet": (b"", "the file is empty"),
    "corrupt.parquet": (b"garbage", "could not read it as parquet"),
    "one_token.txt": (b"a\nb\n", "no text has data.min_prompt_length=2 tokens"),
}


def _one_error_line(err: str, message: str) -> None:
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and message in errors[0], err
    assert not [line for line in err.splitlines() if "Failed to" in line], "a stray log line came first"


@pytest.mark.parametrize("name", sorted(DATA_FILES))
def test_bad_data_file_is_one_line(tmp_path: Path, capsys, working_impl: str, name: str) -> None:
    content, message = DATA_FILES[name]
    (tmp_path / name).write_bytes(content)
    code, _, run = run_script("grpo", tmp_path, "--impl", working_impl, "--data.dataset_name", str(tmp_path / name))
    err = capsys.readouterr().err
    assert code == 2 and not run.exists()
    _one_error_line(err, message)
    assert "HF_ENDPOINT" not in err, "a local file has nothing to do with the Hub"


def test_folder_as_dataset_and_as_model(tmp_path: Path, capsys, working_impl: str) -> None:
    (tmp_path / "notes").mkdir()
    code, _, _ = run_script("grpo", tmp_path, "--impl", working_impl, "--data.dataset_name", str(tmp_path / "notes"))
    _one_error_line(capsys.readouterr().err, "is a folder; give one .csv/.json/.jsonl/.parquet/.txt file")
    assert code == 2
    code, _, _ = run_script("grpo", tmp_path, "--impl", working_impl, "--model.model_name", str(tmp_path / "notes"))
    _one_error_line(capsys.readouterr().err, "is a folder but not a saved model (no config.json)")
    assert code == 2


def test_short_prompts_are_dropped_with_a_note(tmp_path: Path, capsys, working_impl: str) -> None:
    texts = ["ok"] * 3 + ["The film was great and I loved every minute of it"] * 40
    (tmp_path / "mixed.txt").write_text("\n".join(texts) + "\n")
    args = ["--data.dataset_name", str(tmp_path / "mixed.txt"), "--data.min_prompt_length", "3", "--num_steps", "1"]
    code, _, _ = run_script("grpo", tmp_path, "--impl", working_impl, *args)
    err = capsys.readouterr().err
    assert code == 0 and "note: 3 of 43 texts are shorter than data.min_prompt_length=3 tokens and were left out" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--seed", "-1"], "seed=-1 must lie in [0, 4294967295]"),
        (["--learning_rate", "1e30"], "learning_rate=1e+30 must lie in (0, 1]"),
        (["--learning_rate", "inf"], "learning_rate=inf must be a finite number"),
        (["--max_grad_norm", "inf"], "max_grad_norm=inf must be a finite number"),
        (["--temperature", "1e-30"], "temperature=1e-30 must lie in [0.01, 100]"),
        (["--top_k", "5000"], "top_k=5000 exceeds the vocabulary"),
        (["--grpo_group_size", "100000"], "grpo_group_size=100000 means 400000 replies per step"),
        (["--run_name", "a/b/c"], "run_name='a/b/c' must be one folder name"),
        (["--run_name", "../x"], "run_name='../x' must be one folder name"),
    ],
)
def test_bad_setting_is_one_line_before_anything_is_written(
    tmp_path: Path, capsys, working_impl: str, args: list[str], message: str
) -> None:
    code, _, _ = run_script("grpo", tmp_path / "runs", "--impl", working_impl, *args)
    _one_error_line(capsys.readouterr().err, message)
    assert code == 2 and not (tmp_path / "runs").exists() and not (tmp_path / "x").exists()


@pytest.mark.parametrize(
    ("algorithm", "args", "message"),
    [
        ("ppo", ["--beta", "0"], "--beta is a token-level setting of train_ppo.py; add --level token."),
        (
            "grpo",
            ["--grpo_iterations", "3"],
            "--grpo_iterations is a token-level setting of train_grpo.py; add --level",
        ),
        ("ppo", ["--level", "token", "--kl_coef", "0"], "--kl_coef is a sequence-level setting of train_ppo.py"),
    ],
)
def test_a_flag_of_the_other_level_is_one_line(
    tmp_path: Path, capsys, algorithm: str, args: list[str], message: str
) -> None:
    code, _, _ = run_script(algorithm, tmp_path / "runs", *args)
    _one_error_line(capsys.readouterr().err, message)
    assert code == 2 and not (tmp_path / "runs").exists()


def test_run_dir_that_is_a_file(tmp_path: Path, capsys, working_impl: str) -> None:
    (tmp_path / "runs").write_text("not a folder")
    code, _, _ = run_script("grpo", tmp_path / "runs", "--impl", working_impl)
    _one_error_line(capsys.readouterr().err, "is not a folder; give a folder for the runs")
    assert code == 2


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_run_dir(tmp_path: Path, capsys, working_impl: str) -> None:
    (tmp_path / "runs").mkdir(mode=0o555)
    code, _, _ = run_script("grpo", tmp_path / "runs", "--impl", working_impl)
    _one_error_line(capsys.readouterr().err, "is not writable")
    assert code == 2


def test_default_run_names_never_collide(tmp_path: Path, working_impl: str) -> None:
    from rlhf_practice.config import GRPOConfig, preset_config
    from rlhf_practice.training import training_run

    folders = set()
    for _ in range(2):  # two runs started within the same second, without --run_name
        config = preset_config(GRPOConfig, "tiny")
        config.impl, config.device, config.run_dir, config.num_steps = working_impl, "cpu", str(tmp_path), 1
        config.data.max_samples = 256
        with training_run(config) as run:
            folders.add(run.logger.run_dir)
    assert len(folders) == 2 and all(f.is_dir() for f in folders)


def test_blown_up_weights_stop_with_one_line(tmp_path: Path, capsys, working_sources) -> None:
    patch = (  # every gradient of step 1 is inf: the clipped update turns the weights into NaN
        "_grpo_loss = grpo_loss\n\n\n"
        "def grpo_loss(logprobs, advantages):\n"
        "    if logprobs.requires_grad:\n"
        "        logprobs.register_hook(lambda grad: grad * float('inf'))\n"
        "    return _grpo_loss(logprobs, advantages)\n"
    )
    folder = tmp_path / "inf_impl"
    folder.mkdir()
    (folder / "ppo.py").write_text(working_sources["ppo.py"])
    (folder / "grpo.py").write_text(working_sources["grpo.py"] + "\n" + patch)
    code, _, run = run_script("grpo", tmp_path, "--impl", str(folder))
    err = capsys.readouterr().err
    assert code == 1 and "error: step 2: sampling met NaN/inf probabilities" in err and "Traceback" not in err
    assert [r["step"] for r in _metrics(run)] == ["1"]
    assert json.loads((run / "summary.json").read_text())["outcome"] == "failed"


def test_interrupt_before_the_first_step_writes_valid_json(tmp_path: Path, capsys, working_sources) -> None:
    patch = (  # call 1 is the start-up check of the stubs; call 2 is inside step 1's update
        "_calls = []\n_clip_loss = ppo_clip_loss\n\n\n"
        "def ppo_clip_loss(*args):\n"
        "    _calls.append(1)\n"
        "    if len(_calls) > 1:\n"
        "        raise KeyboardInterrupt\n"
        "    return _clip_loss(*args)\n"
    )
    impl = _impl_folder(tmp_path / "impl", working_sources, patch)
    code, _, run = run_script("ppo", tmp_path, "--impl", str(impl))
    assert code == 0 and "interrupted (Ctrl-C) at step 1" in capsys.readouterr().err
    summary = json.loads((run / "summary.json").read_text(), parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    assert summary["final_reward"] is None and summary["steps"] == 0
    assert (run / "policy" / "value_head.pt").is_file() and (run / "policy" / "tokenizer.json").is_file()


def test_second_ctrl_c_during_the_save_waits_for_it(tmp_path: Path, capsys, working_sources) -> None:
    """The first Ctrl-C stops training; a second one arrives in the middle of the save."""
    patch = (
        "import gc, os, signal\nfrom rlhf_practice.modeling import PolicyValueModel\n"
        "_calls = []\n_clip_loss = ppo_clip_loss\n\n\n"
        "def ppo_clip_loss(*args):\n"
        "    _calls.append(1)  # call 1: the start-up check; 2-4: step 1 (2 epochs, then the logged loss)\n"
        "    if len(_calls) > 4:\n"
        "        models = (o for o in gc.get_objects() if isinstance(o, PolicyValueModel))\n"
        "        policy = next(m for m in models if m.value_head.weight.requires_grad)  # not kl/ref's frozen copy\n"
        "        save = policy.save_pretrained\n"
        "        def save_and_interrupt(folder, **kwargs):\n"
        "            os.kill(os.getpid(), signal.SIGINT)\n"
        "            save(folder, **kwargs)\n"
        "        policy.save_pretrained = save_and_interrupt\n"
        "        raise KeyboardInterrupt\n"
        "    return _clip_loss(*args)\n"
    )
    impl = _impl_folder(tmp_path / "impl", working_sources, patch)
    code, _, run = run_script("ppo", tmp_path, "--impl", str(impl), "--num_steps", "5")
    err = capsys.readouterr().err
    assert code == 0 and "saving; please wait until it is done." in err and "Traceback" not in err
    assert {"value_head.pt", "tokenizer.json", "config.json"} <= {p.name for p in (run / "policy").iterdir()}
    assert not list(run.glob(".policy-partial-*")) and json.loads((run / "summary.json").read_text())


# The TensorBoard writer thread fails first; a traceback from it is what a user would see printed.
@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")
def test_run_folder_gone_unwritable_saves_elsewhere(tmp_path: Path, capsys, working_sources) -> None:
    run_dir = tmp_path / "run"
    patch = (
        "import shutil\nfrom pathlib import Path\n_calls = []\n_clip_loss = ppo_clip_loss\n\n\n"
        "def ppo_clip_loss(*args):\n"
        "    _calls.append(1)  # call 1: the start-up check; 2-3: step 1 (1 epoch, then the logged loss)\n"
        "    if len(_calls) == 4:  # in step 2: the run folder turns into something we cannot write into\n"
        f"        shutil.rmtree({str(run_dir)!r})\n"
        f"        Path({str(run_dir)!r}).write_text('')\n"
        "    return _clip_loss(*args)\n"
    )
    impl = _impl_folder(tmp_path / "impl", working_sources, patch)
    code, _, _ = run_script("ppo", tmp_path, "--impl", str(impl), "--ppo_epochs", "1")
    err = capsys.readouterr().err
    _one_error_line(err, "step 2: could not write the logs")
    assert code == 1 and "note: could not write to" in err
    saved = Path(err.split("policy saved to ")[1].split()[0])
    summary = json.loads((saved.parent / "summary.json").read_text())
    assert (saved / "value_head.pt").is_file() and summary["steps"] == 1 and summary["outcome"] == "stopped"


def _interrupted_start_up(tmp_path: Path, working_impl: str, patch: str) -> None:
    """train_grpo.py with its tokenizer loading replaced by ``patch`` (code that sets
    SentimentTask.load_tokenizer and raises a signal in it): one line, exit 130, nothing written."""
    code = (
        "import runpy, sys\n"
        "from rlhf_practice.tasks.sentiment import SentimentTask\n"
        f"{patch}"
        f"sys.argv = ['train_grpo.py', '--impl', {working_impl!r}, '--run_dir', {str(tmp_path)!r}]\n"
        f"runpy.run_path({str(ROOT / 'train_grpo.py')!r}, run_name='__main__')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 130 and "interrupted during start-up: nothing was written." in proc.stderr
    assert "Traceback" not in proc.stderr and not list(tmp_path.iterdir()), proc.stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_start_up_is_one_line(tmp_path: Path, sig: signal.Signals, working_impl: str) -> None:
    patch = (
        f"import os\ndef load(*a, **k):\n    os.kill(os.getpid(), {int(sig)})\nSentimentTask.load_tokenizer = load\n"
    )
    _interrupted_start_up(tmp_path, working_impl, patch)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_whose_handler_runs_late_is_one_line(tmp_path: Path, sig: signal.Signals, working_impl: str) -> None:
    """A signal the kernel hands to another thread reaches the main one a moment late: meanwhile the
    start-up step it cut short fails on its own (here: the tokenizer's length). Still one line, exit 130."""
    patch = (
        "import _thread, functools\n"
        "class Cut:  # len() trips the signal, then fails before Python runs the signal's handler\n"
        f"    __len__ = staticmethod(functools.partial(_thread.interrupt_main, {int(sig)}))\n"
        "SentimentTask.load_tokenizer = lambda self: Cut()\n"
    )
    _interrupted_start_up(tmp_path, working_impl, patch)


def test_grading_with_a_space_after_impl_is_refused(tmp_path: Path) -> None:
    """`pytest -m graded --impl submissions/alice` makes pytest adopt the folder (and its planted
    pytest.ini) as rootdir: the plugin refuses with one line."""
    alice = tmp_path / "alice"
    alice.mkdir()
    (alice / "pytest.ini").write_text("[pytest]\naddopts = -p no:python\n")
    for module in ("ppo", "grpo"):
        (alice / f"{module}.py").write_text((ROOT / f"rlhf_practice/rl/{module}.py").read_text())
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-m", "graded", "--impl", str(alice)], capture_output=True, text=True, cwd=ROOT
    )
    assert proc.returncode == 2 and "not this repository" in proc.stdout + proc.stderr
    assert "write --impl=DIR" in proc.stdout + proc.stderr
