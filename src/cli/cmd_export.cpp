// tensormorph export PATH TENSOR -o OUT.npy: one tensor as a row-major .npy file (checkpoint/npy_export.h says
// how each storage form is written). Parses, calls, prints.
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "checkpoint/npy_export.h"
#include "app/remote_checkpoint.h"
#include "cli/remote_note.h"
#include "checkpoint/openers/open_checkpoint.h"
#include "cli/commands.h"
#include "cli/compute_flags.h"
#include "cli/output.h"
#include "cli/output_format.h"
#include "tensormorph/error.h"
#include "tensormorph/planner.h"

namespace tmorph::cli {

namespace {

struct ExportArgs {
  std::string path, tensor, out;
  bool json = false;
};

void run_export(const ExportArgs& a) {
  // http(s)://, hf:// or s3://: the tensor's bytes fetched into the stand-in while it is written.
  const auto remote = app::open_remote_if_url(a.path);
  const RemoteTransferNote note(remote.get());
  const Checkpoint c = open_checkpoint(remote ? remote->local_path() : a.path);
  const size_t position = c.position(a.tensor, a.path);
  const CheckpointTensor& t = c.tensors[position];
  if (!t.readable()) t.refuse_unreadable();
  const app::FetchedTensors fetched(remote.get(), c, {position});
  std::ofstream out(a.out, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(ErrorKind::Io, a.out + ": cannot write");
  // Backends are loaded only to decode: a dense tensor is written without them.
  const auto rt = t.dequantized() ? command_runtime(nullptr) : nullptr;
  const std::optional<Planner> planner = rt ? std::optional<Planner>(rt->planner()) : std::nullopt;
  const NpyExport e = write_npy(c, t, planner ? &*planner : nullptr, rt ? rt->threads : 1, out);
  out.close();
  if (!out) throw Error(ErrorKind::Io, a.out + ": write failed");
  if (a.json)
    print_json(nlohmann::json{{"tensor", a.tensor}, {"out", a.out}, {"descr", e.descr}, {"shape", t.shape},
                              {"widened_to_float32", e.widened},
                              {"dequantized_from", e.decoded ? nlohmann::json(t.stored_type) : nlohmann::json(nullptr)}});
  else
    std::printf("wrote %s: %s %s%s\n", a.out.c_str(), a.tensor.c_str(), e.descr.c_str(),
                e.how.empty() ? "" : (" (" + e.how + ")").c_str());
}

}  // namespace

void add_export_command(CLI::App& app) {
  auto args = std::make_shared<ExportArgs>();
  CLI::App* cmd = app.add_subcommand("export", "write one tensor as a row-major .npy file");
  cmd->add_option("path", args->path, "checkpoint: file, shard directory, index JSON or GGUF split shard")->required();
  cmd->add_option("tensor", args->tensor, "tensor name")->required();
  require_output_format(cmd->add_option("-o,--out", args->out, "output .npy file")->required(), {OutputFormat::npy});
  cmd->add_flag("--json", args->json, "print one JSON document");
  cmd->callback([args] { run_export(*args); });
}

}  // namespace tmorph::cli
