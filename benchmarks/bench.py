"""Images per second of the generated training loop against a bare PyTorch loop, Lightning and Ignite.

Every contender trains the same model on the same in-memory tensors with the same batch size, optimizer
(SGD with Nesterov momentum and weight decay) and loss, each in a process of its own so that its peak
memory is its own. The bare loop is the physical limit: no metrics, no progress bar, nothing but the step.
The generated loop is the render's own `train_one_epoch`, with no trick plugged in so that it does the same work,
through the render's own `Runtime` (with mixed precision, its GradScaler is a disabled one unless fp16 on a GPU).
Both loops train in the same `--precision`, taken as given: fp32 (the default; autocast off on both sides) or bf16
(autocast on both sides, the generated one through the render's own `--precision`, which needs a render with mixed
precision). Time to first step counts from the start of the measuring process
(importing torch, building data and model, importing and setting up the framework) to the end of the first
optimizer step.
Because separate processes vary by more than the loops differ, a second table has the loops take turns in
one process (see `paired`). A third table times the generated data loader alone (synthetic data, the
default path) against the training step, for the `--num-workers` advice. Then: what worker-count independence
costs per image (`seeding_cost`), the generated data path on real JPEGs against torchvision's reference pipeline
(`jpeg_pipeline`), and whole training processes against a bare script (`whole_process.py`).
On a GPU a last table takes the path a GPU user trains on (`cuda_path`): resnet50 at 224 px, bf16 autocast,
channels-last, eager and under torch.compile, every contender alike, the generated loop from a default render with
mixed precision; each run also reports what its first convolution really received and returned, so that the table
shows all loops did the same work.

    bash benchmarks/run.sh              # CPU, or the GPU when there is one; writes benchmarks/results-<device>.md
    bash benchmarks/run.sh --cuda-path  # only the GPU table (on a CPU: a check of its plumbing, small sizes)
"""

import argparse
import contextlib
import dataclasses
import importlib
import inspect
import json
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CONTENDERS = ["bare", "generated", "lightning", "ignite"]
MODELS = ["small_cnn", "resnet18"]
PAIRED_LOOPS = ["bare", "generated", "lightning", "ignite", "bare (second copy: the control)"]
PAIRED_HEADER = (
    "| model | loop, taking turns in one process ({args.rounds} rounds of {args.chunk} steps) | images/s vs bare "
    "loop, median of rounds | 95 % interval |\n|---|---|---:|---:|"
)
PACKAGE = "my_project"  # the default render's package; `--src` of another render names its own (see package_in)
PRECISIONS = ["fp32", "bf16"]  # what every loop can train in, alike (bf16: autocast around the forward pass)
# The GPU table: what a GPU user trains (the first convolutions dominate; channels-last feeds tensor cores).
CUDA_PATH = {"model": "resnet50", "image_size": 224, "batch_size": 128, "images": 4096, "precision": "bf16"}
CUDA_RENDER = {"use_amp": "yes", "amp_precision": "bf16"}  # a default render, plus the mixed precision it needs
# glibc's malloc hands large freed blocks back to the OS and faults them in again, by a history-dependent rule:
# identical resnet18 runs here page-faulted 4,500 to 12,000 times per step, and their speed went with it.
# Fixing the thresholds (no mmap below 32 MiB, no trimming) takes that noise out for every contender alike.
MEASURING_ENVIRONMENT = {
    "PYTHONWARNINGS": "ignore",
    "MALLOC_MMAP_THRESHOLD_": str(32 * 2**20),
    "MALLOC_TRIM_THRESHOLD_": str(2**40),
}


def package_in(src: str) -> str:
    """The one package a render's src/ holds."""
    found = sorted(path.parent.name for path in Path(src).glob("*/__init__.py"))
    if len(found) != 1:
        raise SystemExit(f"{src}: expected one package with an __init__.py, found {found}")
    return found[0]


def autocast(precision: str, device):
    import torch

    return contextlib.nullcontext() if precision == "fp32" else torch.autocast(device.type, dtype=torch.bfloat16)


def render(out: Path, **answers) -> Path:
    from cookiecutter.main import cookiecutter

    sys.path.insert(0, str(HERE.parent))  # local_extensions.py
    return Path(cookiecutter(str(HERE.parent), no_input=True, output_dir=str(out), extra_context=answers)) / "src"


