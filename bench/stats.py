"""Percentiles for the benchmarks (each prints p50/p90/p99 from its own samples)."""


def pct(v, p):
    """The p-th percentile of v, nearest rank (no interpolation: small n stays honest)."""
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * p / 100))]
