// The integer types and compile-time helpers every layer uses. NVRTC compiles the
// kernels without the C++ standard library, so what <cstdint> and <type_traits>
// would give is spelled here once.
#pragma once

namespace flash {

typedef unsigned short u16;
typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;

// Select<true, A, B>::type is A, Select<false, A, B>::type is B.
template <bool kFirst, class A, class B>
struct Select {
  using type = A;
};
template <class A, class B>
struct Select<false, A, B> {
  using type = B;
};

}  // namespace flash
