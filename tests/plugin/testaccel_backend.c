/* Test plugin "testaccel": proves that a backend built outside core, in plain C, is discovered from the
 * plugin directory, placed by the planner and reported, with no change to core code.
 *
 * It models a discrete device: its data must cross a host link (8 GB/s declared), so the planner
 * charges a transfer for host-resident tensors. It computes on the host, honestly, and offers two
 * kernels: stats.moments for u8, implementing the block contract of op_contracts.h so that its
 * partials are bit-identical to the CPU reference (the parity test checks that), and dequantize.ggml
 * for Q8_0 alone, so that a request over several block formats shows one op placed here and the
 * others falling back to the CPU with the reason reported.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "tensormorph/op_contracts.h"
#include "tensormorph/plugin_abi.h"

static tm_status init(tm_unavailable_reason* reason, tm_message* msg) {
  (void)msg;
  *reason = TM_AVAILABLE;
  return TM_OK;
}
static void shutdown(void) {}
static uint32_t device_count(void) { return 1; }

static tm_status device_info(uint32_t index, tm_device_info_v1* out) {
  if (index != 0) return TM_ERR_INVALID_ARGUMENT;
  memset(out, 0, sizeof *out);
  out->struct_size = sizeof *out;
  out->kind = TM_DEVICE_GPU;
  out->name = "testaccel simulated device";
  out->id = "testaccel-0";
  out->memory_bytes = 1ull << 30;
  out->max_allocation_bytes = 256ull << 20;
  out->max_buffer_binding_bytes = 128ull << 20;
  out->features = TM_FEATURE_F64;
  out->host_link_bytes_per_s = 8e9;
  return TM_OK;
}

enum { kQ8_0 = 8 }; /* ggml type id */

static uint32_t kernel_count(void) { return 2; }

static tm_status kernel_info(uint32_t index, tm_kernel_cap_v1* out) {
  if (index > 1) return TM_ERR_INVALID_ARGUMENT;
  memset(out, 0, sizeof *out);
  out->struct_size = sizeof *out;
  out->precision = TM_PRECISION_EXACT;
  if (index == 1) {
    out->op = TM_OP_DEQUANTIZE_GGML;
    out->dtype_mask = 1ull << kQ8_0;
    return TM_OK;
  }
  out->op = TM_OP_STATS_MOMENTS;
  out->dtype_mask = 1ull << TM_DTYPE_U8;
  out->max_elements = 1ull << 32; /* a size limit, so the planner's too_large path has a real case */
  return TM_OK;
}

