"""Writes safetensors checkpoints in the real-world *packed* quantisation layouts, where several stored tensors
are one logical float tensor: FP8 weights with scale tensors (compressed-tensors, DeepSeek-V3 blocks), gpt-oss
MXFP4 experts, bitsandbytes 4-bit (NF4/FP4, with and without double quantisation), GPTQ (v1/v2, 2/3/4/8 bits,
act-order) and AutoAWQ GEMM.

Each scheme's checkpoint is built by QUANTISING known float32 weights (seeded numpy RNG), plus one hand-made
tensor whose parts are literal codes and scales (the tests hold its values, worked out by hand), one ordinary
tensor (model.norm.weight) and, for linear layers, a bias that stays an ordinary tensor.

    /usr/bin/python3 tests/tools/packed_write.py OUTDIR      writes OUTDIR/<scheme>/ for every scheme

Per scheme directory:
  model.safetensors  the stored parts
  config.json        {"model_type": ..., "quantization_config": {...}} as the quantiser's library writes it
  expected.npz       for every logical tensor NAME:
                       "NAME/ref"   float32, logical shape: this file's dequantisation of the STORED parts, with
                                    exactly the float32 operations each layout defines (the tool must match it
                                    bit for bit)
                       "NAME/orig"  float32: the weights that were quantised (absent for hand-made tensors)
                       "NAME/bound" float64: elementwise bound on |ref - orig|, the scheme's quantisation error
                     "plain_names": the ordinary tensors' names
Every quantised tensor is checked here against its bound before anything is written.
"""
import json
import math
import os
import struct
import sys
import zlib
from dataclasses import dataclass, field

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from safetensors_write import NUMPY_TO_SAFETENSORS, write_safetensors  # noqa: E402

F32 = np.float32
# Slack for the float32 roundings of a quantiser and of its dequantisation (a few units of 2^-24, relative).
FLOAT32_SLACK = 2.0**-21


@dataclass
class Logical:
    ref: np.ndarray                  # float32, logical shape
    orig: np.ndarray | None = None   # float32 weights that were quantised; None for hand-made parts
    bound: np.ndarray | None = None  # float64, elementwise |ref - orig| bound


@dataclass
class Checkpoint:
    model_type: str
    quantization_config: dict
    tensors: list = field(default_factory=list)  # (name, array | (safetensors dtype, raw array)), file order
    logical: dict = field(default_factory=dict)  # logical name -> Logical
    plain: list = field(default_factory=list)    # names of the ordinary tensors

    def add(self, name, value):
        if isinstance(value, np.ndarray) and value.ndim == 0:  # shape []: the writer's ascontiguousarray makes it [1]
            value = (NUMPY_TO_SAFETENSORS[value.dtype.name], value)
        self.tensors.append((name, value))

    def add_plain(self, name, value):
        self.add(name, value)
        self.plain.append(name)

    def add_quantised(self, name, ref, orig, bound):
        """Records a logical tensor quantised from `orig`, after checking |ref - orig| <= bound everywhere."""
        assert ref.dtype == F32 and ref.shape == orig.shape == bound.shape, name
        err = np.abs(ref.astype(np.float64) - orig.astype(np.float64))
        worst = np.argmax(err - bound)
        assert np.all(err <= bound), f"{name}: error {err.flat[worst]} > bound {bound.flat[worst]} at {worst}"
        self.logical[name] = Logical(ref, orig, bound)

    def add_hand_made(self, name, ref):
        assert ref.dtype == F32, name
        self.logical[name] = Logical(ref)


def _rng(scheme):
    return np.random.default_rng(zlib.crc32(scheme.encode()))


