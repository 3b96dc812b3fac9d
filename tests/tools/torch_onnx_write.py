"""Writes the ONNX fixtures of tests/fixtures/onnx_torch with torch's own exporter (Debian's python3-torch 1.13,
torch.onnx.export) and ONNX's own writer (Debian's python3-onnx 1.12, onnx.save_model), and the reference values of
every initializer as ONNX's own reader returns them (onnx.numpy_helper.to_array) in expected.json. The fixtures and
expected.json are committed; only regenerating them needs torch and onnx, so CI never installs them.

    /usr/bin/python3 tests/tools/torch_onnx_write.py [OUT_DIR]     (default: tests/fixtures/onnx_torch)

The model (`Tiny`, seeded): an Embedding, a float16 copy of that Embedding (`embed_half`, .half() of a deepcopy), a
Conv2d with bias followed by a BatchNorm2d (eval mode, running statistics set to non-trivial values), a Linear fed a
3-D input (exported as MatMul), a LayerNorm, a bfloat16 Linear fed a 2-D input (exported as Gemm) and an int64 buffer
holding values no double holds exactly. Exporting the whole model in float16 (.half()) is impossible on CPU with
torch 1.13: tracing runs the forward, and Linear ("addmm_impl_cpu_"), Conv2d ("slow_conv2d_cpu") and LayerNorm
("LayerNormKernelImpl") have no Half kernel on CPU; a float16 Embedding (index_select) and bfloat16 Linear/Conv do
run, hence `embed_half` and the bfloat16 `head`.

Files (opset 14, torch 1.13's default; export_params=True, training=EVAL, keep_initializers_as_inputs left at its
default (False), named inputs and outputs, no dynamic axes):
  folded.onnx    torch.onnx.export(..., do_constant_folding=True): every byte written by torch.onnx.export.
  unfolded.onnx  torch.onnx.export(..., do_constant_folding=False): every byte written by torch.onnx.export.
  external.onnx, external.data
                 folded.onnx read back with onnx.load and written again by onnx.save_model(save_as_external_data=True,
                 all_tensors_to_one_file=True, location="external.data", size_threshold=128): the protobuf of both
                 files was written by onnx (python protobuf's serializer); the tensor values in external.data and the
                 small ones left inline are torch's raw_data bytes, copied unchanged by onnx. torch 1.13 writes
                 external data itself only for a model over 2 GB (it decides by the parameters' size; the
                 use_external_data_format argument is gone from 1.13's signature), so it cannot make a small one.
  expected.json  written by us (this script): per file the options, the model's metadata, and per initializer the
                 name as stored, the ONNX data_type (number and name), the shape, where its values are (raw_data or
                 external data), every value (numpy_helper.to_array, as JSON numbers: float16/bfloat16/float32
                 values are exact in a double, int64 as JSON integers), the sha256 of the little-endian row-major
                 element bytes, min/max/sum/mean (numpy, float64), and `source`: the torch parameter or buffer it
                 came from and how, found by comparing it element for element with the module's state_dict (as
                 stored, renamed, transposed) or with the fusion torch applies (Conv + BatchNorm, computed here in
                 float32: exact or the largest difference observed), or `null` where nothing matched.

torch 1.13's exporter output is byte-deterministic for a given torch and onnx (checked by exporting twice into a
second folder; the generator fails otherwise), so tests/tools/test_fixture_generators.py compares bytes as well as
values where torch is present.
"""
import copy
import hashlib
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import onnx
import torch
from onnx import TensorProto, numpy_helper

sys.path.insert(0, os.path.dirname(__file__))
from fixture_output import finish  # noqa: E402

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "fixtures", "onnx_torch")
OPSET = 14
TYPE_NAMES = {v: k for k, v in TensorProto.DataType.items()}
INPUT_NAMES = ["ids", "img"]
OUTPUT_NAMES = ["y", "h", "z", "p"]


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(10, 8)
        self.embed_half = copy.deepcopy(self.embed).half()
        self.conv = torch.nn.Conv2d(1, 4, 3, padding=1, bias=True)
        self.bn = torch.nn.BatchNorm2d(4)
        self.proj = torch.nn.Linear(8, 6)
        self.norm = torch.nn.LayerNorm(6)
        self.head = torch.nn.Linear(6, 3).bfloat16()
        self.register_buffer("positions", torch.tensor([5, -(2 ** 62) - 1, 2 ** 53 + 1, 7, -3, 2 ** 40], dtype=torch.int64))

    def forward(self, ids, img):
        e = self.embed(ids) + self.embed_half(ids).float()
        y = self.norm(self.proj(e))                                  # (B, T, 6): MatMul
        h = self.bn(self.conv(img)).mean(dim=(2, 3))                  # (B, 4)
        z = self.head(y[:, 0].bfloat16()).float()                     # (B, 3): Gemm
        p = ids * (self.positions[3] - self.positions[0]) + self.positions[: ids.shape[1]]
        return y, h, z, p


