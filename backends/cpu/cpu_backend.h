// The CPU backend: Tier-1, linked statically, registered through the same tm_backend_v1 table as
// every plugin (core calls cpu_backend_table() where it would call a plugin's entry point).
#pragma once

#include "tensormorph/plugin_abi.h"

namespace tmorph::cpu {

const tm_backend_v1* cpu_backend_table();

}  // namespace tmorph::cpu
