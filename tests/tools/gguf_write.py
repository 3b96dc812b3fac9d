"""A small GGUF writer for tests and benchmarks (pure Python + struct; numpy arrays accepted as data).

Contract
--------
``write_gguf(path, kvs, tensors, alignment=None, version=3)`` writes one GGUF file laid out as ggml's
GGUF specification describes it (all integers little-endian):

    magic "GGUF" | u32 version | u64 tensor_count | u64 kv_count
    kv_count KVs:        key (u64 length + UTF-8 bytes) | u32 value type | value
    tensor_count infos:  name (u64 length + bytes) | u32 n_dims | u64 ne[n_dims] | u32 ggml type | u64 offset
    zero padding to the alignment | data section (each tensor at an aligned offset, each followed by
    zero padding to the alignment, the last one included, as ggml's and gguf-py's writers do)

``kvs`` is a list of ``(key, type_name, value)``, written in the order given:

- ``type_name`` is a GGUF value type, case-insensitive: UINT8, INT8, UINT16, INT16, UINT32, INT32,
  FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, FLOAT64.
- scalars take a Python int / float / bool; the value is range-checked for its type.
- STRING takes a ``str`` (encoded as UTF-8) or ``bytes`` (written as is).
- ARRAY takes ``(element_type_name, values)``; for an array of arrays each element of ``values`` is again
  an ``(element_type_name, values)`` pair, to any depth (the writer does not limit nesting; readers do).

``tensors`` is a list of ``(name, ggml_type_name, ne, data)``:

- ``ggml_type_name`` is a ggml type name such as ``'F32'``, ``'F16'``, ``'BF16'``, ``'Q8_0'`` (see
  ``GGML_TYPES``); ``ne`` lists the dimensions in GGUF order, ``ne[0]`` the contiguous row length
  (so a row-major numpy array of shape ``(rows, cols)`` has ``ne = [cols, rows]``).
- ``data`` is ``bytes``/``bytearray``/``memoryview`` or anything with ``tobytes()`` (a numpy array);
  its length must be exactly ``elements / block_size * block_bytes`` for the type, else ValueError.
- tensors are stored in the order given, each at the next multiple of the alignment in the data
  section; the info's offset is relative to the start of the data section.

``version=1`` writes GGUF v1 (llama.cpp's first GGUF, August 2023): the same layout with u32 tensor and KV
counts, string lengths, array counts and ``ne``; its value types stop at ARRAY (UINT64, INT64 and FLOAT64
came with v2: ValueError). No maintained writer produces v1 any more; this one exists for the readers' tests.

Alignment: ``general.alignment`` (UINT32) in ``kvs`` wins; otherwise ``alignment`` (default 32). When an
``alignment`` other than 32 is passed and ``kvs`` has no ``general.alignment``, the KV is appended so that
readers see it. Passing an ``alignment`` that disagrees with the KV is a ValueError.

The writer checks what it is given (types, ranges, sizes, unique keys and tensor names) and raises
ValueError rather than write a file that a conforming reader would refuse. ``gguf_bytes(...)`` returns
the file's bytes instead of writing them; ``tensor_nbytes(type, ne)`` gives a tensor's byte size.
"""
import struct

__all__ = ["GGUF_VALUE_TYPES", "GGML_TYPES", "gguf_bytes", "tensor_nbytes", "write_gguf"]

# GGUF value type name -> (id, struct format for one element or None for STRING/ARRAY)
GGUF_VALUE_TYPES = {
    "UINT8": (0, "B"), "INT8": (1, "b"), "UINT16": (2, "H"), "INT16": (3, "h"),
    "UINT32": (4, "I"), "INT32": (5, "i"), "FLOAT32": (6, "f"), "BOOL": (7, "?"),
    "STRING": (8, None), "ARRAY": (9, None), "UINT64": (10, "Q"), "INT64": (11, "q"),
    "FLOAT64": (12, "d"),
}

