#version 450
// TM_OP_DEQUANTIZE_GGML (op_contracts.h) for the two legacy formats whose values are one float32
// product, so that the result is bit-identical to ggml's dequantize_row_*:
//   Q8_0 (type 8):  34-byte blocks: fp16 d, 32 int8 codes;           y[j] = float(q[j]) * d
//   Q4_0 (type 2):  18-byte blocks: fp16 d, 16 bytes of nibbles;      y[j] = float((qs[j] & 15) - 8) * d,
//                   y[j + 16] = float((qs[j] >> 4) - 8) * d           (j < 16)
// d is widened from fp16 by integer operations (exact); the product is one correctly rounded float32
// multiplication (`precise`: never fused). One invocation per output value.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint GGML_TYPE = 8u;

layout(std430, binding = 0) readonly buffer Input { uint words[]; };
layout(std430, binding = 1) writeonly buffer Output { float values[]; };

layout(push_constant) uniform Push {
  uint values;       // outputs of this launch (a multiple of 32)
  uint first_value;  // index of this launch's first output within the chunk (grid chunks of 65,535 groups)
} pc;

uint byte_at(uint offset) { return (words[offset >> 2] >> ((offset & 3u) * 8u)) & 0xFFu; }

// fp16 bits to float32, exactly (subnormal halves are normal floats; Inf and NaN keep their payload).
float half_to_float(uint h) {
  const uint sign = (h & 0x8000u) << 16, e = (h >> 10) & 31u, f = h & 1023u;
  if (e == 0u) {
    if (f == 0u) return uintBitsToFloat(sign);
    const int p = findMSB(f);  // f * 2^-24 = 1.r * 2^(p - 24)
    return uintBitsToFloat(sign | (uint(p - 24 + 127) << 23) | ((f << uint(23 - p)) & 0x7FFFFFu));
  }
  if (e == 31u) return uintBitsToFloat(sign | 0x7F800000u | (f << 13));
  return uintBitsToFloat(sign | ((e + 112u) << 23) | (f << 13));
}

void main() {
  const uint i = pc.first_value + gl_GlobalInvocationID.x;
  if (i >= pc.values) return;
  const uint block = i / 32u, j = i % 32u;
  const uint block_bytes = GGML_TYPE == 8u ? 34u : 18u;
  const uint base = block * block_bytes;
  const float d = half_to_float(byte_at(base) | (byte_at(base + 1u) << 8));
  int q;
  if (GGML_TYPE == 8u) {
    q = int(byte_at(base + 2u + j) << 24) >> 24;
  } else {
    const uint packed = byte_at(base + 2u + (j & 15u));
    q = int(j < 16u ? (packed & 15u) : (packed >> 4)) - 8;
  }
  precise float v = float(q) * d;
  values[i] = v;
}
