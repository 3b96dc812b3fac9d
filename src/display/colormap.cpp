#include "display/colormap.h"

#include <string>

#include "tensormorph/error.h"

namespace tmorph {
namespace colormap_data {
// Defined in colormap_tables.cpp (generated).
extern const uint8_t gray[256][4], viridis[256][4], plasma[256][4], inferno[256][4], magma[256][4],
    cividis[256][4], turbo[256][4], RdBu_r[256][4], seismic[256][4], coolwarm[256][4], twilight[256][4];
}  // namespace colormap_data

namespace {

namespace d = colormap_data;
const Colormap kColormaps[] = {
    {"gray", d::gray, false, false},         {"viridis", d::viridis, false, false},
    {"plasma", d::plasma, false, false},     {"inferno", d::inferno, false, false},
    {"magma", d::magma, false, false},       {"cividis", d::cividis, false, false},
    {"turbo", d::turbo, false, false},       {"RdBu_r", d::RdBu_r, true, false},
    {"seismic", d::seismic, true, false},    {"coolwarm", d::coolwarm, true, false},
    {"twilight", d::twilight, false, true},
};

}  // namespace

const Colormap& colormap(std::string_view name) {
  for (const Colormap& c : kColormaps)
    if (c.name == name) return c;
  std::string known;
  for (const Colormap& c : kColormaps) known += (known.empty() ? "" : ", ") + std::string(c.name);
  throw Error(ErrorKind::InvalidArgument, "unknown colour map '" + std::string(name) + "' (known: " + known + ")");
}

std::vector<std::string_view> colormap_names() {
  std::vector<std::string_view> names;
  for (const Colormap& c : kColormaps) names.push_back(c.name);
  return names;
}

}  // namespace tmorph
