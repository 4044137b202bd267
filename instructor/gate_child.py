"""A gate's training child: checks the gate's functions on a tiny input, then trains, with no student code in it.

    python -I TREE/gate_child.py TREE JOB REPORT

Run by the outcome gates (:mod:`instructor.gate`, through :func:`instructor.children.run_child`) from its
copy in TREE: a package copy whose ``rl/`` holds no student file, with the training scripts and the tiny
assets. The graded functions are proxies (:func:`instructor.function_server.install`): each call goes to the
function server that :func:`~instructor.children.run_child` started beside this process, in the submission's
tree, and its answer comes back; nothing of the submission runs here, so nothing of it can change the
training loop, the model or how it is saved. JOB says what to run: the graded functions to check first, the
gate's command (a training script of the tree, ``-m`` and the lecture's module, or this program's own
best-of-n measurement), its arguments, the lecture's and best-of-n's settings, where the lecture's model or
the best-of-n curves go. REPORT gets only a status ("trained", "stub", "missing", "broken", "failed"), a
note and the steps made: the reward comes from the judge (:mod:`instructor.judge_child`), which measures the
weights this process saved. It imports nothing of ``instructor`` (not there in the child's tree) and
``rlhf_practice`` only from TREE.

gate/best_of_n trains nothing: :func:`best_of_n_pool` draws one pool of the tiny policy's replies and
:func:`best_of_n_curves` computes from it, with the submission's functions, what the over-optimization
experiment plots. The judge imports both from its own copy of this file and computes the same curves with
the key's functions, written out there. gate/online likewise: :func:`online_pool` and :func:`online_outcome`
(which pairs each selection labels, and the detector on them).
"""

import os
import sys


def main(argv: list[str]) -> None:
    tree, job_path, report_path = argv
    sys.path.insert(0, tree)  # the package copy and the submission's files: before anything is imported
    import torch

    job = torch.load(job_path, weights_only=True)
    if job.get("server"):  # the graded functions: answered by the submission's function server, never imported here
        import function_server

        function_server.install(*job["server"])
    report = {"status": "trained", "note": "", "steps": None}
    if _start_up(job["functions"], report):
        _train(tree, job, report)
    torch.save(report, report_path)


def _start_up(functions: list[str], report: dict) -> bool:
    """Call each of ``functions`` on a tiny input, as the training scripts do when they start; False (and the
    report says why) at the first that is a stub, missing or raising."""
    import importlib

    from rlhf_practice.course import GRADED, probe_args

    for function in functions:
        g = next(g for g in GRADED if g.function == function)
        try:
            fn = getattr(importlib.import_module("rlhf_practice.rl." + g.module), function)
            fn(*probe_args(g))
        except NotImplementedError:
            report.update(status="stub", note=f"{function} is a stub")
            return False
        except ModuleNotFoundError:
            report.update(status="missing", note=f"{g.module}.py missing")
            return False
        except BaseException as err:
            report.update(status="broken", note=f"{function} raises {type(err).__name__} on a tiny input")
            return False
    return True


def _train(tree: str, job: dict, report: dict) -> None:
    """Run the gate's command with the submission's functions; the lecture's final model, or the best-of-n
    curves, go to job["out"]."""
    import importlib
    import runpy

    import torch

    command = job["command"]
    sys.argv = [command[0] if command[0] != "-m" else command[1], *job["argv"]]
    try:
        if job.get("best_of_n"):  # tensors only, as the judge loads them (weights_only)
            student = importlib.import_module("rlhf_practice.rl.best_of_n")
            settings = job["best_of_n"]
            pool = best_of_n_pool(**settings)
            curves = best_of_n_curves(student.best_of_n_kl, student.best_of_n_estimate, student.ensemble_reward, pool)
            torch.save({name: torch.as_tensor(c).detach().clone() for name, c in curves.items()}, job["out"])
            report["steps"] = settings["size"]
        elif job.get("online"):  # gate/online: tensors only, as gate/best_of_n's
            student = importlib.import_module("rlhf_practice.rl.online")
            settings = job["online"]
            outcome = online_outcome(student.select_pairs, student.proxy_agreement, online_pool(**settings), settings)
            torch.save({name: torch.as_tensor(v).detach().clone() for name, v in outcome.items()}, job["out"])
            report["steps"] = settings["pairs"]
        elif command[0] == "-m":  # the lecture: its model is kept so that the judge can measure it
            lecture = importlib.import_module(command[1])
            models = []

            class Kept(lecture.Model):
                def __init__(self, *args):
                    super().__init__(*args)
                    models.append(self)

            lecture.Model = Kept
            student = importlib.import_module("rlhf_practice.rl.lecture")
            curve = lecture.run_policy_gradient(lecture.LectureConfig(**job["lecture"]), student)
            report["steps"] = curve.epochs[-1] if curve.epochs else 0
            if curve.stopped:
                report.update(status="failed", note=curve.stopped)
            torch.save({k: v.detach().clone() for k, v in models[0].state_dict().items()}, job["out"])
        else:
            runpy.run_path(os.path.join(tree, command[0]), run_name="__main__")
    except SystemExit as err:
        if err.code not in (0, None):
            report.update(status="failed", note=f"the run stopped (exit {err.code})")
    except BaseException as err:
        report.update(status="failed", note=f"the run raised {type(err).__name__}")


MODES = ("mean", "min", "uwo")  # the ensembles gate/best_of_n's curves pick by


