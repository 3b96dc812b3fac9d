// Finding files below a folder that a reader may open: acquisitions to discover (Dectris masters, .mib, .npy, ...).
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace tmorph {

// Every regular file at and below `folder` for which match(path) is true, as absolute normalised paths, sorted.
// A folder that vanishes or turns unreadable while it is walked (another process cleaning /tmp, a scratch area
// being pruned) is skipped, never the end of the walk; symbolic links to folders are not followed, so the walk
// cannot loop. `match` gets the absolute path and must not throw. Error(InvalidArgument) when `folder` is not one.
std::vector<std::string> find_regular_files(const std::string& folder, const std::function<bool(const std::string& path)>& match);

// The one acquisition a folder holds, of those a search found there (`found`): Error(InvalidArgument) "FOLDER: no
// WHAT file in this folder" when there is none, and one listing them (see `tensormorph stem discover`) when there
// are several. `what` names the files looked for ("*_master.h5", "*.mib").
std::string only_file_in(const std::string& folder, const std::vector<std::string>& found, const std::string& what);

}  // namespace tmorph
