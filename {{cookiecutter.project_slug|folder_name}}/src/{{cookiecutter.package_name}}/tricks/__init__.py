"""The training tricks chosen for this project, one module each, which the run plugs in."""
