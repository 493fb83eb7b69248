"""Experiments: campaigns (grids of runs as Dask tasks) and the paper's evaluation."""
