"""`deepinfer generate --prompts-file` and `deepinfer bench --mode offline` on the tiny Qwen3."""
import json

import pytest

from conftest import DATA, load_golden

MODEL = DATA / "tiny-qwen3"


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def run_file(run_cli, path, *flags, check=True):
    proc = run_cli("generate", "--model", MODEL, "--prompts-file", path, "--threads", 2, *flags,
                   check=check)
    return proc, [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def test_prompts_file_matches_transformers_greedy_in_input_order(run_cli, tmp_path):
    cases = load_golden("tiny-qwen3")["cases"]
    rows = [{"prompt_ids": c["prompt_ids"], "max_tokens": 32, "ignore_eos": True}
            for c in reversed(cases)]
    # Small pool and budgets: chunked prefill and preemption happen along the way.
    _, out = run_file(run_cli, write_jsonl(tmp_path / "p.jsonl", rows), "--block-size", 4,
                      "--max-num-blocks", 40, "--max-num-batched-tokens", 16,
                      "--enable-prefix-caching")
    assert [o["index"] for o in out] == list(range(len(rows)))
    for o, c in zip(out, reversed(cases)):
        assert set(o) >= {"index", "prompt_ids", "output_ids", "text", "finish_reason"}
        assert o["prompt_ids"] == c["prompt_ids"]
        assert o["output_ids"] == c["greedy_ids"]
        assert o["finish_reason"] == "length"
        assert isinstance(o["text"], str)


def test_text_prompts_n_and_seeded_sampling_are_reproducible(run_cli, tmp_path):
    sampled = {"prompt": "Hello world", "max_tokens": 12, "temperature": 0.9, "top_p": 0.9,
               "seed": 42, "n": 2, "ignore_eos": True}
    others = [{"prompt_ids": [i, i + 1, i + 2], "max_tokens": 6, "temperature": 1.0,
               "seed": i} for i in range(1, 9)]
    _, alone = run_file(run_cli, write_jsonl(tmp_path / "a.jsonl", [sampled]))
    _, mixed = run_file(run_cli, write_jsonl(tmp_path / "b.jsonl", others + [sampled]),
                        "--max-num-batched-tokens", 8)
    got = mixed[-1]
    assert got["index"] == len(others)
    assert got["choices"] == alone[0]["choices"]
    assert len(got["choices"]) == 2
    assert got["choices"][0]["output_ids"] != got["choices"][1]["output_ids"]
    assert got["output_ids"] == got["choices"][0]["output_ids"]


def test_stop_string_is_excluded_from_the_text(run_cli, tmp_path):
    base = {"prompt": "Hello world", "max_tokens": 24, "ignore_eos": True}
    _, full = run_file(run_cli, write_jsonl(tmp_path / "a.jsonl", [base]))
    text = full[0]["text"]
    words = [w for w in text.split(" ")[1:] if len(w) >= 2 and "\ufffd" not in w[:2]]
    assert words, text
    stop = " " + words[-1][:2]
    _, cut = run_file(run_cli, write_jsonl(tmp_path / "b.jsonl", [dict(base, stop=[stop])]))
    assert cut[0]["finish_reason"] == "stop"
    assert cut[0]["text"] == text[:text.index(stop)]
    assert cut[0]["stop"] == stop


def test_bad_lines_and_impossible_prompts_fail_before_running(run_cli, tmp_path):
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"prompt_ids": [1]}, {"prompt_ids": [1], "x": 2}])
    proc, out = run_file(run_cli, bad, check=False)
    assert proc.returncode != 0 and out == []
    assert "bad.jsonl:2" in proc.stderr and "unknown key" in proc.stderr

    long = write_jsonl(tmp_path / "long.jsonl", [{"prompt_ids": [1] * 40}])
    proc, out = run_file(run_cli, long, "--max-model-len", 32, check=False)
    assert proc.returncode != 0 and out == []
    assert "max_model_len" in proc.stderr

    proc = run_cli("generate", "--model", MODEL, "--prompt-ids", "1", "--max-num-seqs", 2)
    assert proc.returncode != 0 and "--prompts-file" in proc.stderr


def test_bench_offline_json_has_the_documented_keys(run_cli):
    proc = run_cli("bench", "--mode", "offline", "--model", MODEL, "--num-prompts", 6,
                   "--input-len", 10, "--output-len", 5, "--max-num-seqs", 4, "--json",
                   "--threads", 2, check=True)
    out = json.loads(proc.stdout)
    for key in ("requests_per_s", "input_tokens_per_s", "output_tokens_per_s", "peak_rss_mb",
                "peak_kv_blocks"):
        assert out[key] > 0, key
    for key in ("ttft_ms", "tpot_ms"):
        assert set(out[key]) == {"mean", "p50", "p90", "p99"}
        assert 0 < out[key]["p50"] <= out[key]["p99"]
    assert out["output_tokens_per_s"] == pytest.approx(
        out["requests_per_s"] * 5, rel=1e-6)

    proc = run_cli("bench", "--mode", "serving", "--model", MODEL, "--num-prompts", 1,
                   "--input-len", 1, "--output-len", 1)
    assert proc.returncode != 0 and "offline" in proc.stderr


def test_engine_flags_are_checked_as_settings_before_loading(run_cli, tmp_path):
    # generate, bench and serve read their engine flags as recipe settings (src/config): the
    # same checks and messages as a config file's keys, before any weight is read.
    path = write_jsonl(tmp_path / "p.jsonl", [{"prompt_ids": [1, 2], "max_tokens": 2}])
    cases = [(["--kv-cache-dtype", "fp8"], ["--kv-cache-dtype", "not built"]),
             (["--max-num-blocks", "0"], ["--max-num-blocks", "positive"]),
             (["--max-num-blocks", "8", "--kv-cache-memory", "1"],
              ["--max-num-blocks", "--kv-cache-memory", "give one"]),
             (["--scheduling-policy", "lifo"], ["--scheduling-policy", "fifo or priority"])]
    for flags, needles in cases:
        proc, out = run_file(run_cli, path, *flags, check=False)
        assert proc.returncode != 0 and out == []
        for needle in needles:
            assert needle in proc.stderr, proc.stderr
        assert "loading model" not in proc.stderr
    proc = run_cli("bench", "--model", MODEL, "--num-prompts", 1, "--input-len", 1,
                   "--output-len", 1, "--kv-cache-dtype", "int4")
    assert proc.returncode != 0 and "--kv-cache-dtype" in proc.stderr
