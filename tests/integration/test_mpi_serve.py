"""Every model command under mpirun (docs/DISTRIBUTED.md): `serve` through the official openai
client, the engine's mixed requests, Python, faults (SIGKILL, SIGSTOP) and bad input.

Each distributed run is compared with the same command in one process: rank 0 owns HTTP, the
tokenizer and the scheduler, the other ranks follow its steps, so the greedy text must be the
same. Skipped when mpirun is not installed.
"""
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest
import requests

from conftest import DATA, ROOT
from serve_util import ServeProcess

MPIRUN = shutil.which("mpirun")
pytestmark = pytest.mark.skipif(MPIRUN is None, reason="mpirun not installed (openmpi-bin)")

MODEL = DATA / "tiny-qwen3-moe"
NAME = "tiny-qwen3-moe"
PROMPTS = [f"Story {i}: once upon a time" + " and then" * (i % 5) for i in range(16)]


def mpi_env(**extra):
    env = dict(os.environ)
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl_vader_single_copy_mechanism="none",
               OMPI_MCA_rmaps_base_oversubscribe="1", **extra)
    return env


def mpirun_argv(ranks, *command):
    return [MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", str(ranks),
            *map(str, command)]


def mpirun(ranks, *command, timeout=120, env=None):
    return subprocess.run(mpirun_argv(ranks, *command), capture_output=True, text=True,
                          timeout=timeout, env=env or mpi_env())


def plain(*command, timeout=120):
    return subprocess.run(list(map(str, command)), capture_output=True, text=True, timeout=timeout)


def ok(proc):
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def rank_pid(parent_pid, rank):
    """The pid of mpirun's child process of `rank` (found by its OMPI_COMM_WORLD_RANK)."""
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if b"deepinfer" in cmdline and f"OMPI_COMM_WORLD_RANK={rank}".encode() in environ \
                and b"mpirun" not in cmdline.split(b"\0")[0]:
            return int(entry.name)
    raise AssertionError(f"no process of rank {rank} under mpirun {parent_pid}")


class MpiServe:
    """`mpirun -np N deepinfer serve ...` on a free port: ready when /health is 200."""

    def __init__(self, binary, ranks, *flags, env=None, timeout=120):
        argv = mpirun_argv(ranks, binary, "serve", MODEL, "--port", 0, "--threads", 1,
                           "--expert-parallel-size", ranks, *flags)
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, errors="replace", env=env or mpi_env())
        self.log = []
        self.port = None
        deadline = time.monotonic() + timeout
        while self.port is None:
            line = self.proc.stderr.readline()
            if not line:
                raise AssertionError(f"serve exited ({self.proc.wait()}): {''.join(self.log)}")
            self.log.append(line)
            match = re.search(r"listening on http://[^:]+:(\d+)", line)
            if match:
                self.port = int(match.group(1))
            assert time.monotonic() < deadline, "serve did not report its port"
        threading.Thread(target=lambda: [self.log.append(l) for l in self.proc.stderr],
                         daemon=True).start()
        self.url = f"http://127.0.0.1:{self.port}"
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"serve died: {''.join(self.log)}"
            try:
                if requests.get(self.url + "/health", timeout=5).status_code == 200:
                    return
            except requests.ConnectionError:
                pass
            time.sleep(0.05)
        raise AssertionError("serve never became ready")

    def text(self):
        return "".join(self.log)


def client_of(url):
    return openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=120)


def greedy_texts(url):
    """16 concurrent greedy completions, every other one streamed: {prompt index: text}."""
    client = client_of(url)

    def one(i):
        kw = dict(model=NAME, prompt=PROMPTS[i], max_tokens=12 + i, temperature=0)
        if i % 2 == 0:
            return "".join(c.choices[0].text for c in
                           client.completions.create(stream=True, **kw))
        return client.completions.create(**kw).choices[0].text

    with ThreadPoolExecutor(16) as pool:
        return dict(enumerate(pool.map(one, range(16))))


def test_serve_two_ranks_answers_what_one_process_does(deepinfer_bin):
    one = ServeProcess(deepinfer_bin, "--threads", 1, model=MODEL)
    try:
        expected = greedy_texts(one.url)
    finally:
        assert one.stop() == 0
    server = MpiServe(deepinfer_bin, 2)
    try:
        got = greedy_texts(server.url)
        chat = client_of(server.url).chat.completions.create(
            model=NAME, messages=[{"role": "user", "content": "hi"}], max_tokens=4,
            temperature=0)
        assert chat.choices[0].message.content is not None
    finally:
        # SIGTERM to rank 0 drains its server; its stop message ends the other rank.
        os.kill(rank_pid(server.proc.pid, 0), signal.SIGTERM)
        rc = server.proc.wait(timeout=60)
    assert got == expected
    assert all(len(t) > 0 for t in got.values())
    assert rc == 0, server.text()
    assert server.text().count("listening on") == 1, "only rank 0 binds a port"


