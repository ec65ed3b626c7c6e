"""Training: the run (`train(cfg)`), its epoch loop, optimizer and schedule, profiling, the hyper-parameter search,
and the parts of the loop this project chose."""
