// The seed of a test that draws fresh random inputs on every run: from std::random_device, or
// FLASHGEN_TEST_SEED's value, to replay a failure with the seed its trace printed
// (`FLASHGEN_TEST_SEED=998459932 ctest -R <test>`). A value that is not an unsigned integer
// throws, naming the variable.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <string>

namespace flashgen::test {

inline std::uint64_t test_seed() {
  if (const char* text = std::getenv("FLASHGEN_TEST_SEED"); text != nullptr && *text != '\0') {
    char* end = nullptr;
    errno = 0;
    const unsigned long long value = std::strtoull(text, &end, 10);
    if (*end != '\0' || errno == ERANGE || *text == '-')
      throw std::invalid_argument(std::string("FLASHGEN_TEST_SEED: got '") + text +
                                  "', expected an unsigned integer (a seed a test printed)");
    return value;
  }
  std::random_device device;
  return (static_cast<std::uint64_t>(device()) << 32) ^ device();
}

}  // namespace flashgen::test
