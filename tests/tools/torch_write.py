"""Writes the torch.save fixtures of tests/fixtures/torch with Debian's python3-torch (1.13) and the
reference values torch computes for them (expected.json). The fixtures and expected.json are committed;
only regenerating them needs torch (apt-get install python3-torch), so CI never installs it.

    /usr/bin/python3 tests/tools/torch_write.py [OUT_DIR]     (default: tests/fixtures/torch)

Files:
  state_dict.pt  a dict holding an OrderedDict state_dict of a small module (with its _metadata), a nested
                 dict of every dtype torch 1.13 writes (f64 f32 f16 bf16 i64 i32 i16 i8 u8 bool), scalar
                 values, and views: several tensors on one storage, a storage_offset view, a transposed
                 (non-contiguous) view and a strided column
  tensor.pt      torch.save of one bare tensor
  parameter.pt   a dict of nn.Parameter (torch._utils._rebuild_parameter)
  protocol4.pt   state_dict.pt's tensors pickled with protocol 4 (MEMOIZE, FRAME, SHORT_BINUNICODE)
  strided.pt     non-contiguous views of several dtypes (transposed bf16 and i32, a permuted 3-D f16, an
                 f64 column from a storage offset, every other u8, a transposed bool, an expanded f32 with
                 stride 0), with every value in expected.json; and `huge`, one float expanded to 10^10
                 elements, which is larger than its file and so listed as unreadable
  legacy.pt      the legacy (pre-1.6, non-zip) format, which the reader refuses by name
"""
import collections
import json
import math
import os
import sys

import torch

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "fixtures", "torch")

STORED = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.int64: "I64",
          torch.int32: "I32", torch.int16: "I16", torch.int8: "I8", torch.uint8: "U8", torch.bool: "BOOL"}


def module_state():
    torch.manual_seed(24)
    m = torch.nn.Sequential(collections.OrderedDict([
        ("embed", torch.nn.Embedding(5, 4)), ("proj", torch.nn.Linear(4, 3)), ("norm", torch.nn.LayerNorm(3))]))
    return m.state_dict()  # an OrderedDict with a _metadata attribute (pickled as BUILD state)


def every_dtype():
    g = torch.Generator().manual_seed(7)
    base = torch.randn(3, 5, generator=g, dtype=torch.float64) * 100
    out = {"f64": base.clone(), "f32": base.float(), "f16": base.half(), "bf16": base.bfloat16()}
    ints = torch.randint(-120, 120, (2, 7), generator=g)
    for name, dt in (("i64", torch.int64), ("i32", torch.int32), ("i16", torch.int16), ("i8", torch.int8)):
        out[name] = ints.to(dt)
    out["i64"][0, 0] = -(2 ** 62) - 1  # a value no double holds exactly
    out["u8"] = torch.randint(0, 256, (9,), generator=g, dtype=torch.uint8)
    out["bool"] = torch.tensor([True, False, True, True, False])
    return out


def views():
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6) - 7.5
    return {
        "base": base,                      # storage S
        "rows": base[1:3],                 # S from element 6, contiguous
        "tail": base.view(-1)[17:],        # S from element 17, contiguous, 1-D
        "transposed": base.t(),            # S, strides (1, 6): non-contiguous
        "column": base[:, 2],              # S from element 2, stride 6
    }


def strided_views():
    g = torch.Generator().manual_seed(2)
    m = torch.randn(5, 7, generator=g, dtype=torch.float64) * 3
    cube = torch.randn(2, 3, 4, generator=g).half()
    return {
        "bf16_t": m.bfloat16().t(),                       # strides (1, 7)
        "i32_t": (m * 10).to(torch.int32).t(),
        "f16_permuted": cube.permute(2, 0, 1),            # shape (4, 2, 3), strides (1, 12, 4)
        "f64_column": m[1:, 3],                           # from element 10, stride 7
        "u8_every_other": torch.arange(200, 230, dtype=torch.uint8)[::2],
        "bool_t": (m > 0).t(),
        "f32_expanded": torch.tensor([1.5, -2.0, 4.25]).expand(4, 3),  # strides (0, 1)
    }


