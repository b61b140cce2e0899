#!/usr/bin/env python3
"""GGUF goldens from gguf-py (llama.cpp's own Python package), for
tests/unit/io/gguf_test.cpp and tests/unit/core/quant_blocks_test.cpp.

Writes, with gguf.GGUFWriter (GGUF v3, general.alignment 64):
  tests/data/gguf/blocks.gguf           a few tensors of every ggml type we read, several rows
                                        each, plus metadata of every value type (scalars and
                                        arrays, incl. arrays of strings and of every int width)
  tests/data/gguf/blocks_expected.bin   gguf.quants.dequantize of every tensor, float32 LE,
                                        concatenated in tensor order
  tests/data/gguf/blocks_expected.json  index: per tensor its type, row-major shape, byte size
                                        and where its values sit in the .bin (null for Q8_K,
                                        which gguf-py cannot dequantize either); every metadata
                                        key with its GGUF type and value
  tests/fuzz/corpus/gguf_fuzz/*.gguf    small seed files for tests/fuzz/gguf_fuzz.cpp

Legacy types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) and BF16 are made by gguf.quants.quantize from
random data (normal values with negatives, zeros, outliers, an all-zero and a constant block).
gguf-py 0.19 cannot quantize k-quants, so Q2_K..Q6_K (and Q8_K) blocks are random bytes whose
f16 super-block scales are set to finite values of varied size (incl. 0, subnormal, negative).
The script reads the file back with gguf.GGUFReader and checks every tensor and key.

Rerun: scripts/setup_tools.sh && .venv-tools/bin/python tools/make_gguf_goldens.py
"""
import importlib.metadata
import json
import pathlib
import sys

import gguf
import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import GGUFValueType as V

SEED = 20261201
ALIGNMENT = 64
ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "data" / "gguf"
CORPUS = ROOT / "tests" / "fuzz" / "corpus" / "gguf_fuzz"

# Row-major shapes (ne reversed); the last entry is the row length ne[0].
LEGACY_SHAPES = [(4, 64), (2, 3, 32), (5, 96)]
K_SHAPES = [(2, 256), (3, 512), (2, 2, 256)]
FLOAT_SHAPES = [(4, 8), (2, 3, 5)]
LEGACY = [Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q8_0]
K_QUANTS = [Q.Q2_K, Q.Q3_K, Q.Q4_K, Q.Q5_K, Q.Q6_K]

# Byte offsets of the f16 super-block scales (d, dmin) in each k-quant block
# (ggml/src/ggml-common.h): random bytes elsewhere are always a valid block.
K_SCALE_OFFSETS = {Q.Q2_K: [80, 82], Q.Q3_K: [108], Q.Q4_K: [0, 2], Q.Q5_K: [0, 2],
                   Q.Q6_K: [208]}

TYPE_NAMES = {V.UINT8: "u8", V.INT8: "i8", V.UINT16: "u16", V.INT16: "i16", V.UINT32: "u32",
              V.INT32: "i32", V.FLOAT32: "f32", V.BOOL: "bool", V.STRING: "string",
              V.UINT64: "u64", V.INT64: "i64", V.FLOAT64: "f64"}