def build():
    torch.manual_seed(45)
    m = Tiny()
    with torch.no_grad():
        m.bn.running_mean.copy_(torch.randn(4))
        m.bn.running_var.copy_(torch.rand(4) + 0.5)
        m.bn.weight.copy_(torch.randn(4))
        m.bn.bias.copy_(torch.randn(4))
        m.norm.weight.copy_(torch.randn(6))
        m.norm.bias.copy_(torch.randn(6))
    m.eval()
    ids = torch.tensor([[1, 2, 3, 4], [9, 0, 5, 5]])
    img = torch.randn(2, 1, 5, 5)
    return m, (ids, img)


def export(m, args, path, fold):
    torch.onnx.export(m, args, path, export_params=True, opset_version=OPSET, do_constant_folding=fold,
                      training=torch.onnx.TrainingMode.EVAL, input_names=INPUT_NAMES, output_names=OUTPUT_NAMES)


def candidates(m):
    """description -> (numpy array, parameters it came from): what an initializer may equal."""
    sd = {k: v.detach() for k, v in m.state_dict().items()}
    out = {}
    for k, v in sd.items():
        if v.dtype == torch.int64 and k.endswith("num_batches_tracked"):
            continue
        a = v.float().numpy() if v.dtype == torch.bfloat16 else v.numpy()
        out[k] = (a, [k], "as stored")
        if v.dim() == 2:
            out[k + ".t()"] = (np.ascontiguousarray(a.T), [k], "transposed")
    bn = m.bn
    scale = bn.weight.detach() / torch.sqrt(bn.running_var + bn.eps)
    w = m.conv.weight.detach() * scale.reshape(-1, 1, 1, 1)
    b = (m.conv.bias.detach() - bn.running_mean) * scale + bn.bias.detach()
    fused = ["conv.weight", "conv.bias", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"]
    out["conv.weight * s (Conv+BatchNorm fused)"] = (w.numpy(), fused[:1] + fused[2:3] + fused[5:],
                                                     "Conv+BatchNorm fused: conv.weight * s, s = bn.weight / sqrt(bn.running_var + eps)")
    out["(conv.bias - bn.running_mean) * s + bn.bias"] = (b.numpy(), fused, "Conv+BatchNorm fused: (conv.bias - bn.running_mean) * s + bn.bias")
    pos = sd["positions"]
    out["positions[3] - positions[0]"] = ((pos[3] - pos[0]).numpy(), ["positions"], "folded: positions[3] - positions[0]")
    out["positions[:4]"] = (pos[:4].numpy(), ["positions"], "folded: positions[:4]")
    return out


def source_of(name, a, cands):
    """The torch tensor `a` (numpy_helper.to_array of initializer `name`) came from, by comparison."""
    a64 = np.asarray(a)
    best = None
    for desc, (c, params, how) in cands.items():
        if c.shape != a64.shape:
            continue
        if c.dtype.kind != a64.dtype.kind and not (c.dtype.kind == "f" and a64.dtype.kind == "f"):
            continue
        if np.array_equal(c.astype(np.float64) if c.dtype.kind == "f" else c,
                          a64.astype(np.float64) if a64.dtype.kind == "f" else a64):
            if how == "as stored" and params[0] != name:
                how = "renamed"
            if c.dtype != a64.dtype:
                how += " (%s in torch, %s stored)" % (c.dtype, a64.dtype)
            return {"params": params, "how": how, "exact": True}
        if c.dtype.kind == "f" and how.startswith("Conv+BatchNorm"):
            diff = float(np.max(np.abs(c.astype(np.float64) - a64.astype(np.float64))))
            if diff < 1e-5 and (best is None or diff < best["max_abs_diff"]):
                best = {"params": params, "how": how, "exact": False, "max_abs_diff": diff}
    return best


def digest(a, data_type):
    """sha256 of the element bytes as stored (little-endian, row-major): bfloat16's are the top halves of the
    float32 values numpy_helper.to_array returns."""
    if data_type == TensorProto.BFLOAT16:
        raw = (np.ascontiguousarray(a, dtype="<f4").view("<u4") >> 16).astype("<u2").tobytes()
    else:
        raw = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes()
    return hashlib.sha256(raw).hexdigest()


def describe(path, cands):
    """expected.json's entry for one model: options filled in by the caller; metadata; every initializer."""
    base = os.path.dirname(path)
    model = onnx.load(path, load_external_data=False)
    onnx.checker.check_model(path)
    tensors = {}
    for t in model.graph.initializer:
        a = numpy_helper.to_array(t, base)
        ext = {e.key: e.value for e in t.external_data}
        field = [f.name for f, _ in t.ListFields() if f.name.endswith("_data") and f.name != "external_data"]
        entry = {"data_type": t.data_type, "stored_type": TYPE_NAMES[t.data_type], "shape": list(t.dims),
                 "elements": int(a.size), "field": "external" if t.data_location == TensorProto.EXTERNAL else field[0],
                 "sha256": digest(a, t.data_type), "source": source_of(t.name, a, cands)}
        if ext:
            entry["location"] = ext["location"]
        v = a.reshape(-1)
        if v.dtype.kind in "iu":
            entry["values"] = [int(x) for x in v]
            entry.update(min=int(v.min()), max=int(v.max()), sum=str(sum(int(x) for x in v)))
        else:
            f = v.astype(np.float64)
            entry["values"] = [float(x) for x in f]
            entry.update(min=float(f.min()), max=float(f.max()), sum=float(f.sum()), mean=float(f.mean()))
        tensors[t.name] = entry
    nodes = {}
    for n in model.graph.node:
        nodes[n.op_type] = nodes.get(n.op_type, 0) + 1
    meta = {"onnx.ir_version": str(model.ir_version), "onnx.producer_name": model.producer_name,
            "onnx.producer_version": model.producer_version,
            "onnx.opset_import": ", ".join("%s %d" % (o.domain or "ai.onnx", o.version) for o in model.opset_import),
            "onnx.graph.name": model.graph.name, "onnx.graph.nodes": str(len(model.graph.node)),
            "onnx.graph.op_types": ", ".join("%s %d" % kv for kv in sorted(nodes.items()))}
    constants = sorted(n.output[0] for n in model.graph.node if n.op_type == "Constant")
    return {"metadata": meta, "tensors": tensors, "constant_nodes": constants}


def write_all(out):
    m, args = build()
    export(m, args, os.path.join(out, "folded.onnx"), True)
    export(m, args, os.path.join(out, "unfolded.onnx"), False)
    model = onnx.load(os.path.join(out, "folded.onnx"))
    for old in ("external.onnx", "external.data"):
        if os.path.exists(os.path.join(out, old)):
            os.remove(os.path.join(out, old))
    onnx.save_model(model, os.path.join(out, "external.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="external.data", size_threshold=128)
    return m, args


FILES = ("folded.onnx", "unfolded.onnx", "external.onnx", "external.data")


def main():
    os.makedirs(OUT, exist_ok=True)
    m, args = write_all(OUT)
    again = tempfile.mkdtemp(prefix="tm-torch-onnx-")
    try:
        write_all(again)
        for name in FILES:
            with open(os.path.join(OUT, name), "rb") as a, open(os.path.join(again, name), "rb") as b:
                assert a.read() == b.read(), "%s differs between two exports: torch.onnx.export is not deterministic here" % name
    finally:
        shutil.rmtree(again, ignore_errors=True)

    cands = candidates(m)
    options = {"torch.onnx.export": {"opset_version": OPSET, "export_params": True, "training": "EVAL",
                                     "input_names": INPUT_NAMES, "output_names": OUTPUT_NAMES}}
    expected = {"torch_version": torch.__version__, "onnx_version": onnx.__version__, "files": {}}
    for name, fold in (("folded.onnx", True), ("unfolded.onnx", False)):
        entry = describe(os.path.join(OUT, name), cands)
        entry["written_by"] = "torch.onnx.export"
        entry["options"] = dict(options["torch.onnx.export"], do_constant_folding=fold)
        expected["files"][name] = entry
    entry = describe(os.path.join(OUT, "external.onnx"), cands)
    entry["written_by"] = "onnx.save_model of folded.onnx as onnx.load read it (values: torch's raw_data bytes)"
    entry["options"] = {"onnx.save_model": {"save_as_external_data": True, "all_tensors_to_one_file": True,
                                            "location": "external.data", "size_threshold": 128}}
    expected["files"]["external.onnx"] = entry
    expected["state_dict"] = {k: {"dtype": str(v.dtype).replace("torch.", ""), "shape": list(v.shape)}
                              for k, v in m.state_dict().items()}
    finish(OUT, expected)


if __name__ == "__main__":
    main()
