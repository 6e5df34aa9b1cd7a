// A random valid C-API call on CPU tensors, for the fuzz test: random geometry, layouts
// (padded, heads-major, seqlen-major, packed q/k/v and dq/dk/dv, broadcast and shared
// inputs) and options. Each buffer holds exactly the bytes its views span, so ASan flags any
// access outside a view; input gaps are NaN and outputs start as 0xff bytes (NaN in every
// dtype), so a read of a gap or a missing write shows up.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "attention_call.h"
#include "flashgen/flashgen.h"

namespace flashgen::test::fuzz {

constexpr unsigned char kPoisonByte = 0xff;

// One heap block of exactly `size` bytes; `covered` marks the bytes some output view writes.
struct Block {
  std::unique_ptr<unsigned char[]> bytes;
  std::size_t size = 0;
  bool output = false;
  std::vector<bool> covered;
};

// A tensor argument of the C API by name, and the block its data lies in.
struct Slot {
  const char* name;
  flashgen_tensor* tensor;
  bool output;
  int block;
};

struct FuzzCall {
  Geometry g;
  flashgen_tensor q, k, v, o, lse, dout, dq, dk, dv;
  flashgen_attention_options options;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  std::vector<Block> blocks;
  std::vector<int> block_of;  // per tensor, in the order of kNames
  std::string layout;         // what was drawn, for failure messages

  flashgen_forward_args forward() const;
  flashgen_backward_args backward() const;
  // The tensors of a pass in validation order (inputs, then outputs), pointing into `args`.
  std::vector<Slot> slots(flashgen_forward_args& args) const;
  std::vector<Slot> slots(flashgen_backward_args& args) const;
  std::string describe() const;

  // Every block's bytes, to check that a refused call changed nothing (and a valid one
  // nothing but the blocks of `except`).
  std::vector<std::vector<unsigned char>> snapshot() const;
  bool unchanged_since(const std::vector<std::vector<unsigned char>>& before,
                       std::initializer_list<const flashgen_tensor*> except = {}) const;
  void poison_outputs(std::initializer_list<const flashgen_tensor*> outputs);
  // Bytes of output blocks that no output view covers but that are no longer the poison.
  std::int64_t written_outside_outputs() const;
};

// A random call; sizes stay small enough that the fp64 reference checks every case.
FuzzCall random_call(std::mt19937_64& rng);

// The logical elements of a view in the contract's layout (batch, seqlen, heads, head_dim)
// or, for lse, (batch, heads, seqlen), as doubles; offsets computed here, not by the runtime.
std::vector<double> read(const flashgen_tensor& t);

// The fp64 reference of o/lse (forward) and dq/dk/dv (backward) from the call's inputs,
// compared with FuzzCall's outputs by the CPU backend tests' rule. Empty: they agree.
std::string check_forward(const FuzzCall& c, bool with_lse);
std::string check_backward(const FuzzCall& c);

}  // namespace flashgen::test::fuzz
