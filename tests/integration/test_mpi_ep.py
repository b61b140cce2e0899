"""Expert parallelism over MPI ranks on one host (docs/DISTRIBUTED.md).

`mpirun -np N deepinfer generate --expert-parallel-size N ...` must give what one process gives:
the same greedy tokens, the same f32 logits at the last prompt position and the same logprobs at
every decode step (max|diff| / max|ref| <= 1e-5), with each rank holding only its experts. The
reference is the same command without mpirun. Also: MpiCommunicator's own tests under 3 ranks,
and the sizes that are refused. Skipped when mpirun is not installed.
"""
import json
import os
import pathlib
import shutil
import subprocess

import numpy as np
import pytest

from conftest import DATA, ROOT, load_golden

MPIRUN = shutil.which("mpirun")
pytestmark = pytest.mark.skipif(MPIRUN is None, reason="mpirun not installed (openmpi-bin)")

MODELS = ["tiny-deepseek-v2", "tiny-deepseek-v3", "tiny-qwen3-moe", "tiny-glm4-moe",
          "tiny-deepseek-v32", "tiny-glm4-moe-lite", "tiny-minimax-m2"]
NEW_TOKENS = 32
TOLERANCE = 1e-5


def mpi_env():
    env = dict(os.environ)
    # CI runs as root; ranks share 2 cores (oversubscribed) and a container may forbid the
    # cross-memory-attach single copy of the shared-memory transport.
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl_vader_single_copy_mechanism="none", OMPI_MCA_rmaps_base_oversubscribe="1")
    return env


