"""Checks shared by the bench tests: every summary of a run recomputed from its records."""
import statistics

import pytest


def percentile(values, q):
    """numpy.percentile's default (linear between closest ranks), written out."""
    values = sorted(values)
    rank = q / 100 * (len(values) - 1)
    low = int(rank)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (rank - low)


def check_summaries(run):
    """Every summary of the run is what its per-request records give."""
    records = run["requests"]
    assert len(records) == run["sent"]
    assert run["completed"] + run["failed"] == run["sent"]
    done = [r for r in records if r["status"] == "completed"]
    assert len(done) == run["completed"]
    series = {"ttft_ms": [r["ttft_ms"] for r in done],
              "tpot_ms": [r["tpot_ms"] for r in done if r["output_tokens"] > 1],
              "e2e_latency_ms": [r["e2e_ms"] for r in done],
              "itl_ms": [x for r in done for x in r["itl_ms"]]}
    for key, values in series.items():
        if not values:
            continue
        assert run[key]["mean"] == pytest.approx(statistics.fmean(values), rel=1e-9), key
        for q in (50, 90, 99):
            assert run[key][f"p{q}"] == pytest.approx(percentile(values, q), rel=1e-9), (key, q)
    for r in done:
        # vLLM's TPOT: the time after the first token over the tokens after it.
        if r["output_tokens"] > 1:
            assert r["tpot_ms"] == pytest.approx(
                (r["e2e_ms"] - r["ttft_ms"]) / (r["output_tokens"] - 1), rel=1e-9)
        assert 0 < r["ttft_ms"] <= r["e2e_ms"]
    out_tokens = sum(r["output_tokens"] for r in done)
    assert run["total_output_tokens"] == out_tokens
    assert run["output_tokens_per_s"] == pytest.approx(out_tokens / run["elapsed_s"], rel=1e-9)
    assert run["requests_per_s"] == pytest.approx(len(done) / run["elapsed_s"], rel=1e-9)