def mixed_requests(tmp_path):
    """32 requests: greedy and seeded sampling, lengths 1..24, stop strings and token ids."""
    lines = []
    for i in range(32):
        line = {"prompt": PROMPTS[i % 16] + f" #{i}", "max_tokens": 1 + (i * 7) % 24}
        if i % 3 == 1:
            line.update(temperature=0.9, top_p=0.9, seed=1000 + i)
        elif i % 3 == 2:
            line.update(temperature=1.2, top_k=20, seed=7 * i)
        else:
            line.update(temperature=0)
        if i % 4 == 1:
            line["stop"] = [" the", "a"]
        if i % 5 == 2:
            line["stop_token_ids"] = [i, i + 1, 2 * i + 3]
        if i % 6 == 0:
            line["ignore_eos"] = True
        lines.append(json.dumps(line))
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_32_mixed_requests_match_one_process(deepinfer_bin, tmp_path):
    path = mixed_requests(tmp_path)
    args = ("generate", "-m", MODEL, "--prompts-file", path, "--threads", 1, "--log-level",
            "warn", "--max-num-seqs", 8)
    ref = ok(plain(deepinfer_bin, *args))
    ref_lines = [json.loads(line) for line in ref.stdout.splitlines()]
    assert len(ref_lines) == 32
    # The settings really differ: some requests stop early, some are sampled.
    assert {r["finish_reason"] for r in ref_lines} >= {"length", "stop"}
    # One reference for every 2-rank layout: experts split, heads and MLPs split (each expert
    # sharded, moe_tp 2), and both (ep 2 x tp 2).
    for layout in (("--expert-parallel-size", 2), ("-tp", 2), ("-tp", 2, "--enable-expert-parallel")):
        got = ok(mpirun(2, deepinfer_bin, *args, *layout))
        got_lines = [json.loads(line) for line in got.stdout.splitlines()]
        assert got_lines == ref_lines, layout


PYTHON_SCRIPT = """
import json, sys
from deepinfer import InferenceEngine
engine = InferenceEngine(model_path=sys.argv[1], threads=1, log_level="warn", **json.loads(sys.argv[2]))
out = engine.generate(["Hello there", "The capital of France"], max_new_tokens=8, temperature=0)
seeded = engine.generate("Once", max_new_tokens=6, temperature=0.8, seed=5)
pieces = list(engine.generate("A stream", max_new_tokens=5, temperature=0, stream=True))
engine.close()
print(json.dumps([out, seeded, "".join(pieces)]))
"""


def test_python_engine_under_mpirun(deepinfer_bin, tmp_path):
    python = ROOT / ".venv" / "bin" / "python"
    if not python.exists():
        python = pathlib.Path(sys.executable)
    module_dir = pathlib.Path(deepinfer_bin).parent / "python"
    if not list(module_dir.glob("_deepinfer*.so")):
        pytest.skip(f"the _deepinfer module is not built in {module_dir}")
    script = tmp_path / "engine.py"
    script.write_text(PYTHON_SCRIPT)
    env = mpi_env(PYTHONPATH=f"{module_dir}:{ROOT / 'python'}")
    ref = subprocess.run([str(python), str(script), str(MODEL), "{}"], capture_output=True,
                         text=True, timeout=120, env={**os.environ, **{"PYTHONPATH": env["PYTHONPATH"]}})
    ok(ref)
    got = ok(mpirun(2, python, script, MODEL, '{"expert_parallel_size": 2}', env=env))
    assert got.stdout == ref.stdout, "rank 0 alone prints, the same answers"
    assert len(json.loads(ref.stdout)[0]) == 2


# Room for a stream that runs until it is cut, with a small KV pool (every rank allocates it).
LONG_STREAMS = ("--max-model-len", 8192, "--allow-long-max-model-len", "--max-num-seqs", 2)


def stream_until_cut(url, results):
    """Streams a long completion; records how it ended (results["streaming"] is set at its
    first text)."""
    client = client_of(url)
    text = ""
    try:
        for chunk in client.completions.create(model=NAME, prompt="tell me", max_tokens=8000,
                                               temperature=0, stream=True,
                                               extra_body={"ignore_eos": True}):
            text += chunk.choices[0].text if chunk.choices else ""
            if text:
                results["streaming"].set()
        results["end"] = "finished"
    except Exception as e:  # the stream is cut or ends with an error event
        results["end"] = f"error: {e!r}"
    results["text"] = text
    results["streaming"].set()


def start_stream(url):
    results = {"streaming": threading.Event()}
    streaming = threading.Thread(target=stream_until_cut, args=(url, results))
    streaming.start()
    assert results["streaming"].wait(60) and "end" not in results, results
    return streaming, results


