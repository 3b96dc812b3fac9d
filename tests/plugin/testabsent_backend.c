/* Test plugin "testabsent": a backend whose driver is missing. It loads, but init reports
 * TM_REASON_NO_DRIVER, as a GPU backend does on a machine without the driver. Tests use it to check
 * that `backends` shows the reason and that a strict --backend request fails with it. */
#include <stdio.h>

#include "tensormorph/plugin_abi.h"

static tm_status init(tm_unavailable_reason* reason, tm_message* msg) {
  *reason = TM_REASON_NO_DRIVER;
  snprintf(msg->text, sizeof msg->text, "simulated: the device driver library is not installed");
  return TM_OK;
}
static void shutdown(void) {}
static uint32_t zero(void) { return 0; }
static tm_status no_device(uint32_t i, tm_device_info_v1* o) { (void)i, (void)o; return TM_ERR_INVALID_ARGUMENT; }
static tm_status no_kernel(uint32_t i, tm_kernel_cap_v1* o) { (void)i, (void)o; return TM_ERR_INVALID_ARGUMENT; }
static tm_status run(const tm_kernel_call_v1* c, tm_message* m) { (void)c, (void)m; return TM_ERR_UNSUPPORTED; }

static const tm_backend_v1 kTable = {TM_PLUGIN_ABI_VERSION, sizeof(tm_backend_v1), "testabsent",
                                     "test plugin: a backend whose driver is missing",
                                     init, shutdown, zero, no_device, zero, no_kernel, run, NULL, NULL, NULL};

TM_PLUGIN_EXPORT const tm_backend_v1* tensormorph_backend_entry(uint32_t abi_version) {
  return abi_version == TM_PLUGIN_ABI_VERSION ? &kTable : NULL;
}
