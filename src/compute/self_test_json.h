// The one JSON shape of a kernel self-test verdict (self_test.h), used by the verdict cache file and by
// every report (`backends --json`, GET /api/compute): backend, device, driver_version, op, input, status,
// detail, seconds, cached.
#pragma once

#include <nlohmann/json.hpp>

#include "tensormorph/self_test.h"

namespace tmorph {

nlohmann::json self_test_verdict_json(const SelfTestVerdict& v);
// The verdict a document of that shape holds; throws nlohmann::json's exceptions on a missing or mistyped field.
SelfTestVerdict self_test_verdict_from_json(const nlohmann::json& j);

}  // namespace tmorph
