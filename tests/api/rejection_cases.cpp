#include "rejection_cases.h"

#include <fmt/format.h>

#include <cstdint>
#include <limits>

namespace flashgen::test {
namespace {

constexpr Status kInvalid = Status::invalid_argument;
constexpr Status kUnsupported = Status::unsupported;

std::array<Tensor*, 8> rank4_tensors(AttentionCall& c) { return {&c.q, &c.k, &c.v, &c.o, &c.dout, &c.dq, &c.dk, &c.dv}; }

// A head dim the tensors' memory does not hold: strides stay contiguous and the views move
// to addresses 64 GiB apart (so that no two overlap); they are only validated, never read.
void set_head_dim(AttentionCall& c, std::int64_t d) {
  std::uintptr_t address = std::uintptr_t{1} << 44;
  for (Tensor* t : rank4_tensors(c)) {
    t->shape[3] = d;
    t->stride = {t->shape[1] * t->shape[2] * d, t->shape[2] * d, d, 1};
    t->data = reinterpret_cast<void*>(address += std::uintptr_t{1} << 36);
  }
}

void set_dtype(AttentionCall& c, DType d) {
  for (Tensor* t : rank4_tensors(c)) t->dtype = d;
}

DType other_dtype(DType d) { return d == DType::bf16 ? DType::f16 : DType::bf16; }

void* offset_bytes(void* p, std::size_t bytes) { return static_cast<char*>(p) + bytes; }

std::string shape_message(const char* name, int dim, const char* dim_name, const Tensor& t, std::int64_t expected,
                          const char* like) {
  return fmt::format("{}: shape[{}] ({}) is {}, expected {} like {}", name, dim, dim_name, t.shape[dim], expected, like);
}

}  // namespace

const std::vector<RejectionCase>& rejection_cases() {
  using B = Baseline;
  static const std::vector<RejectionCase> cases{
      // Null data pointers (lse may be null in forward only).
      {"q_null", kBoth, B::cpu, kInvalid, [](AttentionCall& c) -> std::string { c.q.data = nullptr; return "q: data is null"; }},
      {"k_null", kBoth, B::cpu, kInvalid, [](AttentionCall& c) -> std::string { c.k.data = nullptr; return "k: data is null"; }},
      {"v_null", kBoth, B::cpu, kInvalid, [](AttentionCall& c) -> std::string { c.v.data = nullptr; return "v: data is null"; }},
      {"o_null", kBoth, B::cpu, kInvalid, [](AttentionCall& c) -> std::string { c.o.data = nullptr; return "o: data is null"; }},
      {"lse_null_in_backward", kBackward, B::cpu, kInvalid,
       [](AttentionCall& c) -> std::string { c.lse.data = nullptr; return "lse: data is null"; }},
      {"dout_null", kBackward, B::cpu, kInvalid,
       [](AttentionCall& c) -> std::string { c.dout.data = nullptr; return "dout: data is null"; }},
      {"dq_null", kBackward, B::cpu, kInvalid, [](AttentionCall& c) -> std::string { c.dq.data = nullptr; return "dq: data is null"; }},
      {"dk_null", kBackward, B::cpu, kInvalid, [](AttentionCall& c) -> std::string { c.dk.data = nullptr; return "dk: data is null"; }},
      {"dv_null", kBackward, B::cpu, kInvalid, [](AttentionCall& c) -> std::string { c.dv.data = nullptr; return "dv: data is null"; }},

      // Ranks.
      {"q_rank_3", kBoth, B::cpu, kInvalid,
       [](AttentionCall& c) -> std::string { c.q.rank = 3; return "q: rank is 3, expected 4 (batch, seqlen_q, heads_q, head_dim)"; }},
      {"dk_rank_2", kBackward, B::cpu, kInvalid,
       [](AttentionCall& c) -> std::string { c.dk.rank = 2; return "dk: rank is 2, expected 4 (batch, seqlen_k, heads_kv, head_dim)"; }},
      {"lse_rank_4", kBoth, B::cpu, kInvalid,
       [](AttentionCall& c) -> std::string { c.lse.rank = 4; return "lse: rank is 4, expected 3 (batch, heads_q, seqlen_q)"; }},

      // Shapes that disagree.
      {"k_batch", kBoth, B::cpu, kInvalid,
       [](AttentionCall& c) { c.k.shape[0] += 1; return shape_message("k", 0, "batch", c.k, c.q.shape[0], "q"); }},
      {"k_head_dim", kBoth, B::cpu, kInvalid,
       [](AttentionCall& c) { c.k.shape[3] += 8; return shape_message("k", 3, "head_dim", c.k, c.q.shape[3], "q"); }},
      {"v_seqlen", kBoth, B::cpu, kInvalid,
       [](AttentionCall& c) { c.v.shape[1] += 1; return shape_message("v", 1, "seqlen_k", c.v, c.k.shape[1], "k"); }},
      {"v_heads", kBoth, B::cpu, kInvalid,
       [](AttentionCall& c) { c.v.shape[2] += 1; return shape_message("v", 2, "heads_kv", c.v, c.k.shape[2], "k"); }},
      {"v_head_dim", kBoth, B::cpu, kInvalid,
       [](AttentionCall& c) { c.v.shape[3] += 1; return shape_message("v", 3, "head_dim", c.v, c.q.shape[3], "k"); }},
      {"o_seqlen", kBoth, B::cpu, kInvalid,
       [](AttentionCall& c) { c.o.shape[1] += 1; return shape_message("o", 1, "seqlen_q", c.o, c.q.shape[1], "q"); }},
      {"o_heads", kBoth, B::cpu, kInvalid,
       [](AttentionCall& c) { c.o.shape[2] += 1; return shape_message("o", 2, "heads_q", c.o, c.q.shape[2], "q"); }},
      {"lse_heads", kBoth, B::cpu, kInvalid,
       [](AttentionCall& c) { c.lse.shape[1] += 1; return shape_message("lse", 1, "heads_q", c.lse, c.q.shape[2], "q"); }},
      {"lse_seqlen", kBoth, B::cpu, kInvalid,
       [](AttentionCall& c) { c.lse.shape[2] += 1; return shape_message("lse", 2, "seqlen_q", c.lse, c.q.shape[1], "q"); }},
      {"dout_head_dim", kBackward, B::cpu, kInvalid,
       [](AttentionCall& c) { c.dout.shape[3] += 1; return shape_message("dout", 3, "head_dim", c.dout, c.q.shape[3], "q"); }},
      {"dq_batch", kBackward, B::cpu, kInvalid,
       [](AttentionCall& c) { c.dq.shape[0] -= 1; return shape_message("dq", 0, "batch", c.dq, c.q.shape[0], "q"); }},
      {"dk_seqlen", kBackward, B::cpu, kInvalid,
       [](AttentionCall& c) { c.dk.shape[1] += 1; return shape_message("dk", 1, "seqlen_k", c.dk, c.k.shape[1], "k"); }},
      {"dv_heads", kBackward, B::cpu, kInvalid,
       [](AttentionCall& c) { c.dv.shape[2] += 1; return shape_message("dv", 2, "heads_kv", c.dv, c.k.shape[2], "k"); }},
      {"heads_q_not_multiple_of_heads_kv", kBoth, B::cpu, kInvalid, [](AttentionCall& c) {
         c.k.shape[2] = c.q.shape[2] + 1;
         return fmt::format("k: shape[2] (heads_kv) is {}, expected a divisor of q's heads_q = {}", c.k.shape[2], c.q.shape[2]);
       }},

      // Sizes and strides.
      {"q_seqlen_zero", kBoth, B::cpu, kInvalid,
       [](AttentionCall& c) -> std::string { c.q.shape[1] = 0; return "q: shape[1] (seqlen_q) is 0, expected > 0"; }},
      {"k_heads_negative", kBoth, B::cpu, kInvalid,
       [](AttentionCall& c) -> std::string { c.k.shape[2] = -2; return "k: shape[2] (heads_kv) is -2, expected > 0"; }},
      {"dv_batch_zero", kBackward, B::cpu, kInvalid,
       [](AttentionCall& c) -> std::string { c.dv.shape[0] = 0; return "dv: shape[0] (batch) is 0, expected > 0"; }},
      {"q_last_dim_not_contiguous", kBoth, B::cpu, kInvalid,
       [](AttentionCall& c) -> std::string { c.q.stride[3] = 2; return "q: stride[3] (head_dim) is 2, expected 1"; }},
      {"dv_last_dim_not_contiguous", kBackward, B::cpu, kInvalid,
       [](AttentionCall& c) -> std::string { c.dv.stride[3] = 0; return "dv: stride[3] (head_dim) is 0, expected 1"; }},
      {"k_negative_stride", kBoth, B::cpu, kInvalid, [](AttentionCall& c) {
         c.k.stride[1] = -c.k.stride[1];
         return fmt::format("k: stride[1] (seqlen_k) is {}, expected >= 0", c.k.stride[1]);
       }},
      {"q_span_overflows", kBoth, B::cpu, kInvalid, [](AttentionCall& c) -> std::string {
         c.q.stride[0] = std::numeric_limits<std::int64_t>::max() / 2 + 1;
         return "q: shape (";
       }},
      {"lse_not_contiguous", kBoth, B::cpu, kInvalid, [](AttentionCall& c) {
         c.lse.stride[0] += 1;
         return fmt::format("lse: strides are ({}, {}, 1), expected contiguous", c.lse.stride[0], c.lse.stride[1]);
       }},

      // dtypes.
      {"v_dtype_mismatch", kBoth, B::cpu, kInvalid, [](AttentionCall& c) {
         c.v.dtype = other_dtype(c.q.dtype);
         return fmt::format("v: dtype is {}, expected {} like q", to_string(c.v.dtype), to_string(c.q.dtype));
       }},
      {"dq_dtype_mismatch", kBackward, B::cpu, kInvalid, [](AttentionCall& c) {
         c.dq.dtype = other_dtype(c.q.dtype);
         return fmt::format("dq: dtype is {}, expected {} like q", to_string(c.dq.dtype), to_string(c.q.dtype));
       }},
      {"q_dtype_unknown", kBoth, B::cpu, kInvalid, [](AttentionCall& c) -> std::string {
         c.q.dtype = static_cast<DType>(7);
         return "q: dtype is 7, expected fp32 (0), fp16 (1) or bf16 (2)";
       }},
      {"lse_not_fp32", kBoth, B::cpu, kInvalid,
       [](AttentionCall& c) -> std::string { c.lse.dtype = DType::bf16; return "lse: dtype is bf16, expected fp32"; }},

      // Devices.
      {"k_on_other_device", kBoth, B::cpu, kInvalid,
       [](AttentionCall& c) -> std::string { c.k.device = 0; return "k: device is cuda:0, expected cpu like q"; }},
      {"lse_on_other_device", kBoth, B::cpu, kInvalid,
       [](AttentionCall& c) -> std::string { c.lse.device = 1; return "lse: device is cuda:1, expected cpu like q"; }},
      {"dk_on_other_gpu", kBackward, B::device, kInvalid,
       [](AttentionCall& c) -> std::string { c.dk.device = 1; return "dk: device is cuda:1, expected cuda:0 like q"; }},
      {"device_below_cpu", kBoth, B::cpu, kInvalid,
       [](AttentionCall& c) -> std::string { c.q.device = -2; return "q: device is -2, expected -1 (CPU)"; }},

      // What the GPU kernels cannot run.
      {"gpu_fp32", kBoth, B::device, kUnsupported, [](AttentionCall& c) -> std::string {
         set_dtype(c, DType::f32);
         return "q: dtype is fp32 on cuda:0, expected fp16 or bf16 for the GPU kernels (fp32 runs on the CPU backend)";
       }},
      {"gpu_head_dim_264", kBoth, B::device, kUnsupported, [](AttentionCall& c) -> std::string {
         set_head_dim(c, 264);
         return "q: shape[3] (head_dim) is 264 on cuda:0, expected 1..256";
       }},
      {"gpu_k_misaligned", kBoth, B::device, kUnsupported, [](AttentionCall& c) {
         c.k.data = offset_bytes(c.k.data, 8);
         return fmt::format("k: data pointer {} is not 16-byte aligned", fmt::ptr(c.k.data));
       }},
      {"gpu_dv_misaligned", kBackward, B::device, kUnsupported, [](AttentionCall& c) {
         c.dv.data = offset_bytes(c.dv.data, 2);
         return fmt::format("dv: data pointer {} is not 16-byte aligned", fmt::ptr(c.dv.data));
       }},
      {"gpu_lse_misaligned", kBoth, B::device, kUnsupported, [](AttentionCall& c) {
         c.lse.data = offset_bytes(c.lse.data, 2);
         return fmt::format("lse: data pointer {} is not 4-byte aligned", fmt::ptr(c.lse.data));
       }},
      {"gpu_v_row_stride", kBoth, B::device, kUnsupported, [](AttentionCall& c) {
         c.v.stride[1] += 4;
         return fmt::format("v: stride[1] (seqlen_k) is {} elements, expected a multiple of 8 on cuda:0 when head_dim % 8 == 0",
                            c.v.stride[1]);
       }},
      {"gpu_dq_batch_stride", kBackward, B::device, kUnsupported, [](AttentionCall& c) {
         c.dq.stride[0] += 2;
         return fmt::format("dq: stride[0] (batch) is {} elements, expected a multiple of 8", c.dq.stride[0]);
       }},
      {"gpu_workspace_misaligned", kBackward, B::device, kUnsupported, [](AttentionCall& c) {
         c.workspace = reinterpret_cast<void*>((std::uintptr_t{1} << 46) + 8);  // apart from every tensor
         c.workspace_bytes = 1024;
         return fmt::format("workspace: pointer {} is not 16-byte aligned", fmt::ptr(c.workspace));
       }},

      // What the CPU backend cannot run.
      {"cpu_head_dim_1025", kBoth, B::cpu, kUnsupported, [](AttentionCall& c) -> std::string {
         set_head_dim(c, 1025);
         return "q: shape[3] (head_dim) is 1025, expected 1..1024 for the CPU backend";
       }},
      {"cpu_misaligned", kBoth, B::cpu, kInvalid, [](AttentionCall& c) {
         c.o.data = offset_bytes(c.o.data, 1);
         return fmt::format("o: data pointer {} is not aligned to its element size", fmt::ptr(c.o.data));
       }},

      // Options.
      {"scale_negative", kBoth, B::cpu, kInvalid, [](AttentionCall& c) -> std::string {
         c.options.softmax_scale = -0.5f;
         return "options.softmax_scale: is -0.5, expected a finite value > 0";
       }},
      {"scale_zero", kBoth, B::cpu, kInvalid, [](AttentionCall& c) -> std::string {
         c.options.softmax_scale = 0.0f;
         return "options.softmax_scale: is 0, expected a finite value > 0";
       }},
      {"scale_infinite", kBoth, B::device, kInvalid, [](AttentionCall& c) -> std::string {
         c.options.softmax_scale = std::numeric_limits<float>::infinity();
         return "options.softmax_scale: is inf, expected a finite value > 0";
       }},
      {"window_left_below_minus_one", kBoth, B::cpu, kInvalid, [](AttentionCall& c) -> std::string {
         c.options.window_left = -2;
         return "options.window_left: is -2, expected -1 (unbounded) or >= 0";
       }},
      {"window_right_below_minus_one", kBoth, B::cpu, kInvalid, [](AttentionCall& c) -> std::string {
         c.options.window_right = -7;
         return "options.window_right: is -7, expected -1 (unbounded) or >= 0";
       }},
      {"softcap_negative", kBoth, B::cpu, kInvalid, [](AttentionCall& c) -> std::string {
         c.options.softcap = -1.5f;
         return "options.softcap: is -1.5, expected a finite value >= 0";
       }},
      {"softcap_nan", kBoth, B::cpu, kInvalid, [](AttentionCall& c) -> std::string {
         c.options.softcap = std::numeric_limits<float>::quiet_NaN();
         return "options.softcap: is nan, expected a finite value >= 0";
       }},
      {"softcap_infinite", kBoth, B::device, kInvalid, [](AttentionCall& c) -> std::string {
         c.options.softcap = std::numeric_limits<float>::infinity();
         return "options.softcap: is inf, expected a finite value >= 0";
       }},

      // Outputs that share memory with an input or with each other (issue 17).
      {"o_is_k", kForward, B::cpu, kInvalid, [](AttentionCall& c) -> std::string {
         c.o.data = c.k.data;  // o may reach past k's buffer into another input's: the first one met is named
         return "o: shares memory with ";
       }},
      {"dk_is_v", kBackward, B::cpu, kInvalid, [](AttentionCall& c) -> std::string {
         c.dk = c.v;
         return "dk: shares memory with v";
       }},
      {"dk_inside_dq", kBackward, B::cpu, kInvalid, [](AttentionCall& c) -> std::string {
         c.dk.data = c.dq.data;
         return "dk: shares memory with ";  // dk may reach past dq into another buffer
       }},
      {"lse_inside_o", kForward, B::cpu, kInvalid, [](AttentionCall& c) -> std::string {
         c.lse.data = c.o.data;
         return "lse: shares memory with ";  // lse may reach past o into another buffer
       }},
      {"o_batch_stride_zero", kForward, B::cpu, kInvalid, [](AttentionCall& c) -> std::string {
         c.o.stride[0] = 0;  // batch >= 2: two batches write one place
         return "o: strides (0, ";
       }},
      {"dv_rows_interleave", kBackward, B::cpu, kInvalid, [](AttentionCall& c) -> std::string {
         c.dv.stride[0] -= 1;  // batch >= 2: batch 1 starts on batch 0's last element
         return "put several elements at one address";
       }},
      {"q_elements_overflow_int64", kBoth, B::cpu, kInvalid, [](AttentionCall& c) -> std::string {
         for (Tensor* t : {&c.q, &c.o, &c.dout, &c.dq}) {  // 2^32 x 2^32 rows of zero stride: tiny span
           t->shape[0] = t->shape[1] = std::int64_t{1} << 32;
           t->stride[0] = t->stride[1] = 0;
         }
         for (Tensor* t : {&c.k, &c.v, &c.dk, &c.dv}) t->shape[0] = std::int64_t{1} << 32;
         return "q: shape (4294967296, 4294967296, ";
       }},

      {"q_view_wraps_address_space", kBoth, B::cpu, kInvalid, [](AttentionCall& c) {
         c.q.data = reinterpret_cast<void*>(std::numeric_limits<std::uintptr_t>::max() - 15);  // the CPU backend would read it
         return fmt::format("q: view at {} spans", fmt::ptr(c.q.data));
       }},
      {"dk_view_wraps_address_space", kBackward, B::cpu, kInvalid, [](AttentionCall& c) {
         c.dk.data = reinterpret_cast<void*>(std::numeric_limits<std::uintptr_t>::max() - 15);  // overlap checks would wrap
         return fmt::format("dk: view at {} spans", fmt::ptr(c.dk.data));
       }},

      // Workspace.
      {"workspace_overlaps_q", kBackward, B::cpu, kInvalid, [](AttentionCall& c) -> std::string {
         c.workspace = c.q.data;
         c.workspace_bytes = 64;
         return "workspace: [";
       }},
      {"workspace_null_with_bytes", kBackward, B::cpu, kInvalid, [](AttentionCall& c) -> std::string {
         c.workspace_bytes = 4096;
         return "workspace: is null but workspace_bytes is 4096";
       }},
      {"workspace_size_wraps_address_space", kBackward, B::cpu, kInvalid, [](AttentionCall& c) {
         c.workspace = c.q.data;  // [q, q + SIZE_MAX) covers q: a wrapped end must not hide that
         c.workspace_bytes = std::numeric_limits<std::size_t>::max();
         return fmt::format("workspace: [{}, +{} bytes) runs past the end of the address space", fmt::ptr(c.workspace),
                            c.workspace_bytes);
       }},
      {"workspace_without_bytes", kBackward, B::device, kInvalid, [](AttentionCall& c) {
         c.workspace = c.q.data;
         return fmt::format("workspace_bytes: is 0 but workspace is {}", fmt::ptr(c.workspace));
       }},
  };
  return cases;
}

}  // namespace flashgen::test
