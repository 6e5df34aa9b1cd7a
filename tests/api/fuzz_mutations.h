// The fuzz test's adversarial calls: each mutation breaks one thing in a valid call's C
// arguments (drawn at random: which tensor, which dimension, which bad value) and says what
// the refusal must look like.
#pragma once

#include <optional>
#include <random>
#include <string>
#include <vector>

#include "fuzz_call.h"

namespace flashgen::test::fuzz {

// A pass's C arguments, by slot.
struct Target {
  std::vector<Slot> slots;  // validation order: inputs, then outputs
  flashgen_attention_options* options = nullptr;
  void** workspace = nullptr;  // backward only
  std::size_t* workspace_bytes = nullptr;
};

// How a refusal must look: one of `statuses`, a message that starts with one of `prefixes`
// (the argument it names, e.g. "q: rank is") and contains `contains`.
struct Expected {
  std::vector<std::string> prefixes;
  std::string contains;
  std::vector<flashgen_status> statuses{FLASHGEN_ERROR_INVALID_ARGUMENT};
};

enum PassMask : unsigned { kForwardPass = 1, kBackwardPass = 2, kBothPasses = 3 };

struct Mutation {
  const char* name;
  unsigned passes;
  // Breaks `target`; nullopt when the call has nothing this mutation can break.
  std::optional<Expected> (*apply)(Target& target, std::mt19937_64& rng);
};

const std::vector<Mutation>& mutations();

// Every name a message may start with.
const std::vector<std::string>& argument_names();

}  // namespace flashgen::test::fuzz