def test_sigkill_of_a_rank_during_a_stream_ends_every_rank(deepinfer_bin):
    server = MpiServe(deepinfer_bin, 2, *LONG_STREAMS)
    streaming, results = start_stream(server.url)
    killed_at = time.monotonic()
    os.kill(rank_pid(server.proc.pid, 1), signal.SIGKILL)
    rc = server.proc.wait(timeout=30)
    elapsed = time.monotonic() - killed_at
    streaming.join(timeout=30)
    assert rc != 0
    assert elapsed < 30
    assert re.search(r"process rank 1 .* exited on signal 9", server.text()), server.text()
    assert results.get("end", "").startswith("error"), results
    assert len(results["text"]) > 0, "the stream was running"


def test_sigstop_of_a_rank_is_found_by_the_heartbeat(deepinfer_bin):
    server = MpiServe(deepinfer_bin, 2, *LONG_STREAMS, env=mpi_env(DEEPINFER_HEARTBEAT_TIMEOUT="3"))
    streaming, results = start_stream(server.url)
    worker = rank_pid(server.proc.pid, 1)
    stopped_at = time.monotonic()
    os.kill(worker, signal.SIGSTOP)
    statuses = []
    try:
        # Meanwhile: new requests get 503 once the heartbeat has found the silent rank.
        while server.proc.poll() is None and time.monotonic() - stopped_at < 30:
            try:
                statuses.append(requests.post(server.url + "/v1/completions", timeout=2, json={
                    "model": NAME, "prompt": "x", "max_tokens": 1}).status_code)
            except requests.RequestException:
                pass
            time.sleep(0.2)
        rc = server.proc.wait(timeout=30)
    finally:
        try:
            os.kill(worker, signal.SIGKILL)
        except ProcessLookupError:
            pass
    elapsed = time.monotonic() - stopped_at
    streaming.join(timeout=30)
    assert rc != 0
    assert elapsed < 30
    assert "rank 1 has not answered the heartbeat" in server.text(), server.text()
    assert 503 in statuses, statuses
    # The open stream ended with the heartbeat's error, not a cut connection.
    assert "engine unavailable: rank 1 has not answered" in results.get("end", ""), results


def error_lines(proc):
    assert proc.returncode != 0, proc.stdout + proc.stderr
    return [line for line in proc.stderr.splitlines() if "error:" in line]


