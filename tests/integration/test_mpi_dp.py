"""Attention data parallelism + expert parallelism over MPI ranks (docs/DISTRIBUTED.md,
"Attention data parallelism").

`mpirun -np 2 deepinfer generate --data-parallel-size 2 --expert-parallel-size 2 --prompts-file`
with 32 mixed requests (prompt lengths, output lengths, greedy and seeded sampling, n = 2,
logprobs) must give each request what one process gives: the same tokens, and logprobs within
1e-5 relative. The KV pool is small so that sequences are preempted and recomputed within their
groups. Skipped when mpirun is not installed.
"""
import json

import pytest

from conftest import DATA
from test_mpi_ep import MPIRUN, TOLERANCE, mpirun, ok, one_error_line, plain, rel_diff

pytestmark = pytest.mark.skipif(MPIRUN is None, reason="mpirun not installed (openmpi-bin)")

MODELS = ["tiny-deepseek-v2", "tiny-qwen3-moe", "tiny-deepseek-v32"]


def mixed_requests(path):
    lines = []
    for i in range(32):
        request = {"prompt_ids": [(i * 37 + j * 11 + 5) % 500 for j in range(1 + (i * 7) % 23)],
                   "max_tokens": 4 + (i * 5) % 29, "ignore_eos": True, "logprobs": 2}
        if i % 3 == 1:
            request.update(temperature=0.8, top_p=0.9, seed=1000 + i)
        if i % 8 == 5:
            request.update(n=2, temperature=1.0, seed=7 * i)
        if i % 3 != 1 and i % 8 != 5:
            request["temperature"] = 0
        lines.append(json.dumps(request))
    path.write_text("\n".join(lines) + "\n")
    return path


def values(out):
    return [v for t in out["logprobs"] for v in [t["logprob"]] + [p[1] for p in t["top_logprobs"]]]


@pytest.mark.parametrize("model", MODELS)
def test_dp_attention_with_ep_serves_what_one_process_does(deepinfer_bin, model, tmp_path):
    path = mixed_requests(tmp_path / "requests.jsonl")
    args = ("generate", "-m", DATA / model, "--prompts-file", path, "--threads", 1,
            "--max-num-blocks", 24, "--block-size", 4, "--max-num-batched-tokens", 48)
    ref = ok(plain(deepinfer_bin, *args, "--log-level", "warn"))
    dp = ok(mpirun(2, deepinfer_bin, *args, "--data-parallel-size", 2, "--expert-parallel-size", 2,
                   "--log-level", "warn"))
    ref_lines = [json.loads(line) for line in ref.stdout.splitlines()]
    dp_lines = [json.loads(line) for line in dp.stdout.splitlines()]
    assert len(dp_lines) == len(ref_lines) >= 32
    for r, d in zip(ref_lines, dp_lines):
        for rc, dc in zip([r] + r.get("choices", []), [d] + d.get("choices", [])):
            assert dc["output_ids"] == rc["output_ids"]
            assert rel_diff(values(dc), values(rc)) <= TOLERANCE
        assert len(d.get("choices", [])) == len(r.get("choices", []))


def test_enable_dp_attention_spellings(deepinfer_bin, tmp_path):
    model = DATA / "tiny-qwen3-moe"
    path = mixed_requests(tmp_path / "requests.jsonl")
    args = ("generate", "-m", model, "--prompts-file", path, "--threads", 1, "--log-level", "warn")
    ref = ok(plain(deepinfer_bin, *args))
    dp = ok(mpirun(2, deepinfer_bin, *args, "--enable-dp-attention", "--enable-expert-parallel"))
    assert dp.stdout == ref.stdout
    # Attention data parallelism needs the experts split over the same ranks.
    line = one_error_line(mpirun(2, deepinfer_bin, *args, "--data-parallel-size", 2))
    assert "leaves 2 ranks per expert" in line
