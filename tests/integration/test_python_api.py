"""The Python package (deepinfer / cann_recipes_infer over the _deepinfer pybind11 module),
imported from the CMake build directory: greedy output equals the CLI's, batches equal single
runs, streams concatenate to the full text, chat, argument errors, the GIL released while
generating, and the articles' example script unchanged."""
import json
import os
import pathlib
import subprocess
import sys
import threading
import time

import pytest

from conftest import DATA, ROOT

MODEL = DATA / "tiny-qwen3"
PROMPTS = ["hello there", "The capital of France is", "1, 2, 3, 4,", "once upon a time"]


def python_path(deepinfer_bin):
    """Where the build put _deepinfer (beside the CLI: <build>/python) and the packages."""
    build = pathlib.Path(os.environ.get("DEEPINFER_PYTHON_DIR",
                                        pathlib.Path(deepinfer_bin).parent / "python"))
    if not list(build.glob("_deepinfer*.so")):
        pytest.fail(f"_deepinfer not built in {build}: build with pybind11-dev installed "
                    "(scripts/setup.sh) or set DEEPINFER_PYTHON_DIR")
    return [str(build.resolve()), str(ROOT / "python")]


@pytest.fixture(scope="module")
def deepinfer(deepinfer_bin):
    for path in reversed(python_path(deepinfer_bin)):
        if path not in sys.path:
            sys.path.insert(0, path)
    import deepinfer as module
    return module


@pytest.fixture(scope="module")
def engine(deepinfer):
    eng = deepinfer.InferenceEngine(model_path=str(MODEL), threads=2, max_num_blocks=64,
                                    do_sample=False, max_new_tokens=12, log_level="warn")
    yield eng
    eng.close()


def cli_greedy(run_cli, prompt, max_new):
    out = run_cli("generate", "--model", MODEL, "--prompt", prompt, "--max-new-tokens", max_new,
                  "--json", "--threads", 2, check=True)
    return json.loads(out.stdout)["text"]


def test_generate_greedy_equals_cli(engine, run_cli):
    for prompt in PROMPTS[:2]:
        assert engine.generate(prompt, max_new_tokens=10, temperature=0) == \
            cli_greedy(run_cli, prompt, 10)
    # The config's defaults (do_sample false, max_new_tokens 12) apply when arguments are unset.
    assert engine.generate(PROMPTS[0]) == cli_greedy(run_cli, PROMPTS[0], 12)
    assert engine.sampling_defaults["max_new_tokens"] == 12
    assert engine.model_name == "tiny-qwen3"


def test_list_of_prompts_runs_as_a_batch_equal_to_single_runs(engine):
    single = [engine.generate(p, max_new_tokens=16, temperature=0) for p in PROMPTS]
    assert engine.generate(PROMPTS, max_new_tokens=16, temperature=0) == single
    assert engine.generate(tuple(PROMPTS[:1]), max_new_tokens=16, temperature=0) == single[:1]
    # Seeded sampling is batch-invariant too.
    sampled = [engine.generate(p, max_new_tokens=16, temperature=0.9, seed=7) for p in PROMPTS]
    assert engine.generate(PROMPTS, max_new_tokens=16, temperature=0.9, seed=7) == sampled


def test_stream_chunks_concatenate_to_the_full_text(engine):
    full = engine.generate(PROMPTS[1], max_new_tokens=20, temperature=0, ignore_eos=True)
    stream = engine.generate(PROMPTS[1], max_new_tokens=20, temperature=0, ignore_eos=True,
                             stream=True)
    pieces = list(stream)
    assert len(pieces) > 1 and all(isinstance(p, str) and p for p in pieces)
    assert "".join(pieces) == full
    assert stream.finish_reason == "length"
    # Sampled with a seed: the same as the non-streamed call.
    kwargs = dict(max_new_tokens=20, temperature=0.8, top_p=0.9, top_k=30, seed=3)
    assert "".join(engine.generate(PROMPTS[2], stream=True, **kwargs)) == \
        engine.generate(PROMPTS[2], **kwargs)


def test_stream_closed_early_aborts(engine):
    stream = engine.generate(PROMPTS[0], max_new_tokens=200, temperature=0, ignore_eos=True,
                             stream=True)
    next(stream)
    stream.close()
    assert list(stream) == []
    # The engine is still usable afterwards.
    assert engine.generate(PROMPTS[0], max_new_tokens=4, temperature=0)


def test_stop_strings(engine):
    full = engine.generate(PROMPTS[3], max_new_tokens=30, temperature=0, ignore_eos=True)
    assert len(full) > 4
    stop = full[2:4]
    cut = engine.generate(PROMPTS[3], max_new_tokens=30, temperature=0, ignore_eos=True, stop=stop)
    assert cut == full[:full.index(stop)]
    assert engine.generate(PROMPTS[3], max_new_tokens=30, temperature=0, ignore_eos=True,
                           stop=[stop, "zzz"]) == cut