def sample_values(rng, shape):
    """Normal values with negatives, exact zeros, outliers, one all-zero and one constant block
    of 32 (when there is room)."""
    x = rng.standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    n = flat.size
    flat[rng.choice(n, size=max(1, n // 50), replace=False)] = 0.0
    outliers = rng.choice(n, size=max(1, n // 100), replace=False)
    flat[outliers] *= np.float32(25.0)
    if n >= 128:
        flat[32:64] = 0.0
        flat[64:96] = np.float32(-0.75)
    return x


def random_f16_scales(rng, count):
    """Finite f16 scales: mostly 1e-3..1e-1 of either sign, some 0, subnormal or larger."""
    d = (rng.uniform(1e-3, 1e-1, count) * rng.choice([-1.0, 1.0], count)).astype(np.float16)
    kind = rng.integers(0, 10, count)
    d[kind == 0] = np.float16(0.0)
    d[kind == 1] = np.float16(3e-6)  # subnormal in f16
    d[kind == 2] = np.float16(rng.uniform(1.0, 8.0))
    return d


def crafted_k_blocks(rng, qtype, shape):
    block_size, type_size = gguf.GGML_QUANT_SIZES[qtype]
    rows = int(np.prod(shape[:-1]))
    n_blocks = rows * shape[-1] // block_size
    blocks = rng.integers(0, 256, (n_blocks, type_size), dtype=np.uint8)
    for offset in K_SCALE_OFFSETS.get(qtype, []):
        scales = random_f16_scales(rng, n_blocks)
        blocks[:, offset:offset + 2] = scales.view(np.uint8).reshape(-1, 2)
    return blocks.reshape(*shape[:-1], shape[-1] // block_size * type_size)


def metadata_entries():
    """(key, GGUF type, value, array element type or None), in file order."""
    return [
        ("test.u8", V.UINT8, 255, None),
        ("test.i8", V.INT8, -128, None),
        ("test.u16", V.UINT16, 65535, None),
        ("test.i16", V.INT16, -32768, None),
        ("test.u32", V.UINT32, 4294967295, None),
        ("test.i32", V.INT32, -2147483648, None),
        ("test.u64", V.UINT64, 18446744073709551615, None),
        ("test.i64", V.INT64, -9223372036854775808, None),
        ("test.f32", V.FLOAT32, 0.1, None),
        ("test.f64", V.FLOAT64, -2.718281828459045, None),
        ("test.bool_true", V.BOOL, True, None),
        ("test.bool_false", V.BOOL, False, None),
        ("test.string", V.STRING, "héllo, 世界 😀\nsecond line", None),
        ("test.empty_string", V.STRING, "", None),
        ("test.int_as_u32", V.UINT32, 7, None),
        ("test.arr.string", V.ARRAY, ["<s>", "", "▁the", "ü", "a b"], V.STRING),
        ("test.arr.u8", V.ARRAY, [0, 1, 255], V.UINT8),
        ("test.arr.i8", V.ARRAY, [-128, 0, 127], V.INT8),
        ("test.arr.u16", V.ARRAY, [0, 65535], V.UINT16),
        ("test.arr.i16", V.ARRAY, [-32768, 32767], V.INT16),
        ("test.arr.u32", V.ARRAY, [1, 4294967295], V.UINT32),
        ("test.arr.i32", V.ARRAY, [-1, 0, 2147483647, -2147483648], V.INT32),
        ("test.arr.u64", V.ARRAY, [18446744073709551615, 0], V.UINT64),
        ("test.arr.i64", V.ARRAY, [-9223372036854775808, 9223372036854775807], V.INT64),
        ("test.arr.f32", V.ARRAY, [0.5, -1.25, 0.1, 3.0e38], V.FLOAT32),
        ("test.arr.f64", V.ARRAY, [1e-300, -0.1], V.FLOAT64),
        ("test.arr.bool", V.ARRAY, [True, False, True], V.BOOL),
    ]


def json_value(gtype, value):
    """The value as the C++ reader reports it: f32 widened exactly to double."""
    if gtype == V.FLOAT32:
        return float(np.float32(value))
    return value


def make_tensors(rng):
    """(name, GGML type, row-major shape, array for the writer, expected f32 values or None)."""
    tensors = []
    for i, shape in enumerate(FLOAT_SHAPES):
        x = sample_values(rng, shape)
        x.reshape(-1)[0] = np.float32(1e-6)  # an f16 subnormal
        x.reshape(-1)[1] = np.float32(-0.0)
        tensors.append((f"f32.{i}", Q.F32, shape, x, x))
        h = x.astype(np.float16)
        tensors.append((f"f16.{i}", Q.F16, shape, h,
                        gguf.quants.dequantize(h.view(np.uint8), Q.F16)))
        b = gguf.quants.quantize(x, Q.BF16)
        tensors.append((f"bf16.{i}", Q.BF16, shape, b, gguf.quants.dequantize(b, Q.BF16)))
    for qtype in LEGACY:
        for i, shape in enumerate(LEGACY_SHAPES):
            q = gguf.quants.quantize(sample_values(rng, shape), qtype)
            tensors.append((f"{qtype.name.lower()}.{i}", qtype, shape, q,
                            gguf.quants.dequantize(q, qtype)))
    for qtype in K_QUANTS:
        for i, shape in enumerate(K_SHAPES):
            q = crafted_k_blocks(rng, qtype, shape)
            tensors.append((f"{qtype.name.lower()}.{i}", qtype, shape, q,
                            gguf.quants.dequantize(q, qtype)))
    # gguf-py can neither quantize nor dequantize Q8_K: the reader must say it cannot either.
    q8k = crafted_k_blocks(rng, Q.Q8_K, (2, 256))
    tensors.append(("q8_k.0", Q.Q8_K, (2, 256), q8k, None))
    return tensors


def write_gguf(path, tensors, entries, alignment=None):
    writer = gguf.GGUFWriter(path, arch="deepinfer-test")
    if alignment is not None:
        writer.add_custom_alignment(alignment)
    for key, gtype, value, sub_type in entries:
        writer.add_key_value(key, value, gtype, sub_type=sub_type)
    for name, qtype, _, array, _ in tensors:
        if qtype in (Q.F32, Q.F16):
            writer.add_tensor(name, array)
        else:
            writer.add_tensor(name, array, raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def check_read_back(path, tensors, entries):
    reader = gguf.GGUFReader(path)
    by_name = {t.name: t for t in reader.tensors}
    assert [t.name for t in reader.tensors] == [t[0] for t in tensors]
    for name, qtype, shape, array, expected in tensors:
        t = by_name[name]
        assert t.tensor_type == qtype, name
        assert tuple(int(d) for d in reversed(t.shape)) == tuple(shape), (name, t.shape)
        assert t.data_offset % ALIGNMENT == 0, name
        assert np.array_equal(np.asarray(t.data).view(np.uint8).reshape(-1),
                              np.asarray(array).view(np.uint8).reshape(-1)), name
        if expected is not None:
            assert expected.dtype == np.float32 and expected.shape == tuple(shape), name
            assert np.isfinite(expected).all(), name
    for key, gtype, value, sub_type in entries:
        field = reader.fields[key]
        assert field.types[0] == gtype, key
        got = field.contents()
        if gtype == V.FLOAT32:
            assert got == np.float32(value), key
        elif gtype == V.ARRAY and sub_type == V.FLOAT32:
            assert list(got) == [float(np.float32(v)) for v in value], key
        else:
            assert got == value, (key, got, value)


def main():
    version = importlib.metadata.version("gguf")
    if version != "0.19.0":
        sys.exit(f"gguf {version} is installed; the goldens are made with gguf==0.19.0 "
                 "(tools/requirements.txt)")
    rng = np.random.default_rng(SEED)
    OUT.mkdir(parents=True, exist_ok=True)
    tensors = make_tensors(rng)
    entries = metadata_entries()
    gguf_path = OUT / "blocks.gguf"
    write_gguf(gguf_path, tensors, entries, alignment=ALIGNMENT)
    all_entries = ([("general.architecture", V.STRING, "deepinfer-test", None),
                    ("general.alignment", V.UINT32, ALIGNMENT, None)] + entries)
    check_read_back(gguf_path, tensors, all_entries)

    index = {
        "generator": {"gguf": "0.19.0", "numpy": np.__version__, "seed": SEED,
                      "script": "tools/make_gguf_goldens.py"},
        "gguf_version": 3,
        "alignment": ALIGNMENT,
        "tensors": [],
        "metadata": [],
    }
    offset = 0
    with open(OUT / "blocks_expected.bin", "wb") as out:
        for name, qtype, shape, array, expected in tensors:
            entry = {"name": name, "type": qtype.name, "ggml_type": int(qtype),
                     "shape": list(shape), "nbytes": int(np.asarray(array).nbytes),
                     "expected_offset": None, "expected_count": 0}
            if expected is not None:
                values = np.ascontiguousarray(expected, dtype="<f4").reshape(-1)
                out.write(values.tobytes())
                entry["expected_offset"] = offset
                entry["expected_count"] = int(values.size)
                offset += int(values.size)
            index["tensors"].append(entry)
    for key, gtype, value, sub_type in all_entries:
        item = {"key": key, "type": TYPE_NAMES[gtype] if gtype != V.ARRAY else "array"}
        if gtype == V.ARRAY:
            item["element_type"] = TYPE_NAMES[sub_type]
            item["value"] = [json_value(sub_type, v) for v in value]
        else:
            item["value"] = json_value(gtype, value)
        index["metadata"].append(item)
    with open(OUT / "blocks_expected.json", "w", encoding="utf-8") as f:
        json.dump(index, f, indent=1, ensure_ascii=False)
        f.write("\n")

    # Small fuzz seeds: default alignment, a few types, and a file without tensors.
    CORPUS.mkdir(parents=True, exist_ok=True)
    seed_rng = np.random.default_rng(SEED + 1)
    small = []
    for qtype, shape in [(Q.F32, (2, 4)), (Q.Q8_0, (2, 32)), (Q.Q4_K, (1, 256))]:
        x = sample_values(seed_rng, shape)
        if qtype == Q.Q4_K:
            array = crafted_k_blocks(seed_rng, qtype, shape)
        else:
            array = x if qtype == Q.F32 else gguf.quants.quantize(x, qtype)
        small.append((f"seed.{qtype.name.lower()}", qtype, shape, array, None))
    seed_entries = [("test.arr.string", V.ARRAY, ["a", "bc"], V.STRING),
                    ("test.arr.i32", V.ARRAY, [1, -2], V.INT32), ("test.f32", V.FLOAT32, 1.5, None)]
    write_gguf(CORPUS / "small.gguf", small, seed_entries)
    write_gguf(CORPUS / "metadata_only.gguf", [], seed_entries)

    total = sum(p.stat().st_size for p in OUT.iterdir())
    print(f"wrote {len(tensors)} tensors, {len(all_entries)} keys, {offset} expected values; "
          f"{OUT.relative_to(ROOT)} is {total} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
