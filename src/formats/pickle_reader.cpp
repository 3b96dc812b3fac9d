#include "formats/pickle_reader.h"

#include <cstdio>
#include <cstring>
#include <unordered_map>

#include "core/utf8.h"
#include "tensormorph/error.h"

namespace tmorph {

namespace {

// Opcode names of Python's pickletools, by byte value; null for bytes that are no opcode.
const char* opcode_name(uint8_t op) {
  switch (op) {
    case '(': return "MARK";            case '.': return "STOP";          case '0': return "POP";
    case '1': return "POP_MARK";        case '2': return "DUP";           case 'F': return "FLOAT";
    case 'I': return "INT";             case 'J': return "BININT";        case 'K': return "BININT1";
    case 'L': return "LONG";            case 'M': return "BININT2";       case 'N': return "NONE";
    case 'P': return "PERSID";          case 'Q': return "BINPERSID";     case 'R': return "REDUCE";
    case 'S': return "STRING";          case 'T': return "BINSTRING";     case 'U': return "SHORT_BINSTRING";
    case 'V': return "UNICODE";         case 'X': return "BINUNICODE";    case 'a': return "APPEND";
    case 'b': return "BUILD";           case 'c': return "GLOBAL";        case 'd': return "DICT";
    case '}': return "EMPTY_DICT";      case 'e': return "APPENDS";       case 'g': return "GET";
    case 'h': return "BINGET";          case 'i': return "INST";          case 'j': return "LONG_BINGET";
    case 'l': return "LIST";            case ']': return "EMPTY_LIST";    case 'o': return "OBJ";
    case 'p': return "PUT";             case 'q': return "BINPUT";        case 'r': return "LONG_BINPUT";
    case 's': return "SETITEM";         case 't': return "TUPLE";         case ')': return "EMPTY_TUPLE";
    case 'u': return "SETITEMS";        case 'G': return "BINFLOAT";      case 0x80: return "PROTO";
    case 0x81: return "NEWOBJ";         case 0x82: return "EXT1";         case 0x83: return "EXT2";
    case 0x84: return "EXT4";           case 0x85: return "TUPLE1";       case 0x86: return "TUPLE2";
    case 0x87: return "TUPLE3";         case 0x88: return "NEWTRUE";      case 0x89: return "NEWFALSE";
    case 0x8a: return "LONG1";          case 0x8b: return "LONG4";        case 'B': return "BINBYTES";
    case 'C': return "SHORT_BINBYTES";  case 0x8c: return "SHORT_BINUNICODE"; case 0x8d: return "BINUNICODE8";
    case 0x8e: return "BINBYTES8";      case 0x8f: return "EMPTY_SET";    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";      case 0x92: return "NEWOBJ_EX";    case 0x93: return "STACK_GLOBAL";
    case 0x94: return "MEMOIZE";        case 0x95: return "FRAME";        case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER";    case 0x98: return "READONLY_BUFFER";
    default: return nullptr;
  }
}

class Reader {
 public:
  Reader(const uint8_t* bytes, uint64_t size, const std::string& path, const PickleOptions& options, bool in_stream)
      : p_(bytes), size_(size), path_(path), o_(options), lim_(options.limits), in_stream_(in_stream) {
    if (in_stream_ && size_ > lim_.max_bytes) {
      size_ = lim_.max_bytes;
      capped_ = true;
    }
  }

  PickleRef run();
  uint64_t end() const { return pos_; }

 private:
  const uint8_t* p_;
  uint64_t size_;
  const std::string& path_;
  const PickleOptions& o_;
  const PickleLimits& lim_;
  const bool in_stream_;    // bytes may follow STOP (read_pickle's `end`)
  bool capped_ = false;     // size_ cut to lim_.max_bytes: the stream goes on past it
  uint64_t pos_ = 0;        // next byte to read
  uint64_t op_at_ = 0;      // offset of the opcode being executed
  uint8_t op_ = 0;
  std::vector<PickleRef> stack_;
  std::vector<size_t> marks_;  // stack heights at each MARK
  std::unordered_map<uint64_t, PickleRef> memo_;
  uint64_t values_ = 0, items_ = 0;

