/* Test plugin "testfuture": built for an ABI core does not speak. Its entry point refuses version 1,
 * so core must report it as incompatible_abi and carry on. */
#include <stddef.h>

#include "tensormorph/plugin_abi.h"

TM_PLUGIN_EXPORT const tm_backend_v1* tensormorph_backend_entry(uint32_t abi_version) {
  (void)abi_version;
  return NULL;  /* speaks only a future ABI */
}