def memory_format(channels_last: bool):
    import torch

    return torch.channels_last if channels_last else torch.preserve_format


def first_conv(model):
    from torch import nn

    return next(module for module in model.modules() if isinstance(module, nn.Conv2d))


def watch_first_conv(model, seen: dict) -> None:
    """Record, once, what the first convolution receives and returns: the proof that a loop trained in the
    memory format and precision the table says."""

    def hook(module, inputs, output):
        if not seen:
            seen["input_channels_last"] = inputs[0].dim() == 4 and inputs[0].is_contiguous(
                memory_format=memory_format(True)
            )
            seen["output_dtype"] = str(output.dtype).removeprefix("torch.")

    first_conv(model).register_forward_hook(hook)


# ---- one measurement, in its own process ---------------------------------------------------------------


def one(contender: str, model_name: str, args) -> dict:
    started = time.perf_counter()  # time to first step counts from here: imports, data, model, framework set-up
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    sys.path.insert(0, args.src)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    images = torch.randn(args.images, 3, args.image_size, args.image_size, generator=generator)
    labels = torch.randint(0, 10, (args.images,), generator=generator)
    loader = DataLoader(
        TensorDataset(images, labels),
        batch_size=args.batch_size,
        shuffle=True,
        drop_last=True,
        generator=generator,
        pin_memory=device.type == "cuda",
    )
    if model_name == "small_cnn":
        model = importlib.import_module(f"{PACKAGE}.models").SmallCNN(10)
    else:
        import torchvision

        model = getattr(torchvision.models, model_name)(num_classes=10)
    model.to(device, memory_format=memory_format(args.channels_last))
    seen = {}
    if not args.compile:  # a hook's side effect would break the compiled graph; compile keeps the eager run's work
        watch_first_conv(model, seen)
    trained = torch.compile(model) if args.compile else model
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-4)
    criterion = nn.CrossEntropyLoss()

    step_times = []

    def clock(*_):
        if not step_times and device.type == "cuda":
            torch.cuda.synchronize()  # once: the first step really finished
        step_times.append(time.perf_counter())

    optimizer.register_step_post_hook(clock)
    RUNNERS[contender](trained, loader, optimizer, criterion, device, args.epochs, args.precision, args.channels_last)
    if device.type == "cuda":
        torch.cuda.synchronize()
    finished = time.perf_counter()

    per_epoch = len(loader)
    timed_steps = len(step_times) - per_epoch  # the first epoch warms up (allocator, autotuning, caches)
    seconds = finished - step_times[per_epoch - 1]
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB
    memory = torch.cuda.max_memory_allocated() if device.type == "cuda" else rss
    return {
        "images_per_second": timed_steps * args.batch_size / seconds,
        "first_step_seconds": step_times[0] - started,
        "peak_memory_mib": memory / 2**20,
        "steps": len(step_times),
        "precision": args.precision,  # the same on both sides of a comparison: bench.py takes one for all loops
        "channels_last": args.channels_last,
        "compiled": args.compile,
        "first_conv": seen,  # {} under compile
        "device": torch.cuda.get_device_name() if device.type == "cuda" else cpu_name(),
    }


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []:
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "CPU"


def run_bare(model, loader, optimizer, criterion, device, epochs, precision="fp32", channels_last=False):
    model.train()
    layout = memory_format(channels_last)
    for _ in range(epochs):
        for images, targets in loader:
            images = images.to(device, non_blocking=True, memory_format=layout)
            targets = targets.to(device, non_blocking=True)
            with autocast(precision, device):
                loss = criterion(model(images), targets)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()


def run_generated(model, loader, optimizer, criterion, device, epochs, precision="fp32", channels_last=False):
    call = generated_call(device, precision, channels_last)
    for _ in range(epochs):
        call(model, loader, criterion, optimizer)