def best_of_n_pool(seed: int, prompts: int, size: int, models: int, noise: float) -> dict:
    """gate/best_of_n's pool: ``prompts`` prompts of the tiny preset's sentiment task (drawn with ``seed``), ``size``
    replies to each sampled from its starting policy; "gold", the rule reward of each reply, (B, N) float32 (few
    distinct values: ties everywhere), and "proxies", ``models`` reward models that each err differently: the gold
    plus Gaussian noise of std ``noise`` drawn with ``seed``, rounded to halves as a judge's coarse ratings are, so
    that replies tie on a proxy where their gold differs, (k, B, N). One thread, the same seed: the same numbers in
    the gate child and in the judge."""
    import torch

    from rlhf_practice.config import GRPOConfig, preset_config
    from rlhf_practice.sampling import Sampler
    from rlhf_practice.tasks import build_task
    from rlhf_practice.training import seed_everything

    config = preset_config(GRPOConfig, "tiny")
    task = build_task(config)
    tokenizer = task.load_tokenizer()
    sampler = Sampler.from_config(task.load_policy(torch.device("cpu")), tokenizer, config)
    seed_everything(seed)
    batch = next(task.prompt_batches(tokenizer, prompts, seed))
    ids, mask = (batch[key].repeat_interleave(size, dim=0) for key in ("input_ids", "attention_mask"))
    with torch.no_grad():
        replies = sampler.sample(ids, mask).decode(tokenizer)
    gold = task.reward([p for p in batch["prompt_text"] for _ in range(size)], replies).view(prompts, size)
    errors = torch.randn(models, prompts, size, generator=torch.Generator().manual_seed(seed)) * noise
    return {"gold": gold, "proxies": torch.round((gold + errors) * 2) / 2}


def best_of_n_curves(best_of_n_kl, best_of_n_estimate, ensemble_reward, pool: dict) -> dict:
    """What the over-optimization experiment plots, computed with the three given functions from ``pool``
    (:func:`best_of_n_pool`): "kl", best-of-n's KL for n = 1 ... N (the x axis is its square root); for the reply
    picked by the gold itself and by the proxies' "mean", "min" and "uwo" ensembles, "gold/<picker>" and
    "proxy/<picker>", the mean over prompts of best-of-n's expected gold and proxy score, n = 1 ... N."""
    import torch

    gold, proxies = pool["gold"], pool["proxies"]
    models, prompts, size = proxies.shape
    curves = {"kl": best_of_n_kl(torch.arange(1, size + 1))}
    pickers = {"gold": gold}
    for mode in MODES:
        pickers[mode] = ensemble_reward(proxies.reshape(models, prompts * size), mode).reshape(prompts, size)
    for name, proxy in pickers.items():
        curves[f"gold/{name}"] = best_of_n_estimate(proxy, gold).mean(dim=0)
        if name != "gold":
            curves[f"proxy/{name}"] = best_of_n_estimate(proxy, proxy).mean(dim=0)
    return curves


def online_pool(seed: int, pairs: int, models: int, noise: float, labels: int = 0) -> dict:
    """gate/online's fresh pairs: ``pairs`` prompts of the tiny preset's sentiment task (drawn with ``seed``), two
    replies to each from its starting policy; "gold_a", "gold_b", each reply's rule reward, (C,) float32 (few values:
    ties); "proxy_a", "proxy_b", (k, C): ``models`` proxies made as best_of_n_pool's (the gold plus noise of std
    ``noise``, rounded to halves: proxy ties where the gold differs; with k = 4 every mean and difference of them is
    exact in any order of summation, so ties are ties in any right implementation); "smooth_a", "smooth_b", (3, C):
    three proxies without the rounding, for 'disagreement' (the variance of probabilities has no exact ties).
    ``labels``: unused here."""
    import torch

    pool = best_of_n_pool(seed, pairs, 2, models, noise)
    gold, proxies = pool["gold"], pool["proxies"]  # (C, 2), (k, C, 2)
    smooth = gold + torch.randn(3, pairs, 2, generator=torch.Generator().manual_seed(seed + 1)) * noise
    return {
        "gold_a": gold[:, 0],
        "gold_b": gold[:, 1],
        "proxy_a": proxies[..., 0],
        "proxy_b": proxies[..., 1],
        "smooth_a": smooth[..., 0],
        "smooth_b": smooth[..., 1],
    }


def online_outcome(select_pairs, proxy_agreement, pool: dict, settings: dict) -> dict:
    """What gate/online's loop would decide, computed with the two given functions from ``pool`` (:func:`online_pool`):
    "picked/<selection>", the ``labels`` pairs each selection sends to the annotator ("uncertain" by the rounded
    proxies, "uncertain_one" by the first of them alone, "disagreement" by the smooth ones), and
    "agreement/<selection>", the rounded proxies' mean's agreement with the gold on those pairs; "agreement/all", on
    every pair."""
    import torch

    a, b, labels = pool["proxy_a"], pool["proxy_b"], settings["labels"]
    picks = {
        "random": select_pairs(a, b, labels, "random"),
        "uncertain": select_pairs(a, b, labels, "uncertain"),
        "uncertain_one": select_pairs(a[:1], b[:1], labels, "uncertain"),
        "disagreement": select_pairs(pool["smooth_a"], pool["smooth_b"], labels, "disagreement"),
    }
    proxy_a, proxy_b = a.mean(dim=0), b.mean(dim=0)
    outcome = {f"picked/{name}": picked for name, picked in picks.items()}
    for name, picked in [*picks.items(), ("all", torch.arange(len(proxy_a)))]:
        index = torch.as_tensor(picked).long()
        parts = (proxy_a[index], proxy_b[index], pool["gold_a"][index], pool["gold_b"][index])
        outcome[f"agreement/{name}"] = proxy_agreement(*parts)
    return outcome


if __name__ == "__main__":
    main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # the report is written: skip the teardown (and whatever the student's code left running)
