"""What every command stands on: errors, files written whole and folder locks, devices and seeds, and how a
configuration field is declared."""
