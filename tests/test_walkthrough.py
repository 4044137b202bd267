"""The task-0 walkthrough (not graded) runs with the answer key and stops politely at a stub."""

from __future__ import annotations

from rlhf_practice.walkthrough import main


def test_walkthrough_with_answer_key(capsys) -> None:
    main(["--impl", "answer", "--batch_size", "2"])
    out = capsys.readouterr().out
    for stage in ("1. A DataLoader batch", "3. Reward", "5. Advantages", "7. One optimizer step", "new - old"):
        assert stage in out


def test_walkthrough_stops_at_an_unfinished_stub(capsys) -> None:
    main(["--impl", "student", "--batch_size", "2"])
    out = capsys.readouterr().out
    assert "rewards" in out and "skipped: compute_advantages is not implemented yet: see TASKS.md §1.2" in out