  [[noreturn]] void fail(const std::string& what) const {
    char where[96];
    const char* name = opcode_name(op_);
    std::snprintf(where, sizeof where, "byte %llu (file offset %llu), opcode 0x%02x %s: ",
                  static_cast<unsigned long long>(op_at_), static_cast<unsigned long long>(o_.file_offset + op_at_), op_,
                  name ? name : "(unknown)");
    throw Error(ErrorKind::BadInput, escape_invalid_utf8(path_ + ": " + where + what));  // names from the file may not be UTF-8
  }

  // Reads n bytes of argument; fails naming how many were needed when fewer remain.
  const uint8_t* take(uint64_t n, const char* what) {
    if (n > size_ - pos_)
      fail(std::string(what) + " needs " + std::to_string(n) + " bytes, only " + std::to_string(size_ - pos_) +
           " remain (truncated pickle or lying length)");
    const uint8_t* at = p_ + pos_;
    pos_ += n;
    return at;
  }
  uint64_t le(uint32_t n, const char* what) {
    const uint8_t* b = take(n, what);
    uint64_t v = 0;
    for (uint32_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(b[i]) << (8 * i);
    return v;
  }

  PickleRef make(PickleKind kind) {
    if (++values_ > lim_.max_values) fail("more than " + std::to_string(lim_.max_values) + " values (limit)");
    auto v = std::make_shared<PickleValue>();
    v->kind = kind;
    v->offset = op_at_;
    return v;
  }
  void push(PickleRef v) {
    if (stack_.size() >= size_) fail("stack deeper than the pickle is long");  // cannot happen: one push per byte
    stack_.push_back(std::move(v));
  }
  PickleRef pop(const char* what) {
    if (stack_.empty() || (!marks_.empty() && stack_.size() == marks_.back()))
      fail(std::string("expected ") + what + " on the stack, found " + (stack_.empty() ? "an empty stack" : "a MARK"));
    PickleRef v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  PickleRef& top(const char* what) {
    if (stack_.empty() || (!marks_.empty() && stack_.size() == marks_.back()))
      fail(std::string("expected ") + what + " on the stack, found " + (stack_.empty() ? "an empty stack" : "a MARK"));
    return stack_.back();
  }
  // The values above the last MARK, removed from the stack with the MARK.
  std::vector<PickleRef> pop_mark() {
    if (marks_.empty()) fail("no MARK to pop to");
    const size_t at = marks_.back();
    marks_.pop_back();
    std::vector<PickleRef> out(std::make_move_iterator(stack_.begin() + static_cast<ptrdiff_t>(at)),
                               std::make_move_iterator(stack_.end()));
    stack_.resize(at);
    return out;
  }
  // Makes child part of parent: refused when it would exceed the depth or item limits.
  void adopt(PickleValue& parent, PickleValue& child) {
    if (&parent == &child) fail("a " + std::string(pickle_kind_name(parent.kind)) + " would contain itself (a cycle)");
    if (child.depth + 1 > lim_.max_depth) fail("values nested deeper than " + std::to_string(lim_.max_depth) + " levels (limit)");
    if (++items_ > lim_.max_items) fail("more than " + std::to_string(lim_.max_items) + " container items (limit)");
    child.contained = true;
    parent.depth = std::max(parent.depth, child.depth + 1);
  }
  // A container about to change: not one already inside another (that could make a cycle).
  PickleValue& mutable_target(const PickleRef& target, std::initializer_list<PickleKind> kinds, const char* what) {
    bool ok = false;
    for (PickleKind k : kinds) ok |= target->kind == k;
    if (!ok) fail(std::string("expected ") + what + " below the items, found a " + pickle_kind_name(target->kind));
    if (target->contained) fail(std::string("modifies a ") + pickle_kind_name(target->kind) + " that is already inside another value (refused: it could make a cycle)");
    return *target;
  }
  PickleRef container(PickleKind kind, std::vector<PickleRef> items) {
    PickleRef v = make(kind);
    for (auto& x : items) {
      adopt(*v, *x);
      v->items.push_back(std::move(x));
    }
    return v;
  }
  void set_items(std::vector<PickleRef> kv) {
    if (kv.size() % 2) fail("expected key/value pairs, found an odd number (" + std::to_string(kv.size()) + ") of values");
    PickleValue& d = mutable_target(top("a dict"), {PickleKind::Dict, PickleKind::Reduce}, "a dict");
    for (size_t i = 0; i < kv.size(); i += 2) {
      adopt(d, *kv[i]);
      adopt(d, *kv[i + 1]);
      d.entries.emplace_back(std::move(kv[i]), std::move(kv[i + 1]));
    }
  }
  void append_items(std::vector<PickleRef> xs, std::initializer_list<PickleKind> kinds, const char* what) {
    PickleValue& l = mutable_target(top(what), kinds, what);
    for (auto& x : xs) {
      adopt(l, *x);
      l.items.push_back(std::move(x));
    }
  }
  void memo_put(uint64_t index) {
    if (memo_.size() >= lim_.max_memo && !memo_.count(index)) fail("more than " + std::to_string(lim_.max_memo) + " memo entries (limit)");
    memo_[index] = top("a value to memoize");
  }
  void memo_get(uint64_t index) {
    auto it = memo_.find(index);
    if (it == memo_.end()) fail("memo index " + std::to_string(index) + " was never stored (" + std::to_string(memo_.size()) + " entries)");
    push(it->second);
  }
  PickleRef text_value(PickleKind kind, uint64_t n) {
    const uint8_t* b = take(n, kind == PickleKind::Str ? "the string" : "the bytes");
    PickleRef v = make(kind);
    v->text.assign(reinterpret_cast<const char*>(b), n);
    // Python's unpickler decodes BINUNICODE, SHORT_BINUNICODE and BINUNICODE8 as UTF-8 and refuses
    // what is not; so does this reader (lone surrogates too, which Python lets through with
    // 'surrogatepass' but no JSON output could carry).
    if (kind == PickleKind::Str && !is_valid_utf8(v->text))
      fail("the string of " + std::to_string(n) + " bytes is not valid UTF-8 ('" + escape_invalid_utf8(v->text.substr(0, 64)) +
           (n > 64 ? "...'" : "'") + "); Python's unpickler refuses it too");
    return v;
  }
  PickleRef integer(int64_t x) {
    PickleRef v = make(PickleKind::Int);
    v->integer = x;
    return v;
  }
  // LONG1/LONG4: n bytes of little-endian two's complement; only what fits 64 bits.
  PickleRef long_value(uint64_t n) {
    if (n > 8) fail("an integer of " + std::to_string(n) + " bytes is wider than 64 bits (refused)");
    const uint8_t* b = take(n, "the integer");
    uint64_t u = 0;
    for (uint64_t i = 0; i < n; ++i) u |= static_cast<uint64_t>(b[i]) << (8 * i);
    if (n > 0 && n < 8 && (b[n - 1] & 0x80)) u |= ~uint64_t{0} << (8 * n);  // sign-extend
    return integer(static_cast<int64_t>(u));
  }
  void global(const std::string& module, const std::string& name) {
    if (module.size() > lim_.max_global_name || name.size() > lim_.max_global_name)
      fail("a global's module or name is longer than " + std::to_string(lim_.max_global_name) + " bytes");
    const std::string full = module + "." + name;
    if (!o_.allowed_globals.count(full))
      fail("global '" + full + "' is not on the allow-list (refused, nothing is called); allowed: " + o_.allowed_what);
    PickleRef v = make(PickleKind::Global);
    v->text = full;
    push(std::move(v));
  }
  // One line of GLOBAL's text argument, without its newline: printable ASCII, bounded.
  std::string line(const char* what) {
    const uint64_t limit = std::min<uint64_t>(size_ - pos_, lim_.max_global_name + 1);
    for (uint64_t i = 0; i < limit; ++i) {
      const uint8_t c = p_[pos_ + i];
      if (c == '\n') {
        std::string s(reinterpret_cast<const char*>(p_ + pos_), i);
        pos_ += i + 1;
        return s;
      }
      if (c < 0x20 || c > 0x7e) {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", c);
        fail(std::string(what) + " holds byte " + hex + " (expected printable ASCII)");
      }
    }
    fail(std::string("expected ") + what + " ended by a newline within " + std::to_string(lim_.max_global_name) + " bytes");
  }
  void step();
};

void Reader::step() {
  switch (op_) {
    case '(':
      if (marks_.size() >= lim_.max_depth) fail("MARKs nested deeper than " + std::to_string(lim_.max_depth) + " (limit)");
      marks_.push_back(stack_.size());
      return;
    case '0': pop("a value"); return;
    case '1': pop_mark(); return;
    case '2': push(top("a value")); return;
    case 'N': push(make(PickleKind::None)); return;
    case 0x88: case 0x89: {
      PickleRef v = make(PickleKind::Bool);
      v->boolean = op_ == 0x88;
      push(std::move(v));
      return;
    }
    case 'K': push(integer(static_cast<int64_t>(le(1, "the integer")))); return;
    case 'M': push(integer(static_cast<int64_t>(le(2, "the integer")))); return;
    case 'J': push(integer(static_cast<int32_t>(static_cast<uint32_t>(le(4, "the integer"))))); return;
    case 0x8a: push(long_value(le(1, "the integer's length"))); return;
    case 0x8b: push(long_value(le(4, "the integer's length"))); return;
    case 'G': {
      const uint8_t* b = take(8, "the float");
      uint64_t u = 0;
      for (int i = 0; i < 8; ++i) u = (u << 8) | b[i];  // big-endian
      PickleRef v = make(PickleKind::Float);
      std::memcpy(&v->real, &u, 8);
      push(std::move(v));
      return;
    }
    case 0x8c: push(text_value(PickleKind::Str, le(1, "the string's length"))); return;
    case 'X': push(text_value(PickleKind::Str, le(4, "the string's length"))); return;
    case 0x8d: push(text_value(PickleKind::Str, le(8, "the string's length"))); return;
    case 'U': case 'C': push(text_value(PickleKind::Bytes, le(1, "the length"))); return;
    case 'T': case 'B': push(text_value(PickleKind::Bytes, le(4, "the length"))); return;
    case 0x8e: case 0x96: push(text_value(PickleKind::Bytes, le(8, "the length"))); return;
    case ')': push(make(PickleKind::Tuple)); return;
    case ']': push(make(PickleKind::List)); return;
    case '}': push(make(PickleKind::Dict)); return;
    case 0x8f: push(make(PickleKind::Set)); return;
    case 0x85: case 0x86: case 0x87: {
      std::vector<PickleRef> xs(op_ - 0x84);
      for (size_t i = xs.size(); i-- > 0;) xs[i] = pop("a tuple item");
      push(container(PickleKind::Tuple, std::move(xs)));
      return;
    }
    case 't': push(container(PickleKind::Tuple, pop_mark())); return;
    case 'l': push(container(PickleKind::List, pop_mark())); return;
    case 0x91: push(container(PickleKind::Set, pop_mark())); return;
    case 'd': {
      auto kv = pop_mark();
      push(make(PickleKind::Dict));
      set_items(std::move(kv));
      return;
    }
    case 'a': {
      PickleRef x = pop("the item to append");
      append_items({std::move(x)}, {PickleKind::List}, "a list");
      return;
    }
    case 'e': append_items(pop_mark(), {PickleKind::List}, "a list"); return;
    case 0x90: append_items(pop_mark(), {PickleKind::Set}, "a set"); return;
    case 's': {
      PickleRef value = pop("the value"), key = pop("the key");
      set_items({std::move(key), std::move(value)});
      return;
    }
    case 'u': set_items(pop_mark()); return;
    case 'h': memo_get(le(1, "the memo index")); return;
    case 'j': memo_get(le(4, "the memo index")); return;
    case 'q': memo_put(le(1, "the memo index")); return;
    case 'r': memo_put(le(4, "the memo index")); return;
    case 0x94: memo_put(memo_.size()); return;
    case 'c': {
      std::string module = line("the module name");
      std::string name = line("the attribute name");
      global(module, name);
      return;
    }
    case 0x93: {
      PickleRef name = pop("the attribute name"), module = pop("the module name");
      if (module->kind != PickleKind::Str || name->kind != PickleKind::Str)
        fail(std::string("expected two strings (module, name), found a ") + pickle_kind_name(module->kind) + " and a " + pickle_kind_name(name->kind));
      global(module->text, name->text);
      return;
    }
    case 0x81:
      if (!o_.allow_newobj) fail("instantiating a class is refused (nothing is executed)");
      [[fallthrough]];
    case 'R': {
      PickleRef args = pop("the arguments"), callable = pop("the callable");
      if (callable->kind != PickleKind::Global) fail(std::string("expected a global to call, found a ") + pickle_kind_name(callable->kind));
      if (args->kind != PickleKind::Tuple) fail(std::string("expected a tuple of arguments, found a ") + pickle_kind_name(args->kind));
      push(container(PickleKind::Reduce, {std::move(callable), std::move(args)}));
      return;
    }
    case 'b': {
      PickleRef state = pop("the state"), object = pop("the object to build");
      push(container(PickleKind::Build, {std::move(object), std::move(state)}));
      return;
    }
    case 'Q': push(container(PickleKind::PersistentId, {pop("the persistent id")})); return;
    case 0x95:  // FRAME: a read-ahead hint; its 8-byte length must fit what remains
      if (le(8, "the frame length") > size_ - pos_) fail("frame runs past the end of the pickle");
      return;
    case 0x80: fail("PROTO may appear only first");
    case 'F': case 'I': case 'L': case 'P': case 'S': case 'V': case 'g': case 'p':
      fail("protocol-0 text opcodes are not supported (torch.save writes protocol 2)");
    case 'i': case 'o': case 0x92:
      fail("instantiating a class is refused (nothing is executed)");
    case 0x82: case 0x83: case 0x84: fail("the extension registry is not supported");
    case 0x97: case 0x98: fail("out-of-band buffers are not supported");
    default: fail("not a pickle opcode");
  }
}

PickleRef Reader::run() {
  if (size_ > lim_.max_bytes && !capped_) {
    throw Error(ErrorKind::BadInput, path_ + ": pickle of " + std::to_string(size_) + " bytes exceeds the limit of " +
                                         std::to_string(lim_.max_bytes));
  }
  op_ = size_ ? p_[0] : 0;
  if (size_ < 2 || p_[0] != 0x80)
    fail("expected PROTO (0x80) and a protocol number at byte 0: a pickle of protocol 2 to 5");
  if (p_[1] < 2 || p_[1] > 5) fail("protocol " + std::to_string(p_[1]) + " is not supported (2 to 5 are)");
  pos_ = 2;
  while (pos_ < size_) {
    op_at_ = pos_;
    op_ = p_[pos_++];
    if (op_ == '.') {
      if (!marks_.empty()) fail("STOP with " + std::to_string(marks_.size()) + " MARK(s) still open");
      if (stack_.size() != 1) fail("STOP expects exactly one value on the stack, found " + std::to_string(stack_.size()));
      if (pos_ != size_ && !in_stream_) fail(std::to_string(size_ - pos_) + " bytes follow STOP");
      return stack_.back();
    }
    step();
  }
  op_at_ = size_;
  op_ = 0;
  if (capped_)
    throw Error(ErrorKind::BadInput, escape_invalid_utf8(path_) + ": pickle has not stopped within " + std::to_string(lim_.max_bytes) +
                                         " bytes (limit)");
  throw Error(ErrorKind::BadInput, escape_invalid_utf8(path_) + ": pickle ends at byte " + std::to_string(size_) + " without STOP (truncated)");
}

}  // namespace

const char* pickle_kind_name(PickleKind k) {
  switch (k) {
    case PickleKind::None: return "None";
    case PickleKind::Bool: return "bool";
    case PickleKind::Int: return "int";
    case PickleKind::Float: return "float";
    case PickleKind::Str: return "str";
    case PickleKind::Bytes: return "bytes";
    case PickleKind::Tuple: return "tuple";
    case PickleKind::List: return "list";
    case PickleKind::Set: return "set";
    case PickleKind::Dict: return "dict";
    case PickleKind::Global: return "global";
    case PickleKind::Reduce: return "call";
    case PickleKind::PersistentId: return "persistent id";
    case PickleKind::Build: return "built object";
  }
  return "?";
}

PickleRef read_pickle(const uint8_t* bytes, uint64_t size, const std::string& path, const PickleOptions& options, uint64_t* end) {
  Reader r(bytes, size, path, options, end != nullptr);
  PickleRef v = r.run();
  if (end) *end = r.end();
  return v;
}

}  // namespace tmorph
