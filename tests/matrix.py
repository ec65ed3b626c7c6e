"""The combination matrix: every combination of the boolean prompts, with the choice and text answers
spread over it by a seeded draw (a covering design: the tests assert every boolean value meets every
choice value and every text variant), plus every combination the pre-generation hook must refuse.

Every accepted combination is rendered and checked; a covering sample of them is also smoke-trained: every
5-way combination of trick values (and every trick value with every choice) trains at least once.
"""

import itertools
import random

import numpy as np
from helpers import CHOICES, REQUIRES, TRICKS

GPU_IDS = ["0", "", "1", "0,1", "0,1,2,3", "cpu"]
PROJECT_NAMES = ["My Project", "Flower Classifier", "Vision Ünïcode", "x"]
SHORT = {  # short names keep test ids readable (pytest replaces ids over 100 characters)
    "use_amp": "amp",
    "use_checkpointing": "ckpt",
    "use_distributed": "ddp",
    "use_freezing": "freeze",
    "use_grad_clipping": "clip",
    "use_label_smoothing": "smooth",
    "use_layerwise_lr": "lrmult",
    "use_mixup": "mix",
    "use_sync_bn": "syncbn",
    "use_tensorboard": "tb",
    "use_ema": "ema",
}


def _draw(rng: random.Random, tricks_on: dict) -> dict:
    answers = dict(tricks_on)
    for key, options in CHOICES.items():
        answers[key] = rng.choice(options)
    answers["project_name"] = rng.choice(PROJECT_NAMES)
    return answers


def _name(answers: dict) -> str:
    on = [SHORT[trick] for trick in TRICKS if answers[trick]] or ["none"]
    choices = [answers[key] for key in CHOICES]
    return "+".join(on) + "|" + "|".join(choices) + f"|gpus={answers['gpu_ids'] or 'empty'}"


def combinations() -> tuple[dict[str, dict], dict[str, dict]]:
    """(accepted, rejected): answers by readable id, from every combination of the booleans. Deterministic."""
    rng = random.Random(2026)
    accepted, rejected = {}, {}
    for values in itertools.product([False, True], repeat=len(TRICKS)):
        answers = _draw(rng, dict(zip(TRICKS, values, strict=True)))
        answers["gpu_ids"] = rng.choice(GPU_IDS)
        refused = any(answers[trick] and not answers[needed] for trick, needed in REQUIRES.items())
        (rejected if refused else accepted)[_name(answers)] = answers
    return accepted, rejected


ACCEPTED, REJECTED = combinations()


def covering_sample(rows: dict[str, dict], strength: int) -> list[str]:
    """Greedy covering design: keep adding the combination that trains the most not-yet-trained cells, where a
    cell is one value of `strength` tricks together, or one trick value with one choice, until every cell that
    some accepted combination has is trained. For 5 tricks together, 97 of the 1,536 accepted combinations."""
    names = sorted(rows)
    subsets = list(itertools.combinations(TRICKS, strength))
    pairs = [(trick, key) for trick in TRICKS for key in CHOICES]
    keys = [
        [(s, tuple(rows[n][t] for t in s)) for s in subsets] + [(p, (rows[n][p[0]], rows[n][p[1]])) for p in pairs]
        for n in names
    ]
    index = {cell: i for i, cell in enumerate(sorted({cell for row in keys for cell in row}, key=repr))}
    cells = np.array([[index[cell] for cell in row] for row in keys])
    trained = np.zeros(len(index), dtype=bool)
    chosen = []
    while not trained.all():
        best = int((~trained[cells]).sum(axis=1).argmax())  # the first of equals: deterministic
        chosen.append(names[best])
        trained[cells[best]] = True
    return sorted(chosen)


STRENGTH = 5
SMOKED = covering_sample(ACCEPTED, STRENGTH)
CHUNK = 48  # renders checked per test: one ruff run over all of them
RENDER_CHUNKS = [sorted(ACCEPTED)[start : start + CHUNK] for start in range(0, len(ACCEPTED), CHUNK)]
REJECTION_MESSAGES = {"use_sync_bn": "use_sync_bn synchronises BatchNorm across the processes of a multi-GPU job"}
