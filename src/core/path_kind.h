// What a path given by a user names, asked before anything opens it: opening a FIFO for reading blocks
// until a writer appears (HDF5, SQLite and std::ifstream would wait forever), and std::filesystem's
// queries throw on a symbolic-link loop.
#pragma once

#include <string>

namespace tmorph {

enum class PathKind { Missing, Regular, Directory, Other };

// stat() following symbolic links. Missing: no such file or a component that is not a folder. Throws
// tmorph::Error(Io) "PATH: ..." when the path cannot be resolved otherwise (a symbolic-link loop, no
// permission to search a folder on the way).
PathKind path_kind(const std::string& path);

// Throws tmorph::Error(Io) unless `path` is a regular file (or a link to one): "PATH: no such file",
// "PATH: not a regular file (a FIFO)", a symbolic-link loop, ...
void require_regular_file(const std::string& path);

// For a file that may not exist yet (an index to create, optional settings): true when `path` is a
// regular file, false when nothing is there; throws as require_regular_file for anything else.
bool regular_file_or_missing(const std::string& path);

}  // namespace tmorph
