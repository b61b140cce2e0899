"""Pipeline parallelism over MPI ranks on one host (docs/DISTRIBUTED.md, "Pipeline parallelism").

`mpirun -np P deepinfer generate --pipeline-parallel-size P ...` must give what one process
gives: the same f32 logits at the last prompt position (max|diff| / max|ref| <= 1e-5), the same
32 greedy tokens, and through the engine (`--prompts-file`, several sequences per step, split
into micro-batches) the same tokens and logprobs. Each stage loads only its layers. Skipped when
mpirun is not installed.
"""
import json

import numpy as np
import pytest

from conftest import DATA, load_golden
from test_mpi_ep import MPIRUN, NEW_TOKENS, TOLERANCE, mpirun, ok, one_error_line, plain, \
    prompts_file, rel_diff

pytestmark = pytest.mark.skipif(MPIRUN is None, reason="mpirun not installed (openmpi-bin)")

# (model, stages): 2-layer models over 2 stages, 3-layer ones over 3 (and one uneven split).
LAYOUTS = [("tiny-qwen2", 2), ("tiny-llama", 2), ("tiny-deepseek-v2", 3),
           ("tiny-qwen3-moe", 3), ("tiny-glm4-moe", 2)]


def logprob_values(out):
    return [v for t in out["logprobs"] for v in [t["logprob"]] + [p[1] for p in t["top_logprobs"]]]


@pytest.mark.parametrize("model,stages", LAYOUTS)
def test_pipeline_generates_what_one_process_does(deepinfer_bin, model, stages, tmp_path):
    case = load_golden(model)["cases"][-1]
    ids = ",".join(map(str, case["prompt_ids"]))
    single = lambda dump: ("generate", "-m", DATA / model, "--prompt-ids", ids, "-n", NEW_TOKENS,
                           "--ignore-eos", "--json", "--dump-logits", dump, "--threads", 1)
    ref = ok(plain(deepinfer_bin, *single(tmp_path / "ref.npy"), "--log-level", "warn"))
    pp = ok(mpirun(stages, deepinfer_bin, *single(tmp_path / "pp.npy"),
                   "--pipeline-parallel-size", stages, "--log-level", "info"))
    assert len(pp.stdout.strip().splitlines()) == 1, "only rank 0 prints"
    assert json.loads(pp.stdout)["output_ids"] == json.loads(ref.stdout)["output_ids"]
    diff = rel_diff(np.load(tmp_path / "pp.npy"), np.load(tmp_path / "ref.npy"))
    assert diff <= TOLERANCE, f"{model} pp={stages}: last-prompt logits differ by {diff:.3g}"
    # Each stage says which layers (and so which weights) it holds; none are unused.
    layers = json.loads((DATA / model / "config.json").read_text())["num_hidden_layers"]
    for stage in range(stages):
        assert f"pipeline parallel rank {stage} of {stages} (pp {stage}/{stages}): decoder " \
               f"layers" in pp.stderr
    assert f"of {layers}, the final norm and lm_head; weights on this rank" in pp.stderr
    assert "not used by" not in pp.stderr, pp.stderr

    # Every golden prompt through the engine at once, cut into 2 micro-batches per step.
    path = prompts_file(tmp_path, model)
    batch = ("generate", "-m", DATA / model, "--prompts-file", path, "--threads", 1)
    ref = ok(plain(deepinfer_bin, *batch, "--log-level", "warn"))
    pp = ok(mpirun(stages, deepinfer_bin, *batch, "--pipeline-parallel-size", stages,
                   "--num-micro-batches", 2, "--log-level", "info"))
    ref_lines = [json.loads(line) for line in ref.stdout.splitlines()]
    pp_lines = [json.loads(line) for line in pp.stdout.splitlines()]
    assert len(pp_lines) == len(ref_lines) == len(load_golden(model)["cases"])
    for r, p in zip(ref_lines, pp_lines):
        assert p["output_ids"] == r["output_ids"]
        assert rel_diff(logprob_values(p), logprob_values(r)) <= TOLERANCE
    # Per-rank timers (the bubble): every stage reports its compute and waiting time.
    assert pp.stderr.count("2 micro-batches per step") == stages, pp.stderr


def test_pipeline_sizes_refused_with_the_numbers(deepinfer_bin):
    base = ("generate", "-m", DATA / "tiny-qwen2", "--prompt-ids", "1,2", "-n", 1, "--threads", 1)
    line = one_error_line(mpirun(3, deepinfer_bin, *base, "--pipeline-parallel-size", 3))
    assert "--pipeline-parallel-size = 3 is more than the 2 decoder layers" in line
    line = one_error_line(plain(deepinfer_bin, *base, "--num-micro-batches", 2))
    assert "--num-micro-batches = 2" in line and "one stage" in line
