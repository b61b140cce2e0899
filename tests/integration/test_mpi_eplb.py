"""MoE exchange options and expert load balancing under mpirun (docs/DISTRIBUTED.md).

On a tiny DeepSeek-V3 whose router bias makes experts 0 and 1 hot (the test edits
e_score_correction_bias of a copy): the balancedness (mean / max rank load) before and after
EPLB, both from the record file; after >= before + 0.2; and outputs unchanged by placement
(from a recorded load, and re-balanced online with weights moved between ranks). Also: the
capacity factor drops the same assignments under mpirun as in one process, and bf16 rows
round the logits within bf16's precision. Skipped when mpirun is not installed.
"""
import json
import shutil
import struct

import numpy as np
import pytest

from conftest import DATA
from test_mpi_ep import MPIRUN, mpirun, ok, plain, rel_diff

pytestmark = pytest.mark.skipif(MPIRUN is None, reason="mpirun not installed (openmpi-bin)")

HOT = (0, 1)
MOE_LAYERS = (1, 2)  # model.layers.0 is dense (first_k_dense_replace = 1)


@pytest.fixture(scope="module")
def skewed(tmp_path_factory):
    """tiny-deepseek-v3 with +4 on the correction bias of experts 0 and 1 in every MoE layer."""
    model = tmp_path_factory.mktemp("eplb") / "tiny-deepseek-v3-skewed"
    shutil.copytree(DATA / "tiny-deepseek-v3", model)
    path = model / "model.safetensors"
    data = bytearray(path.read_bytes())
    (size,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + size])
    for layer in MOE_LAYERS:
        info = header[f"model.layers.{layer}.mlp.gate.e_score_correction_bias"]
        assert info["dtype"] == "F32"
        begin = 8 + size + info["data_offsets"][0]
        bias = np.frombuffer(bytes(data[begin:begin + 4 * info["shape"][0]]), dtype="<f4").copy()
        bias[list(HOT)] += 4.0
        data[begin:begin + bias.nbytes] = bias.tobytes()
    path.write_bytes(bytes(data))
    prompts = model.parent / "prompts.jsonl"
    prompts.write_text("".join(
        json.dumps({"prompt_ids": [5 + i, 17, 42, 99, 3 + i], "max_tokens": 16,
                    "ignore_eos": True, "logprobs": 2}) + "\n" for i in range(4)))
    return model, prompts


def generate(deepinfer_bin, model, prompts, ranks, *flags):
    args = ("generate", "-m", model, "--prompts-file", prompts, "--threads", 1, *flags)
    if ranks == 1:
        return ok(plain(deepinfer_bin, *args))
    return ok(mpirun(ranks, deepinfer_bin, *args, "--expert-parallel-size", ranks))


def outputs(proc):
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    return [(line["output_ids"], line["logprobs"]) for line in lines]


def record(path):
    layers = json.loads(path.read_text())["layers"]
    assert [layer["name"] for layer in layers] == [f"model.layers.{l}.mlp" for l in MOE_LAYERS]
    return layers


def mean_balancedness(layers, key):
    return float(np.mean([layer[key] for layer in layers]))


