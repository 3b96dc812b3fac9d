"""A minimal safetensors writer for tests: header = u64 little-endian length + JSON (tensors in the
order given, offsets contiguous from 0), then the tensors' bytes. numpy arrays in, any dtype numpy has;
bf16 is passed as ("BF16", uint16 array of raw bit patterns)."""
import json
import struct

import numpy as np

NUMPY_TO_SAFETENSORS = {"float64": "F64", "float32": "F32", "float16": "F16", "int64": "I64", "int32": "I32",
                        "int16": "I16", "int8": "I8", "uint8": "U8", "uint16": "U16", "uint32": "U32",
                        "uint64": "U64", "bool": "BOOL"}


def write_safetensors(path, tensors, metadata=None):
    """tensors: list of (name, array) or (name, (dtype_name, raw_array)). Returns the bytes of tensor data."""
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, value in tensors:
        if isinstance(value, tuple):
            dtype, arr = value
        else:
            arr = np.ascontiguousarray(value)
            dtype = NUMPY_TO_SAFETENSORS[arr.dtype.name]
        data = np.ascontiguousarray(arr).tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)
    return offset


def write_sharded(directory, shards, metadata=None):
    """shards: list of (file name, tensors). Writes each shard and model.safetensors.index.json."""
    weight_map, total = {}, 0
    for file_name, tensors in shards:
        total += write_safetensors(f"{directory}/{file_name}", tensors, metadata)
        for name, _ in tensors:
            weight_map[name] = file_name
    with open(f"{directory}/model.safetensors.index.json", "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f)