def state_dict_file():
    return {"model": module_state(), "dtypes": every_dtype(), "views": views(),
            "step": 1234, "lr": 0.1, "tag": "fixture", "done": True}


def reference(obj, prefix=""):
    """name -> expected values, for every tensor under obj (names as tensormorph forms them)."""
    out = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.update(reference(v, prefix + "." + str(k) if prefix else str(k)))
    elif isinstance(obj, torch.Tensor):
        t = obj.detach()
        flat = t.reshape(-1)
        values = flat.to(torch.int64) if t.dtype in (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64) else flat.double()
        as_py = [int(x) if not t.dtype.is_floating_point else float(x) for x in values.tolist()]
        entry = {"shape": list(t.shape), "stored_type": STORED[t.dtype], "contiguous": t.is_contiguous(),
                 "storage_offset": t.storage_offset(), "stride": list(t.stride()), "elements": t.numel(),
                 "first": as_py[:4]}
        if not t.is_contiguous():
            entry["values"] = as_py  # row-major, as the view reads
        if t.numel():
            entry["min"] = min(as_py)
            entry["max"] = max(as_py)
            entry["sum"] = math.fsum(as_py)
        out[prefix or "tensor"] = entry
    return out


def scalars(obj, prefix=""):
    out = {}
    for k, v in obj.items():
        name = prefix + "." + str(k) if prefix else str(k)
        if isinstance(v, dict):
            out.update(scalars(v, name))
        elif isinstance(v, bool):
            out[name] = "True" if v else "False"
        elif isinstance(v, (int, str)):
            out[name] = str(v)
        elif isinstance(v, float):
            out[name] = repr(v)
    return out


def main():
    os.makedirs(OUT, exist_ok=True)
    files = {
        "state_dict.pt": (state_dict_file(), {}),
        "tensor.pt": (torch.linspace(-1, 1, 9), {}),
        "parameter.pt": ({"p": torch.nn.Parameter(torch.ones(2, 3) * 0.5), "q": torch.nn.Parameter(torch.zeros(4))}, {}),
        "protocol4.pt": (state_dict_file(), {"pickle_protocol": 4}),
    }
    expected = {"torch_version": torch.__version__, "files": {}}
    for name, (obj, kwargs) in files.items():
        path = os.path.join(OUT, name)
        torch.save(obj, path, **kwargs)
        # Check the file as torch reads it back, then record what torch computes.
        back = torch.load(path)
        ref = reference(obj if not isinstance(obj, torch.Tensor) else obj)
        assert set(ref) == set(reference(back)), name
        expected["files"][name] = {"tensors": ref, "metadata": scalars(obj) if isinstance(obj, dict) else {}}
    # A view larger than its file: only what it is, no values (10^10 elements).
    views = strided_views()
    huge = torch.zeros(1).expand(100000, 100000)
    torch.save(dict(views, huge=huge), os.path.join(OUT, "strided.pt"))
    back = torch.load(os.path.join(OUT, "strided.pt"))
    assert back["huge"].stride() == (0, 0) and set(back) == set(views) | {"huge"}
    tensors = reference(views)
    tensors["huge"] = {"shape": list(huge.shape), "stored_type": "F32", "contiguous": False, "storage_offset": 0,
                       "stride": list(huge.stride()), "elements": huge.numel()}
    expected["files"]["strided.pt"] = {"tensors": tensors, "metadata": {}}
    torch.save({"w": torch.ones(2)}, os.path.join(OUT, "legacy.pt"), _use_new_zipfile_serialization=False)
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")
    for name in sorted(os.listdir(OUT)):
        print("%-16s %6d bytes" % (name, os.path.getsize(os.path.join(OUT, name))))


if __name__ == "__main__":
    main()