def mpirun(ranks, *command, timeout=120):
    argv = [MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", str(ranks), *map(str, command)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=mpi_env())


def plain(*command, timeout=120):
    return subprocess.run(list(map(str, command)), capture_output=True, text=True, timeout=timeout)


def ok(proc):
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def rel_diff(got, ref):
    got, ref = np.asarray(got, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    assert got.shape == ref.shape
    return float(np.max(np.abs(got - ref)) / np.max(np.abs(ref)))


def prompts_file(tmp_path, model):
    """Every golden prompt of the model, greedy, 32 tokens, top-5 logprobs at each step."""
    path = tmp_path / f"{model}.jsonl"
    lines = [json.dumps({"prompt_ids": case["prompt_ids"], "max_tokens": NEW_TOKENS,
                         "ignore_eos": True, "logprobs": 5})
             for case in load_golden(model)["cases"]]
    path.write_text("\n".join(lines) + "\n")
    return path


def run_both(deepinfer_bin, ranks, args, tmp_path, tag):
    """(reference, distributed) stdout of `deepinfer ARGS` alone and under mpirun."""
    ref = ok(plain(deepinfer_bin, *args(tmp_path / f"{tag}-ref.npy"), "--threads", 1))
    ep = ok(mpirun(ranks, deepinfer_bin, *args(tmp_path / f"{tag}-ep.npy"), "--threads", 1,
                   "--expert-parallel-size", ranks))
    return ref, ep


def assert_same_generation(deepinfer_bin, model, ranks, tmp_path):
    case = load_golden(model)["cases"][-1]
    ids = ",".join(map(str, case["prompt_ids"]))
    args = lambda dump: ("generate", "-m", DATA / model, "--prompt-ids", ids, "-n", NEW_TOKENS,
                         "--ignore-eos", "--json", "--dump-logits", dump, "--log-level", "warn")
    ref, ep = run_both(deepinfer_bin, ranks, args, tmp_path, f"{model}-{ranks}")
    ref_out, ep_out = json.loads(ref.stdout), json.loads(ep.stdout.strip().splitlines()[-1])
    assert len(ep.stdout.strip().splitlines()) == 1, "only rank 0 prints"
    assert ep_out["output_ids"] == ref_out["output_ids"]
    assert len(ref_out["output_ids"]) == NEW_TOKENS
    diff = rel_diff(np.load(tmp_path / f"{model}-{ranks}-ep.npy"),
                    np.load(tmp_path / f"{model}-{ranks}-ref.npy"))
    assert diff <= TOLERANCE, f"{model} ep={ranks}: last-prompt logits differ by {diff:.3g}"

    # Several prompts through the engine (batched prefill and decode), logprobs at every step.
    path = prompts_file(tmp_path, model)
    args = lambda _: ("generate", "-m", DATA / model, "--prompts-file", path, "--log-level", "warn")
    ref, ep = run_both(deepinfer_bin, ranks, args, tmp_path, f"{model}-{ranks}-batch")
    ref_lines = [json.loads(line) for line in ref.stdout.splitlines()]
    ep_lines = [json.loads(line) for line in ep.stdout.splitlines()]
    assert len(ep_lines) == len(ref_lines) == len(load_golden(model)["cases"])
    for r, e in zip(ref_lines, ep_lines):
        assert e["output_ids"] == r["output_ids"]
        # Each step: the chosen token's logprob and the top 5 as [token, logprob] pairs.
        values = lambda out: [v for t in out["logprobs"]
                              for v in [t["logprob"]] + [p[1] for p in t["top_logprobs"]]]
        assert [[p[0] for p in t["top_logprobs"]] for t in e["logprobs"]] == [
            [p[0] for p in t["top_logprobs"]] for t in r["logprobs"]]
        assert rel_diff(values(e), values(r)) <= TOLERANCE


@pytest.mark.parametrize("model", MODELS)
def test_two_ranks_generate_what_one_process_does(deepinfer_bin, model, tmp_path):
    assert_same_generation(deepinfer_bin, model, 2, tmp_path)


def test_four_ranks_generate_what_one_process_does(deepinfer_bin, tmp_path):
    assert_same_generation(deepinfer_bin, "tiny-deepseek-v3", 4, tmp_path)


def test_each_rank_loads_only_its_experts(deepinfer_bin):
    config = json.loads((DATA / "tiny-qwen3-moe" / "config.json").read_text())
    experts = config["num_local_experts"]
    proc = ok(mpirun(2, deepinfer_bin, "generate", "-m", DATA / "tiny-qwen3-moe", "--prompt-ids",
                     "1,2,3", "-n", 2, "--threads", 1, "--expert-parallel-size", 2,
                     "--log-level", "info"))
    for rank, first in ((0, 0), (1, experts // 2)):
        assert (f"expert parallel rank {rank} of 2 (ep {rank}/2): routed experts {first}-"
                f"{first + experts // 2 - 1} of {experts}") in proc.stderr
    assert "not used by" not in proc.stderr, "other ranks' experts are not unused tensors"


def test_enable_expert_parallel_spans_every_rank(deepinfer_bin):
    proc = ok(mpirun(2, deepinfer_bin, "generate", "-m", DATA / "tiny-glm4-moe", "--prompt-ids",
                     "5,6,7", "-n", 4, "--ignore-eos", "--json", "--threads", 1,
                     "--enable-expert-parallel", "--log-level", "warn"))
    ref = ok(plain(deepinfer_bin, "generate", "-m", DATA / "tiny-glm4-moe", "--prompt-ids", "5,6,7",
                   "-n", 4, "--ignore-eos", "--json", "--threads", 1, "--log-level", "warn"))
    assert json.loads(proc.stdout)["output_ids"] == json.loads(ref.stdout)["output_ids"]


def test_bench_offline_runs_under_mpirun(deepinfer_bin):
    proc = ok(mpirun(2, deepinfer_bin, "bench", "-m", DATA / "tiny-deepseek-v2", "--dataset-name",
                     "random", "--random-input-len", 8, "--random-output-len", 4, "--num-prompts",
                     4, "--warmup", 0, "--json", "--threads", 1, "--expert-parallel-size", 2,
                     "--log-level", "warn"))
    runs = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(proc.stdout.strip().splitlines()) == 1, "only rank 0 reports"
    assert "completed" in json.dumps(runs)


def one_error_line(proc):
    assert proc.returncode != 0
    errors = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert errors, proc.stderr
    return errors[0]


def test_refused_sizes_name_the_numbers(deepinfer_bin):
    model = DATA / "tiny-deepseek-v2"
    base = ("generate", "-m", model, "--prompt-ids", "1,2", "-n", 1, "--threads", 1)
    # Not under mpirun: how to launch.
    line = one_error_line(plain(deepinfer_bin, *base, "--expert-parallel-size", 2))
    assert "mpirun -np 2 deepinfer" in line
    # Does not divide the 8 experts.
    line = one_error_line(mpirun(3, deepinfer_bin, *base, "--expert-parallel-size", 3))
    assert "3 does not divide the 8 routed experts" in line
    # Not the world size.
    line = one_error_line(mpirun(2, deepinfer_bin, *base, "--expert-parallel-size", 4))
    assert "--expert-parallel-size = 4 needs 4 ranks" in line and "mpirun started 2" in line
    # A dense model has no experts to split.
    line = one_error_line(mpirun(2, deepinfer_bin, "generate", "-m", DATA / "tiny-qwen2",
                                 "--prompt-ids", "1,2", "-n", 1, "--threads", 1,
                                 "--expert-parallel-size", 2))
    assert "dense model" in line
    # Tensor and pipeline parallelism run: test_mpi_tp.py, test_mpi_pp.py.
    # Commands that load no model refuse to run under mpirun with several ranks (serve, run,
    # validate, info run there: test_mpi_serve.py).
    line = one_error_line(mpirun(2, deepinfer_bin, "tokenize", "--model", model, "--text", "hi"))
    assert "`deepinfer tokenize` runs in one process only" in line



def test_mpi_communicator_under_three_ranks(deepinfer_bin):
    binary = pathlib.Path(deepinfer_bin).parent / "tests" / "mpi" / "deepinfer_mpi_tests"
    if not binary.exists():
        binary = ROOT / "build" / "tests" / "mpi" / "deepinfer_mpi_tests"
    if not binary.exists():
        pytest.skip(f"{binary} not built (cmake --build build --target deepinfer_mpi_tests)")
    proc = mpirun(3, binary)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "PASSED" in proc.stdout
