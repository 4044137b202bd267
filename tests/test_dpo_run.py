"""train_dpo.py end to end (not graded): two-step runs on the tiny preset, the pairs it builds, caches
and reads from a file of your own, and its one-line errors. The runs need a finished rl/dpo.py (task 12)."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest
from _runs import _impl_folder, _metrics, run_script
from test_scripts import _readme_tags

from rlhf_practice.course import Impl
from rlhf_practice.errors import ConfigError
from rlhf_practice.preferences import rank_pairs, read_pairs

DPO_TAGS = {
    "loss/policy",
    "rewards/chosen",
    "rewards/rejected",
    "rewards/accuracies",
    "rewards/margins",
    "logps/chosen",
    "logps/rejected",
}
SAMPLED_TAGS = {"reward/mean", "reward/std", "response/length", "kl/ref"}


@pytest.fixture(scope="session")
def working_dpo_impl(impl: Impl, working_impl: str) -> str:
    """--impl value for the DPO runs: the implementation under test, once rl/dpo.py (task 12) is done."""
    try:
        impl.check_implemented("dpo")
    except (NotImplementedError, ConfigError):  # a stub, or a folder without dpo.py
        pytest.skip("runs train_dpo.py end to end: finish the functions of task 12 first")
    return working_impl


def _dpo(tmp_path: Path, impl: str, *args: str, name: str = "run") -> tuple[int, Path]:
    code, _, run = run_script("dpo", tmp_path, "--impl", impl, "--pairs_dir", str(tmp_path / "pairs"), *args, name=name)
    return code, run


def test_two_step_run_logs_trl_tags_and_fresh_samples(tmp_path: Path, capsys, working_dpo_impl: str) -> None:
    code, run = _dpo(tmp_path, working_dpo_impl, "--eval_every", "5")
    err = capsys.readouterr().err
    assert code == 0, err
    assert "finished after 2 steps" in err and "pairs: built" in err
    rows = _metrics(run)
    assert [r["step"] for r in rows] == ["1", "2"]
    assert DPO_TAGS | SAMPLED_TAGS <= set(rows[0]), (
        f"metrics.csv lacks {sorted(DPO_TAGS | SAMPLED_TAGS - set(rows[0]))}"
    )
    assert all(rows[1][tag] != "" for tag in SAMPLED_TAGS), "the last step samples fresh replies"
    undocumented = sorted(set(rows[0]) - {"step"} - _readme_tags())
    assert not undocumented, f"README.md's tag table does not explain {undocumented}"
    first = rows[0]
    assert float(first["loss/policy"]) == pytest.approx(0.693147, abs=1e-5), "policy = reference at step 1: log 2"
    assert float(first["rewards/margins"]) == 0 and float(first["kl/ref"]) == 0
    summary = json.loads((run / "summary.json").read_text())
    assert summary["outcome"] == "finished" and summary["pairs_s"] > 0
    printed = float(err.split("pairs_s = ")[1].split(" s")[0])  # the start-up line and summary.json: one measurement
    assert printed == pytest.approx(summary["pairs_s"], abs=0.051)
    pairs_file = Path(summary["pairs_file"])
    record = json.loads(pairs_file.with_suffix(".json").read_text())
    assert record["settings"]["pair_samples"] == 4 and "train_dpo.py" in record["command"]
    pairs = read_pairs(pairs_file, "pairs_dir")
    assert len(pairs) == record["pairs"] > 0
    assert all(p["chosen_reward"] > p["rejected_reward"] for p in pairs), "ties are dropped, the better reply is chosen"


def test_built_pairs_are_reused_while_their_settings_match(tmp_path: Path, capsys, working_dpo_impl: str) -> None:
    assert _dpo(tmp_path, working_dpo_impl, name="a")[0] == 0
    assert "pairs: built" in capsys.readouterr().err
    assert _dpo(tmp_path, working_dpo_impl, name="b")[0] == 0
    err = capsys.readouterr().err
    assert "pairs: built" not in err and "read from" in err
    assert _metrics(tmp_path / "a") == _metrics(tmp_path / "b"), "building the pairs must not change the training"
    assert _dpo(tmp_path, working_dpo_impl, "--learning_rate", "1e-3", name="c")[0] == 0
    assert "read from" in capsys.readouterr().err, "learning_rate does not change the pairs"
    assert _dpo(tmp_path, working_dpo_impl, "--pair_samples", "3", name="d")[0] == 0
    assert "pairs: built" in capsys.readouterr().err
    assert len(list((tmp_path / "pairs").glob("*.jsonl"))) == 2


def test_two_rounds_rebuild_pairs_from_the_policy(tmp_path: Path, capsys, working_dpo_impl: str) -> None:
    code, run = _dpo(tmp_path, working_dpo_impl, "--rounds", "2", "--num_steps", "4", "--eval_every", "2")
    err = capsys.readouterr().err
    assert code == 0, err
    pairs = read_pairs(run / "pairs_round2.jsonl", "pairs_dir")
    assert pairs and all(p["chosen_reward"] > p["rejected_reward"] for p in pairs)
    rows = _metrics(run)
    assert float(rows[2]["loss/policy"]) == pytest.approx(0.693147, abs=1e-5), "step 3: the new reference is the policy"
    assert float(rows[2]["rewards/margins"]) == 0


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_your_own_pairs_file(tmp_path: Path, capsys, working_dpo_impl: str, suffix: str) -> None:
    rows = [("The film was", " great fun.", " dull."), ('A "long" movie', " I loved it, truly.", " bad, bad.")]
    path = tmp_path / f"my_pairs{suffix}"
    if suffix == ".jsonl":
        path.write_text("".join(json.dumps(dict(zip(("prompt", "chosen", "rejected"), r))) + "\n" for r in rows))
    else:
        import csv

        with open(path, "w", newline="") as f:
            csv.writer(f).writerows([("prompt", "chosen", "rejected"), *rows])
    code, run = _dpo(tmp_path, working_dpo_impl, "--pairs_file", str(path))
    err = capsys.readouterr().err
    assert code == 0, err
    assert f"pairs: 2 read from {path}" in err and not (tmp_path / "pairs").exists()
    assert json.loads((run / "summary.json").read_text())["pairs_file"] == str(path)
    assert [p["chosen_ended"] for p in read_pairs(path, "pairs_file")] == [True, True], "TRL's rule: replies end"


def test_sort_task_ranks_pairs_by_its_reward(tmp_path: Path, capsys, working_dpo_impl: str) -> None:
    code, run = _dpo(tmp_path, working_dpo_impl, "--task", "sort", "--warmup_steps", "2", "--pair_samples", "8")
    err = capsys.readouterr().err
    assert code == 0, err
    rows = _metrics(run)
    assert {"accuracy/heldout", "rewards/accuracies", "kl/ref"} <= set(rows[0])
    assert (tmp_path / "pairs").glob("sort-*.jsonl")


def test_reference_logps_under_inference_mode_still_trains(
    tmp_path: Path, capsys, impl: Impl, working_dpo_impl
) -> None:
    """torch.inference_mode is a valid way to write reference_logps: its tensors must not break the loss."""
    sources = {f"{m}.py": inspect.getsource(impl.module(m)) for m in ("ppo", "grpo")}
    folder = _impl_folder(tmp_path / "impl", sources, "")
    patch = (
        "\n\ndef reference_logps(ref_model, input_ids, attention_mask, prompt_lengths):\n"
        "    ref_model.eval()\n"
        "    with torch.inference_mode():\n"
        "        return reply_logps(ref_model, input_ids, attention_mask, prompt_lengths)\n"
    )
    (folder / "dpo.py").write_text(inspect.getsource(impl.module("dpo")) + patch)
    code, _ = _dpo(tmp_path, str(folder))
    err = capsys.readouterr().err
    assert code == 0, err


@pytest.mark.parametrize(
    ("args", "files", "message"),
    [
        (["--pairs_file", "missing.jsonl"], {}, "error: pairs_file='missing.jsonl': no such file"),
        (["--pairs_file", "pairs.txt"], {}, "error: pairs_file='pairs.txt' must be a .jsonl, .json or .csv file"),
        (["--pairs_file", "p.csv"], {"p.csv": "prompt,chosen\nHi, there\n"}, "row 1 has no column 'rejected'"),
        (["--pairs_file", "p.jsonl"], {"p.jsonl": '{"prompt": "a", "chosen": 1, "rejected": "b"}\n'}, "chosen is int"),
        (["--pairs_file", "p.json"], {"p.json": "[]"}, "the file holds no pairs"),
        (["--reward.sentiment_weight", "0"], {}, "no pair is left after dropping ties; raise pair_samples"),
        (["--rounds", "2", "--pairs_file", "p.csv"], {}, "error: rounds=2 needs pairs built from the policy"),
        (["--level", "token"], {}, "error: level='token': train_dpo.py has only --level sequence"),
    ],
)
def test_bad_pairs_are_one_line(tmp_path, capsys, monkeypatch, working_dpo_impl, args, files, message) -> None:
    monkeypatch.chdir(tmp_path)
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    code, _ = _dpo(tmp_path, working_dpo_impl, *args)
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err, err


def test_unfinished_dpo_stub_is_one_friendly_line(tmp_path: Path, capsys, impl: Impl, working_impl: str) -> None:
    sources = {f"{m}.py": inspect.getsource(impl.module(m)) for m in ("ppo", "grpo")}
    folder = _impl_folder(tmp_path / "stub_impl", sources, "")
    (folder / "dpo.py").write_text(
        "def reply_logps(*args, **kwargs):\n"
        '    raise NotImplementedError("reply_logps is not implemented yet: see TASKS.md §12.2.")\n'
    )
    code, run = _dpo(tmp_path, str(folder))
    err = capsys.readouterr().err
    assert code == 3 and not run.exists() and "Traceback" not in err
    line = next(line for line in err.splitlines() if line.startswith("error:"))
    assert "reply_logps" in line and "TASKS.md §12.2" in line and "pytest -m graded" in line


def test_pairs_are_ranked_and_ties_dropped() -> None:
    replies, rewards, ended = ["a", "b", "c", "d"], [0.5, 1.0, 0.5, -1.0], [True, False, True, True]
    (best_worst,) = rank_pairs("p", replies, rewards, ended, "best_worst")
    assert (best_worst["chosen"], best_worst["rejected"], best_worst["chosen_ended"]) == ("b", "d", False)
    every = rank_pairs("p", replies, rewards, ended, "all")
    assert len(every) == 5, "4 replies make 6 pairs; a and c tie"
    assert all(p["chosen_reward"] > p["rejected_reward"] for p in every)
    assert rank_pairs("p", ["a", "b"], [0.0, 0.0], [True, True], "best_worst") == []


def test_reference_once_equals_recomputing_it(impl: Impl, working_dpo_impl: str) -> None:
    """PairData.compute_reference: one reference_logps call per batch of one pass (not one per step), and
    each pair's cached log pi_ref is bit for bit what the batch that first trains on it would compute
    (so step 1's loss is log 2 exactly); in later passes, where other padding surrounds it, within a few float32
    ulps (1e-6 relative: the sums are near -75, where one ulp is 7.6e-6, and 2 ulps apart on an Intel Xeon)."""
    import torch

    from rlhf_practice.modeling import PolicyValueModel, load_tokenizer
    from rlhf_practice.preferences import PairData

    dpo = impl.module("dpo")
    tokenizer = load_tokenizer("tiny")
    reference = PolicyValueModel.from_pretrained("tiny").reference_model()
    texts = [" great fun.", " dull and long, so long.", " I loved it.", " bad.", " a film", " the end of it all."]
    pairs = [
        {"prompt": f"Review {i}:", "chosen": texts[i % 6], "rejected": texts[(i + 1 + i // 6) % 6],
         "chosen_ended": i % 2 == 0, "rejected_ended": True}
        for i in range(10)
    ]  # fmt: skip
    data = PairData(pairs, tokenizer, reference.max_length, "test")
    calls = []

    def counted(*args):
        calls.append(args[1].shape[0])
        return dpo.reference_logps(*args)

    data.compute_reference(counted, reference.lm, batch_size=4, seed=3)
    assert calls == [8, 8, 8], "one batched call per batch of the first pass (10 pairs, 4 a batch: 3 batches)"
    batches = data.batches(4, seed=3)
    for step in range(8):  # 32 pairs: more than three passes over the 10
        batch = next(batches)
        again = dpo.reference_logps(reference.lm, batch.input_ids, batch.attention_mask, batch.prompt_lengths)
        if step < 3:
            assert torch.equal(batch.ref_logps, again), f"step {step + 1}: the cache differs from recomputing"
        else:
            torch.testing.assert_close(batch.ref_logps, again, rtol=1e-6, atol=1e-5)  # a few float32 ulps of ~-75
        chosen, rejected = batch.ref_logps.chunk(2)
        losses, _, _ = dpo.dpo_loss(chosen, rejected, *again.chunk(2), beta=0.5)
        if step < 3:
            assert torch.equal(losses, torch.full_like(losses, torch.log(torch.tensor(2.0)).item()))
