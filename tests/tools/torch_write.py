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
  legacy.pt      the legacy format (before torch 1.6, not a zip; torch.save(..., _use_new_zipfile_serialization=
                 False)): one float tensor
  legacy_state_dict.pt   state_dict.pt's object in the legacy format: every dtype, scalars, views on one
                 storage (a slice, a transpose, a column)
  legacy_tuple.pt        the legacy format with a tuple at the root: a bf16 tensor, a dict holding a transposed
                 f16 view, a list of uint8 and int64 tensors (names "0", "1.t", "2.0", "2.1")
  legacy_windows.pt      NOT written by torch: our own writer (legacy_windows_bytes, stdlib pickle opcodes put
                 together by hand) mimicking a legacy file written on Windows, whose sys_info says long is 4
                 bytes, with a uint8 and an int64 storage and two f32 tensors sharing one storage. Where torch
                 is present it must read the file back with the same values (it ignores sys_info).
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
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            out.update(reference(v, prefix + "." + str(i) if prefix else str(i)))
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


def legacy_tuple():
    g = torch.Generator().manual_seed(11)
    m = torch.randn(3, 4, generator=g)
    return (m.bfloat16(), {"t": m.half().t()}, [torch.arange(250, 256, dtype=torch.uint8), torch.tensor([-(2 ** 40), 3, 2 ** 62])])


def legacy_windows_bytes():
    """A legacy torch.save file put together by hand (our own writer, not torch's), as torch on Windows
    writes it: sys_info's type_sizes say long is 4 bytes. Returns (bytes, the tensors as numpy arrays by name,
    each with its storage offset and strides)."""
    import pickle
    import struct
    import numpy as np

    def u(s):  # BINUNICODE
        b = s.encode()
        return b"X" + struct.pack("<I", len(b)) + b

    def i(v):  # BININT
        return b"J" + struct.pack("<i", v)

    def tup(items):
        return b"(" + b"".join(items) + b"t"

    def tensor(storage_type, key, numel, offset, size, stride):
        pid = tup([u("storage"), b"ctorch\n" + storage_type.encode() + b"\n", u(key), u("cpu"), i(numel), b"N"])
        return (b"ctorch._utils\n_rebuild_tensor_v2\n" +
                tup([pid + b"Q", i(offset), tup([i(x) for x in size]), tup([i(x) for x in stride]), b"\x89",
                     b"ccollections\nOrderedDict\n)R"]) + b"R")

    weights = (np.arange(12, dtype=np.float32) - 5.5) / 4   # storage "w": 12 floats
    counts = np.array([7, -3, 2 ** 33, 0, 12], dtype=np.int64)
    mask = np.array([0, 1, 255, 128, 3, 9], dtype=np.uint8)
    entries = [
        ("embed.weight", tensor("FloatStorage", "w", 12, 0, (3, 4), (4, 1))),
        ("embed.weight_t", tensor("FloatStorage", "w", 12, 0, (4, 3), (1, 4))),   # the same storage, transposed
        ("embed.row", tensor("FloatStorage", "w", 12, 8, (4,), (1,))),           # the same storage, from element 8
        ("counts", tensor("LongStorage", "c", 5, 0, (5,), (1,))),
        ("mask", tensor("ByteStorage", "m", 6, 0, (2, 3), (3, 1))),
    ]
    obj = b"\x80\x02}(" + b"".join(u(k) + v for k, v in entries) + u("epoch") + i(3) + b"u."
    sys_info = {"protocol_version": 1001, "little_endian": True, "type_sizes": {"short": 2, "int": 4, "long": 4}}
    out = pickle.dumps(0x1950a86a20f9469cfc6c, protocol=2) + pickle.dumps(1001, protocol=2) + pickle.dumps(sys_info, protocol=2)
    out += obj + pickle.dumps(["c", "m", "w"], protocol=2)
    for arr in (counts, mask, weights):  # in the key list's order: element count (int64), then the elements
        out += struct.pack("<q", arr.size) + arr.tobytes()
    arrays = {"embed.weight": (weights.reshape(3, 4), 0, [4, 1]), "embed.weight_t": (weights.reshape(3, 4).T, 0, [1, 4]),
              "embed.row": (weights[8:], 8, [1]), "counts": (counts, 0, [1]), "mask": (mask.reshape(2, 3), 0, [3, 1])}
    return out, arrays


def numpy_reference(arrays):
    """The same entries as reference(), computed with numpy for legacy_windows_bytes's arrays."""
    stored = {"float32": "F32", "int64": "I64", "uint8": "U8"}
    out = {}
    for name, (a, offset, stride) in arrays.items():
        flat = a.reshape(-1)
        is_float = a.dtype.kind == "f"
        as_py = [float(x) if is_float else int(x) for x in flat.tolist()]
        contiguous = bool(a.flags["C_CONTIGUOUS"])
        entry = {"shape": list(a.shape), "stored_type": stored[str(a.dtype)], "contiguous": contiguous, "storage_offset": offset,
                 "stride": stride, "elements": int(a.size), "first": as_py[:4], "min": min(as_py), "max": max(as_py),
                 "sum": math.fsum(as_py)}
        if not contiguous:
            entry["values"] = as_py
        out[name] = entry
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
    # The legacy format, written by torch.
    legacy = {"legacy.pt": {"w": torch.ones(2)}, "legacy_state_dict.pt": state_dict_file(), "legacy_tuple.pt": legacy_tuple()}
    for name, obj in legacy.items():
        path = os.path.join(OUT, name)
        torch.save(obj, path, _use_new_zipfile_serialization=False)
        with open(path, "rb") as f:
            assert not f.read(4).startswith(b"PK"), name
        back = torch.load(path)
        assert reference(back) == reference(obj), name
        expected["files"][name] = {"tensors": reference(obj), "metadata": scalars(obj) if isinstance(obj, dict) else {}}
    # The legacy format as Windows writes it, by our own writer; torch must read it with the same values.
    data, arrays = legacy_windows_bytes()
    path = os.path.join(OUT, "legacy_windows.pt")
    with open(path, "wb") as f:
        f.write(data)
    ref = numpy_reference(arrays)
    assert reference(torch.load(path)) == ref, "torch reads legacy_windows.pt otherwise"
    expected["files"]["legacy_windows.pt"] = {"tensors": ref, "metadata": {"epoch": "3"}}
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")
    for name in sorted(os.listdir(OUT)):
        print("%-16s %6d bytes" % (name, os.path.getsize(os.path.join(OUT, name))))


if __name__ == "__main__":
    main()