def generated_call(device, precision: str, channels_last: bool = False):
    """`train_one_epoch` of the render in `--src`, doing the bare loop's work (no trick plugged in) in the bare loop's
    precision and memory format, through the render's runtime."""
    engine = importlib.import_module(f"{PACKAGE}.training.engine")
    config = importlib.import_module(f"{PACKAGE}.config")
    fields = {field.name for field in dataclasses.fields(config.TrainConfig)}
    # the bare loop's work: no smoothing (the criterion is the bench's own anyway), no clipping
    settings = {"device": device.type, "label_smoothing": 0.0, "clip_grad_norm": 0.0, "precision": precision}
    settings["channels_last"] = channels_last
    if "precision" not in fields and precision != "fp32":
        raise SystemExit(f"--precision {precision}: this render has no mixed precision (render it with use_amp)")
    cfg = config.TrainConfig(**{key: value for key, value in settings.items() if key in fields})
    runtime = engine.Runtime(device, cfg)  # the render's own, as train() makes it: fp16's scaler on CUDA alone
    for name, parameter in list(inspect.signature(engine.train_one_epoch).parameters.items())[5:]:
        if parameter.default is inspect.Parameter.empty:
            raise SystemExit(f"train_one_epoch of {PACKAGE} needs `{name}`, which bench.py does not know how to pass")
    return lambda model, loader, criterion, optimizer: engine.train_one_epoch(
        model, loader, criterion, optimizer, runtime, channels_last=channels_last
    )


def run_lightning(model, loader, optimizer, criterion, device, epochs, precision="fp32", channels_last=False):
    import lightning

    layout = memory_format(channels_last)

    class Classifier(lightning.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = model

        def training_step(self, batch, index):
            images, targets = batch
            return criterion(self.model(images.contiguous(memory_format=layout)), targets)

        def configure_optimizers(self):
            return optimizer

    trainer = lightning.Trainer(
        max_epochs=epochs,
        accelerator=device.type if device.type == "cuda" else "cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        precision="bf16-mixed" if precision == "bf16" else "32-true",  # Lightning's autocast, as the bare loop's
    )
    trainer.fit(Classifier(), train_dataloaders=loader)


def run_ignite(model, loader, optimizer, criterion, device, epochs, precision="fp32", channels_last=False):
    from ignite.engine import create_supervised_trainer

    layout = memory_format(channels_last)

    def prepare_batch(batch, device, non_blocking):
        images, targets = batch
        images = images.to(device, non_blocking=non_blocking, memory_format=layout)
        return images, targets.to(device, non_blocking=non_blocking)

    def forward(model, images):  # Ignite's own amp_mode autocasts to fp16 only: bf16 goes through model_fn
        with autocast(precision, device):
            return model(images)

    trainer = create_supervised_trainer(
        model, optimizer, criterion, device=device, non_blocking=True, prepare_batch=prepare_batch, model_fn=forward
    )
    trainer.run(loader, max_epochs=epochs)


RUNNERS = {"bare": run_bare, "generated": run_generated, "lightning": run_lightning, "ignite": run_ignite}


def paired(model_name: str, args) -> dict:
    """Every loop taking turns in one process, `--chunk` steps a turn, each on its own copy of the same model.

    The machine's slow moments hit all loops alike, so per-round ratios are far steadier than ratios between
    separate processes. A turn is timed from its first optimizer step to its last, so what a framework does
    once per `fit`/`run` (building a Trainer, say) is left out and its per-step work is in. A second copy of
    the bare loop takes turns too: its distance from 1 is what the harness itself can resolve. The figure is
    the median of the per-round ratios to the bare loop, with a bootstrap 95 % interval.
    """
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    sys.path.insert(0, args.src)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    generator = torch.Generator().manual_seed(0)
    count = args.chunk * args.batch_size
    images = torch.randn(count, 3, args.image_size, args.image_size, generator=generator)
    labels = torch.randint(0, 10, (count,), generator=generator)
    loader = DataLoader(TensorDataset(images, labels), batch_size=args.batch_size, shuffle=True, drop_last=True)
    if model_name == "small_cnn":
        build = lambda: importlib.import_module(f"{PACKAGE}.models").SmallCNN(10)  # noqa: E731
    else:
        import torchvision

        build = lambda: getattr(torchvision.models, model_name)(num_classes=10)  # noqa: E731
    stamps = []

    def clock(*_):
        if device.type == "cuda" and len(stamps) in (0, args.chunk - 1):
            torch.cuda.synchronize()  # the turn's first and last steps really finished
        stamps.append(time.perf_counter())

    setups, seconds = {}, {loop: [] for loop in PAIRED_LOOPS}
    for loop in PAIRED_LOOPS:
        torch.manual_seed(0)
        model = build().to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, nesterov=True, weight_decay=5e-4)
        optimizer.register_step_post_hook(clock)
        setups[loop] = (model, optimizer)
    criterion = nn.CrossEntropyLoss()
    for round_ in range(args.rounds + 2):  # the first two rounds warm every loop up
        shift = round_ % len(PAIRED_LOOPS)  # each loop goes first, second, ... in turn
        for loop in PAIRED_LOOPS[shift:] + PAIRED_LOOPS[:shift]:
            stamps.clear()
            model, optimizer = setups[loop]
            RUNNERS[loop.split()[0]](model, loader, optimizer, criterion, device, 1, args.precision)
            if round_ >= 2:
                seconds[loop].append(stamps[-1] - stamps[0])
    return {loop: speedup(seconds["bare"], seconds[loop]) for loop in PAIRED_LOOPS[1:]}


