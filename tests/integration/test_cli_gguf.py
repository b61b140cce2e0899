"""`--model FILE.gguf` through the CLI: a GGUF written by llama.cpp's converter runs as the
checkpoint it came from, and broken or unsupported files fail with one clear line."""
import json
import struct

import pytest

from conftest import DATA, load_golden

GGUF = DATA / "gguf-models"


def gguf_bytes(metadata, tensors=(), version=3):
    """A minimal GGUF file: metadata {key: str | int(u32)}, tensors [(name, dims, ggml_type, data)]."""
    def string(s):
        b = s.encode()
        return struct.pack("<Q", len(b)) + b

    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(metadata))
    for key, value in metadata.items():
        out += string(key)
        out += struct.pack("<I", 8) + string(value) if isinstance(value, str) else struct.pack("<II", 4, value)
    offset = 0
    for name, dims, ggml_type, data in tensors:
        out += string(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims)
        out += struct.pack("<IQ", ggml_type, offset)
        offset += (len(data) + 31) // 32 * 32
    out += b"\0" * (-len(out) % 32)
    for _, _, _, data in tensors:
        out += data + b"\0" * (-len(data) % 32)
    return out


def test_gguf_generates_what_its_checkpoint_generates(run_cli):
    case = load_golden("tiny-llama")["cases"][1]
    ids = ",".join(map(str, case["prompt_ids"]))
    for model in (GGUF / "tiny-llama-f32.gguf", DATA / "tiny-llama"):
        out = json.loads(run_cli("generate", "--model", model, "--prompt-ids", ids, "--max-new-tokens", 8,
                                 "--ignore-eos", "--json", check=True).stdout)
        assert out["output_ids"] == case["greedy_ids"][:8], model


def test_directory_holding_one_gguf_is_that_model(run_cli, tmp_path):
    (tmp_path / "model.gguf").write_bytes((GGUF / "tiny-qwen2-f32.gguf").read_bytes())
    out = json.loads(run_cli("info", "--model", tmp_path, "--json", check=True).stdout)
    assert out["architecture"] == "Qwen2ForCausalLM"


def error_of(run_cli, path):
    proc = run_cli("info", "--model", path)
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.strip().splitlines() if "error" in line]
    assert len(lines) == 1, proc.stderr
    assert "internal error" not in lines[0]
    return lines[0]


@pytest.mark.parametrize("name,content,message", [
    ("magic.gguf", b"GGUX" + b"\0" * 60, "magic"),
    ("empty.gguf", b"", "GGUF"),
    ("v1.gguf", b"GGUF" + struct.pack("<IQQ", 1, 0, 0), "version"),
])
def test_broken_files_fail_with_one_line(run_cli, tmp_path, name, content, message):
    path = tmp_path / name
    path.write_bytes(content)
    assert message in error_of(run_cli, path)


def test_truncated_gguf_fails_with_one_line(run_cli, tmp_path):
    whole = (GGUF / "tiny-qwen2-f32.gguf").read_bytes()
    path = tmp_path / "cut.gguf"
    path.write_bytes(whole[: len(whole) // 2])
    assert "cut.gguf" in error_of(run_cli, path)


def test_huge_metadata_string_fails_without_allocating(run_cli, tmp_path):
    data = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 2**40) + b"general.architecture"
    path = tmp_path / "huge.gguf"
    path.write_bytes(data)
    assert "huge.gguf" in error_of(run_cli, path)


def test_unknown_architecture_and_tensor_type_are_named(run_cli, tmp_path):
    path = tmp_path / "mamba.gguf"
    path.write_bytes(gguf_bytes({"general.architecture": "mamba"},
                                [("token_embd.weight", [4, 8], 0, b"\0" * 128)]))
    line = error_of(run_cli, path)
    assert "'mamba'" in line and "llama" in line
    path = tmp_path / "type.gguf"
    path.write_bytes(gguf_bytes({"general.architecture": "llama"},
                                [("token_embd.weight", [32, 8], 77, b"\0" * 256)]))
    assert "77" in error_of(run_cli, path)
