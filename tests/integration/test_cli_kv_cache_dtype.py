"""`--kv-cache-dtype`: a memory budget holds as many more blocks as a token costs fewer bytes
(`deepinfer info` gives the per-token cost), every dtype serves requests, bad names fail."""
import json
import re

from conftest import DATA

MODEL = DATA / "tiny-qwen3"


def pool_blocks(run_cli, tmp_path, dtype):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text(json.dumps({"prompt_ids": [3, 1, 4, 1, 5, 9, 2, 6], "max_tokens": 6})
                       + "\n", encoding="utf-8")
    proc = run_cli("generate", "--model", MODEL, "--prompts-file", prompts, "--threads", 2,
                   "--kv-cache-dtype", dtype, "--kv-cache-memory", 0.002, check=True)
    out = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert len(out) == 1 and len(out[0]["output_ids"]) == 6
    assert out[0]["finish_reason"] == "length"
    return int(re.search(r"of (\d+) KV blocks", proc.stderr).group(1))


def test_budget_holds_more_blocks_of_a_smaller_dtype(run_cli, tmp_path):
    info = json.loads(run_cli("info", "--model", MODEL, "--json", check=True).stdout)
    bytes_per_token = {"f32": info["kv_bytes_per_token"],
                       "bf16": info["kv_bytes_per_token_bf16"],
                       "int8": info["kv_bytes_per_token_int8"]}
    # int8: one byte per element plus a 4-byte scale per group, so between 1/4 and 1/2 of f32.
    assert bytes_per_token["f32"] / 4 < bytes_per_token["int8"] < bytes_per_token["f32"] / 2
    assert bytes_per_token["bf16"] * 2 == bytes_per_token["f32"]
    blocks = {dtype: pool_blocks(run_cli, tmp_path, dtype) for dtype in bytes_per_token}
    budget = 0.002 * 2**30
    for dtype, per_token in bytes_per_token.items():
        assert blocks[dtype] == int(budget // (per_token * 16)), dtype
    assert pool_blocks(run_cli, tmp_path, "f16") == blocks["bf16"]
    assert pool_blocks(run_cli, tmp_path, "auto") == blocks["f32"]


def test_unknown_kv_cache_dtype_is_a_clear_error(run_cli, tmp_path):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt_ids": [1, 2]}\n', encoding="utf-8")
    proc = run_cli("generate", "--model", MODEL, "--prompts-file", prompts, "--kv-cache-dtype",
                   "fp8")
    assert proc.returncode != 0
    assert "fp8" in proc.stderr and "int8" in proc.stderr and "Traceback" not in proc.stderr


def test_single_prompt_logits_with_an_int8_cache_stay_close(run_cli, tmp_path):
    import numpy as np
    from conftest import load_golden
    case = max(load_golden("tiny-qwen3")["cases"], key=lambda c: len(c["prompt_ids"]))
    ids = ",".join(map(str, case["prompt_ids"]))
    logits = {}
    for dtype in ("f32", "int8"):
        path = tmp_path / f"{dtype}.npy"
        run_cli("generate", "--model", MODEL, "--prompt-ids", ids, "--max-new-tokens", 1,
                "--kv-cache-dtype", dtype, "--dump-logits", path, check=True)
        logits[dtype] = np.load(path)
    ref = np.array(case["last_logits"], dtype=np.float32)
    assert np.abs(logits["f32"] - ref).max() <= 1e-4 * np.abs(ref).max()
    rel_l2 = np.linalg.norm(logits["int8"] - logits["f32"]) / np.linalg.norm(logits["f32"])
    assert 0 < rel_l2 <= 5e-2