def speedup(base: list[float], other: list[float]) -> dict:
    """Median of the per-round ratios of seconds (base / other: other's images/s against base's), with a bootstrap
    95 % interval."""
    ratios = [b / o for b, o in zip(base, other, strict=True)]
    resample = random.Random(0)
    medians = sorted(statistics.median(resample.choices(ratios, k=len(ratios))) for _ in range(2000))
    return {"ratio": statistics.median(ratios), "low": medians[50], "high": medians[1949]}


def loader_alone(workers: int, args) -> dict:
    """The generated data path (synthetic stripes, augmentation, normalisation) without any training."""
    import torch

    sys.path.insert(0, args.src)
    config = importlib.import_module(f"{PACKAGE}.config")
    data = importlib.import_module(f"{PACKAGE}.data.loaders")
    train = importlib.import_module(f"{PACKAGE}.training.train")
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    cfg = train.resolve(config.TrainConfig(batch_size=args.batch_size, num_workers=workers, output_dir="unused"))
    loader = data.build_data(cfg, device).train
    count, started = 0, time.perf_counter()
    for epoch in range(2):
        if epoch == 1:  # the first epoch starts the workers
            count, started = 0, time.perf_counter()
        for images, _ in loader:
            count += len(images)
    return {"images_per_second": count / (time.perf_counter() - started)}


PHOTO_CLASSES = ["china", "china-upright", "flower", "flower-upright"]
JPEG_PIPELINES = ["reference", "generated", "reference (second copy: the control)"]
IMAGENET_STATS = ([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])