# ggml type name -> (id, elements per block, bytes per block), per ggml's type traits.
GGML_TYPES = {
    "F32": (0, 1, 4), "F16": (1, 1, 2), "Q4_0": (2, 32, 18), "Q4_1": (3, 32, 20),
    "Q5_0": (6, 32, 22), "Q5_1": (7, 32, 24), "Q8_0": (8, 32, 34), "Q8_1": (9, 32, 36),
    "Q2_K": (10, 256, 84), "Q3_K": (11, 256, 110), "Q4_K": (12, 256, 144), "Q5_K": (13, 256, 176),
    "Q6_K": (14, 256, 210), "Q8_K": (15, 256, 292), "IQ2_XXS": (16, 256, 66), "IQ2_XS": (17, 256, 74),
    "IQ3_XXS": (18, 256, 98), "IQ1_S": (19, 256, 50), "IQ4_NL": (20, 32, 18), "IQ3_S": (21, 256, 110),
    "IQ2_S": (22, 256, 82), "IQ4_XS": (23, 256, 136), "I8": (24, 1, 1), "I16": (25, 1, 2),
    "I32": (26, 1, 4), "I64": (27, 1, 8), "F64": (28, 1, 8), "IQ1_M": (29, 256, 56),
    "BF16": (30, 1, 2), "TQ1_0": (34, 256, 54), "TQ2_0": (35, 256, 66), "MXFP4": (39, 32, 17),
}

_INT_RANGES = {
    "UINT8": (0, 2**8 - 1), "INT8": (-2**7, 2**7 - 1), "UINT16": (0, 2**16 - 1), "INT16": (-2**15, 2**15 - 1),
    "UINT32": (0, 2**32 - 1), "INT32": (-2**31, 2**31 - 1), "UINT64": (0, 2**64 - 1), "INT64": (-2**63, 2**63 - 1),
}


def _type_name(name):
    key = str(name).upper()
    if key not in GGUF_VALUE_TYPES:
        raise ValueError("unknown GGUF value type %r (expected one of %s)" % (name, ", ".join(GGUF_VALUE_TYPES)))
    return key


def _string(s, v1=False):
    b = s.encode("utf-8") if isinstance(s, str) else bytes(s)
    return struct.pack("<I" if v1 else "<Q", len(b)) + b


def _check_scalar(type_name, v, where):
    if type_name == "BOOL":
        if not isinstance(v, bool) and v not in (0, 1):
            raise ValueError("%s: BOOL value must be True/False (or 0/1), got %r" % (where, v))
    elif type_name in _INT_RANGES:
        if isinstance(v, bool) or not isinstance(v, int):
            # numpy integers are not ints; accept anything that converts exactly
            try:
                iv = int(v)
            except (TypeError, ValueError):
                raise ValueError("%s: %s value must be an integer, got %r" % (where, type_name, v))
            if iv != v:
                raise ValueError("%s: %s value must be an integer, got %r" % (where, type_name, v))
            v = iv
        lo, hi = _INT_RANGES[type_name]
        if not lo <= v <= hi:
            raise ValueError("%s: %d does not fit in %s" % (where, v, type_name))
    else:  # FLOAT32 / FLOAT64
        if isinstance(v, (str, bytes)):
            raise ValueError("%s: %s value must be a number, got %r" % (where, type_name, v))


def _value(type_name, value, where, v1=False):
    """Encodes one value (without its type tag) of GGUF type type_name (v1: 32-bit lengths and counts)."""
    type_id, fmt = GGUF_VALUE_TYPES[type_name]
    if v1 and type_id > GGUF_VALUE_TYPES["ARRAY"][0]:
        raise ValueError("%s: GGUF v1 has no %s values" % (where, type_name))
    if type_name == "STRING":
        if not isinstance(value, (str, bytes, bytearray)):
            raise ValueError("%s: STRING value must be str or bytes, got %r" % (where, type(value).__name__))
        return _string(value, v1)
    if type_name == "ARRAY":
        try:
            elem_name, values = value
        except (TypeError, ValueError):
            raise ValueError("%s: ARRAY value must be (element_type_name, values)" % where)
        elem_name = _type_name(elem_name)
        if v1 and GGUF_VALUE_TYPES[elem_name][0] > GGUF_VALUE_TYPES["ARRAY"][0]:
            raise ValueError("%s: GGUF v1 has no %s values" % (where, elem_name))
        values = list(values)
        head = struct.pack("<II" if v1 else "<IQ", GGUF_VALUE_TYPES[elem_name][0], len(values))
        efmt = GGUF_VALUE_TYPES[elem_name][1]
        if efmt is not None:  # numeric / bool: one pack call for the whole array
            for i, v in enumerate(values):
                _check_scalar(elem_name, v, "%s[%d]" % (where, i))
            if elem_name in _INT_RANGES:
                values = [int(v) for v in values]
            elif elem_name == "BOOL":
                values = [bool(v) for v in values]
            else:
                values = [float(v) for v in values]
            return head + struct.pack("<%d%s" % (len(values), efmt), *values)
        return head + b"".join(_value(elem_name, v, "%s[%d]" % (where, i), v1) for i, v in enumerate(values))
    _check_scalar(type_name, value, where)
    if type_name in _INT_RANGES:
        value = int(value)
    elif type_name == "BOOL":
        value = bool(value)
    else:
        value = float(value)
    return struct.pack("<" + fmt, value)


