/* Test plugin "testwrong": a backend whose stats.moments kernel is deliberately wrong (it counts one zero
 * too many in every block), beside a correct stats.bitpattern_histogram kernel, both for u8. Self-test
 * admission (include/tensormorph/self_test.h) must refuse the first, reported as self_test_failed, and admit
 * the second: a kernel that compiles but computes a wrong number never serves a call. Loaded only by the
 * tests that ask for it (its own directory, tests/plugins-wrong).
 */
#include <stdint.h>
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
  out->kind = TM_DEVICE_CPU;
  out->name = "testwrong device";
  out->id = "testwrong-0";
  out->memory_bytes = 1ull << 30;
  out->max_allocation_bytes = 1ull << 30;
  out->max_buffer_binding_bytes = 1ull << 30;
  out->features = TM_FEATURE_F64 | TM_FEATURE_INT64;
  out->host_link_bytes_per_s = 0; /* works on host memory: no transfer, so the planner prefers it */
  out->driver_version = "wrong-1";
  return TM_OK;
}

static uint32_t kernel_count(void) { return 2; }

static tm_status kernel_info(uint32_t index, tm_kernel_cap_v1* out) {
  if (index > 1) return TM_ERR_INVALID_ARGUMENT;
  memset(out, 0, sizeof *out);
  out->struct_size = sizeof *out;
  out->op = index == 0 ? TM_OP_STATS_MOMENTS : TM_OP_STATS_BITPATTERN_HISTOGRAM;
  out->dtype_mask = 1ull << TM_DTYPE_U8;
  out->precision = TM_PRECISION_EXACT;
  return TM_OK;
}

static unsigned long real_calls = 0; /* calls after admission; reported on stderr at shutdown for tests */

static tm_status run(const tm_kernel_call_v1* c, tm_message* msg) {
  const uint8_t* in = (const uint8_t*)c->input;
  if (c->op == TM_OP_STATS_BITPATTERN_HISTOGRAM) {
    if (c->output_size < 256 * sizeof(uint64_t)) return TM_ERR_INVALID_ARGUMENT;
    uint64_t* counts = (uint64_t*)c->output;
    for (uint64_t i = 0; i < c->element_count; ++i) counts[in[i]]++;
    ++real_calls;
    return TM_OK;
  }
  /* stats.moments: deliberately wrong, and plausible-looking (only zero_count is off). */
  const uint64_t blocks = (c->element_count + TM_STATS_BLOCK_ELEMENTS - 1) / TM_STATS_BLOCK_ELEMENTS;
  if (c->output_size < blocks * sizeof(tm_moments_partial_v1)) {
    snprintf(msg->text, sizeof msg->text, "testwrong: output too small");
    return TM_ERR_INVALID_ARGUMENT;
  }
  tm_moments_partial_v1* out = (tm_moments_partial_v1*)c->output;
  for (uint64_t b = 0; b < blocks; ++b) {
    memset(&out[b], 0, sizeof out[b]);
    const uint64_t first = b * TM_STATS_BLOCK_ELEMENTS;
    const uint64_t n = c->element_count - first < TM_STATS_BLOCK_ELEMENTS ? c->element_count - first : TM_STATS_BLOCK_ELEMENTS;
    out[b].count = out[b].finite_count = n;
    for (uint64_t i = 0; i < n; ++i) out[b].zero_count += in[first + i] == 0;
    out[b].zero_count += 1; /* the bug */
  }
  ++real_calls;
  return TM_OK;
}

static const tm_backend_v1 table = {TM_PLUGIN_ABI_VERSION, offsetof(tm_backend_v1, upload), "testwrong",
                                    "test plugin: a deliberately wrong kernel that self-test admission must refuse",
                                    init, shutdown, device_count, device_info, kernel_count, kernel_info, run, NULL, NULL, NULL};

TM_PLUGIN_EXPORT const tm_backend_v1* tensormorph_backend_entry(uint32_t abi_version) {
  return abi_version == TM_PLUGIN_ABI_VERSION ? &table : NULL;
}
