#!/usr/bin/python3
"""The GGUF-header peer: what a Python user reaches for instead of `tensormorph ls`, a numpy-memmap
reader in the style of llama.cpp's gguf-py GGUFReader (our own implementation, same approach):

  open     np.memmap(path, mode="r") over the whole file, as uint8
  fields   every header item and KV becomes a Field whose `parts` are little numpy views into the map
           (key length, key bytes, value type, then the value: scalar view, string length + bytes, or
           array element type + count + each element's parts), and whose `data` lists the indices of
           the parts that carry the value; nothing is copied, values are decoded on demand
  tensors  every tensor info becomes a Field too (name, n_dims, dims, ggml type, offset), then a
           Tensor record with its shape, byte size and a numpy view of its bytes in the data section,
           as GGUFReader builds them in its constructor

Timing (`--repeat N`): the full parse (open + every KV + every tensor info + the tensor views) with
time.perf_counter, best and median of N. Prints one JSON line:
  {"tensors": n, "kvs": m, "seconds_best": x, "seconds_median": y}
`--dump` prints the parsed KVs (scalars and array lengths) and tensors instead, for checking.
Needs Debian's /usr/bin/python3 (numpy).
"""
import argparse
import json
import statistics
import sys
import time

import numpy as np

# GGUF value types: id -> (name, numpy dtype or None for STRING/ARRAY)
VALUE_TYPES = {
    0: ("UINT8", np.uint8), 1: ("INT8", np.int8), 2: ("UINT16", np.uint16), 3: ("INT16", np.int16),
    4: ("UINT32", np.uint32), 5: ("INT32", np.int32), 6: ("FLOAT32", np.float32), 7: ("BOOL", np.bool_),
    8: ("STRING", None), 9: ("ARRAY", None), 10: ("UINT64", np.uint64), 11: ("INT64", np.int64),
    12: ("FLOAT64", np.float64),
}
STRING, ARRAY = 8, 9

# ggml type id -> (name, elements per block, bytes per block, numpy dtype of the stored items)
GGML_TYPES = {
    0: ("F32", 1, 4, np.float32), 1: ("F16", 1, 2, np.float16), 2: ("Q4_0", 32, 18, np.uint8),
    3: ("Q4_1", 32, 20, np.uint8), 6: ("Q5_0", 32, 22, np.uint8), 7: ("Q5_1", 32, 24, np.uint8),
    8: ("Q8_0", 32, 34, np.uint8), 9: ("Q8_1", 32, 36, np.uint8), 10: ("Q2_K", 256, 84, np.uint8),
    11: ("Q3_K", 256, 110, np.uint8), 12: ("Q4_K", 256, 144, np.uint8), 13: ("Q5_K", 256, 176, np.uint8),
    14: ("Q6_K", 256, 210, np.uint8), 15: ("Q8_K", 256, 292, np.uint8), 16: ("IQ2_XXS", 256, 66, np.uint8),
    17: ("IQ2_XS", 256, 74, np.uint8), 18: ("IQ3_XXS", 256, 98, np.uint8), 19: ("IQ1_S", 256, 50, np.uint8),
    20: ("IQ4_NL", 32, 18, np.uint8), 21: ("IQ3_S", 256, 110, np.uint8), 22: ("IQ2_S", 256, 82, np.uint8),
    23: ("IQ4_XS", 256, 136, np.uint8), 24: ("I8", 1, 1, np.int8), 25: ("I16", 1, 2, np.int16),
    26: ("I32", 1, 4, np.int32), 27: ("I64", 1, 8, np.int64), 28: ("F64", 1, 8, np.float64),
    29: ("IQ1_M", 256, 56, np.uint8), 30: ("BF16", 1, 2, np.uint16), 34: ("TQ1_0", 256, 54, np.uint8),
    35: ("TQ2_0", 256, 66, np.uint8), 39: ("MXFP4", 32, 17, np.uint8),
}


_LE = {}  # numpy dtype -> its little-endian dtype


class Field:
    """One header item: `parts` are numpy views into the map, `data` the indices of the value parts."""
    __slots__ = ("offset", "name", "parts", "types", "data")

    def __init__(self, offset, name, parts, types, data):
        self.offset, self.name, self.parts, self.types, self.data = offset, name, parts, types, data

    def contents(self):
        """The decoded value: a scalar, a str, or a list (nested lists for arrays of arrays)."""
        return _decode(self.parts, self.data, self.types)


