"""A whole training process, start to exit: the generated `train` command against a bare hand-written script that
does the same work (ImageFolder of scikit-learn's digits at 32 px, random resized crops and flips, resnet18, SGD,
label smoothing 0.1, clipping at 1.0, 2 epochs, validation after each, the weights saved at the end), with SGD
(lr 0.05, Nesterov momentum 0.9) or AdamW (lr 0.001), weight decay 5e-4 on both sides.

Each run is a fresh process, timed from outside (wall time) and from inside: `launch` notes the clock, imports torch
and hooks every optimizer's step before it hands over, so both sides pay the same for that and the first step is
timed alike. They take turns, with a second copy of the bare script as the control; the generated run also
without its plots (learning curves and confusion matrix, drawn at the end), which the bare script does not draw,
and also given the bare script's normalisation (`--mean`/`--std`), which it otherwise measures on the training images
before the first step: what is left is the generated run's own bookkeeping (checkpoints, reports, summary).

Afterwards it times what a checkpoint costs on this disk: one of the generated runs' own last.pt, loaded and
written again as the run writes it (serialised to a temporary file, fsynced, renamed), its median seconds and size.

    python benchmarks/whole_process.py --src RENDER/src [--rounds 7] [--optimizer sgd|adamw]
"""

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
KINDS = [
    "bare",
    "generated",
    "generated --no-plots",
    "generated --no-plots, the bare script's --mean/--std",
    "bare (second copy: the control)",
]
EPOCHS, SIZE, BATCH = 2, 32, 64
MEAN, STD = [0.5, 0.5, 0.5], [0.5, 0.5, 0.5]
OPTIMIZERS = {  # the bare script's, and the generated run's flags for the same
    "sgd": ("torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-4)", []),
    "adamw": ("torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=5e-4)", ["--optimizer", "adamw"]),
}

BARE = """
import sys
import torch
import torchvision
from torch import nn
from torchvision import datasets, transforms

data, out = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
normalise = transforms.Normalize({mean}, {std})
augment = [transforms.RandomResizedCrop({size}, scale=(0.35, 1.0)), transforms.RandomHorizontalFlip()]
train_set = datasets.ImageFolder(data + "/train", transforms.Compose([*augment, transforms.ToTensor(), normalise]))
val_set = datasets.ImageFolder(data + "/val", transforms.Compose([transforms.ToTensor(), normalise]))
train = torch.utils.data.DataLoader(train_set, batch_size={batch}, shuffle=True)
val = torch.utils.data.DataLoader(val_set, batch_size={batch})
model = torchvision.models.resnet18(num_classes=len(train_set.classes))
optimizer = {optimizer}
criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
for epoch in range({epochs}):
    model.train()
    for images, targets in train:
        loss = criterion(model(images), targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    model.eval()
    correct = 0
    with torch.no_grad():
        for images, targets in val:
            correct += (model(images).argmax(1) == targets).sum().item()
    print(epoch + 1, loss.item(), correct / len(val_set))
torch.save(model.state_dict(), out + "/model.pt")
"""

LAUNCH = """
import json, sys, time
started = time.perf_counter()
import torch
from torch.optim.optimizer import register_optimizer_step_post_hook
steps = []
register_optimizer_step_post_hook(lambda *_: steps.append(time.perf_counter()) if not steps else None)
record, kind = sys.argv[1], sys.argv[2]
try:
    if kind == "bare":
        sys.argv = [sys.argv[3], *sys.argv[4:]]
        exec(compile(open(sys.argv[0]).read(), sys.argv[0], "exec"), {{"__name__": "__main__"}})
    else:
        from {package}.cli import main
        code = main(sys.argv[3:])
        assert code == 0, code
finally:
    with open(record, "w") as file:
        json.dump({{"first_step": steps[0] - started, "until_exit": time.perf_counter() - started}}, file)
"""


