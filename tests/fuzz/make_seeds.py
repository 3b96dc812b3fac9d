"""Writes the checked-in seed corpora of the fuzz harnesses (tests/fuzz/corpus/NAME/), a few small files
each, from the test writers of tests/tools. Deterministic: run it again after changing it and commit what
changes. Debian's python3 with python3-numpy.

    /usr/bin/python3 tests/fuzz/make_seeds.py

At fuzz time scripts/run-fuzz adds the reference fixtures of ../shared/fixtures when they are present."""
import os
import random
import shutil
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
from gguf_write import gguf_bytes  # noqa: E402
from safetensors_write import write_safetensors  # noqa: E402

CORPUS = os.path.join(HERE, "corpus")


def corpus(name):
    d = os.path.join(CORPUS, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def put(d, name, data):
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def safetensors_seeds():
    d = corpus("safetensors")
    write_safetensors(os.path.join(d, "mixed.safetensors"),
                      [("a.weight", np.arange(6, dtype=np.float32).reshape(2, 3)),
                       ("b.bias", ("BF16", np.array([0x3F80, 0x7FC0, 0xFF80], dtype=np.uint16))),
                       ("c.ids", np.array([[-1, 2]], dtype=np.int64)),
                       ("d.mask", np.array([True, False])),
                       ("e.empty", np.zeros((0, 4), dtype=np.float16)),
                       ("f.scalar", np.array(1.5, dtype=np.float64))],
                      metadata={"format": "pt", "note": "caf\u00e9"})
    write_safetensors(os.path.join(d, "subbyte.safetensors"),
                      [("fp4", ("F4", np.zeros(2, dtype=np.uint8).reshape(1, 2))),
                       ("e8m0", ("F8_E8M0", np.array([127, 128], dtype=np.uint8))),
                       ("f8", ("F8_E4M3", np.array([0x38, 0x7F], dtype=np.uint8)))])
    put(d, "empty-header", struct.pack("<Q", 2) + b"{}")


def gguf_seeds():
    d = corpus("gguf")
    kvs = [("general.architecture", "STRING", "llama"),
           ("general.alignment", "UINT32", 32),
           ("u8", "UINT8", 255), ("i8", "INT8", -128), ("u16", "UINT16", 65535), ("i16", "INT16", -1),
           ("u32", "UINT32", 7), ("i32", "INT32", -7), ("f32", "FLOAT32", 0.5), ("b", "BOOL", True),
           ("u64", "UINT64", 2**64 - 1), ("i64", "INT64", -2**63), ("f64", "FLOAT64", -2.25),
           ("tokens", "ARRAY", ("STRING", ["<s>", "</s>", "caf\u00e9"])),
           ("scores", "ARRAY", ("FLOAT32", [0.0, -1.0])),
           ("flags", "ARRAY", ("BOOL", [True, False])),
           ("nested", "ARRAY", ("ARRAY", [("INT32", [1, 2]), ("INT32", [])]))]
    tensors = [("w", "F32", [4, 2], np.arange(8, dtype=np.float32)),
               ("q", "Q8_0", [32], bytes(34)),
               ("h", "F16", [2], np.zeros(2, dtype=np.float16))]
    put(d, "mixed.gguf", gguf_bytes(kvs, tensors))
    put(d, "v2-empty.gguf", gguf_bytes([("general.name", "STRING", "x")], [], version=2))
    put(d, "v1-mixed.gguf", gguf_bytes([kv for kv in kvs if kv[1] not in ("UINT64", "INT64", "FLOAT64")], tensors, version=1))


INDEX_TENSORS = {"model.embed.weight": "model-00001-of-00002.safetensors",
                 "model.norm.weight": "model-00001-of-00002.safetensors",
                 "lm_head.weight": "model-00002-of-00002.safetensors"}


def index_seeds():
    # The shards fuzz_index_json.cpp writes: 32 + 6 bytes in the first, 5 in the second.
    import json
    d = corpus("index_json")
    put(d, "valid.json", json.dumps({"metadata": {"total_size": 43}, "weight_map": INDEX_TENSORS}, indent=2))
    put(d, "no-metadata.json", json.dumps({"weight_map": INDEX_TENSORS}))
    one = {k: v for k, v in INDEX_TENSORS.items() if v.endswith("00001-of-00002.safetensors")}
    put(d, "one-shard.json", json.dumps({"metadata": {"total_size": 38}, "weight_map": one}))
    put(d, "wrong-shard.json", json.dumps({"weight_map": dict(INDEX_TENSORS, **{"lm_head.weight": "../x.safetensors"})}))


# Text seeds of fuzz_quant_config: config.json, "----", then NAME DTYPE DIMS [CONTENT] lines.
QUANT_SEEDS = {
    "gptq-v1": ('{"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 8, "desc_act": false}}',
                ["m.qweight I32 2,8", "m.qzeros I32 2,1", "m.scales F16 2,8"]),
    "gptq-v2-gidx": ('{"quantization_config": {"quant_method": "gptq", "bits": 8, "checkpoint_format": "gptq_v2"}}',
                     ["m.qweight I32 4,4", "m.qzeros I32 1,1", "m.scales F16 1,4", "m.g_idx I32 16"]),
    "gptq-3bit": ('{"quantization_config": {"quant_method": "gptq", "bits": 3, "group_size": -1}}',
                  ["m.qweight I32 3,32", "m.qzeros I32 1,3", "m.scales F16 1,32"]),
    "awq": ('{"quantization_config": {"quant_method": "awq", "w_bit": 4, "q_group_size": 8, "version": "gemm"}}',
            ["m.qweight I32 16,1", "m.qzeros I32 2,1", "m.scales F16 2,8"]),
    "bnb-nf4": ('{"quantization_config": {"quant_method": "bitsandbytes", "load_in_4bit": true}}',
                ["m.weight U8 8", "m.weight.absmax F32 1", "m.weight.quant_map F32 16",
                 'm.weight.quant_state.bitsandbytes__nf4 U8 = {"quant_type": "nf4", "blocksize": 64, "shape": [4, 4], "dtype": "float16"}']),
    "bnb-fp4-nested": ('{"quantization_config": {"quant_method": "bitsandbytes", "bnb_4bit_use_double_quant": true}}',
                       ["m.weight U8 32", "m.weight.absmax U8 1", "m.weight.quant_map F32 16", "m.weight.nested_absmax F32 1",
                        "m.weight.nested_quant_map F32 256",
                        'm.weight.quant_state.bitsandbytes__fp4 U8 = {"quant_type": "fp4", "blocksize": 64, "shape": [8, 8], '
                        '"nested_blocksize": 256, "nested_offset": 0.125}']),
    "fp8-block": ('{"quantization_config": {"quant_method": "fp8", "weight_block_size": [2, 2]}}',
                  ["m.weight F8_E4M3 4,4", "m.weight_scale_inv F32 2,2"]),
    "fp8-channel": ('{"quantization_config": {"quant_method": "compressed-tensors"}}',
                    ["m.weight F8_E5M2 3,2", "m.weight_scale BF16 3,1", "n.weight F8_E4M3 2", "n.weight_scale F32 -"]),
    "mxfp4": ('{"quantization_config": {"quant_method": "mxfp4"}}',
              ["m.w_blocks U8 2,3,16", "m.w_scales U8 2,3"]),
    "autogptq-file": ('{"bits": 4, "group_size": 16, "desc_act": false, "sym": true}',
                      ["@quantize_config.json", "m.qweight I32 4,8", "m.qzeros I32 2,1", "m.scales F16 2,8"]),
}


def quant_seeds():
    d = corpus("quant_config")
    for name, (config, lines) in QUANT_SEEDS.items():
        put(d, name + ".txt", config + "\n----\n" + "\n".join(lines) + "\n")


def lz4_literals(data):
    """One LZ4 block of literals only (a valid block for LZ4_decompress_safe)."""
    n = len(data)
    out = bytearray([min(n, 15) << 4])
    if n >= 15:
        rest = n - 15
        while rest >= 255:
            out.append(255)
            rest -= 255
        out.append(rest)
    return bytes(out) + data


def lz4_with_match(data):
    """data[:8] as literals, data[:8] again as a match at offset 8, then data[8:] (at least 5) as literals."""
    assert len(data) >= 13
    head, tail = data[:8], data[8:]
    out = bytearray([(8 << 4) | (8 - 4)]) + head + struct.pack("<H", 8)
    return bytes(out) + lz4_literals(tail), head + head + tail


def bitshuffle_seeds():
    """Prefix byte (element size 1/2/4/8 in bits 0-1, bit 2: uncompressed), u16 param, then the chunk."""
    d = corpus("bitshuffle_lz4")
    rng = random.Random(32008)
    for es_bits, es in ((0, 1), (1, 2), (2, 4), (3, 8)):
        elements = 8 * 3 + 5  # three 8-element blocks, a 5-element raw tail
        block_elements = 8
        blocks = []
        for b in range(3):
            raw = bytes(rng.randrange(256) for _ in range(block_elements * es))
            blocks.append(struct.pack(">I", len(lz4_literals(raw))) + lz4_literals(raw))
        tail = bytes(rng.randrange(256) for _ in range(5 * es))
        chunk = struct.pack(">QI", elements * es, block_elements * es) + b"".join(blocks) + tail
        put(d, f"lz4-es{es}", bytes([es_bits, 0, 0]) + chunk)
        plain = bytes(rng.randrange(256) for _ in range(elements * es))
        put(d, f"plain-es{es}", bytes([es_bits | 4, 16, 0]) + plain)
    comp, raw = lz4_with_match(bytes(range(16)) + bytes(8))
    chunk = struct.pack(">QI", 32, 32) + struct.pack(">I", len(comp)) + comp
    assert len(raw) == 32
    put(d, "lz4-match-es1", bytes([0, 0, 0]) + chunk)


def dectris_seeds():
    """The harness's input drives a writer: random bytes of a few lengths are as good a start as any."""
    d = corpus("dectris")
    rng = random.Random(4)
    for n in (16, 64, 256, 1024):
        put(d, f"random-{n}", bytes(rng.randrange(256) for _ in range(n)))


def pickle_seeds():
    # The committed torch.save fixtures (written by tests/tools/torch_write.py; the legacy_* ones in the legacy
    # format), data.pkl of one alone,
    # a DCP .metadata and chunk, and a pickle naming a global outside the allow-list.
    import zipfile
    d = corpus("pickle")
    fixtures = os.path.join(HERE, "..", "fixtures", "torch")
    for name in ("tensor.pt", "parameter.pt", "protocol4.pt", "strided.pt", "legacy_tuple.pt", "legacy_windows.pt"):
        shutil.copy(os.path.join(fixtures, name), os.path.join(d, name))
    # A DCP .metadata (tests/tools/dcp_write.py) and one of its chunks (a torch.save archive).
    dcp = os.path.join(HERE, "..", "fixtures", "dcp", "sharded")
    shutil.copy(os.path.join(dcp, ".metadata"), os.path.join(d, "dcp-metadata.pkl"))
    shutil.copy(os.path.join(dcp, "__0_1.distcp"), os.path.join(d, "dcp-chunk.pt"))
    # DeepSpeed-ZeRO-style model and optimizer states (tests/tools/zero_write.py).
    zero = os.path.join(HERE, "..", "fixtures", "zero")
    shutil.copy(os.path.join(zero, "zero2", "global_step5", "mp_rank_00_model_states.pt"), os.path.join(d, "zero-model-states.pt"))
    shutil.copy(os.path.join(zero, "zero3", "global_step5", "zero_pp_rank_1_mp_rank_00_optim_states.pt"), os.path.join(d, "zero3-optim-states.pt"))
    shutil.copy(os.path.join(zero, "zero1_bf16", "global_step5", "bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt"), os.path.join(d, "zero1-optim-states.pt"))
    with zipfile.ZipFile(os.path.join(fixtures, "state_dict.pt")) as z:
        put(d, "state_dict-data.pkl", z.read("state_dict/data.pkl"))
    put(d, "refused-global.pkl", b"\x80\x02cos\nsystem\nX\x02\x00\x00\x00id\x85R.")
    # One value shared along 2^41 paths through the memo (the reader bounds its visits).
    p = bytearray(b"\x80\x04N\x940h\x00h\x00\x86\x940")
    for k in range(1, 41):
        p += bytes([ord("h"), k, ord("h"), k, 0x86, 0x94, ord("0")])
    p += b"}X\x01\x00\x00\x00wh" + bytes([41]) + b"s."
    with zipfile.ZipFile(os.path.join(d, "shared-expansion.pt"), "w", zipfile.ZIP_STORED) as z:
        z.writestr(zipfile.ZipInfo("a/data.pkl", date_time=(1980, 1, 1, 0, 0, 0)), bytes(p))


def npy_seeds():
    """.npy files written by numpy itself (np.save, np.lib.format.write_array): versions 1.0 and 2.0, C and
    Fortran order, a 0-d array, an empty one, big-endian and string dtypes."""
    import io
    d = corpus("npy")
    np.save(os.path.join(d, "f4.npy"), np.arange(12, dtype="<f4").reshape(3, 4))
    np.save(os.path.join(d, "fortran.npy"), np.asfortranarray(np.arange(6, dtype="<i2").reshape(2, 3)))
    np.save(os.path.join(d, "bool0d.npy"), np.bool_(True))
    np.save(os.path.join(d, "be.npy"), np.arange(3, dtype=">u8"))
    np.save(os.path.join(d, "empty.npy"), np.zeros((0, 5), dtype="|u1"))
    np.save(os.path.join(d, "str.npy"), np.array(["ab", "c"]))
    b = io.BytesIO()
    np.lib.format.write_array(b, np.arange(4, dtype="<f8"), version=(2, 0))
    put(d, "v2.npy", b.getvalue())


if __name__ == "__main__":
    safetensors_seeds()
    gguf_seeds()
    index_seeds()
    quant_seeds()
    bitshuffle_seeds()
    dectris_seeds()
    pickle_seeds()
    npy_seeds()
    for name in sorted(os.listdir(CORPUS)):
        files = os.listdir(os.path.join(CORPUS, name))
        size = sum(os.path.getsize(os.path.join(CORPUS, name, f)) for f in files)
        print(f"corpus/{name}: {len(files)} files, {size} bytes")