def _decode(parts, data, types):
    kind = types[0]
    if kind == STRING:
        return bytes(parts[data[0]]).decode("utf-8", "replace")
    if kind != ARRAY:
        return parts[data[0]][0].item()
    elem = types[1] if len(types) > 1 else None
    if elem == STRING:
        return [bytes(parts[i]).decode("utf-8", "replace") for i in data]
    if elem == ARRAY:
        return [_decode(sub_parts, sub_data, sub_types) for sub_parts, sub_data, sub_types in data]
    return [parts[i][0].item() for i in data]


class Tensor:
    __slots__ = ("name", "ggml_type", "ne", "shape", "n_elements", "n_bytes", "data_offset", "data", "field")

    def __init__(self, **kw):
        for k, v in kw.items():
            setattr(self, k, v)


class GgufHeaderReader:
    def __init__(self, path, data_views=True):
        self.data = np.memmap(path, mode="r")
        self.fields = {}
        self.tensors = []
        self.alignment = 32
        offs = 0
        if bytes(self._get(offs, np.uint8, 4)) != b"GGUF":
            raise ValueError("%s: not a GGUF file (magic)" % path)
        offs += 4
        version = self._get(offs, np.uint32)
        if int(version[0]) not in (2, 3):
            raise ValueError("%s: GGUF version %d not supported" % (path, int(version[0])))
        self.version = int(version[0])
        offs += self._push_field(Field(offs, "GGUF.version", [version], [4], [0]))
        counts = self._get(offs, np.uint64, 2)
        offs += self._push_field(Field(offs, "GGUF.tensor_count", [counts[:1]], [10], [0]))
        offs += self._push_field(Field(offs, "GGUF.kv_count", [counts[1:]], [10], [0]))
        self.tensor_count, self.kv_count = int(counts[0]), int(counts[1])
        offs = self._build_kvs(offs, self.kv_count)
        offs, infos = self._build_tensor_infos(offs, self.tensor_count)
        align = self.fields.get("general.alignment")
        if align is not None:
            self.alignment = int(align.parts[align.data[0]][0])
        padding = offs % self.alignment
        if padding:
            offs += self.alignment - padding
        self.data_offset = offs
        self._build_tensors(offs, infos, data_views)

    # -- low-level views ---------------------------------------------------------------------------
    def _get(self, offset, dtype, count=1):
        dtype = _LE.get(dtype) or _LE.setdefault(dtype, np.dtype(dtype).newbyteorder("<"))
        end = offset + dtype.itemsize * count
        if end > len(self.data):
            raise ValueError("read of %d %s at %d runs past the end (%d bytes)" % (count, dtype, offset, len(self.data)))
        return self.data[offset:end].view(dtype)[:count]

    def _push_field(self, field):
        if field.name in self.fields:
            raise ValueError("duplicate key %r at %d" % (field.name, field.offset))
        self.fields[field.name] = field
        return sum(int(p.nbytes) for p in field.parts)

    def _string_parts(self, offset):
        length = self._get(offset, np.uint64)
        return length, self._get(offset + 8, np.uint8, int(length[0]))

    # -- values ------------------------------------------------------------------------------------
    def _value_parts(self, offset, vtype):
        """(size, parts, data, types) of one value of GGUF type vtype at offset."""
        if vtype == STRING:
            length, text = self._string_parts(offset)
            return 8 + int(length[0]), [length, text], [1], [STRING]
        if vtype in VALUE_TYPES and vtype != ARRAY:
            view = self._get(offset, VALUE_TYPES[vtype][1])
            return int(view.nbytes), [view], [0], [vtype]
        if vtype == ARRAY:
            elem_type = self._get(offset, np.uint32)
            count = self._get(offset + 4, np.uint64)
            et, n = int(elem_type[0]), int(count[0])
            size, parts, data, types = 12, [elem_type, count], [], [ARRAY, et]
            pos = offset + 12
            if et != ARRAY and et != STRING and et in VALUE_TYPES:
                # numeric arrays: one view of all elements, one part per element (as gguf-py keeps them)
                whole = self._get(pos, VALUE_TYPES[et][1], n)
                width = whole.itemsize
                for i in range(n):
                    parts.append(whole[i:i + 1])
                    data.append(len(parts) - 1)
                return size + n * width, parts, data, types
            for _ in range(n):
                esize, eparts, edata, etypes = self._value_parts(pos, et)
                if et == ARRAY:
                    data.append((eparts, edata, etypes))
                    parts.extend(eparts)
                else:
                    base = len(parts)
                    parts.extend(eparts)
                    data.extend(base + i for i in edata)
                if not types[2:]:
                    types.extend(etypes[1:] if et == ARRAY else [])
                pos += esize
                size += esize
            return size, parts, data, types
        raise ValueError("unknown GGUF value type %d at %d" % (vtype, offset))

    def _build_kvs(self, offs, count):
        for _ in range(count):
            start = offs
            key_len, key = self._string_parts(offs)
            offs += 8 + int(key_len[0])
            vtype = self._get(offs, np.uint32)
            offs += 4
            size, parts, data, types = self._value_parts(offs, int(vtype[0]))
            offs += size
            name = bytes(key).decode("utf-8")
            nested = types[0] == ARRAY and types[1] == ARRAY  # data holds (parts, data, types) triples
            field = Field(start, name, [key_len, key, vtype] + parts, types, data if nested else [3 + i for i in data])
            if name in self.fields:
                raise ValueError("duplicate key %r at %d" % (name, start))
            self.fields[name] = field
        return offs

    def _build_tensor_infos(self, offs, count):
        infos = []
        for _ in range(count):
            start = offs
            name_len, name = self._string_parts(offs)
            offs += 8 + int(name_len[0])
            n_dims = self._get(offs, np.uint32)
            offs += 4
            dims = self._get(offs, np.uint64, int(n_dims[0]))
            offs += 8 * int(n_dims[0])
            ggml_type = self._get(offs, np.uint32)
            offs += 4
            rel = self._get(offs, np.uint64)
            offs += 8
            infos.append(Field(start, bytes(name).decode("utf-8"), [name_len, name, n_dims, dims, ggml_type, rel],
                               [], [1, 3, 4, 5]))
        return offs, infos

    def _build_tensors(self, data_offset, infos, data_views):
        names = set()
        for f in infos:
            ggml_id = int(f.parts[4][0])
            if ggml_id not in GGML_TYPES:
                raise ValueError("tensor %r: unknown ggml type %d" % (f.name, ggml_id))
            if f.name in names:
                raise ValueError("tensor %r appears twice" % f.name)
            names.add(f.name)
            tname, block, block_bytes, item_dtype = GGML_TYPES[ggml_id]
            ne = [int(n) for n in f.parts[3]]
            n_elements = int(np.prod(ne, dtype=np.uint64)) if ne else 1
            n_bytes = n_elements * block_bytes // block
            start = data_offset + int(f.parts[5][0])
            view = None
            if data_views:
                if block == 1:
                    view = self._get(start, item_dtype, n_elements).reshape(ne[::-1])
                else:  # quantized: rows of raw blocks, as gguf-py exposes them
                    view = self._get(start, np.uint8, n_bytes).reshape(ne[::-1][:-1] + [ne[0] // block * block_bytes])
            self.tensors.append(Tensor(name=f.name, ggml_type=tname, ne=ne, shape=ne[::-1], n_elements=n_elements,
                                       n_bytes=n_bytes, data_offset=start, data=view, field=f))

    def kvs(self):
        """The metadata KVs (the GGUF.* header items left out), in file order."""
        return [f for name, f in self.fields.items() if not name.startswith("GGUF.")]


def dump(reader):
    out = {"version": reader.version, "alignment": reader.alignment, "data_offset": reader.data_offset, "kvs": {}, "tensors": []}
    for f in reader.kvs():
        value = f.contents()
        type_name = VALUE_TYPES[f.types[0]][0]
        if f.types[0] == ARRAY:
            type_name += "[" + VALUE_TYPES[f.types[1]][0] + "]"
            value = {"len": len(value), "head": value[:3]}
        out["kvs"][f.name] = {"type": type_name, "value": value}
    for t in reader.tensors:
        out["tensors"].append({"name": t.name, "type": t.ggml_type, "ne": t.ne, "bytes": t.n_bytes, "offset": t.data_offset})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("path")
    ap.add_argument("--repeat", type=int, default=5, help="timed parses; best and median are reported (default 5)")
    ap.add_argument("--no-data-views", action="store_true", help="skip building each tensor's numpy view")
    ap.add_argument("--dump", action="store_true", help="print the parsed header as JSON instead of timing it")
    args = ap.parse_args()
    if args.dump:
        json.dump(dump(GgufHeaderReader(args.path, not args.no_data_views)), sys.stdout, indent=1, default=str)
        print()
        return
    times, reader = [], None
    for _ in range(max(1, args.repeat)):
        t0 = time.perf_counter()
        reader = GgufHeaderReader(args.path, not args.no_data_views)
        times.append(time.perf_counter() - t0)
        del reader.data  # release the map before the next run
    print(json.dumps({"tensors": len(reader.tensors), "kvs": len(reader.kvs()), "seconds_best": min(times),
                      "seconds_median": statistics.median(times)}))


if __name__ == "__main__":
    main()