/* IEEE binary16 to float, exactly, NaN payloads kept (as the CPU backend widens them). */
static float half_to_float(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exponent = (h >> 10) & 31u, fraction = h & 1023u;
  uint32_t bits;
  if (exponent == 0) {  /* zero or subnormal: fraction * 2^-24 is exact */
    const float magnitude = (float)fraction * 0x1p-24f;
    memcpy(&bits, &magnitude, 4);
    bits |= sign;
  } else {
    bits = sign | (exponent == 31 ? 0x7f800000u : (exponent + 112u) << 23) | fraction << 13;
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

/* Q8_0: blocks of a half scale d and 32 int8 codes; value = q * d in float, as ggml computes it. */
static tm_status dequantize_q8_0(const tm_kernel_call_v1* c, tm_message* msg) {
  const tm_dequantize_ggml_params_v1* p = (const tm_dequantize_ggml_params_v1*)c->params;
  if (!p || c->params_size < sizeof *p || p->ggml_type != kQ8_0 || c->element_count % 32 ||
      c->output_size < c->element_count * sizeof(float)) {
    snprintf(msg->text, sizeof msg->text, "testaccel: dequantize.ggml takes whole Q8_0 blocks");
    return TM_ERR_INVALID_ARGUMENT;
  }
  const uint8_t* in = (const uint8_t*)c->input;
  float* out = (float*)c->output;
  for (uint64_t b = 0; b < c->element_count / 32; ++b, in += 34) {
    uint16_t h;
    memcpy(&h, in, 2);
    const float d = half_to_float(h);
    for (int i = 0; i < 32; ++i) out[b * 32 + i] = (float)(int8_t)in[2 + i] * d;
  }
  return TM_OK;
}

static void block_u8(const uint8_t* p, uint64_t n, tm_moments_partial_v1* out) {
  uint64_t sum = 0, zeros = 0;
  uint8_t lo = 255, hi = 0;
  for (uint64_t i = 0; i < n; ++i) {
    sum += p[i];
    zeros += p[i] == 0;
    if (p[i] < lo) lo = p[i];
    if (p[i] > hi) hi = p[i];
  }
  const double mean = n ? (double)sum / (double)n : 0.0; /* the sum is exact in double (< 2^53) */
  double lanes[TM_STATS_LANES] = {0};
  for (uint64_t i = 0; i < n; ++i) {
    const double d = (double)p[i] - mean;
    lanes[i % TM_STATS_LANES] += d * d;
  }
  for (unsigned width = TM_STATS_LANES; width > 1; width /= 2)
    for (unsigned i = 0; i < width / 2; ++i) lanes[i] = lanes[2 * i] + lanes[2 * i + 1];
  memset(out, 0, sizeof *out);
  out->count = out->finite_count = n;
  out->zero_count = zeros;
  out->min = n ? lo : INFINITY;
  out->max = n ? hi : -INFINITY;
  out->abs_max = n ? hi : 0;
  out->sum = (double)sum;
  out->mean = mean;
  out->m2 = lanes[0];
  out->int_min = INT64_MAX;
  out->int_max = INT64_MIN;
  out->uint_min = n ? lo : UINT64_MAX;
  out->uint_max = hi;
  out->int_sum_lo = sum;
  out->int_sum_hi = 0;
}

/* Residency: the "device memory" of this simulated device is a heap copy. */
struct resident {
  uint64_t bytes;
  uint8_t* data;
};
static unsigned long resident_reads = 0; /* calls served from a resident copy (reported on stderr) */

static tm_status upload(uint32_t device, const void* data, uint64_t bytes, uint64_t* buffer, tm_message* msg) {
  struct resident* r = device == 0 ? malloc(sizeof *r) : NULL;
  if (r) r->data = malloc(bytes ? bytes : 1);
  if (!r || !r->data) {
    free(r);
    snprintf(msg->text, sizeof msg->text, "testaccel: cannot keep %llu bytes", (unsigned long long)bytes);
    return TM_ERR_OUT_OF_MEMORY;
  }
  memcpy(r->data, data, bytes);
  r->bytes = bytes;
  *buffer = (uint64_t)(uintptr_t)r;
  return TM_OK;
}

static void release(uint64_t buffer) {
  struct resident* r = (struct resident*)(uintptr_t)buffer;
  if (!r) return;
  free(r->data);
  free(r);
  if (getenv("TESTACCEL_REPORT_RESIDENT_READS")) fprintf(stderr, "testaccel: resident reads %lu\n", resident_reads);
}

static tm_status run(const tm_kernel_call_v1* c, tm_message* msg) {
  if (c->op == TM_OP_DEQUANTIZE_GGML && c->kernel_index == 1) return dequantize_q8_0(c, msg);
  if (c->op != TM_OP_STATS_MOMENTS || c->dtype != TM_DTYPE_U8) {
    snprintf(msg->text, sizeof msg->text, "testaccel: only stats.moments on u8 and dequantize.ggml on Q8_0");
    return TM_ERR_UNSUPPORTED;
  }
  const uint64_t blocks = (c->element_count + TM_STATS_BLOCK_ELEMENTS - 1) / TM_STATS_BLOCK_ELEMENTS;
  if (c->output_size < blocks * sizeof(tm_moments_partial_v1)) {
    snprintf(msg->text, sizeof msg->text, "testaccel: output too small");
    return TM_ERR_INVALID_ARGUMENT;
  }
  tm_moments_partial_v1* out = (tm_moments_partial_v1*)c->output;
  const uint8_t* in = (const uint8_t*)c->input;
  /* A resident copy (upload below) is read instead of the host data when the call names one. */
  if (c->struct_size >= offsetof(tm_kernel_call_v1, input_offset) + sizeof c->input_offset && c->input_buffer) {
    const struct resident* r = (const struct resident*)(uintptr_t)c->input_buffer;
    if (c->input_offset > r->bytes || c->element_count > r->bytes - c->input_offset) {
      snprintf(msg->text, sizeof msg->text, "testaccel: the call reads past its resident buffer");
      return TM_ERR_INVALID_ARGUMENT;
    }
    in = r->data + c->input_offset;
    ++resident_reads;
  }
  for (uint64_t b = 0; b < blocks; ++b) {
    const uint64_t first = b * TM_STATS_BLOCK_ELEMENTS;
    const uint64_t left = c->element_count - first;
    block_u8(in + first, left < TM_STATS_BLOCK_ELEMENTS ? left : TM_STATS_BLOCK_ELEMENTS, &out[b]);
  }
  return TM_OK;
}

static const tm_backend_v1 kTable = {
    TM_PLUGIN_ABI_VERSION, sizeof(tm_backend_v1), "testaccel",
    "test plugin: a simulated discrete device with two kernels (stats.moments on u8, dequantize.ggml on Q8_0)",
    init, shutdown, device_count, device_info, kernel_count, kernel_info, run, upload, release, NULL};

TM_PLUGIN_EXPORT const tm_backend_v1* tensormorph_backend_entry(uint32_t abi_version) {
  return abi_version == TM_PLUGIN_ABI_VERSION ? &kTable : NULL;
}
