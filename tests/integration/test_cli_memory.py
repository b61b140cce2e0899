"""Memory and thread flags as llama.cpp users spell them (--mlock, --no-mmap, --numa,
--cpu-mask, --cpu-strict) plus --transparent-huge-pages and --enable-atb-attention, through
the CLI on every checkpoint kind (safetensors, GGUF, a converted directory). Where the
weights live and which CPUs run does not change one logit; each flag says in the log what it
did (their effects on the mappings and threads are observed in tests/unit/core). The unfused
attention (enable_atb_attention false) stays within float reassociation of the fused one and
as close to transformers' goldens."""
import os

import numpy as np
import pytest

from conftest import DATA, load_golden

GGUF = DATA / "gguf-models"


def logits(run_cli, tmp_path, model, ids, *flags):
    path = tmp_path / ("logits" + "_".join(map(str, flags)).replace("/", "") + ".npy")
    proc = run_cli("generate", "--model", model, "--prompt-ids", ids, "--max-new-tokens", 1,
                   "--threads", 2, "--dump-logits", path, *flags, check=True)
    return np.load(path), proc.stderr


def prompt(model="tiny-qwen3"):
    case = max(load_golden(model)["cases"], key=lambda c: len(c["prompt_ids"]))
    return ",".join(map(str, case["prompt_ids"])), np.array(case["last_logits"], np.float32)


def allowed_cpu_mask():
    cpus = sorted(os.sched_getaffinity(0))
    return cpus, hex(sum(1 << c for c in cpus[:2]))


def test_no_mmap_and_mlock_hold_the_same_weights_on_every_checkpoint_kind(run_cli, tmp_path):
    ids, _ = prompt()
    converted = tmp_path / "converted"
    run_cli("convert", "--input_dir", DATA / "tiny-qwen3", "--output_dir", converted,
            "--precision", "bf16", check=True)
    for model in (DATA / "tiny-qwen3", GGUF / "tiny-qwen3-f32.gguf", converted):
        mapped, log = logits(run_cli, tmp_path, model, ids)
        assert "memory: weights mapped" in log, log
        read, log_read = logits(run_cli, tmp_path, model, ids, "--no-mmap", "--mlock")
        assert "read into anonymous memory (--no-mmap), locked (--mlock)" in log_read, log_read
        # A refused mlock is a warning naming the limit, and the run goes on.
        assert "cannot lock" not in log_read or "RLIMIT_MEMLOCK" in log_read
        np.testing.assert_array_equal(read, mapped)


def test_huge_pages_off_and_cpu_placement_change_no_logit(run_cli, tmp_path):
    ids, _ = prompt()
    base, log = logits(run_cli, tmp_path, DATA / "tiny-qwen3", ids)
    assert "transparent huge pages" in log
    off, log_off = logits(run_cli, tmp_path, DATA / "tiny-qwen3", ids,
                          "--transparent-huge-pages", "false")
    assert "transparent huge pages off" in log_off
    np.testing.assert_array_equal(off, base)
    cpus, mask = allowed_cpu_mask()
    strict, log_strict = logits(run_cli, tmp_path, DATA / "tiny-qwen3", ids, "--cpu-mask", mask,
                                "--cpu-strict", "1")
    assert "--cpu-strict: thread i on CPU i of" in log_strict, log_strict
    np.testing.assert_array_equal(strict, base)
    numa, log_numa = logits(run_cli, tmp_path, DATA / "tiny-qwen3", ids, "--numa", "distribute")
    nodes = [n for n in os.listdir("/sys/devices/system/node") if n[4:].isdigit()] \
        if os.path.isdir("/sys/devices/system/node") else []
    if len(nodes) <= 1:
        assert "one NUMA node" in log_numa, log_numa
    np.testing.assert_array_equal(numa, base)


def test_bad_placement_values_are_refused_before_loading(run_cli):
    for flags, fragment in ((["--numa", "spread"], "distribute, isolate or numactl"),
                            (["--cpu-mask", "0xz"], "not a hex CPU mask"),
                            (["--numa", "isolate", "--cpu-mask", "1"], "give one of them")):
        proc = run_cli("generate", "--model", DATA / "tiny-qwen3", "--prompt-ids", "1,2", *flags)
        assert proc.returncode != 0
        assert fragment in proc.stderr, proc.stderr


@pytest.mark.parametrize("model", ["tiny-qwen3", "tiny-deepseek-v2-lite"])
def test_unfused_attention_is_within_reassociation_of_the_fused(run_cli, tmp_path, model):
    ids, ref = prompt(model)
    fused, _ = logits(run_cli, tmp_path, DATA / model, ids)
    unfused, log = logits(run_cli, tmp_path, DATA / model, ids, "--enable-atb-attention", "false")
    assert "unfused attention and residual norms" in log, log
    scale = np.abs(fused).max()
    assert np.abs(unfused - fused).max() <= 1e-4 * scale
    for got in (fused, unfused):
        assert np.linalg.norm(got - ref) / np.linalg.norm(ref) <= 1e-4