def make_digits(folder: Path) -> Path:
    """scikit-learn's 1,797 handwritten digits as 32 px RGB PNGs in train/ and val/ (a fifth), one folder per digit."""
    import numpy as np
    from PIL import Image
    from sklearn.datasets import load_digits

    digits = load_digits()
    for index, (image, label) in enumerate(zip(digits.images, digits.target, strict=True)):
        split = "val" if index % 5 == 0 else "train"
        (folder / split / str(label)).mkdir(parents=True, exist_ok=True)
        gray = Image.fromarray((image * 255 / 16).astype(np.uint8)).resize((SIZE, SIZE), Image.BILINEAR)
        gray.convert("RGB").save(folder / split / str(label) / f"{index:04d}.png")
    return folder


def run(kind: str, src: str, package: str, data: Path, scratch: Path, optimizer: str) -> dict:
    out = Path(tempfile.mkdtemp(dir=scratch))
    record = out / "record.json"
    launch = LAUNCH.format(package=package)
    if kind.startswith("bare"):
        script = scratch / "bare.py"
        args = ["bare", str(script), str(data), str(out)]
    else:
        args = ["generated", "train", "--data", str(data), "--model", "resnet18", "--epochs", str(EPOCHS)]
        args += ["--image-size", str(SIZE), "--batch-size", str(BATCH), "--num-workers", "0", "--device", "cpu"]
        args += ["--label-smoothing", "0.1", "--clip-grad-norm", "1.0", "--output-dir", str(out / "run")]
        args += ["--weight-decay", "5e-4", *OPTIMIZERS[optimizer][1]]
        args += ["--no-plots"] if "--no-plots" in kind else []
        args += ["--mean", *map(str, MEAN), "--std", *map(str, STD)] if "--mean" in kind else []
    env = {**os.environ, "PYTHONPATH": src, "PYTHONWARNINGS": "ignore"}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", launch, str(record), *args], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{kind} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return {"wall": wall, **json.loads(record.read_text()), "out": str(out)}


def checkpoint_cost(last: Path, repeats: int = 5) -> dict:
    """Median seconds to write `last` again as train writes it (temporary file, fsync, rename), and its size."""
    import torch

    state = torch.load(last, map_location="cpu", weights_only=False)
    seconds = []
    for _ in range(repeats):
        started = time.perf_counter()
        temporary = last.with_name("again.tmp")
        with open(temporary, "wb") as file:
            torch.save(state, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, last.with_name("again.pt"))
        seconds.append(time.perf_counter() - started)
    return {"seconds": statistics.median(seconds), "megabytes": round(last.stat().st_size / 1e6, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--src", required=True, help="the src/ folder of a render")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--optimizer", choices=OPTIMIZERS, default="sgd")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from bench import package_in, speedup

    package = package_in(args.src)
    with tempfile.TemporaryDirectory() as folder:
        scratch = Path(folder)
        data = make_digits(scratch / "digits")
        optimizer = OPTIMIZERS[args.optimizer][0]
        bare = BARE.format(mean=MEAN, std=STD, size=SIZE, batch=BATCH, epochs=EPOCHS, optimizer=optimizer)
        (scratch / "bare.py").write_text(bare)
        runs = {kind: [] for kind in KINDS}
        order = random.Random(0)
        for round_ in range(args.rounds + 1):  # the first round warms the disk cache
            for kind in order.sample(KINDS, len(KINDS)):
                result = run(kind, args.src, package, data, scratch, args.optimizer)
                if round_:
                    runs[kind].append(result)
                print(f"round {round_}: {kind}: {result}", file=sys.stderr, flush=True)
        last = Path(runs["generated"][-1]["out"]) / "run" / "last.pt"
        cost = checkpoint_cost(last) if last.is_file() else None  # a render without checkpointing has none
    print(json.dumps({**summary(runs, speedup), "checkpoint (one last.pt)": cost}))


def summary(runs: dict, speedup) -> dict:
    """Per kind: the median seconds, and time ratios against the bare script (above 1: slower than bare)."""
    result = {}
    for kind, measured in runs.items():
        figures = {}
        for key in ("first_step", "until_exit", "wall"):
            bare = [r[key] for r in runs["bare"]]
            mine = [r[key] for r in measured]
            ratio = speedup(mine, bare)  # mine / bare, per round: how much longer it took
            figures[key] = {"seconds": statistics.median(mine), **ratio}
        result[kind] = figures
    return result


if __name__ == "__main__":
    main()