def _weights(rng, shape):
    """Weight-like float32 values: N(0, 0.02) with about 0.2% outliers 8x larger, as real layers have."""
    w = rng.standard_normal(shape) * 0.02
    flat = w.reshape(-1)
    flat[rng.choice(flat.size, flat.size // 500 + 1, replace=False)] *= 8
    return w.astype(F32)


def _add_norm_and_bias(ck, rng, bias_prefix, out_features, width, bias_dtype=F32):
    """The ordinary tensors every checkpoint carries: a linear layer's bias and the final norm."""
    if bias_prefix is not None:
        ck.add_plain(bias_prefix + ".bias", (rng.standard_normal(out_features) * 0.01).astype(bias_dtype))
    ck.add_plain("model.norm.weight", (1 + rng.standard_normal(width) * 0.05).astype(F32))


def _nearest_level(a, levels):
    """Index of the level nearest to each a (a >= 0; levels increasing, levels[0] <= a <= levels[-1]); a tie goes
    to the even index, which for a floating-point code table is IEEE round-half-to-even."""
    hi = np.minimum(np.searchsorted(levels, a), len(levels) - 1)
    lo = np.maximum(hi - 1, 0)
    d_lo, d_hi = a - levels[lo], levels[hi] - a
    return np.where(d_lo < d_hi, lo, np.where(d_hi < d_lo, hi, np.where(lo % 2 == 0, lo, hi)))


def _bf16_bits(x):
    """float32 -> bfloat16 bit patterns, round to nearest even (finite inputs)."""
    bits = np.ascontiguousarray(x, dtype=F32).view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def _bf16_widen(bits):
    return (bits.astype(np.uint32) << 16).view(F32)


def _pack_fields(values, bits, order=None):
    """Packs unsigned `bits`-wide fields along the last axis into uint32 words, viewed as int32: field k (bits
    [k*bits, (k+1)*bits)) of word w holds values[..., w*pack + order[k]] (order = identity unless given)."""
    pack = 32 // bits
    order = list(range(pack)) if order is None else order
    v = values.astype(np.uint32)
    assert v.shape[-1] % pack == 0 and np.all(v < (1 << bits))
    v = v.reshape(*v.shape[:-1], v.shape[-1] // pack, pack)
    words = np.zeros(v.shape[:-1], np.uint32)
    for k in range(pack):
        words |= v[..., order[k]] << np.uint32(k * bits)
    return words.view(np.int32)


def _unpack_fields(words, bits, order=None):
    """Inverse of _pack_fields: int32 words [..., W] -> int64 values [..., W * pack]."""
    pack = 32 // bits
    order = list(range(pack)) if order is None else order
    u = np.ascontiguousarray(words).view(np.uint32)
    out = np.zeros((*u.shape, pack), np.int64)
    for k in range(pack):
        out[..., order[k]] = (u >> np.uint32(k * bits)) & np.uint32((1 << bits) - 1)
    return out.reshape(*u.shape[:-1], u.shape[-1] * pack)


def _pack_stream(values, bits):
    """Packs `bits`-wide codes along the last axis as one little-endian bit stream of uint32 words (code k at
    stream bits k*bits .. k*bits + bits - 1, crossing into the next word when it must: AutoGPTQ's 3-bit layout,
    32 codes in 3 words), viewed as int32. Independent of the kernel: a big integer per row."""
    v = values.astype(np.uint64)
    assert v.shape[-1] * bits % 32 == 0 and np.all(v < (1 << bits))
    flat = v.reshape(-1, v.shape[-1])
    n_words = v.shape[-1] * bits // 32
    out = np.zeros((flat.shape[0], n_words), np.uint32)
    for r, row in enumerate(flat):
        acc = 0
        for k, code in enumerate(row.tolist()):
            acc |= int(code) << (k * bits)
        out[r] = [(acc >> (32 * w)) & 0xFFFFFFFF for w in range(n_words)]
    return out.reshape(*v.shape[:-1], n_words).view(np.int32)


def _unpack_stream(words, bits):
    """Inverse of _pack_stream: int32 words [..., W] -> int64 codes [..., W * 32 / bits]."""
    u = np.ascontiguousarray(words).view(np.uint32)
    flat = u.reshape(-1, u.shape[-1])
    n = u.shape[-1] * 32 // bits
    out = np.zeros((flat.shape[0], n), np.int64)
    for r, row in enumerate(flat):
        acc = sum(int(w) << (32 * i) for i, w in enumerate(row.tolist()))
        out[r] = [(acc >> (k * bits)) & ((1 << bits) - 1) for k in range(n)]
    return out.reshape(*u.shape[:-1], n)


# ------------------------------------------------------------------------------------------------ FP8

def _fp8_table(exp_bits, man_bits, ieee_specials):
    """Value (float64) of each of the 256 codes. e4m3fn (ieee_specials False): no infinities, NaN = S.1111.111;
    e5m2: exponent 31 is inf (mantissa 0) or NaN, as in IEEE half."""
    bias = (1 << (exp_bits - 1)) - 1
    code = np.arange(256)
    e = (code >> man_bits) & ((1 << exp_bits) - 1)
    m = (code & ((1 << man_bits) - 1)) / float(1 << man_bits)
    mag = np.where(e == 0, m * 2.0 ** (1 - bias), (1 + m) * 2.0 ** (e - bias))
    val = np.where(code & 0x80, -mag, mag)
    if ieee_specials:
        top = e == (1 << exp_bits) - 1
        val[top & (m == 0)] = np.where(code[top & (m == 0)] & 0x80, -np.inf, np.inf)
        val[top & (m != 0)] = np.nan
    else:
        val[(code & 0x7F) == 0x7F] = np.nan
    return val


# dtype -> (code values, largest finite positive code, mantissa bits, smallest normal exponent)
FP8 = {"F8_E4M3": (_fp8_table(4, 3, False), 0x7E, 3, -6),
       "F8_E5M2": (_fp8_table(5, 2, True), 0x7B, 2, -14)}
FP8_BLOCK = 128  # DeepSeek-V3's weight_block_size [128, 128]


def fp8_encode(x, dtype):
    """float32 -> fp8 codes (uint8): nearest value, ties to even, saturating at the largest finite value."""
    table, max_code, _, _ = FP8[dtype]
    levels = table[:max_code + 1]
    a = np.minimum(np.abs(x.astype(np.float64)), levels[-1])
    return (_nearest_level(a, levels) | np.where(np.signbit(x), 0x80, 0)).astype(np.uint8)


def _expand_blocks(s, shape):
    """Per-block scales [ceil(out/128), ceil(in/128)] -> one per element [out, in]."""
    return np.repeat(np.repeat(s, FP8_BLOCK, axis=0), FP8_BLOCK, axis=1)[:shape[0], :shape[1]]


def fp8_decode(codes, dtype, scale, blocks):
    """value = float32(fp8 value) * float32(scale), in float32; `scale` broadcasts, or is per block."""
    s = _expand_blocks(scale, codes.shape) if blocks else scale
    return FP8[dtype][0][codes].astype(F32) * s.astype(F32)


def _fp8_parts(ck, prefix, dtype, codes, scale_name, scale):
    """Stores L.weight (fp8 codes) and its scale tensor (float32 array or ("BF16", bits)); returns the logical
    values."""
    ck.add(prefix + ".weight", (dtype, codes))
    ck.add(prefix + "." + scale_name, scale)
    s = _bf16_widen(scale[1]) if isinstance(scale, tuple) else scale
    return fp8_decode(codes, dtype, s, scale_name == "weight_scale_inv")


def _fp8_linear(ck, rng, prefix, shape, dtype, granularity, scale_shape=None, bf16_scale=False):
    """Quantises one linear weight [out, in]. granularity: "tensor" (scale_shape () or (1,)), "channel" ([out, 1]),
    "block" (weight_scale_inv [ceil(out/128), ceil(in/128)]); scale = amax / largest finite fp8 value."""
    w = _weights(rng, shape)
    table, max_code, man_bits, emin = FP8[dtype]
    fmax = F32(table[max_code])
    if granularity == "tensor":
        scale = np.full(scale_shape, F32(np.abs(w).max()) / fmax, F32)
    elif granularity == "channel":
        scale = np.abs(w).max(axis=1, keepdims=True) / fmax
    else:
        grid = [-(-n // FP8_BLOCK) for n in shape]
        pad = np.zeros([g * FP8_BLOCK for g in grid], F32)
        pad[:shape[0], :shape[1]] = np.abs(w)
        scale = pad.reshape(grid[0], FP8_BLOCK, grid[1], FP8_BLOCK).max(axis=(1, 3)) / fmax
    stored = ("BF16", _bf16_bits(scale)) if bf16_scale else scale
    s = _bf16_widen(stored[1]) if bf16_scale else scale
    s_full = _expand_blocks(s, shape) if granularity == "block" else np.broadcast_to(s, shape)
    x = w / s_full  # float32, the value the code approximates
    ref = _fp8_parts(ck, prefix, dtype, fp8_encode(x, dtype),
                     "weight_scale_inv" if granularity == "block" else "weight_scale", stored)
    # Half a unit in the last place of x (relative 2^-(m+1); subnormals: half the subnormal step), plus what
    # saturation at the largest value cuts off, times the scale.
    a = np.abs(x.astype(np.float64))
    half_ulp = a * 2.0 ** -(man_bits + 1) + 2.0 ** (emin - man_bits - 1)
    bound = s_full.astype(np.float64) * (half_ulp + np.maximum(a - fmax, 0)) + FLOAT32_SLACK * np.abs(w)
    ck.add_quantised(prefix + ".weight", ref, w, bound)


COMPRESSED_TENSORS_FP8 = {"quant_method": "compressed-tensors", "format": "float-quantized"}
HAND = "model.hand.proj"  # the hand-made linear layer of every linear-layer scheme


def build_fp8_tensor():
    """Per-tensor scales, shape [] (AutoFP8 / vLLM "fp8") and [1] (compressed-tensors), e4m3."""
    ck, rng = Checkpoint("llama", COMPRESSED_TENSORS_FP8), _rng("fp8_tensor")
    _fp8_linear(ck, rng, "model.layers.0.self_attn.q_proj", (96, 200), "F8_E4M3", "tensor", scale_shape=())
    _fp8_linear(ck, rng, "model.layers.0.self_attn.k_proj", (128, 136), "F8_E4M3", "tensor", scale_shape=(1,))
    codes = np.array([[0x38, 0x40, 0xB8, 0x7E], [0x01, 0x08, 0x80, 0x7F]], np.uint8)
    ck.add_hand_made(HAND + ".weight", _fp8_parts(ck, HAND, "F8_E4M3", codes, "weight_scale", np.array(0.5, F32)))
    _add_norm_and_bias(ck, rng, "model.layers.0.self_attn.q_proj", 96, 200)
    return ck


def build_fp8_channel():
    """Per-output-channel scales [out, 1], float32 and bfloat16."""
    ck, rng = Checkpoint("llama", COMPRESSED_TENSORS_FP8), _rng("fp8_channel")
    _fp8_linear(ck, rng, "model.layers.0.self_attn.q_proj", (160, 224), "F8_E4M3", "channel")
    _fp8_linear(ck, rng, "model.layers.0.self_attn.o_proj", (96, 256), "F8_E4M3", "channel", bf16_scale=True)
    codes = np.array([[0x38, 0xC0], [0x30, 0x44], [0x00, 0x80]], np.uint8)
    scale = ("BF16", np.array([[0x4040], [0x3F00], [0xC000]], np.uint16))  # 3.0, 0.5, -2.0
    ck.add_hand_made(HAND + ".weight", _fp8_parts(ck, HAND, "F8_E4M3", codes, "weight_scale", scale))
    _add_norm_and_bias(ck, rng, "model.layers.0.self_attn.q_proj", 160, 224)
    return ck


def build_fp8_block():
    """DeepSeek-V3: 128x128 blocks, weight_scale_inv (a multiplier despite its name); partial edge blocks."""
    config = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
              "weight_block_size": [FP8_BLOCK, FP8_BLOCK]}
    ck, rng = Checkpoint("deepseek_v3", config), _rng("fp8_block")
    _fp8_linear(ck, rng, "model.layers.0.self_attn.q_proj", (200, 300), "F8_E4M3", "block")
    _fp8_linear(ck, rng, "model.layers.0.mlp.down_proj", (96, 130), "F8_E4M3", "block")
    codes = np.full((2, 130), 0x38, np.uint8)  # 1.0
    codes[1, 129] = 0xC4  # -3.0
    ck.add_hand_made(HAND + ".weight", _fp8_parts(ck, HAND, "F8_E4M3", codes, "weight_scale_inv",
                                                  np.array([[2.0, 0.25]], F32)))
    _add_norm_and_bias(ck, rng, "model.layers.0.self_attn.q_proj", 200, 300)
    return ck


def build_fp8_e5m2():
    """e5m2 codes (with infinities and NaNs), per-tensor and per-channel scales."""
    ck, rng = Checkpoint("llama", COMPRESSED_TENSORS_FP8), _rng("fp8_e5m2")
    _fp8_linear(ck, rng, "model.layers.0.self_attn.q_proj", (112, 144), "F8_E5M2", "tensor", scale_shape=())
    _fp8_linear(ck, rng, "model.layers.0.self_attn.k_proj", (128, 160), "F8_E5M2", "channel")
    codes = np.array([[0x3C, 0x7B, 0x01, 0xC2], [0x7C, 0xFC, 0x7D, 0x3E]], np.uint8)
    ck.add_hand_made(HAND + ".weight", _fp8_parts(ck, HAND, "F8_E5M2", codes, "weight_scale", np.array(2.0, F32)))
    _add_norm_and_bias(ck, rng, "model.layers.0.self_attn.q_proj", 112, 144)
    return ck


# ------------------------------------------------------------------------------------------------ MXFP4

MXFP4_LUT = np.array([+0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0], F32)


def mxfp4_decode(blocks, scales):
    """gpt-oss: blocks u8 [..., G, 16], scales u8 [..., G] -> float32 [..., G*32]; byte j of a block holds element
    2j (low nibble) and 2j+1 (high); value = LUT[code] * 2^(scale - 127) (exact); scale 255 is NaN."""
    codes = np.stack([blocks & 0x0F, blocks >> 4], axis=-1).reshape(*blocks.shape[:-1], 32)
    with np.errstate(over="ignore"):  # scale 255 overflows before it is replaced by NaN
        vals = np.ldexp(MXFP4_LUT[codes], scales.astype(np.int32)[..., None] - 127)
    assert vals.dtype == F32
    vals[scales == 255] = np.nan
    return vals.reshape(*blocks.shape[:-2], blocks.shape[-2] * 32)


def _mxfp4_parts(ck, prefix, blocks, scales):
    ck.add(prefix + "_blocks", blocks)
    ck.add(prefix + "_scales", scales)
    return mxfp4_decode(blocks, scales)


def _mxfp4_experts(ck, rng, prefix, experts, rows, cols):
    """Quantises [experts, rows, cols] per 32 consecutive values: exponent e = floor(log2(amax)) - 2 (the OCP MX
    rule for E2M1, whose largest magnitude is 2^2 * 1.5), codes nearest (ties to even) with |x| / 2^e clamped to 6."""
    w = _weights(rng, (experts, rows, cols))
    groups = w.reshape(experts, rows, cols // 32, 32)
    amax = np.abs(groups).max(axis=-1)
    assert np.all(amax > 0)
    e = np.frexp(amax)[1] - 1 - 2  # frexp: amax = m * 2^k, m in [0.5, 1) -> floor(log2(amax)) = k - 1
    x = groups / np.ldexp(F32(1), e)[..., None]  # exact: division by a power of two
    mag = _nearest_level(np.minimum(np.abs(x), 6.0).astype(np.float64), MXFP4_LUT[:8].astype(np.float64))
    codes = (mag | np.where(np.signbit(x), 8, 0)).astype(np.uint8)
    blocks = (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)
    ref = _mxfp4_parts(ck, prefix, blocks, (e + 127).astype(np.uint8))
    # Half the widest gap of the E2M1 values (4 -> 6) times 2^e, plus what clamping at 6 * 2^e cuts off.
    step = np.repeat(np.ldexp(1.0, e), 32, axis=-1).reshape(w.shape)
    bound = step + np.maximum(np.abs(w.astype(np.float64)) - 6 * step, 0)
    ck.add_quantised(prefix, ref, w, bound)


def build_mxfp4():
    """gpt-oss experts, stored orientation [E, rows, G*32] (transformers transposes the last two on load)."""
    ck, rng = Checkpoint("gpt_oss", {"quant_method": "mxfp4"}), _rng("mxfp4")
    experts = "model.layers.0.mlp.experts."
    _mxfp4_experts(ck, rng, experts + "gate_up_proj", 2, 64, 128)
    _mxfp4_experts(ck, rng, experts + "down_proj", 2, 96, 96)
    # Row 0: every code, scale 2^1; row 1: scale byte 255 (NaN); row 2: scale 2^-127 (float32 subnormals).
    blocks = np.array([[[[0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE] + [0x00] * 8],
                        [[0x77] * 16],
                        [[0x71] * 16]]], np.uint8)
    scales = np.array([[[128], [255], [0]]], np.uint8)
    hand = "model.layers.1.mlp.experts.gate_up_proj"
    ck.add_hand_made(hand, _mxfp4_parts(ck, hand, blocks, scales))
    ck.add_plain(experts + "gate_up_proj_bias", (rng.standard_normal((2, 64)) * 0.01).astype(F32))
    ck.add_plain(experts + "down_proj_bias", (rng.standard_normal((2, 96)) * 0.01).astype(F32))
    _add_norm_and_bias(ck, rng, None, 0, 96)
    return ck


# ------------------------------------------------------------------------------------------------ bitsandbytes

BNB_BLOCK = 64          # bnb_4bit blocksize (transformers' default)
BNB_NESTED_BLOCK = 256  # blocksize of the absmax double quantisation
# bitsandbytes' get_4bit_type("nf4") values.
NF4_MAP = np.array([-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
                    -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
                    0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
                    0.7229568362236023, 1.0], F32)
# get_4bit_type("fp4"): [0, 0.0625, 8, 12, 4, 6, 2, 3, -0, -0.0625, ...] / 12 in float32. Its "-0" is a Python
# int, so the stored code 8 is +0.0, not -0.0.
FP4_MAP = np.array([0, 0.0625, 8, 12, 4, 6, 2, 3, 0, -0.0625, -8, -12, -4, -6, -2, -3], F32) / F32(12)


def bnb_dynamic_map():
    """bitsandbytes' create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8), the nested absmax code:
    256 sorted values in [-1, 1] (computed here in numpy; the tool reads whichever map is stored)."""
    data = [0.0, 1.0]
    for i in range(7):
        bounds = np.linspace(0.1, 1, 2**i + 1, dtype=F32)
        means = (bounds[:-1] + bounds[1:]) / F32(2)
        data += (F32(10.0 ** (i - 6)) * means).tolist() + (-F32(10.0 ** (i - 6)) * means).tolist()
    assert len(data) == 256
    return np.array(sorted(data), F32)


def bnb_decode(packed, quant_map, absmax, shape):
    """Byte k holds element 2k in its HIGH nibble and 2k+1 in its low one; flat element i uses absmax[i // 64];
    value = quant_map[code] * absmax, in float32."""
    n = math.prod(shape)
    codes = np.stack([packed.reshape(-1) >> 4, packed.reshape(-1) & 0x0F], axis=-1).reshape(-1)[:n]
    return (quant_map[codes] * absmax[np.arange(n) // BNB_BLOCK]).reshape(shape)


def bnb_nested_absmax(codes, nested_absmax, nested_map, offset):
    """Double quantisation: absmax[b] = nested_map[codes[b]] * nested_absmax[b // 256] + float32(offset)."""
    b = np.arange(codes.size)
    return nested_map[codes] * nested_absmax[b // BNB_NESTED_BLOCK] + F32(offset)


def _bnb_parts(ck, prefix, quant_type, packed, quant_map, shape, absmax, nested=None):
    """Stores a Linear4bit weight as transformers serialises it: L.weight u8 [ceil(n/2), 1], L.weight.absmax
    (float32, or u8 codes when nested), L.weight.quant_map, then L.weight.nested_absmax and
    L.weight.nested_quant_map when nested = (nested_absmax, nested_map, offset), and the JSON quant state as u8.
    Returns the logical values."""
    w = prefix + ".weight"
    ck.add(w, packed.reshape(-1, 1))
    ck.add(w + ".absmax", absmax)
    ck.add(w + ".quant_map", quant_map)
    state = {"quant_type": quant_type, "blocksize": BNB_BLOCK, "dtype": "bfloat16", "shape": list(shape)}
    if nested is not None:
        nested_absmax, nested_map, offset = nested
        ck.add(w + ".nested_absmax", nested_absmax)
        ck.add(w + ".nested_quant_map", nested_map)
        state.update({"nested_blocksize": BNB_NESTED_BLOCK, "nested_dtype": "float32", "nested_offset": offset})
        absmax = bnb_nested_absmax(absmax, nested_absmax, nested_map, offset)
    ck.add(w + ".quant_state.bitsandbytes__" + quant_type, np.frombuffer(json.dumps(state).encode(), np.uint8))
    return bnb_decode(packed, quant_map, absmax, shape)


def _nearest_entry(x, table):
    """Index of the nearest table entry (the first of equals, as bitsandbytes' argmin)."""
    return np.argmin(np.abs(x.astype(np.float64)[:, None] - table.astype(np.float64)[None, :]), axis=1)


def _bnb_linear(ck, rng, prefix, shape, quant_type, nested):
    """Quantises [out, in] flattened in blocks of 64: absmax = max |w| of the block, code = nearest quant_map entry
    to w / absmax. Nested: offset = mean(absmax); absmax - offset quantised in blocks of 256 with the dynamic map.
    As in bitsandbytes, the 4-bit codes are chosen with the exact absmax; the stored one may differ."""
    w = _weights(rng, shape)
    flat, n = w.reshape(-1), w.size
    quant_map = NF4_MAP if quant_type == "nf4" else FP4_MAP
    padded = np.zeros(-(-n // BNB_BLOCK) * BNB_BLOCK, F32)
    padded[:n] = np.abs(flat)
    absmax = padded.reshape(-1, BNB_BLOCK).max(axis=1)
    per_elem = absmax[np.arange(n) // BNB_BLOCK]
    codes = _nearest_entry(flat / per_elem, quant_map)
    codes = np.append(codes, 0) if n % 2 else codes  # odd n: the last low nibble is padding
    packed = ((codes[0::2] << 4) | codes[1::2]).astype(np.uint8)
    if nested:
        offset = float(F32(absmax.astype(np.float64).mean()))  # a float32 value, written to the JSON
        centred = absmax - F32(offset)
        groups = np.zeros(-(-absmax.size // BNB_NESTED_BLOCK) * BNB_NESTED_BLOCK, F32)
        groups[:absmax.size] = np.abs(centred)
        nested_absmax = groups.reshape(-1, BNB_NESTED_BLOCK).max(axis=1)
        dyn = bnb_dynamic_map()
        b = np.arange(absmax.size)
        absmax_codes = _nearest_entry(centred / nested_absmax[b // BNB_NESTED_BLOCK], dyn).astype(np.uint8)
        ref = _bnb_parts(ck, prefix, quant_type, packed, quant_map, shape, absmax_codes,
                         (nested_absmax, dyn, offset))
        stored_absmax = bnb_nested_absmax(absmax_codes, nested_absmax, dyn, offset)
    else:
        ref = _bnb_parts(ck, prefix, quant_type, packed, quant_map, shape, absmax)
        stored_absmax = absmax
    # Half the widest gap between adjacent quant_map values times absmax, plus |quant_map value| (<= 1) times the
    # error of the stored absmax.
    half_gap = np.diff(np.sort(quant_map.astype(np.float64))).max() / 2
    exact = per_elem.astype(np.float64)
    stored = stored_absmax[np.arange(n) // BNB_BLOCK].astype(np.float64)
    bound = half_gap * exact + np.abs(stored - exact) + FLOAT32_SLACK * np.maximum(exact, stored)
    ck.add_quantised(prefix + ".weight", ref, w, bound.reshape(shape))


def _bnb_config(quant_type, nested):
    return {"quant_method": "bitsandbytes", "load_in_4bit": True, "load_in_8bit": False,
            "bnb_4bit_quant_type": quant_type, "bnb_4bit_use_double_quant": nested,
            "bnb_4bit_compute_dtype": "bfloat16"}


# Hand-made bnb weight [5, 13] (65 codes, one padding nibble): codes 0..15 repeated over the first 64-value block,
# then code 15 alone in a partial second block.
BNB_HAND_SHAPE = (5, 13)
BNB_HAND_BYTES = np.frombuffer(bytes.fromhex("0123456789abcdef" * 4 + "f0"), np.uint8)


def build_nf4():
    ck, rng = Checkpoint("llama", _bnb_config("nf4", False)), _rng("nf4")
    _bnb_linear(ck, rng, "model.layers.0.self_attn.q_proj", (99, 133), "nf4", False)
    _bnb_linear(ck, rng, "model.layers.0.self_attn.o_proj", (128, 256), "nf4", False)
    ck.add_hand_made(HAND + ".weight", _bnb_parts(ck, HAND, "nf4", BNB_HAND_BYTES, NF4_MAP, BNB_HAND_SHAPE,
                                                  np.array([1.0, 4.0], F32)))
    _add_norm_and_bias(ck, rng, "model.layers.0.self_attn.q_proj", 99, 133)
    return ck


def build_nf4_nested():
    """Double quantisation; q_proj has 500 absmax blocks, so two nested blocks (the second partial)."""
    ck, rng = Checkpoint("llama", _bnb_config("nf4", True)), _rng("nf4_nested")
    _bnb_linear(ck, rng, "model.layers.0.self_attn.q_proj", (160, 200), "nf4", True)
    _bnb_linear(ck, rng, "model.layers.0.self_attn.o_proj", (101, 129), "nf4", True)
    # A linear nested map (k - 128) / 128: codes 224 and 128 are 0.75 and 0; times 2.0, plus 0.5: absmax 2.0, 0.5.
    linear_map = ((np.arange(256) - 128) / 128).astype(F32)
    ck.add_hand_made(HAND + ".weight", _bnb_parts(ck, HAND, "nf4", BNB_HAND_BYTES, NF4_MAP, BNB_HAND_SHAPE,
                                                  np.array([224, 128], np.uint8),
                                                  (np.array([2.0], F32), linear_map, 0.5)))
    _add_norm_and_bias(ck, rng, "model.layers.0.self_attn.q_proj", 160, 200)
    return ck


def build_fp4():
    ck, rng = Checkpoint("llama", _bnb_config("fp4", False)), _rng("fp4")
    _bnb_linear(ck, rng, "model.layers.0.self_attn.q_proj", (99, 133), "fp4", False)
    _bnb_linear(ck, rng, "model.layers.0.self_attn.o_proj", (128, 192), "fp4", False)
    # codes 3, 11, 5, 8, 7 (+ a padding nibble): 1.0, -1.0, 0.5, +0.0, 0.25 times absmax 6.
    ck.add_hand_made(HAND + ".weight", _bnb_parts(ck, HAND, "fp4", np.array([0x3B, 0x58, 0x70], np.uint8),
                                                  FP4_MAP, (1, 5), np.array([6.0], F32)))
    _add_norm_and_bias(ck, rng, "model.layers.0.self_attn.q_proj", 99, 133)
    return ck


# ------------------------------------------------------------------------------------------------ GPTQ / AWQ

GROUP = 128
AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]  # AutoAWQ GEMM: nibble k of a word holds column 8w + AWQ_ORDER[k]


def _quantise_groups(w, bits, g_idx, groups, zero_at_least_1=False):
    """Asymmetric min/max quantisation of w [O, I] per (group, output column), the group of input i being
    g_idx[i]: range [lo, hi] = [min(min, 0), max(max, 0)] (GPTQ's Quantizer keeps 0 in range), scale =
    (hi - lo) / (2^b - 1) rounded to fp16, zero = round(-lo / scale), q = clamp(round(w / scale) + zero, 0, 2^b - 1).
    zero_at_least_1 (GPTQ v1, which stores zero - 1): lo is lowered to at most -hi / (2^b - 1) first, which makes
    -lo / scale >= (2^b - 1) / 2^b >= 3/4, so zero >= 1. Returns q [O, I], scales fp16 [G, O], zeros [G, O]."""
    maxq = (1 << bits) - 1
    q = np.zeros(w.shape, np.int64)
    scales = np.zeros((groups, w.shape[0]), np.float16)
    zeros = np.zeros((groups, w.shape[0]), np.int64)
    for g in range(groups):
        cols = np.nonzero(g_idx == g)[0]
        sub = w[:, cols].astype(np.float64)
        lo, hi = np.minimum(sub.min(axis=1), 0), np.maximum(sub.max(axis=1), 0)
        if zero_at_least_1:
            lo = np.minimum(lo, -hi / maxq)
        scales[g] = ((hi - lo) / maxq).astype(np.float16)
        s = scales[g].astype(np.float64)
        assert np.all(s > 0)
        zeros[g] = np.clip(np.round(-lo / s), 0, maxq)
        q[:, cols] = np.clip(np.round(sub / s[:, None]) + zeros[g][:, None], 0, maxq)
    return q, scales, zeros


def _group_bound(w, scales, g_idx, bits):
    """|w - scale * (q - zero)| <= scale * (1/2 + (2^b - 1) * 2^-11): half a step, plus what rounding the scale to
    fp16 (relative 2^-11) may push past the top code."""
    s = scales.astype(np.float64)[g_idx].T  # [O, I]
    return s * (0.5 + ((1 << bits) - 1) * 2.0**-11) + FLOAT32_SLACK * np.abs(w)


def gptq_decode(qweight, qzeros, scales, g_idx, bits, v1):
    """W[o, i] = float32(scales[g, o]) * float32(q[i, o] - zero[g, o]), g = g_idx[i]; q packed along the input
    (qweight [I / pack, O]), zeros along the output (qzeros [G, O / pack]); zero = stored + 1 in v1 (AutoGPTQ
    stores zero - 1), stored in v2. Integer subtraction, float32 multiply."""
    unpack = _unpack_stream if bits == 3 else _unpack_fields
    q = unpack(qweight.T, bits).T          # [I, O]
    zeros = unpack(qzeros, bits) + (1 if v1 else 0)  # [G, O]
    diff = (q - zeros[g_idx]).astype(F32)
    return np.ascontiguousarray((scales.astype(F32)[g_idx] * diff).T)


def _gptq_parts(ck, prefix, bits, v1, qweight, qzeros, scales, g_idx):
    """Stores L.qweight, L.qzeros, L.scales, L.g_idx; returns the logical L.weight [O, I]."""
    ck.add(prefix + ".qweight", qweight)
    ck.add(prefix + ".qzeros", qzeros)
    ck.add(prefix + ".scales", scales)
    ck.add(prefix + ".g_idx", g_idx.astype(np.int32))
    return gptq_decode(qweight, qzeros, scales, g_idx, bits, v1)


def _gptq_linear(ck, rng, prefix, out_features, in_features, bits, v1, act_order=False):
    """Quantises an [O, I] weight. g_idx[i] = i // 128, or with act_order (desc_act) rank[i] // 128 where rank is
    input i's position in a random processing order (GPTQ's descending Hessian diagonal)."""
    w = _weights(rng, (out_features, in_features))
    groups = -(-in_features // GROUP)
    rank = np.argsort(rng.permutation(in_features)) if act_order else np.arange(in_features)
    g_idx = rank // GROUP
    q, scales, zeros = _quantise_groups(w, bits, g_idx, groups, zero_at_least_1=v1)
    stored_zeros = zeros - 1 if v1 else zeros
    assert np.all(stored_zeros >= 0)
    pack = _pack_stream if bits == 3 else _pack_fields
    ref = _gptq_parts(ck, prefix, bits, v1, pack(q, bits).T, pack(stored_zeros, bits), scales, g_idx)
    ck.add_quantised(prefix + ".weight", ref, w, _group_bound(w, scales, g_idx, bits))


def _gptq_config(bits, checkpoint_format="gptq", desc_act=False):
    return {"quant_method": "gptq", "bits": bits, "group_size": GROUP, "desc_act": desc_act, "sym": False,
            "checkpoint_format": checkpoint_format}


def _words(values):
    """Literal 32-bit words (written as unsigned hex) -> int32 array."""
    return np.array(values, np.uint32).view(np.int32)


def build_gptq():
    """v1, 4 bits, group 128, g_idx = i // 128; q_proj's last group is partial (320 inputs)."""
    ck, rng = Checkpoint("llama", _gptq_config(4)), _rng("gptq")
    _gptq_linear(ck, rng, "model.layers.0.self_attn.q_proj", 192, 320, 4, v1=True)
    _gptq_linear(ck, rng, "model.layers.0.self_attn.o_proj", 96, 256, 4, v1=True)
    # Column words: q = i, 8 + i, 0, 15, 7 - i, 8, 8, 8 for inputs i = 0..7. Stored zeros of columns 0..7 (nibble
    # k = column k): 8, 7, 0, 14, 3, 7, 6, 1.
    qweight = _words([[0x76543210, 0xFEDCBA98, 0x00000000, 0xFFFFFFFF, 0x01234567] + [0x88888888] * 3])
    scales = np.array([[0.5, 0.25, 1.0, 2.0, 0.125, 1.5, 3.0, 0.0625]], np.float16)
    ck.add_hand_made(HAND + ".weight", _gptq_parts(ck, HAND, 4, True, qweight, _words([[0x1673E078]]), scales,
                                                   np.zeros(8, np.int32)))
    # A stored zero of 15 in the top nibble, what AutoGPTQ writes for a zero of 0 there: the v1 rule (stored + 1)
    # gives 16 (AutoGPTQ's qlinear_cuda_old forward; its later unpack helpers mask to 0 instead).
    wrap = "model.hand_wrap.proj"
    ck.add_hand_made(wrap + ".weight", _gptq_parts(ck, wrap, 4, True, _words([[0x76543210] * 8]),
                                                   _words([[0xF7777777]]), np.ones((1, 8), np.float16),
                                                   np.zeros(8, np.int32)))
    _add_norm_and_bias(ck, rng, "model.layers.0.self_attn.q_proj", 192, 320, np.float16)
    return ck


def build_gptq_actorder():
    """desc_act: g_idx is not monotonic; 296 inputs, so the last group has 40."""
    ck, rng = Checkpoint("llama", _gptq_config(4, desc_act=True)), _rng("gptq_actorder")
    _gptq_linear(ck, rng, "model.layers.0.self_attn.q_proj", 128, 296, 4, v1=True, act_order=True)
    # 256 inputs, q = i % 8; the first 128 inputs in group 1 (stored zero 3, scale 0.5), the rest in group 0
    # (stored zero 7, scale 1).
    g_idx = np.array([1] * 128 + [0] * 128, np.int32)
    scales = np.array([[1.0] * 8, [0.5] * 8], np.float16)
    ck.add_hand_made(HAND + ".weight", _gptq_parts(ck, HAND, 4, True, _words([[0x76543210] * 8] * 32),
                                                   _words([[0x77777777], [0x33333333]]), scales, g_idx))
    _add_norm_and_bias(ck, rng, "model.layers.0.self_attn.q_proj", 128, 296, np.float16)
    return ck


def build_gptq_v2():
    """GPTQModel's v2 format: zeros stored as they are; 264 inputs, so the last group has 8."""
    ck, rng = Checkpoint("llama", _gptq_config(4, "gptq_v2")), _rng("gptq_v2")
    _gptq_linear(ck, rng, "model.layers.0.self_attn.q_proj", 160, 264, 4, v1=False)
    # q = i (column 0), 8 + i (columns 1..7); stored zeros 8, 0 x 6, 15.
    qweight = _words([[0x76543210] + [0xFEDCBA98] * 7])
    ck.add_hand_made(HAND + ".weight", _gptq_parts(ck, HAND, 4, False, qweight, _words([[0xF0000008]]),
                                                   np.full((1, 8), 0.5, np.float16), np.zeros(8, np.int32)))
    _add_norm_and_bias(ck, rng, "model.layers.0.self_attn.q_proj", 160, 264, np.float16)
    return ck


def build_gptq_8bit():
    """8 bits: four inputs per word; 200 inputs, so the last group has 72."""
    ck, rng = Checkpoint("llama", _gptq_config(8)), _rng("gptq_8bit")
    _gptq_linear(ck, rng, "model.layers.0.self_attn.q_proj", 96, 200, 8, v1=True)
    # q = 0, 1, 2, 3, 255, 1, 127, 128 in every column; stored zeros 127.
    qweight = _words([[0x03020100] * 8, [0x807F01FF] * 8])
    ck.add_hand_made(HAND + ".weight", _gptq_parts(ck, HAND, 8, True, qweight, _words([[0x7F7F7F7F] * 2]),
                                                   np.full((1, 8), 0.5, np.float16), np.zeros(8, np.int32)))
    _add_norm_and_bias(ck, rng, "model.layers.0.self_attn.q_proj", 96, 200, np.float16)
    return ck


def build_gptq_2bit():
    """2 bits: sixteen inputs per word; 272 inputs, so the last group has 16."""
    ck, rng = Checkpoint("llama", _gptq_config(2)), _rng("gptq_2bit")
    _gptq_linear(ck, rng, "model.layers.0.self_attn.q_proj", 128, 272, 2, v1=True)
    # q = i % 4 in every column (0xE4 = 0b11_10_01_00); stored zeros 1; scale 1, column 15: 0.25.
    scales = np.array([[1.0] * 15 + [0.25]], np.float16)
    ck.add_hand_made(HAND + ".weight", _gptq_parts(ck, HAND, 2, True, _words([[0xE4E4E4E4] * 16]),
                                                   _words([[0x55555555]]), scales, np.zeros(16, np.int32)))
    _add_norm_and_bias(ck, rng, "model.layers.0.self_attn.q_proj", 128, 272, np.float16)
    return ck


def build_gptq_3bit():
    """3 bits: 32 inputs in 3 words, codes crossing word boundaries (AutoGPTQ's pack); 256 inputs, 96 outputs."""
    ck, rng = Checkpoint("llama", _gptq_config(3)), _rng("gptq_3bit")
    _gptq_linear(ck, rng, "model.layers.0.self_attn.q_proj", 96, 256, 3, v1=True)
    # q = i % 8 down every column: the 24-bit run 0..7 = 0xFAC688 four times in 96 bits gives the words
    # 0x88FAC688, 0xC688FAC6, 0xFAC688FA; stored zeros 3 (zero 4): 0b011 x 32 = 0xDB6DB6DB, 0xB6DB6DB6,
    # 0x6DB6DB6D; scale 1, output 31: 0.5. So W[o, i] = scale[o] * (i % 8 - 4).
    scales = np.array([[1.0] * 31 + [0.5]], np.float16)
    qweight = _words([[0x88FAC688] * 32, [0xC688FAC6] * 32, [0xFAC688FA] * 32])
    ck.add_hand_made(HAND + ".weight", _gptq_parts(ck, HAND, 3, True, qweight, _words([[0xDB6DB6DB, 0xB6DB6DB6, 0x6DB6DB6D]]),
                                                   scales, np.zeros(32, np.int32)))
    _add_norm_and_bias(ck, rng, "model.layers.0.self_attn.q_proj", 96, 256, np.float16)
    return ck


def awq_decode(qweight, qzeros, scales):
    """AutoAWQ GEMM: qweight [I, O / 8], qzeros [I / 128, O / 8] (AWQ_ORDER nibbles), scales fp16 [I / 128, O];
    W[o, i] = float32(scales[i // 128, o]) * float32(q[i, o] - z[i // 128, o])."""
    q = _unpack_fields(qweight, 4, AWQ_ORDER)
    g = np.arange(q.shape[0]) // GROUP
    diff = (q - _unpack_fields(qzeros, 4, AWQ_ORDER)[g]).astype(F32)
    return np.ascontiguousarray((scales.astype(F32)[g] * diff).T)


def _awq_parts(ck, prefix, qweight, qzeros, scales):
    ck.add(prefix + ".qweight", qweight)
    ck.add(prefix + ".qzeros", qzeros)
    ck.add(prefix + ".scales", scales)
    return awq_decode(qweight, qzeros, scales)


def _awq_linear(ck, rng, prefix, out_features, in_features):
    """Quantised as GPTQ (groups of 128 consecutive inputs, which AWQ requires to be whole); zeros stored as-is."""
    w = _weights(rng, (out_features, in_features))
    g_idx = np.arange(in_features) // GROUP
    q, scales, zeros = _quantise_groups(w, 4, g_idx, in_features // GROUP)
    ref = _awq_parts(ck, prefix, _pack_fields(q.T, 4, AWQ_ORDER), _pack_fields(zeros, 4, AWQ_ORDER), scales)
    ck.add_quantised(prefix + ".weight", ref, w, _group_bound(w, scales, g_idx, 4))


def build_awq():
    config = {"quant_method": "awq", "bits": 4, "group_size": GROUP, "zero_point": True, "version": "gemm"}
    ck, rng = Checkpoint("llama", config), _rng("awq")
    _awq_linear(ck, rng, "model.layers.0.self_attn.q_proj", 200, 384)
    _awq_linear(ck, rng, "model.layers.0.self_attn.o_proj", 96, 256)
    # Even inputs: nibbles 0..7 (columns 0, 2, 4, 6, 1, 3, 5, 7 get q = 0..7); odd inputs: nibbles 8..15. Zeros 8;
    # scale 2 on column 3 and 0.5 on column 7, else 1.
    scales = np.array([[1.0, 1.0, 1.0, 2.0, 1.0, 1.0, 1.0, 0.5]], np.float16)
    ck.add_hand_made(HAND + ".weight", _awq_parts(ck, HAND, _words([[0x76543210], [0xFEDCBA98]] * 64),
                                                  _words([[0x88888888]]), scales))
    _add_norm_and_bias(ck, rng, "model.layers.0.self_attn.q_proj", 200, 384, np.float16)
    return ck


# ------------------------------------------------------------------------------------------------ writing

SCHEMES = {"fp8_tensor": build_fp8_tensor, "fp8_channel": build_fp8_channel, "fp8_block": build_fp8_block,
           "fp8_e5m2": build_fp8_e5m2, "mxfp4": build_mxfp4, "nf4": build_nf4, "nf4_nested": build_nf4_nested,
           "fp4": build_fp4, "gptq": build_gptq, "gptq_actorder": build_gptq_actorder, "gptq_v2": build_gptq_v2,
           "gptq_8bit": build_gptq_8bit, "gptq_2bit": build_gptq_2bit, "gptq_3bit": build_gptq_3bit, "awq": build_awq}


def read_header(path):
    """A safetensors file's header: {name: {"dtype", "shape", "data_offsets"}} (no __metadata__), after checking
    that the offsets tile the data section exactly."""
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
        data_size = os.fstat(f.fileno()).st_size - 8 - length
    header.pop("__metadata__", None)
    end = 0
    for entry in sorted(header.values(), key=lambda e: e["data_offsets"]):
        assert entry["data_offsets"][0] == end, path
        end = entry["data_offsets"][1]
    assert end == data_size, path
    return header


def write_checkpoint(directory, ck):
    """Writes model.safetensors, config.json and expected.npz into `directory` (created if needed)."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "model.safetensors")
    write_safetensors(path, ck.tensors, {"format": "pt"})
    header = read_header(path)
    assert list(header) == [name for name, _ in ck.tensors], path
    for name, value in ck.tensors:
        arr = value[1] if isinstance(value, tuple) else value
        assert header[name]["shape"] == list(arr.shape), name
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump({"model_type": ck.model_type, "quantization_config": ck.quantization_config}, f, indent=2)
    arrays = {"plain_names": np.array(ck.plain)}
    for name, lg in ck.logical.items():
        arrays[name + "/ref"] = lg.ref
        if lg.orig is not None:
            arrays[name + "/orig"], arrays[name + "/bound"] = lg.orig, lg.bound
    np.savez(os.path.join(directory, "expected.npz"), **arrays)


def write_all(out_dir):
    for scheme, build in SCHEMES.items():
        write_checkpoint(os.path.join(out_dir, scheme), build())


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: packed_write.py OUTDIR   (writes OUTDIR/<scheme>/ for: %s)" % ", ".join(SCHEMES))
    write_all(sys.argv[1])
