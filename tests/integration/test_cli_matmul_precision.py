"""`--matmul-precision bf16`: matmuls with bf16 weights round their activations to bf16. The
logits move a little from the exact path (bf16 weights, f32 activations) and stay close to
transformers' f32 goldens; a bad value is a clear error naming the accepted ones."""
import numpy as np

from conftest import DATA, load_golden

MODEL = DATA / "tiny-qwen3"


def logits(run_cli, tmp_path, ids, *flags):
    path = tmp_path / ("logits" + "_".join(map(str, flags)) + ".npy")
    proc = run_cli("generate", "--model", MODEL, "--prompt-ids", ids, "--max-new-tokens", 1,
                   "--dtype", "bf16", "--dump-logits", path, *flags, check=True)
    return np.load(path), proc.stderr


def test_bf16_activations_stay_close_and_are_reported(run_cli, tmp_path):
    case = max(load_golden("tiny-qwen3")["cases"], key=lambda c: len(c["prompt_ids"]))
    ids = ",".join(map(str, case["prompt_ids"]))
    exact, log_exact = logits(run_cli, tmp_path, ids)
    rounded, log_rounded = logits(run_cli, tmp_path, ids, "--matmul-precision", "bf16")
    assert "matmul precision f32" in log_exact
    assert "matmul precision bf16" in log_rounded
    ref = np.array(case["last_logits"], dtype=np.float32)
    assert not np.array_equal(exact, rounded)
    for got in (exact, rounded):
        assert np.linalg.norm(got - ref) / np.linalg.norm(ref) <= 3e-2


def test_unknown_matmul_precision_is_refused(run_cli):
    proc = run_cli("generate", "--model", MODEL, "--prompt-ids", "1,2", "--matmul-precision",
                   "fp8")
    assert proc.returncode != 0
    assert "fp8" in proc.stderr and "bf16" in proc.stderr
