"""The benchmark checkpoints exported to GGUF by llama.cpp's converter (tools/convert_to_gguf.py)
load and compute what the safetensors originals compute: bitwise for bf16 and f32 exports, within
Q8_0's rounding for q8_0. The exports are large and git-ignored: each case skips unless both
files are there (tools/make_bench_model.py + tools/convert_to_gguf.py make them)."""
import numpy as np
import pytest

from conftest import ROOT

MODELS = ROOT / "bench" / "models"
PROMPT = "3,14,15,92,65,35,89,79,32,38,46,26,43"
CASES = [(shape, outtype) for shape in ("qwen2.5-0.5b", "deepseek-v2-lite-4l")
         for outtype in ("bf16", "f32", "q8_0")]


def logits(run_cli, model, out):
    run_cli("generate", "--model", model, "--prompt-ids", PROMPT, "--max-new-tokens", 1,
            "--threads", 2, "--dump-logits", out, check=True, timeout=600)
    return np.load(out)


@pytest.mark.parametrize("shape,outtype", CASES)
def test_export_equals_the_safetensors_original(run_cli, tmp_path, shape, outtype):
    original = MODELS / f"{shape}-random"
    exported = MODELS / "gguf" / f"{shape}-random-{outtype}.gguf"
    if not (original / "config.json").exists() or not exported.exists():
        pytest.skip(f"{exported.name} or its original not generated (tools/convert_to_gguf.py)")
    got = logits(run_cli, exported, tmp_path / "gguf.npy")
    if outtype == "q8_0":
        want = logits(run_cli, original, tmp_path / "st.npy")
        assert np.linalg.norm(got - want) / np.linalg.norm(want) < 5e-2
    else:
        # The export holds the original's values in the same dtype (f32 export of a bf16
        # checkpoint: widened exactly), so the original run in that dtype is the expectation.
        want_dtype = "bf16" if outtype == "bf16" else "f32"
        run_cli("generate", "--model", original, "--prompt-ids", PROMPT, "--max-new-tokens", 1,
                "--threads", 2, "--dtype", want_dtype, "--dump-logits", tmp_path / "st.npy",
                check=True, timeout=600)
        want = np.load(tmp_path / "st.npy")
        assert np.array_equal(got, want)
