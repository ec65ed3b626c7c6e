"""Training: the run (`train(cfg)`), its epoch loop, optimizer, mixed precision, checkpoints, profiling and the
hyper-parameter search."""
