"""Fidelity of --quantization against llama.cpp's: for every type, the mean KL divergence of
deepinfer's next-token distributions from the 16-bit model is no worse than llama.cpp's for
the same type, model and text (tests/data/quantize/llamacpp_kl.json, measured with
`llama-perplexity --kl-divergence` by tools/make_kl_goldens.py), up to TOLERANCE.

The model (kquant_model.py) is generated here with numpy, as the goldens script generated it;
the llama.cpp side kept token_embd / output in f32 as our policy does ("same_policy"), so both
quantize the same matrices into bit-identical blocks and the comparison is of the kernels.
"""
import json

import pytest

import kquant_model
from conftest import DATA, ROOT

GOLDENS = json.loads((DATA / "quantize" / "llamacpp_kl.json").read_text())
# Relative slack on llama.cpp's mean KL: llama.cpp scores the second half of each 128-token
# chunk, validate --window 128 --stride 64 the tokens after 64..127 of context plus the first
# window's; and the two tokenizers may split the text slightly differently.
TOLERANCE = 0.10


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return kquant_model.write(tmp_path_factory.mktemp("kq") / kquant_model.NAME)


@pytest.mark.parametrize("qtype", list(GOLDENS["types"]))
def test_mean_kl_is_no_worse_than_llama_cpps(run_cli, model, qtype):
    ctx = GOLDENS["n_ctx"]
    proc = run_cli("validate", "-m", model, "--dtype", "f32", "--quantization", qtype,
                   "--reference", model, "--reference-dtype", "f32",
                   "--text", ROOT / GOLDENS["text"], "--window", ctx, "--stride", ctx // 2,
                   "--threads", 2, "--json", check=True)
    ours = json.loads(proc.stdout)["teacher_forcing"]["mean_kl"]
    theirs = GOLDENS["types"][qtype]["same_policy"]["mean_kl"]
    assert ours <= theirs * (1 + TOLERANCE), f"{qtype}: ours {ours:.4e}, llama.cpp {theirs:.4e}"
