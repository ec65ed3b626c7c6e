"""What every command stands on: the configuration, errors, files written whole, folder locks, devices and seeds, and
processes of a distributed run."""
