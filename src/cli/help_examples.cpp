#include "cli/help_examples.h"

#include <map>
#include <string>

namespace tmorph::cli {

namespace {

// Subcommand path (names joined by spaces) -> one command line. Paths are the demo's defaults.
const std::map<std::string, std::string>& examples() {
  static const std::map<std::string, std::string> table = {
      {"stats", "tensormorph stats build/demo model.norm.weight"},
      {"backends", "tensormorph backends --json"},
      {"config", "tensormorph config set compute.prefer vulkan"},
      {"config list", "tensormorph config list"},
      {"config get", "tensormorph config get compute.prefer"},
      {"config set", "tensormorph config set compute.threads 8"},
      {"config unset", "tensormorph config unset compute.prefer"},
      {"calibrate", "tensormorph calibrate --size-mib 16"},
      {"demo", "tensormorph demo --out build/demo"},
      {"info", "tensormorph info build/demo"},
      {"ls", "tensormorph ls build/demo --filter 'model.layers.0.*' --sort size"},
      {"export", "tensormorph export build/demo model.norm.weight -o norm.npy"},
      {"index", "tensormorph index build/demo"},
      {"compare", "tensormorph compare model-f16.gguf model-q4_k.gguf"},
      {"diff", "tensormorph diff base/ finetuned/"},
      {"render", "tensormorph render build/demo model.layers.0.mlp.down_proj.weight --stat abs_max --transform log -o out.png"},
      {"tile", "tensormorph tile build/demo model.layers.0.mlp.down_proj.weight --level 0 --tile 0,0"},
      {"serve", "tensormorph serve build/demo build/stem-demo --port 8765"},
      {"stem", "tensormorph stem inspect build/stem-demo"},
      {"stem demo", "tensormorph stem demo --out build/stem-demo --scan 32,32 --detector 64"},
      {"stem discover", "tensormorph stem discover build"},
      {"stem inspect", "tensormorph stem inspect build/stem-demo/demo_master.h5"},
      {"stem load", "tensormorph stem load build/stem-demo --scan-bin 2 --detector-bin 4"},
      {"stem export", "tensormorph stem export build/stem-demo --scan-region 0,8,0,8 -o part.npy"},
      {"stem bf", "tensormorph stem bf build/stem-demo -o bf.png"},
      {"stem abf", "tensormorph stem abf build/stem-demo -o abf.npy"},
      {"stem adf", "tensormorph stem adf build/stem-demo -o adf.npy"},
      {"stem haadf", "tensormorph stem haadf build/stem-demo -o haadf.png"},
      {"stem df", "tensormorph stem df build/stem-demo -o df.npy"},
      {"stem mask", "tensormorph stem mask build/stem-demo --inner-mrad 40 --outer-mrad 80 -o adf.npy"},
      {"stem com", "tensormorph stem com build/stem-demo -o com.npy"},
      {"stem dpc", "tensormorph stem dpc build/stem-demo -o dpc.png"},
      {"stem idpc", "tensormorph stem idpc build/stem-demo -o idpc.png"},
      {"stem fft", "tensormorph stem fft build/stem-demo --of bf -o fft.png"},
      {"stem mean-dp", "tensormorph stem mean-dp build/stem-demo -o mean.png --transform log"},
      {"stem prepare", "tensormorph stem prepare build/stem-demo"},
      {"stem ssb", "tensormorph stem ssb build/stem-demo --C10 50 -o phase.png"},
      {"stem movie", "tensormorph stem movie build/stem-demo --sweep outer --inner 0 --from 4 --to 12 -o sweep.gif"},
  };
  return table;
}

void walk(CLI::App& app, const std::string& path) {
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    const std::string name = path.empty() ? sub->get_name() : path + " " + sub->get_name();
    if (const auto it = examples().find(name); it != examples().end()) sub->footer("Example:\n  " + it->second);
    walk(*sub, name);
  }
}

}  // namespace

void add_help_examples(CLI::App& app) { walk(app, ""); }

}  // namespace tmorph::cli