def make_photos(folder: Path, per_class: int = 80, seed: int = 0) -> Path:
    """Real photographs at ImageNet-like sizes: scikit-learn's two sample photos (640x427), scaled by 0.9 to 1,
    cut at random places into 400x350 to 500x375 pictures (half of them turned upright), re-encoded as JPEG
    (quality 90) into train/ and val/ folders of four classes. Nothing is downloaded."""
    from PIL import Image
    from sklearn.datasets import load_sample_images

    draw = random.Random(seed)
    sources = dict(zip(["china", "flower"], load_sample_images().images, strict=True))
    for name in PHOTO_CLASSES:
        photo = Image.fromarray(sources[name.split("-")[0]])
        for index in range(per_class + per_class // 4):
            scale = draw.uniform(0.9, 1.0)
            scaled = photo.resize((round(photo.width * scale), round(photo.height * scale)), Image.BILINEAR)
            width, height = draw.randint(400, 500), draw.randint(350, 375)
            left, top = draw.randint(0, scaled.width - width), draw.randint(0, scaled.height - height)
            cut = scaled.crop((left, top, left + width, top + height))
            cut = cut.transpose(Image.ROTATE_90) if name.endswith("upright") else cut
            split = "train" if index < per_class else "val"
            (folder / split / name).mkdir(parents=True, exist_ok=True)
            cut.save(folder / split / name / f"{index:03d}.jpg", quality=90)
    return folder


def jpeg_pipeline(workers: int, args) -> dict:
    """Training images/s on real JPEGs at 224 px: the generated data path against torchvision's reference
    classification pipeline (ImageFolder, PIL decoding, RandomResizedCrop, flip, ToTensor, Normalize), with the
    generated path's crop scale (0.35-1) on both sides, batch 64, `workers` data-loading processes. Both yield
    normalised float batches ready for the model (the generated path converts on the device, here the CPU). They
    take turns, an epoch each, in one process; a second copy of the reference is the control."""
    import torch
    import torchvision.transforms as T
    from torch.utils.data import DataLoader
    from torchvision.datasets import ImageFolder

    sys.path.insert(0, args.src)
    config = importlib.import_module(f"{PACKAGE}.config")
    data = importlib.import_module(f"{PACKAGE}.data.loaders")
    train = importlib.import_module(f"{PACKAGE}.training.train")
    photos = make_photos(Path(tempfile.mkdtemp()) / "photos")
    reference = T.Compose(
        [
            T.RandomResizedCrop(224, scale=(0.35, 1.0)),
            T.RandomHorizontalFlip(),
            T.ToTensor(),
            T.Normalize(*IMAGENET_STATS),
        ]
    )
    loader = lambda: DataLoader(  # noqa: E731
        ImageFolder(photos / "train", transform=reference), batch_size=64, shuffle=True, num_workers=workers
    )
    cfg = config.TrainConfig(data=str(photos), image_size=224, batch_size=64, num_workers=workers)
    cfg = train.resolve(
        dataclasses.replace(cfg, output_dir=tempfile.mkdtemp(), mean=IMAGENET_STATS[0], std=IMAGENET_STATS[1])
    )
    device = torch.device("cpu")
    generated = data.build_data(cfg, device).train
    loaders = {"reference": loader(), "generated": generated, JPEG_PIPELINES[2]: loader()}
    prepare = getattr(data, "prepare", None)
    seconds = {name: [] for name in JPEG_PIPELINES}
    for round_ in range(args.rounds // 4 + 1):  # the first round warms up
        shift = round_ % len(JPEG_PIPELINES)
        for name in JPEG_PIPELINES[shift:] + JPEG_PIPELINES[:shift]:
            if name == "generated":
                data.start_epoch(generated, round_ + 1)
            started = time.perf_counter()
            for images, _ in loaders[name]:
                if name == "generated" and prepare:
                    images = prepare(images, device, cfg)
            if round_:
                seconds[name].append(time.perf_counter() - started)
    count = len(loaders["reference"].dataset)
    rates = {name: count / statistics.median(times) for name, times in seconds.items()}
    return {"rates": rates} | {name: speedup(seconds["reference"], seconds[name]) for name in JPEG_PIPELINES[1:]}


def seeding_cost(batch_size: int, args) -> dict:
    """What worker-count independence costs per image: SeededBatches' own work for a batch (a hash, a seed and, in
    the main process, saving and restoring the random streams), timed around a dataset that does nothing, against
    what the default training transform takes per image. (Timing the transform with and without the seed would mix
    in its random choices: another seed draws other crops, cheaper or dearer.) Batch 1 is what seeding every image
    on its own would cost."""
    import torch
    import torch.utils.data as tud

    sys.path.insert(0, args.src)
    sources = importlib.import_module(f"{PACKAGE}.data.sources")
    samplers = importlib.import_module(f"{PACKAGE}.data.samplers")
    transforms = importlib.import_module(f"{PACKAGE}.data.transforms")
    torch.set_num_threads(1)

    def per_image(fetch, batches, rounds=9) -> float:
        times = []
        for _ in range(rounds):
            started = time.perf_counter()
            for batch in batches:
                fetch(batch)
            times.append((time.perf_counter() - started) / sum(map(len, batches)))
        return statistics.median(times)

    stats = [0.5] * 3
    transform = transforms.build_transform("synthetic", args.image_size, stats, stats, transforms.Augmentation("basic"))
    images = sources.SyntheticImages(1024, 0, transform=transform)
    transformed = per_image(lambda batch: [images[i] for i in batch], [list(range(1024))], rounds=5)
    nothing = list(range(2**16))
    seeded = samplers.SeededBatches(nothing, 0)
    batches = [nothing[i : i + batch_size] for i in range(0, 8192, batch_size)]
    plain = per_image(lambda batch: [nothing[i] for i in batch], batches)
    in_main = per_image(seeded.__getitems__, batches) - plain
    tud._utils.worker._worker_info = type("Worker", (), {"id": 0})()  # as in a data-loading worker: no state kept
    in_worker = per_image(seeded.__getitems__, batches) - plain
    return {"transform_us": transformed * 1e6, "main_us": in_main * 1e6, "worker_us": in_worker * 1e6}


# ---- the whole benchmark -------------------------------------------------------------------------------


def measure(kind: str, name: str, args) -> dict:
    command = [sys.executable, __file__, "--one", kind, name, "--src", args.src]
    command += ["--images", str(args.images), "--epochs", str(args.epochs), "--precision", args.precision]
    command += ["--channels-last"] * args.channels_last + ["--compile"] * args.compile
    command += [
        "--image-size",
        str(args.image_size),
        "--batch-size",
        str(args.batch_size),
        "--rounds",
        str(args.rounds),
        "--chunk",
        str(args.chunk),
    ]
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **MEASURING_ENVIRONMENT})
    if done.returncode != 0:
        raise SystemExit(f"{kind} {name} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def table(results: dict, loaders: dict, pairs: dict, args, device: str) -> str:
    import torch

    lines = [
        f"Machine: {device}; {os.cpu_count()} CPU cores, {os.environ.get('OMP_NUM_THREADS', 'all')} threads; "
        f"torch {torch.__version__}, Python {platform.python_version()}. {args.images} images of "
        f"{args.image_size}x{args.image_size}, batch {args.batch_size}, {args.epochs} epochs (the first one warms "
        f"up and is not timed), median of {args.repeats} runs. glibc malloc thresholds fixed for every contender "
        f"(MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_; see bench.py).",
        "",
        "| model | loop | images/s | vs bare loop | time to first step (s) | vs bare loop | peak memory (MiB) |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for model in MODELS:
        bare = results[model]["bare"]
        for contender in CONTENDERS:
            r = results[model][contender]
            speed, start = r["images_per_second"], r["first_step_seconds"]
            lines.append(
                f"| {model} | {contender} | {speed:.0f} | {speed / bare['images_per_second']:.3f} | {start:.2f} | "
                f"{start / bare['first_step_seconds']:.2f} | {r['peak_memory_mib']:.0f} |"
            )
    lines += ["", PAIRED_HEADER.format(args=args)]
    for model, result in pairs.items():
        lines += paired_rows(model, result)
    train_rate = results["small_cnn"]["generated"]["images_per_second"]
    lines += ["", "| data loading alone (synthetic, default transforms) | images/s | vs small_cnn training |"]
    lines += ["|---|---:|---:|"]
    for workers, r in loaders.items():
        rate = r["images_per_second"]
        lines.append(f"| `--num-workers {workers}` | {rate:.0f} | {rate / train_rate:.2f}x |")
    return "\n".join(lines) + "\n"


def whole_process(args) -> dict:
    """benchmarks/whole_process.py on the same render: whole train processes against a bare script."""
    command = [sys.executable, str(HERE / "whole_process.py"), "--src", args.src]
    done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **MEASURING_ENVIRONMENT})
    if done.returncode != 0:
        raise SystemExit(f"whole_process.py failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def jpeg_table(jpeg: dict) -> str:
    lines = [
        "",
        "| real JPEGs at 224 px (320 photos, 4 classes), batch 64 | reference images/s | generated images/s | "
        "generated vs reference, median of rounds | 95 % interval | control (reference again) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for workers, r in jpeg.items():
        rates, mine, control = r["rates"], r["generated"], r[JPEG_PIPELINES[2]]
        lines.append(
            f"| `--num-workers {workers}` | {rates['reference']:.0f} | {rates['generated']:.0f} | "
            f"{mine['ratio']:.2f} | {mine['low']:.2f}-{mine['high']:.2f} | {control['ratio']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def whole_table(whole: dict) -> str:
    lines = [
        "",
        "| whole process: resnet18, 2 epochs of the digits at 32 px | to first step (s) | vs bare | until exit (s) | "
        "vs bare | wall (s) | vs bare, 95 % interval |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for kind, r in whole.items():
        first, until, wall = r["first_step"], r["until_exit"], r["wall"]
        lines.append(
            f"| {kind} | {first['seconds']:.2f} | {first['ratio']:.2f} | {until['seconds']:.2f} | "
            f"{until['ratio']:.2f} | {wall['seconds']:.2f} | {wall['ratio']:.2f} "
            f"({wall['low']:.2f}-{wall['high']:.2f}) |"
        )
    return "\n".join(lines) + "\n"


def seeding_table(seeding: dict, args) -> str:
    lines = [
        "",
        f"| worker-count independence: seeding, per image of a batch | main process | in a worker | share of the "
        f"{args.image_size}-px training transform ({seeding[1]['transform_us']:.0f} µs per image) |",
        "|---|---:|---:|---:|",
    ]
    for size, r in seeding.items():
        name = "batch 1 (as seeding each image)" if size == 1 else f"batch {size}"
        share = f"{r['main_us'] / r['transform_us']:.2%} / {r['worker_us'] / r['transform_us']:.2%}"
        lines.append(f"| {name} | {r['main_us']:.2f} µs | {r['worker_us']:.2f} µs | {share} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--one", nargs=2, metavar=("CONTENDER", "MODEL"), help=argparse.SUPPRESS)
    parser.add_argument("--src", help=argparse.SUPPRESS)
    parser.add_argument("--images", type=int, help="images per epoch (default: 2048 on CPU, 32768 on GPU)")
    parser.add_argument("--epochs", type=int, default=3, help="epochs per run; the first is not timed")
    parser.add_argument("--image-size", type=int, help="default: 32, or 224 for the GPU table")
    parser.add_argument("--batch-size", type=int, help="default: 64, or 128 for the GPU table")
    parser.add_argument("--repeats", type=int, default=5, help="runs per contender; the median counts")
    parser.add_argument("--rounds", type=int, default=40, help="turns of each loop in the paired comparison")
    parser.add_argument("--chunk", type=int, default=8, help="training steps per turn in the paired comparison")
    parser.add_argument("--paired-only", action="store_true", help="only the paired comparison and its control")
    parser.add_argument(
        "--precision",
        choices=PRECISIONS,
        default="fp32",
        help="what every loop trains in (default fp32); bf16 is autocast around every loop's forward pass and takes "
        "--one with a render that has mixed precision",
    )
    parser.add_argument("--channels-last", action="store_true", help="model and images in channels-last layout")
    parser.add_argument("--compile", action="store_true", help="torch.compile the model, for every loop alike")
    parser.add_argument(
        "--cuda-path",
        action="store_true",
        help="only the GPU table: --cuda-model at 224 px, bf16, channels-last, eager and compiled (on a CPU: a check "
        "of its plumbing; pass small sizes)",
    )
    parser.add_argument("--cuda-model", default=CUDA_PATH["model"], help=argparse.SUPPRESS)
    parser.add_argument("--contenders", nargs="+", choices=CONTENDERS, default=CONTENDERS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    table_defaults = CUDA_PATH if args.cuda_path else {"image_size": 32, "batch_size": 64}
    args.image_size = args.image_size or table_defaults["image_size"]
    args.batch_size = args.batch_size or table_defaults["batch_size"]
    if args.one:
        if not args.src:
            parser.error("--one needs --src, the src/ folder of a render")
        global PACKAGE
        PACKAGE = package_in(args.src)
        args.images = args.images or 2048
        kind, name = args.one
        if kind == "loader":
            result = loader_alone(int(name), args)
        elif kind == "jpeg":
            result = jpeg_pipeline(int(name), args)
        elif kind == "seeding":
            result = seeding_cost(int(name), args)
        elif kind == "paired":
            result = paired(name, args)
        else:
            result = one(kind, name, args)
        print(json.dumps(result))
        return

    if args.precision != "fp32" or args.channels_last or args.compile:
        parser.error("--precision, --channels-last and --compile go with --one; the GPU table sets its own")
    import torch

    cuda = torch.cuda.is_available()
    if args.cuda_path:
        args.images = args.images or CUDA_PATH["images"]
        text = cuda_path_table(cuda_path(args), args)
        print(text)
        out = HERE / f"results-{'cuda' if cuda else 'cpu'}-gpu-path.md"
        out.write_text(text)
        print(f"written to {out}")
        return
    args.images = args.images or (32768 if cuda else 2048)
    with tempfile.TemporaryDirectory() as folder:
        args.src = str(render(Path(folder)))
        if args.paired_only:
            print(PAIRED_HEADER.format(args=args))
            for model in MODELS:
                print("\n".join(paired_rows(model, measure("paired", model, args))), flush=True)
            return
        runs = {model: {contender: [] for contender in CONTENDERS} for model in MODELS}
        order = random.Random(0)
        for repeat in range(args.repeats):  # interleaved in a new order each time: slow moments hit everyone
            for model in MODELS:
                for contender in order.sample(CONTENDERS, len(CONTENDERS)):
                    runs[model][contender].append(measure(contender, model, args))
                    print(f"run {repeat + 1}: {model} {contender}: {runs[model][contender][-1]}", flush=True)
        results = {model: {c: medians(rs) for c, rs in by_contender.items()} for model, by_contender in runs.items()}
        loaders = {workers: measure("loader", str(workers), args) for workers in (0, 1, 2)}
        seeding = {size: measure("seeding", str(size), args) for size in (1, 8, args.batch_size)}
        jpeg = {workers: measure("jpeg", str(workers), args) for workers in (0, 2)}
        whole = whole_process(args)
        pairs = {model: measure("paired", model, args) for model in MODELS}
    device = results["small_cnn"]["bare"]["device"]
    text = table(results, loaders, pairs, args, device) + seeding_table(seeding, args) + jpeg_table(jpeg)
    text += whole_table(whole)
    if cuda:  # after the 32-px tables, which need their own sizes
        args.image_size, args.batch_size, args.images = (CUDA_PATH[k] for k in ("image_size", "batch_size", "images"))
        text += cuda_path_table(cuda_path(args), args)
    print(text)
    out = HERE / f"results-{'cuda' if cuda else 'cpu'}.md"
    out.write_text(text)
    print(f"written to {out}")


def cuda_path(args) -> dict:
    """The GPU table's runs: every contender in its own process, eager and compiled, `--repeats` times in a new
    order each time, on a default render with mixed precision; the medians."""
    runs = {}
    order = random.Random(0)
    with tempfile.TemporaryDirectory() as folder:
        base = argparse.Namespace(**vars(args))
        base.src = str(render(Path(folder), **CUDA_RENDER))
        base.precision, base.channels_last = CUDA_PATH["precision"], True
        for compiled in (False, True):
            settings = argparse.Namespace(**vars(base))
            settings.compile = compiled
            for repeat in range(args.repeats):
                for contender in order.sample(args.contenders, len(args.contenders)):
                    result = measure(contender, args.cuda_model, settings)
                    runs.setdefault((compiled, contender), []).append(result)
                    print(f"run {repeat + 1}: {args.cuda_model} compiled={compiled} {contender}: {result}", flush=True)
    return {key: medians(results) for key, results in runs.items()}


def cuda_path_table(results: dict, args) -> str:
    """One row per loop and compile setting; the first convolution's input layout and output type say what each
    loop really trained in (not recorded under compile, whose graph a hook would break)."""
    device = next(iter(results.values()))["device"]
    lines = [
        "",
        f"GPU path on {device}: {args.cuda_model} at {args.image_size} px, batch {args.batch_size}, {args.images} "
        f"images x {args.epochs} epochs (the first, with compilation, not timed), bf16 autocast, channels-last, "
        f"median of {args.repeats} runs; the generated loop from a default render with use_amp=yes.",
        "",
        "| compiled | loop | images/s | vs bare loop | time to first step (s) | peak memory (MiB) | "
        "first conv: input channels-last, output |",
        "|---|---|---:|---:|---:|---:|---|",
    ]
    for compiled in (False, True):
        bare = results.get((compiled, "bare"))
        for contender in args.contenders:
            r = results[(compiled, contender)]
            speed = r["images_per_second"]
            versus = f"{speed / bare['images_per_second']:.3f}" if bare else "-"
            seen = r["first_conv"]
            conv = f"{seen['input_channels_last']}, {seen['output_dtype']}" if seen else "(compiled)"
            lines.append(
                f"| {'yes' if compiled else 'no'} | {contender} | {speed:.0f} | {versus} | "
                f"{r['first_step_seconds']:.2f} | {r['peak_memory_mib']:.0f} | {conv} |"
            )
    return "\n".join(lines) + "\n"


def paired_rows(model: str, result: dict) -> list[str]:
    return [f"| {model} | {loop} | {r['ratio']:.3f} | {r['low']:.3f}-{r['high']:.3f} |" for loop, r in result.items()]


def medians(runs: list[dict]) -> dict:
    """Each figure's own median over the runs (the fastest run need not be the one that started fastest)."""
    numbers = [key for key, value in runs[0].items() if isinstance(value, int | float) and not isinstance(value, bool)]
    return runs[0] | {key: statistics.median(r[key] for r in runs) for key in numbers}


if __name__ == "__main__":
    main()
