// One declaration of an operation's parameters, read by every face. An operation (a 4D-STEM product, SSB, a
// movie) lists its parameters once: the name each face spells it with (HTTP query, Python keyword, CLI flag),
// its kind, its accepted range and its unit. The faces parse text (a query value, a flag's argument) and check
// typed values (a Python keyword, a parsed flag) through these functions only, so the same request gets the
// same verdict and the same message in every face; only the parameter's spelling differs:
//   CLI     "--inner: expected a number >= 0 (detector pixels), got '-1'"          (exit 2)
//   HTTP    "parameter 'inner': expected a number >= 0 (detector pixels), got '-1'" (400)
//   Python  "inner: expected a number >= 0 (detector pixels), got '-1'"            (tm.InvalidArgument)
// Every refusal is Error(ErrorKind::InvalidArgument).
//
// Text grammar (all faces): numbers are plain decimals, [-]DIGITS[.DIGITS][e[-|+]DIGITS] or [-].DIGITS…, finite
// (no "+", no spaces, no hexadecimal, no nan/inf); counts are decimal digits only (at most 15); switches are
// 0, 1, false or true; lists are exactly `count` items separated by commas.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tmorph {

enum class Face { Cli, Http, Python };

enum class ParamKind {
  Number,   // a finite number in the range
  Count,    // an unsigned integer in the range
  Switch,   // on or off
  Choice,   // one of `form`'s words, separated by '|'
  Counts,   // `count` unsigned integers separated by commas (`form` shows them, e.g. "R0,R1,C0,C1")
  Numbers,  // `count` finite numbers separated by commas, each in the range
  Text,     // any text that is not empty (a path)
};

struct ParamSpec {
  std::string_view http;    // the query name; "" when the server does not take it
  std::string_view python;  // the keyword; "" when Python does not take it
  std::string_view cli;     // the flag, dashes included; "" when the CLI does not take it
  ParamKind kind = ParamKind::Number;
  double lo = 0, hi = 0;    // Number, Numbers, Count: the accepted range, both ends included unless lo_open
  bool lo_open = false;     // lo itself refused (a radius, an energy: > 0)
  std::string_view unit;    // what a number measures ("detector pixels", "Å"); "" for plain counts
  std::string_view form;    // Choice: "json|npy"; lists: "R0,R1,C0,C1"
  size_t count = 1;         // lists: the number of items
  std::string_view help;    // one line for --help and the Python docs

  // The name this face uses; the first spelling the parameter has when the face has none of its own.
  std::string_view name(Face face) const;
};

struct OperationSchema {
  std::string_view name;  // "stem.product"
  std::span<const ParamSpec> params;

  // The parameter with this spelling in this face; nullptr when the face does not take it.
  const ParamSpec* find(Face face, std::string_view spelled) const;
  // The parameter with this spelling in any face; Error(Internal) when not declared (a bug of the caller).
  const ParamSpec& at(std::string_view any_spelling) const;
  // The face's spellings, in declaration order ("inner, outer, …"), for a message listing what is accepted.
  std::string names(Face face) const;
};

// How a message names the parameter in this face: "--inner", "parameter 'inner'", "inner".
std::string spelled(const ParamSpec& p, Face face);
// What the parameter accepts, in words: "a number >= 0 (detector pixels)", "1 to 1024", "json or npy".
std::string expectation(const ParamSpec& p);
// "expected EXPECTATION, got 'GOT'": the part of a refusal every face shares.
std::string expected_got(const ParamSpec& p, std::string_view got);
// Throws InvalidArgument "SPELLED: expected EXPECTATION, got 'GOT'".
[[noreturn]] void refuse(const ParamSpec& p, Face face, std::string_view got);

// Throws InvalidArgument "SPELLED: not a parameter of OP (it takes a, b, …)" for a name the face does not take.
[[noreturn]] void refuse_unknown(const OperationSchema& op, Face face, std::string_view name);
// A number as messages show it: the shortest text that reads back the same ("nan" for a NaN).
std::string number_text(double v);
// A strict decimal (the grammar above), or false.
bool parse_decimal(std::string_view text, double& out);

// Typed values (Python keywords, parsed flags): the range and finiteness checks; return the value.
double check_number(const ParamSpec& p, Face face, double value);
uint64_t check_count(const ParamSpec& p, Face face, uint64_t value);
// Text (query values, flag arguments): the grammar, then the same checks.
double parse_number(const ParamSpec& p, Face face, std::string_view text);
uint64_t parse_count(const ParamSpec& p, Face face, std::string_view text);
bool parse_switch(const ParamSpec& p, Face face, std::string_view text);
std::string parse_choice(const ParamSpec& p, Face face, std::string_view text);
std::vector<uint64_t> parse_counts(const ParamSpec& p, Face face, std::string_view text);
std::vector<double> parse_numbers(const ParamSpec& p, Face face, std::string_view text);
// Any kind: the text is accepted (true) or refuse() throws. What a CLI validator or an unknown-use check calls.
void check_text(const ParamSpec& p, Face face, std::string_view text);

}  // namespace tmorph
