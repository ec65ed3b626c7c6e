"""Data: datasets, decoding, transforms, samplers and loaders, and the layouts of data a user brings."""