def test_chat_equals_the_cli_pipeline(engine, run_cli, tmp_path):
    messages = [{"role": "user", "content": "hello there"}]
    (tmp_path / "m.json").write_text(json.dumps(messages))
    rendered = run_cli("render-chat", "--model", MODEL, "--messages", tmp_path / "m.json",
                       "--add-generation-prompt", check=True).stdout
    (tmp_path / "p.txt").write_bytes(rendered.encode())
    ids = json.loads(run_cli("tokenize", "--model", MODEL, "--text-file", tmp_path / "p.txt",
                             check=True).stdout)
    expected = json.loads(run_cli("generate", "--model", MODEL, "--prompt-ids",
                                  ",".join(map(str, ids)), "--max-new-tokens", 10, "--json",
                                  check=True).stdout)["text"]
    assert engine.chat(messages, max_new_tokens=10, temperature=0) == expected
    assert "".join(engine.chat(messages, max_new_tokens=10, temperature=0, stream=True)) == expected
    # chat_template_kwargs reach the template (Qwen3's enable_thinking changes the prompt).
    engine.chat(messages, max_new_tokens=2, chat_template_kwargs={"enable_thinking": False})


@pytest.mark.parametrize("call,fragment", [
    (lambda e: e.generate("hi", max_new_tokens=0), "max_new_tokens must be a positive integer"),
    (lambda e: e.generate("hi", top_p=1.5), "top_p must be in (0, 1]"),
    (lambda e: e.generate("hi", temperature=-1.0), "temperature must be >= 0"),
    (lambda e: e.generate("hi", top_k=-5), "top_k must be"),
    (lambda e: e.generate("hi", repetition_penalty=0.0), "repetition_penalty must be > 0"),
    (lambda e: e.generate("hi", seed=-1), "seed must be >= 0"),
    (lambda e: e.generate("hi", stop=""), "stop strings must not be empty"),
    (lambda e: e.generate(""), "prompt must not be empty"),
    (lambda e: e.generate([]), "empty list"),
    (lambda e: e.generate(["a", "b"], stream=True), "stream=True takes one prompt"),
    (lambda e: e.generate("word " * 400), "tokens"),
    (lambda e: e.chat([]), "non-empty list"),
    (lambda e: e.chat([{"content": "no role"}]), "messages[0]"),
    (lambda e: e.chat([{"role": "user", "content": "x"}], chat_template_kwargs=[1]),
     "chat_template_kwargs must be a dict"),
])
def test_bad_arguments_raise_value_error(engine, call, fragment):
    with pytest.raises(ValueError) as info:
        call(engine)
    assert fragment in str(info.value)


def test_bad_types_raise_type_error(engine):
    with pytest.raises(TypeError):
        engine.generate(42)
    with pytest.raises(TypeError):
        engine.generate(["ok", 3])
    with pytest.raises(TypeError):
        engine.generate("hi", max_new_tokens="many")


def test_bad_constructor_arguments(deepinfer, tmp_path):
    with pytest.raises(ValueError, match="give config_path"):
        deepinfer.InferenceEngine()
    with pytest.raises(ValueError, match="unknown setting 'blocksize'"):
        deepinfer.InferenceEngine(model_path=str(MODEL), blocksize=16)
    with pytest.raises(ValueError, match="expert_parallel_size = 8"):
        deepinfer.InferenceEngine(model_path=str(MODEL), expert_parallel_size=8)
    bad = tmp_path / "infer_config.json"
    bad.write_text(json.dumps({"model": {"model_path": str(MODEL), "hidden_size": 1}}))
    with pytest.raises(ValueError, match="model.hidden_size = 1"):
        deepinfer.InferenceEngine(config_path=bad)
    with pytest.raises(RuntimeError, match="no tokenizer.json"):
        empty = tmp_path / "empty_model"
        empty.mkdir()
        (empty / "config.json").write_text((MODEL / "config.json").read_text())
        deepinfer.InferenceEngine(model_path=empty)


def test_gil_is_released_while_generating(engine):
    window = {}
    ticks = []

    def work():
        window["start"] = time.perf_counter()
        engine.generate(PROMPTS * 4, max_new_tokens=200, temperature=0, ignore_eos=True)
        window["end"] = time.perf_counter()

    thread = threading.Thread(target=work)
    thread.start()
    while thread.is_alive():
        ticks.append(time.perf_counter())
    thread.join()
    inside = [t for t in ticks if window["start"] < t < window["end"]]
    duration = window["end"] - window["start"]
    assert duration > 0.05, "generation too short to observe"
    # Holding the GIL would freeze this loop for the whole call (a handful of ticks at most).
    assert len(inside) > 1000, (len(inside), duration)


def test_articles_example_runs_unchanged(deepinfer_bin, tmp_path):
    """SEED_INTERFACES.md §2 as a script, in a directory whose configs/deepseek/ point at a tiny
    DeepSeek-V2 checkpoint."""
    config_dir = tmp_path / "configs" / "deepseek"
    config_dir.mkdir(parents=True)
    shipped = json.loads((ROOT / "configs/deepseek/infer_config.json").read_text())
    shipped["model"] = {"model_path": str(DATA / "tiny-deepseek-v2"), "model_type": "deepseek_v2"}
    shipped["inference"]["max_seq_len"] = 256
    shipped["kv_cache"]["max_num_blocks"] = 64
    (config_dir / "infer_config.json").write_text(json.dumps(shipped))
    script = tmp_path / "test_infer.py"
    script.write_text(
        'from cann_recipes_infer import InferenceEngine\n'
        'engine = InferenceEngine(config_path="configs/deepseek/infer_config.json")\n'
        'output = engine.generate(prompt="Tell me about MoE.", max_new_tokens=512, '
        'temperature=0.7, top_p=0.95, stream=False)\n'
        'print(output)\n')
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(python_path(deepinfer_bin)))
    proc = subprocess.run([sys.executable, script.name], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "warm-up completed" in proc.stderr
    assert proc.stdout.endswith("\n")
