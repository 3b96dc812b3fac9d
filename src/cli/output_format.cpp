#include "cli/output_format.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include "tensormorph/error.h"

namespace tmorph::cli {

namespace {

struct OutputExtension {
  const char* text;
  OutputFormat format;
};
constexpr OutputExtension kOutputExtensions[] = {{".npy", OutputFormat::npy}, {".png", OutputFormat::png}, {".tif", OutputFormat::tiff},
                                     {".tiff", OutputFormat::tiff}};

std::string lowercase_extension_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const size_t dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return "";
  std::string ext = path.substr(dot);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext;
}

std::string formats_listed(const std::vector<OutputFormat>& writes) {
  std::string out;
  for (size_t i = 0; i < writes.size(); ++i) {
    const auto e = std::find_if(std::begin(kOutputExtensions), std::end(kOutputExtensions), [&](const OutputExtension& x) { return x.format == writes[i]; });
    out += (i == 0 ? "" : i + 1 == writes.size() ? " or " : ", ") + std::string(e->text);
  }
  return out;
}

}  // namespace

OutputFormat output_format(const std::string& path, const std::vector<OutputFormat>& writes) {
  const std::string ext = lowercase_extension_of(path);
  for (const auto& e : kOutputExtensions)
    if (ext == e.text && std::find(writes.begin(), writes.end(), e.format) != writes.end()) return e.format;
  throw Error(ErrorKind::InvalidArgument, path + ": cannot write " + (ext.empty() ? "a file without an extension" : "a '" + ext + "' file") +
                                              " here (the format follows the extension: this command writes " + formats_listed(writes) + ")");
}

void require_output_format(CLI::Option* out, std::vector<OutputFormat> writes) {
  out->check([writes = std::move(writes)](const std::string& path) {
    try {
      output_format(path, writes);
      return std::string();
    } catch (const Error& e) {
      return std::string(e.what());
    }
  });
}

}  // namespace tmorph::cli