@pytest.mark.parametrize("ranks", [2, 4])
def test_skewed_routing_is_balanced_by_eplb_and_outputs_do_not_change(deepinfer_bin, skewed,
                                                                      ranks, tmp_path):
    model, prompts = skewed
    reference = outputs(generate(deepinfer_bin, model, prompts, 1, "--log-level", "warn"))

    # Default placement, load recorded: before == measured, the hot experts on rank 0.
    plain_record = tmp_path / "default.json"
    run = generate(deepinfer_bin, model, prompts, ranks, "--eplb-record", plain_record,
                   "--log-level", "warn")
    assert outputs(run) == reference
    before = record(plain_record)
    for layer in before:
        assert layer["balancedness"] == pytest.approx(layer["balancedness_default"])
        assert sorted(range(8), key=lambda e: -layer["load"][e])[:2] == list(HOT)
        assert layer["balancedness_default"] < 0.75

    # Placement at start from that record, one redundant slot per rank.
    placed_record = tmp_path / "placed.json"
    run = generate(deepinfer_bin, model, prompts, ranks, "--num-redundant-experts", ranks,
                   "--eplb-load-file", plain_record, "--eplb-record", placed_record,
                   "--log-level", "info")
    assert outputs(run) == reference, "placement changed the outputs"
    after = record(placed_record)
    for b, a in zip(before, after):
        assert a["balancedness_default"] == pytest.approx(b["balancedness_default"])
        assert a["balancedness"] >= b["balancedness"] + 0.2, (b, a)
        assert len(a["placement"]) == 8 + ranks
        assert all(a["placement"].count(e) >= 2 for e in HOT)
    summary = [line for line in run.stderr.splitlines() if "EPLB: balancedness" in line]
    assert len(summary) == 1, run.stderr  # rank 0 reports
    print(f"ep={ranks}: balancedness before {mean_balancedness(before, 'balancedness'):.3f}, "
          f"after {mean_balancedness(after, 'balancedness'):.3f}; {summary[0]}")

    # Online: re-placed every 4 forward calls over a window of 4, weights moved between ranks.
    online_record = tmp_path / "online.json"
    run = generate(deepinfer_bin, model, prompts, ranks, "--num-redundant-experts", ranks,
                   "--eplb-interval", 4, "--eplb-window", 4, "--eplb-record", online_record,
                   "--log-level", "info")
    assert outputs(run) == reference, "online re-balancing changed the outputs"
    online = record(online_record)
    for layer in online:
        assert layer["rebalances"] >= 1
        assert layer["balancedness"] >= layer["balancedness_default"] + 0.2, layer
    assert "re-balanced at forward call 4" in run.stderr


def test_capacity_factor_drops_the_same_under_mpirun(deepinfer_bin, skewed, tmp_path):
    model, prompts = skewed
    runs, drops = {}, {}
    for ranks in (1, 2):
        path = tmp_path / f"capacity-{ranks}.json"
        runs[ranks] = outputs(generate(deepinfer_bin, model, prompts, ranks, "--capacity-factor",
                                       0.5, "--eplb-record", path, "--log-level", "warn"))
        drops[ranks] = [layer["dropped_assignments"] for layer in record(path)]
    assert runs[2] == runs[1]
    assert drops[2] == drops[1]
    assert all(d > 0 for d in drops[1]), "the hot experts must overflow a capacity of 0.5"


def test_bf16_rows_round_within_bf16_precision(deepinfer_bin, skewed, tmp_path):
    model, _ = skewed
    logits = {}
    for dtype in ("fp32", "bf16", "fp16"):
        dump = tmp_path / f"{dtype}.npy"
        ok(mpirun(2, deepinfer_bin, "generate", "-m", model, "--prompt-ids", "5,17,42,99", "-n", 4,
                  "--ignore-eos", "--json", "--dump-logits", dump, "--threads", 1,
                  "--expert-parallel-size", 2, "--communication-dtype", dtype,
                  "--log-level", "warn"))
        logits[dtype] = np.load(dump)
    ref = tmp_path / "ref.npy"
    ok(plain(deepinfer_bin, "generate", "-m", model, "--prompt-ids", "5,17,42,99", "-n", 4,
             "--ignore-eos", "--json", "--dump-logits", ref, "--threads", 1, "--log-level", "warn"))
    ref = np.load(ref)
    assert rel_diff(logits["fp32"], ref) == 0.0
    bf16, fp16 = rel_diff(logits["bf16"], ref), rel_diff(logits["fp16"], ref)
    # bf16 keeps 8 significant bits: each rounding is within 2^-9; two MoE layers, two
    # roundings each, stay well inside 2^-6 of the logits' scale. fp16 keeps 11 bits.
    assert 0 < bf16 <= 2 ** -6
    assert 0 < fp16 < bf16


def test_bench_reports_the_same_drops_under_mpirun(deepinfer_bin, skewed):
    model, _ = skewed
    args = ("bench", "-m", model, "--dataset-name", "random", "--random-input-len", 8,
            "--random-output-len", 4, "--num-prompts", 4, "--warmup", 0, "--json", "--threads", 1,
            "--capacity-factor", 0.5, "--log-level", "warn")
    one = json.loads(ok(plain(deepinfer_bin, *args)).stdout.strip().splitlines()[-1])
    two = json.loads(ok(mpirun(2, deepinfer_bin, *args, "--expert-parallel-size", 2))
                     .stdout.strip().splitlines()[-1])
    assert one["moe_dropped_assignments"] > 0
    assert two["moe_dropped_assignments"] == one["moe_dropped_assignments"]
