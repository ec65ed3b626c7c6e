"""`--profile`: a few training steps under torch.profiler, as a trace and a table of the top operators."""

import itertools
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from ..core.files import own_folder, replacing, write_text


class ProfiledLoader:
    """Iterates like `loader`. In the first epoch, the `steps` steps after a warm-up step run under the profiler;
    the trace and the table are written as soon as they end."""

    def __init__(self, loader, out: Path, device: torch.device, steps: int = 5):
        self.loader, self.out, self.device, self.steps, self.done = loader, out, device, steps, False

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self):
        batches = iter(self.loader)
        if self.done:
            yield from batches
            return
        self.done = True
        yield from itertools.islice(batches, 1)  # first allocations and autotuning are not typical steps
        cuda = self.device.type == "cuda"  # the training device, not merely a visible GPU
        profiler = profile(activities=[ProfilerActivity.CPU] + [ProfilerActivity.CUDA] * cuda, record_shapes=True)
        profiler.start()
        try:
            yield from itertools.islice(batches, self.steps)
        finally:  # also when the epoch ends first
            if self.device.type != "cpu":
                torch.accelerator.synchronize(self.device)  # the kernels queued by the last steps belong in the trace
            profiler.stop()
            self.write(profiler, "self_cuda_time_total" if cuda else "self_cpu_time_total")
        yield from batches

    def write(self, profiler: profile, sort_by: str) -> None:
        own_folder(self.out)  # a planted link is replaced, not followed
        with replacing(self.out / "trace.json") as file:
            profiler.export_chrome_trace(file.name)  # by name: the profiler writes the file itself
        write_text(self.out / "top_operators.txt", profiler.key_averages().table(sort_by=sort_by, row_limit=25))
        print(f"profile: {self.out / 'top_operators.txt'}; open {self.out / 'trace.json'} in ui.perfetto.dev")