def tensor_nbytes(ggml_type_name, ne):
    """Bytes a tensor of this ggml type and GGUF-order dimensions occupies; ValueError if impossible."""
    key = str(ggml_type_name).upper()
    if key not in GGML_TYPES:
        raise ValueError("unknown ggml type %r" % (ggml_type_name,))
    _, block, block_bytes = GGML_TYPES[key]
    ne = [int(n) for n in ne]
    if not 1 <= len(ne) <= 4 or any(n < 0 for n in ne):
        raise ValueError("ne %r: 1 to 4 non-negative dimensions expected" % (ne,))
    if ne[0] % block:
        raise ValueError("ne[0] = %d is not a multiple of %s's block of %d" % (ne[0], key, block))
    elements = 1
    for n in ne:
        elements *= n
    return elements // block * block_bytes


def _resolve_alignment(kvs, alignment):
    declared = None
    for key, type_name, value in kvs:
        if key == "general.alignment":
            if _type_name(type_name) != "UINT32":
                raise ValueError("general.alignment must be UINT32, got %s" % type_name)
            declared = int(value)
    if declared is not None and alignment is not None and alignment != declared:
        raise ValueError("alignment=%d disagrees with the general.alignment KV (%d)" % (alignment, declared))
    align = declared if declared is not None else (alignment if alignment is not None else 32)
    if align <= 0 or align & (align - 1):
        raise ValueError("alignment %d is not a power of two" % align)
    extra = []
    if declared is None and align != 32:
        extra.append(("general.alignment", "UINT32", align))
    return align, extra


def gguf_bytes(kvs, tensors, alignment=None, version=3):
    """The bytes of the GGUF file write_gguf would write (see the module docstring)."""
    kvs = list(kvs)
    align, extra = _resolve_alignment(kvs, alignment)
    kvs += extra

    if version not in (1, 2, 3):
        raise ValueError("GGUF version %r: 1, 2 or 3 expected" % (version,))
    v1 = version == 1
    parts = [b"GGUF", struct.pack("<III" if v1 else "<IQQ", version, len(tensors), len(kvs))]
    seen = set()
    for key, type_name, value in kvs:
        if key in seen:
            raise ValueError("KV key %r given twice" % key)
        seen.add(key)
        type_name = _type_name(type_name)
        parts.append(_string(key, v1))
        parts.append(struct.pack("<I", GGUF_VALUE_TYPES[type_name][0]))
        parts.append(_value(type_name, value, key, v1))

    blobs, names, offset = [], set(), 0
    for name, ggml_name, ne, data in tensors:
        if name in names:
            raise ValueError("tensor %r given twice" % name)
        names.add(name)
        key = str(ggml_name).upper()
        need = tensor_nbytes(key, ne)
        blob = data.tobytes() if hasattr(data, "tobytes") else bytes(data)
        if len(blob) != need:
            raise ValueError("tensor %r: %s %r needs %d bytes, data has %d" % (name, key, list(ne), need, len(blob)))
        offset = (offset + align - 1) // align * align
        parts.append(_string(name, v1))
        parts.append(struct.pack("<I%d%s" % (len(ne), "I" if v1 else "Q"), len(ne), *[int(n) for n in ne]))
        parts.append(struct.pack("<IQ", GGML_TYPES[key][0], offset))
        blobs.append((offset, blob))
        offset += len(blob)

    header = b"".join(parts)
    out = bytearray(header)
    out += b"\0" * (-len(out) % align)
    data_start = len(out)
    for off, blob in blobs:
        out += b"\0" * (data_start + off - len(out))
        out += blob
    out += b"\0" * (-len(out) % align)  # the last tensor is padded too, as ggml and gguf-py write files
    return bytes(out)


def write_gguf(path, kvs, tensors, alignment=None, version=3):
    """Writes a GGUF file at path (see the module docstring for kvs and tensors); returns path."""
    data = gguf_bytes(kvs, tensors, alignment=alignment, version=version)
    with open(path, "wb") as f:
        f.write(data)
    return path
