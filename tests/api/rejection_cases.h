// The table of invalid or unsupported arguments: each case breaks one thing in a valid
// random call and says which status and which message text validation must give.
// rejection_test.cpp runs every case through the C++ Runtime and through the C API.
#pragma once

#include <string>
#include <vector>

#include "attention_call.h"

namespace flashgen::test {

enum Passes : unsigned { kForward = 1, kBackward = 2, kBoth = 3 };
enum class Baseline { cpu, device };

struct RejectionCase {
  const char* name;
  unsigned passes;
  Baseline baseline;
  Status status;
  // Breaks the call; returns text the error message must contain (names argument and value).
  std::string (*mutate)(AttentionCall&);
};

const std::vector<RejectionCase>& rejection_cases();

}  // namespace flashgen::test
