"""Throughput, overhead and cost of runs, trials and workers against a simulated or stand-in backend."""
