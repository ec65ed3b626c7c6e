"""The combination matrix: every combination of the boolean prompts, with the choice and text answers spread over it
(the tests assert every boolean value meets every choice value and every text variant), plus every combination the
pre-generation hook must refuse. The precision, tracker, GPU ids and project name are drawn by a seeded generator; the
model is the built-in one except on a covering design for each other model (_give_models).

Every accepted combination is rendered, checked and smoke-trained.
"""

import itertools
import random

from render import CHOICES
from tricks import REGISTRY, TRICKS, unmet

GPU_IDS = ["0", "", "1", "0,1", "0,1,2,3", "cpu"]
PROJECT_NAMES = ["My Project", "Flower Classifier", "Vision Ünïcode", "x"]


BUILT_IN = CHOICES["model"][0]  # the template's own small network: any other model's smoke run costs 2-4 times as much
TRIPLES = list(itertools.combinations(range(len(TRICKS)), 3))


def _draw(rng: random.Random, tricks_on: dict) -> dict:
    answers = dict(tricks_on)
    for key, options in CHOICES.items():
        answers[key] = BUILT_IN if key == "model" else rng.choice(options)
    answers["project_name"] = rng.choice(PROJECT_NAMES)
    return answers


def _name(answers: dict) -> str:
    on = [REGISTRY[trick].short for trick in TRICKS if answers[trick]] or ["none"]  # ids under pytest's 100 chars
    choices = [answers[key] for key in CHOICES]
    return "+".join(on) + "|" + "|".join(choices) + f"|gpus={answers['gpu_ids'] or 'empty'}"


def cells(answers: dict) -> set[tuple]:
    """What one combination trains a model with: the values of every three tricks together, each trick's value with
    each tracker, its cell of the GPU check (precision x DDP x checkpointing), and its task."""
    values = [answers[trick] for trick in TRICKS]
    return (
        {tuple((i, values[i]) for i in triple) for triple in TRIPLES}
        | {(trick, answers[trick], answers["tracker"]) for trick in TRICKS}
        | {(precision_of(answers), answers["use_distributed"], answers["use_checkpointing"])}
        | {("task", answers["task"])}
    )


def precision_of(answers: dict) -> str:
    """The precision a render trains in on CUDA: its prompted one with mixed precision, else fp32."""
    return answers["amp_precision"] if answers["use_amp"] else "fp32"


def _give_models(accepted: list[dict]) -> None:
    """Every other model than the built-in one trains a covering design of the matrix: the fewest combinations (chosen
    greedily, in the matrix's order) that between them train it with every cell (above) some accepted combination has;
    the built-in model trains the rest. So each model meets every value of any three tricks together, not only each
    trick at both values."""
    trains = [cells(answers) for answers in accepted]
    wanted = set().union(*trains)
    for model in CHOICES["model"][1:]:
        missing, free = set(wanted), [i for i, answers in enumerate(accepted) if answers["model"] == BUILT_IN]
        while missing:
            best = max(free, key=lambda i: len(trains[i] & missing))  # the first of the best
            assert trains[best] & missing, f"{model}: only combinations given to other models train {missing}"
            accepted[best]["model"] = model
            missing -= trains[best]
            free.remove(best)


def combinations() -> tuple[dict[str, dict], dict[str, dict]]:
    """(accepted, rejected): answers by readable id, from every combination of the booleans. Deterministic."""
    rng = random.Random(2026)
    drawn = []
    for values in itertools.product([False, True], repeat=len(TRICKS)):
        answers = _draw(rng, dict(zip(TRICKS, values, strict=True)))
        answers["gpu_ids"] = rng.choice(GPU_IDS)
        drawn.append(answers)
    _give_models([answers for answers in drawn if not unmet(answers)])
    for answers in drawn:
        if unmet(answers):  # never trained: any model
            answers["model"] = rng.choice(CHOICES["model"])
    accepted = {_name(answers): answers for answers in drawn if not unmet(answers)}
    rejected = {_name(answers): answers for answers in drawn if unmet(answers)}
    return accepted, rejected


ACCEPTED, REJECTED = combinations()


# Every model with every trick on and with every trick off, on top of the models the matrix gives out; the trackers in
# turn, so that each one logs an all-on and an all-off run.
EXTREMES = {
    f"{model}-{'all-on' if on else 'all-off'}-{tracker}": (model, on, tracker)
    for model, tracker in zip(CHOICES["model"], CHOICES["tracker"], strict=True)
    for on in (True, False)
}
