"""Trained models at work: evaluate, predict, features, and export to files that run without this package."""
