// A restricted, non-executing reader of Python pickles (protocols 2-5), for torch.save's data.pkl.
//
// It runs nothing: every opcode builds a node of a small value tree. Globals are names checked against
// an allow-list the caller gives (anything else is refused with its module.name and byte offset);
// REDUCE and BUILD become nodes naming the callable and its arguments, never calls; persistent ids
// become nodes the caller resolves. Opcodes that instantiate classes (INST, OBJ, NEWOBJ_EX, and NEWOBJ
// unless PickleOptions::allow_newobj), the extension registry (EXT1/2/4), out-of-band buffers
// (NEXT_BUFFER, READONLY_BUFFER) and the protocol-0 text opcodes are refused. Strings must be valid
// UTF-8, as Python's unpickler demands. Memory and nesting are bounded (PickleLimits); every length is
// checked against the bytes that remain. Errors are tmorph::Error(BadInput) naming the file, the byte
// offset of the opcode, the opcode and what was expected.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace tmorph {

enum class PickleKind : uint8_t {
  None, Bool, Int, Float, Str, Bytes, Tuple, List, Set, Dict,
  Global,        // text = "module.name"
  Reduce,        // items = {callable, args}; entries = SETITEM(S) applied to the call's result (OrderedDict)
  PersistentId,  // items = {pid}
  Build,         // items = {object, state}
};
const char* pickle_kind_name(PickleKind k);  // "None", "int", "str", "tuple", ... (for messages)

struct PickleValue;
using PickleRef = std::shared_ptr<PickleValue>;

struct PickleValue {
  PickleKind kind = PickleKind::None;
  uint64_t offset = 0;        // byte offset (within the pickle) of the opcode that made this value
  bool boolean = false;       // Bool
  int64_t integer = 0;        // Int (wider integers are refused)
  double real = 0;            // Float
  std::string text;           // Str (checked to be valid UTF-8, as Python's unpickler does), Bytes, Global
  std::vector<PickleRef> items;                          // see PickleKind
  std::vector<std::pair<PickleRef, PickleRef>> entries;  // Dict (in insertion order), Reduce
  // Bookkeeping of the reader: a value already inside another may no longer be mutated (so the tree
  // has no cycle), and depth bounds the nesting consumers recurse through.
  bool contained = false;
  uint32_t depth = 1;
};

struct PickleLimits {
  uint64_t max_bytes = 256ull << 20;     // the pickle itself
  uint32_t max_depth = 200;              // nesting of values (and of MARKs)
  uint64_t max_values = 8'000'000;       // nodes made
  uint64_t max_memo = 4'000'000;         // memo entries
  uint64_t max_items = 32'000'000;       // container slots, all containers together
  uint32_t max_global_name = 256;        // bytes of a module or attribute name
};

struct PickleOptions {
  std::set<std::string> allowed_globals;  // "module.name"
  std::string allowed_what;               // says what is allowed, for the refusal message
  PickleLimits limits;
  uint64_t file_offset = 0;               // where the pickle starts in its file (named in errors)
  // NEWOBJ (cls.__new__(cls, *args), how dataclasses pickle) of an allowed class becomes a Reduce node
  // {cls, args}, as REDUCE does: nothing is instantiated. DCP's .metadata needs it; torch.save does not.
  bool allow_newobj = false;
};

// Reads the pickle in bytes[0, size) (PROTO 2-5 first, STOP last, nothing after it) and returns the
// value STOP returns. `path` names the file in errors, e.g. "model.pt: data.pkl".
// With `end` given, the pickle is the first of several in a stream (the legacy torch.save format):
// bytes may follow its STOP, *end receives the offset just past it, and a pickle that has not
// stopped within limits.max_bytes is refused.
PickleRef read_pickle(const uint8_t* bytes, uint64_t size, const std::string& path, const PickleOptions& options, uint64_t* end = nullptr);

}  // namespace tmorph
