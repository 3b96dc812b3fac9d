// Which file format an output path asks for: its extension decides (case-insensitive), and an extension the command
// cannot write is refused before any work (exit 2, naming what it writes), never written under the wrong name.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace tmorph::cli {

enum class OutputFormat { npy, png, tiff };  // movies: image/movie_writer.h movie_format (.gif, .mp4)

// .npy, .png, .tif/.tiff -> the format; throws Error(InvalidArgument) "PATH: cannot write a '.EXT' file
// (COMMAND writes .npy, .png or .tif)" when the extension is none of `writes` (or there is none).
OutputFormat output_format(const std::string& path, const std::vector<OutputFormat>& writes);

// The same rule as a CLI11 check on an -o option: the refusal comes at parse time.
void require_output_format(CLI::Option* out, std::vector<OutputFormat> writes);

}  // namespace tmorph::cli