def test_mismatched_checkpoints_between_ranks_are_refused(deepinfer_bin, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(MODEL, other)
    config = json.loads((other / "config.json").read_text())
    config["rms_norm_eps"] = config.get("rms_norm_eps", 1e-6) * 2
    (other / "config.json").write_text(json.dumps(config))
    base = ("generate", "--prompt-ids", "1,2,3", "-n", 2, "--threads", 1,
            "--expert-parallel-size", 2)
    argv = [MPIRUN, "--allow-run-as-root", "--oversubscribe",
            "-np", "1", deepinfer_bin, *base, "-m", MODEL, ":",
            "-np", "1", deepinfer_bin, *base, "-m", other]
    proc = subprocess.run(list(map(str, argv)), capture_output=True, text=True, timeout=60,
                          env=mpi_env())
    lines = error_lines(proc)
    assert len(lines) == 1, proc.stderr
    assert "rank 1 does not match rank 0: its config.json differs" in lines[0]
    assert "loading model" not in proc.stderr  # before any weight is read


def test_mismatched_binaries_between_ranks_are_refused(deepinfer_bin, tmp_path):
    objcopy = shutil.which("objcopy")
    if objcopy is None:
        pytest.skip("objcopy (binutils) not installed: cannot make a binary of another build id")
    # The same code under another build id: what a rank built from other sources looks like.
    note = tmp_path / "note"
    other = tmp_path / "deepinfer-other"
    subprocess.run([objcopy, "-O", "binary", "--only-section=.note.gnu.build-id",
                    deepinfer_bin, note], check=True)
    data = bytearray(note.read_bytes())
    data[-1] ^= 0xFF  # the id is the note's last bytes
    note.write_bytes(bytes(data))
    subprocess.run([objcopy, f"--update-section=.note.gnu.build-id={note}", deepinfer_bin, other],
                   check=True)
    base = ("generate", "-m", MODEL, "--prompt-ids", "1,2,3", "-n", 2, "--threads", 1,
            "--expert-parallel-size", 2)
    argv = [MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", "1", deepinfer_bin, *base,
            ":", "-np", "1", other, *base]
    proc = subprocess.run(list(map(str, argv)), capture_output=True, text=True, timeout=60,
                          env=mpi_env())
    lines = error_lines(proc)
    assert len(lines) == 1, proc.stderr
    assert "rank 1 does not match rank 0: its deepinfer build differs" in lines[0]


def test_mpirun_missing_and_device_counts(deepinfer_bin, tmp_path):
    # --expert-parallel-size 2 without mpirun, on a machine without it: says what to install.
    env = {k: v for k, v in os.environ.items() if not k.startswith("OMPI_")}
    env["PATH"] = str(tmp_path)  # no mpirun here
    proc = subprocess.run([str(deepinfer_bin), "generate", "-m", str(MODEL), "--prompt-ids", "1",
                           "-n", "1", "--expert-parallel-size", "2"], capture_output=True,
                          text=True, timeout=60, env=env)
    (line,) = error_lines(proc)
    assert "mpirun is not installed (Debian: apt-get install openmpi-bin)" in line
    assert "mpirun -np 2 deepinfer" in line
    # run --npu_devices: under mpirun one device per rank.
    proc = mpirun(2, deepinfer_bin, "run", "--model", MODEL, "--npu_devices", "0,1,2",
                  "--expert-parallel-size", 2, "--prompt", "hi", "--threads", 1, timeout=60)
    lines = error_lines(proc)
    assert lines and "--npu_devices lists 3 devices but mpirun started 2 ranks" in lines[0]
    # Without mpirun it keeps its meaning (threads) and says how to launch ranks.
    proc = ok(plain(deepinfer_bin, "run", "--model", MODEL, "--npu_devices", "0,1", "--prompt",
                    "hi", "--max-new-tokens", 2))
    assert "mpirun -np 2 deepinfer" in proc.stderr


def test_run_local_and_validate_under_mpirun(deepinfer_bin):
    args = ("run", "--model", MODEL, "--prompt", "hello there", "--max-new-tokens", 6,
            "--temperature", 0, "--threads", 1, "--log-level", "warn")
    ref = ok(plain(deepinfer_bin, *args))
    got = ok(mpirun(2, deepinfer_bin, *args, "--expert-parallel-size", 2))
    assert got.stdout == ref.stdout
    # validate: the model under test and its reference both run in lockstep.
    args = ("validate", "-m", MODEL, "--reference", MODEL, "--preset", "random",
            "--num-prompts", 2, "--prompt-len", 6, "--max-new-tokens", 4, "--json",
            "--threads", 1, "--log-level", "warn")
    ref = ok(plain(deepinfer_bin, *args))
    got = ok(mpirun(2, deepinfer_bin, *args, "--expert-parallel-size", 2))
    assert json.loads(got.stdout) == json.loads(ref.stdout)


def stored_bytes(model_dir):
    """(all tensor bytes, routed-expert tensor bytes) from the safetensors header itself."""
    raw = (model_dir / "model.safetensors").read_bytes()
    header = json.loads(raw[8:8 + int.from_bytes(raw[:8], "little")])
    sizes = {name: t["data_offsets"][1] - t["data_offsets"][0]
             for name, t in header.items() if name != "__metadata__"}
    experts = sum(b for n, b in sizes.items() if ".mlp.experts." in n)
    return sum(sizes.values()), experts


def test_info_reports_the_weights_of_every_rank(deepinfer_bin):
    model = DATA / "tiny-deepseek-v2"
    proc = ok(mpirun(2, deepinfer_bin, "info", "-m", model, "--expert-parallel-size", 2, "--json",
                     "--log-level", "warn"))
    assert len(proc.stdout.strip().splitlines()) == 1, "rank 0 prints for every rank"
    out = json.loads(proc.stdout)
    total, experts = stored_bytes(model)
    assert experts > 0
    # Each rank holds everything but the other rank's half of the routed experts.
    assert out["weight_bytes_per_rank"] == [total - experts // 2] * 2
    table = ok(mpirun(2, deepinfer_bin, "info", "-m", model, "--expert-parallel-size", 2,
                      "--log-level", "warn")).stdout
    assert "memory per rank (weights loaded, expert parallel 2 of 2 ranks)" in table
    assert "rank 1" in table and "(routed experts 4-7)" in table


def test_bench_online_under_mpirun_serves_from_rank_0(deepinfer_bin):
    proc = ok(mpirun(2, deepinfer_bin, "bench", "--mode", "online", "--model", MODEL, "--threads",
                     1, "--expert-parallel-size", 2, "--num_samples", 16, "--warmup", 1,
                     "--request-rate", "inf", "--seed", 1, "--input-len", 16, "--output-len", 8,
                     "--json", "--log-level", "warn"))
    assert len(proc.stdout.strip().splitlines()[0]) > 0
    run = json.loads(proc.stdout)
    assert run["server"] == "in bench's process (rank 0 of mpirun)"
    assert run["sent"] == run["completed"] == 16, run.get("failure_reasons")
    assert all(r["output_tokens"] == 8 and r["prompt_tokens"] == 16 for r in run["requests"])
