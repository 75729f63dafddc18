"""Benchmarks: each study writes figures under bench/results and sections of bench/report.md."""
