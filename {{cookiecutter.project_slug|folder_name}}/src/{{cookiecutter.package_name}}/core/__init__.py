"""What every command stands on: the configuration, errors, files written whole and folder locks, devices and
seeds."""
