"""The CI subset of the algorithmic-complexity suite (issue #44): `complexity_bench --quick`
times every request and model-file parser and every tokenizer stage on inputs of n and 4n
bytes and fails when the cost ratio passes 6 (a quadratic stage gives 16) or the peak RSS
passes its bound. A case over its bound is retried once alone (min-of-N timings already
absorb most noise on a shared machine)."""
import os
import re
import subprocess

import pytest

from conftest import ROOT

BENCH = ROOT / "build" / "complexity_bench"


def run(*args):
    proc = subprocess.run([str(BENCH), "--quick", *args], capture_output=True, text=True,
                          timeout=300)
    print(proc.stdout, proc.stderr)
    return proc


@pytest.mark.skipif(not BENCH.exists(), reason="benches not built (scripts/build.sh release)")
def test_every_parser_and_expander_is_linear():
    proc = run()
    assert proc.returncode in (0, 1), proc.stderr
    cases = [line for line in proc.stdout.splitlines()[1:] if re.search(r"\d+\.\d+", line)]
    assert len(cases) >= 30, proc.stdout
    over = [line[:44].strip() for line in cases if line.endswith("OVER")]
    for name in over:
        again = run("--filter", name)
        assert again.returncode == 0, f"{name} is over its bound twice:\n{again.stdout}"
