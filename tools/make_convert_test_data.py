#!/usr/bin/env python3
"""Test data for `deepinfer convert`'s restricted pytorch_model.bin reader (tests/data/convert):

  state_dict.bin / state_dict.json   a torch.save state dict of f32 / bf16 / f16 / int64 tensors,
                                     one a view at a storage offset, one non-contiguous, and the
                                     values torch itself reads back (the expectations)
  malicious.bin                      a torch.save-shaped zip whose data.pkl calls os.system:
                                     the reader must refuse it naming the global, running nothing
  tiny-qwen2-bin/                    tests/data/tiny-qwen2 re-saved by torch.save as
                                     pytorch_model.bin (converting it must equal converting the
                                     safetensors original)

Run with the tools venv: .venv-tools/bin/python tools/make_convert_test_data.py
"""
import collections
import json
import pathlib
import shutil
import zipfile

import torch
from safetensors.torch import load_file

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data" / "convert"
# The file malicious.bin's pickle would create if anything ran it.
SENTINEL = "/tmp/deepinfer-malicious-pickle-ran"


def state_dict():
    g = torch.Generator().manual_seed(11)
    sd = collections.OrderedDict()
    sd["dense.weight"] = torch.randn(3, 5, generator=g)
    sd["norm.weight"] = torch.randn(7, generator=g).to(torch.bfloat16)
    sd["half.weight"] = torch.randn(2, 4, generator=g).to(torch.float16)
    sd["ids"] = torch.arange(6, dtype=torch.int64)
    sd["row_view"] = sd["dense.weight"][2]            # shares storage at offset 10
    sd["transposed"] = torch.randn(4, 3, generator=g).t()  # non-contiguous
    return sd


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    sd = state_dict()
    torch.save(sd, OUT / "state_dict.bin")
    back = torch.load(OUT / "state_dict.bin", weights_only=True)
    expected = {name: {"dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape),
                       "values": t.float().flatten().tolist()} for name, t in back.items()}
    (OUT / "state_dict.json").write_text(json.dumps(expected, indent=1) + "\n")

    # protocol 2: GLOBAL 'os system', the command as its argument tuple, REDUCE, STOP.
    cmd = f"touch {SENTINEL}".encode()
    pickle = (b"\x80\x02cos\nsystem\nq\x00X" + len(cmd).to_bytes(4, "little") + cmd +
              b"q\x01\x85q\x02Rq\x03.")
    with zipfile.ZipFile(OUT / "malicious.bin", "w", zipfile.ZIP_STORED) as z:
        z.writestr("malicious/data.pkl", pickle)
        z.writestr("malicious/byteorder", "little")
        z.writestr("malicious/version", "3\n")

    src = ROOT / "tests" / "data" / "tiny-qwen2"
    dst = OUT / "tiny-qwen2-bin"
    dst.mkdir(exist_ok=True)
    torch.save(collections.OrderedDict(load_file(src / "model.safetensors")),
               dst / "pytorch_model.bin")
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json",
                 "generation_config.json"):
        shutil.copy(src / name, dst / name)


if __name__ == "__main__":
    main()
