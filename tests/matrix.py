"""The combination matrix: every combination of the boolean prompts, with the choice and text answers
spread over it by a seeded draw (a covering design: the tests assert every boolean value meets every
choice value and every text variant), plus every combination the pre-generation hook must refuse.

Every accepted combination is rendered, checked and smoke-trained.
"""

import itertools
import random

from render import CHOICES
from tricks import REGISTRY, TRICKS, unmet

GPU_IDS = ["0", "", "1", "0,1", "0,1,2,3", "cpu"]
PROJECT_NAMES = ["My Project", "Flower Classifier", "Vision Ünïcode", "x"]


# The built-in model trains 74 % of the matrix: a torchvision model's smoke run costs 2-4 times as much. Each of those
# still trains more than a sixteenth of it (65 to 68 today), meeting every trick at both values many times (test_matrix
# checks every pairing, and the sixteenth); its own lane in test_bake runs the tests where the network matters.
WEIGHTS = {"model": [8 if model == "small_cnn" else 1 for model in CHOICES["model"]]}


def _draw(rng: random.Random, tricks_on: dict) -> dict:
    answers = dict(tricks_on)
    for key, options in CHOICES.items():
        answers[key] = rng.choices(options, WEIGHTS[key])[0] if key in WEIGHTS else rng.choice(options)
    answers["project_name"] = rng.choice(PROJECT_NAMES)
    return answers


def _name(answers: dict) -> str:
    on = [REGISTRY[trick].short for trick in TRICKS if answers[trick]] or ["none"]  # ids under pytest's 100 chars
    choices = [answers[key] for key in CHOICES]
    return "+".join(on) + "|" + "|".join(choices) + f"|gpus={answers['gpu_ids'] or 'empty'}"


def combinations() -> tuple[dict[str, dict], dict[str, dict]]:
    """(accepted, rejected): answers by readable id, from every combination of the booleans. Deterministic."""
    rng = random.Random(2026)
    accepted, rejected = {}, {}
    for values in itertools.product([False, True], repeat=len(TRICKS)):
        answers = _draw(rng, dict(zip(TRICKS, values, strict=True)))
        answers["gpu_ids"] = rng.choice(GPU_IDS)
        (rejected if unmet(answers) else accepted)[_name(answers)] = answers
    return accepted, rejected


ACCEPTED, REJECTED = combinations()


# Every model with every trick on and with every trick off, on top of the drawn models of the matrix; the trackers in
# turn, so that each one logs an all-on and an all-off run.
EXTREMES = {
    f"{model}-{'all-on' if on else 'all-off'}-{tracker}": (model, on, tracker)
    for model, tracker in zip(CHOICES["model"], CHOICES["tracker"], strict=True)
    for on in (True, False)
}
