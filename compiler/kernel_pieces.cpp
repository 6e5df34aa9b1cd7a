#include "compiler/kernel_pieces.h"

namespace flashgen {

DkdvMainloop dkdv_mainloop(const KernelSpec& s) {
  if (s.warp_specialized())
    return s.padded_head_dim() == 256 ? DkdvMainloop::sm90_ws_shared_scores : DkdvMainloop::sm90_ws;
  if (!s.uses_wgmma()) return DkdvMainloop::sm80;
  // d256 on wgmma: both warpgroups on the same 64 keys, one head-dim half each (KernelSpec::uses_wgmma).
  return s.padded_head_dim() == 256 ? DkdvMainloop::sm90_shared_scores : DkdvMainloop::sm90;
}

bool dkdv_section_grid(const KernelSpec& s) {
  return s.pass == Pass::bwd_dkdv && s.warp_specialized() && (s.causal || s.window);
}

KernelPieces kernel_pieces(const KernelSpec& s) {
  switch (s.pass) {
    case Pass::fwd:  // heaviest (last, under a causal mask) query tiles first
      if (s.warp_specialized()) {
        KernelPieces ws{{"fwd/fwd_kernel_sm90.cuh"}, "flash::FwdKernelSm90<Traits, "};
        if (s.persistent) ws.headers.push_back("scheduler/persistent.cuh");
        // Persistent under a mask (Traits::kLocal): the longest tiles first, rounds in a snake.
        ws.kernel += s.persistent ? "flash::StaticPersistentScheduler<Traits::kBlockM, Traits::kLocal>, "
                                  : "flash::SingleTileScheduler<true>, ";
        ws.kernel += "flash::FwdMainloopSm90<Traits>, flash::FwdEpilogueSm90<Traits>>";
        return ws;
      }
      return {{"fwd/fwd_kernel.cuh"},
              "flash::FwdKernel<Traits, flash::SingleTileScheduler<true>, flash::FwdMainloop<Traits>, "
              "flash::FwdEpilogue<Traits>>"};
    case Pass::bwd_preprocess:
      return {{"bwd/bwd_preprocess_kernel.cuh"}, "flash::BwdPreprocessKernel<Traits, flash::SingleTileScheduler<false>>"};
    case Pass::bwd_dkdv: {
      struct Mainloop {
        const char* header;
        const char* type;
      };
      static constexpr Mainloop kMainloops[] = {  // in DkdvMainloop's order
          {"bwd/dkdv_mainloop_sm80.cuh", "flash::DkdvMainloopSm80<Traits>"},
          {"bwd/dkdv_mainloop_sm90.cuh", "flash::DkdvMainloopSm90<Traits>"},
          {"bwd/dkdv_mainloop_sm90_shared_scores.cuh", "flash::DkdvMainloopSm90SharedScores<Traits>"},
          {"bwd/dkdv_mainloop_sm90_ws.cuh", "flash::DkdvMainloopSm90Ws<Traits>"},
          {"bwd/dkdv_mainloop_sm90_ws_shared_scores.cuh", "flash::DkdvMainloopSm90WsSharedScores<Traits>"},
      };
      const Mainloop& m = kMainloops[static_cast<int>(dkdv_mainloop(s))];
      if (s.warp_specialized()) {  // the producer / consumer kernel, its epilogue on the consumer threads
        const bool sections = dkdv_section_grid(s);
        KernelPieces ws{{"bwd/bwd_dkdv_kernel_sm90.cuh", m.header},
                        std::string("flash::BwdDkdvKernelSm90<Traits, ") + m.type + ", " +
                            (sections ? "flash::SectionGridScheduler>" : "flash::SingleTileScheduler<false, false>>")};
        if (sections) ws.headers.push_back("scheduler/section_grid.cuh");
        return ws;
      }
      return {{"bwd/bwd_dkdv_kernel.cuh", m.header},
              std::string("flash::BwdDkdvKernel<Traits, ") + m.type +
                  ", flash::SingleTileScheduler<false>, flash::DkdvEpilogue<Traits>>"};
    }
    case Pass::bwd_dq:
      return {{"bwd/bwd_dq_kernel.cuh"},
              "flash::BwdDqKernel<Traits, flash::SingleTileScheduler<true>, flash::BwdDqMainloop<Traits>>"};
    case Pass::bwd_dq_convert:
      return {{"bwd/bwd_dq_convert_kernel.cuh"}, "flash::BwdDqConvertKernel<Traits, flash::SingleTileScheduler<false>>"};
    case Pass::fwd_splitkv:
      return {{"fwd/fwd_splitkv_kernel.cuh"},
              "flash::FwdSplitKvKernel<Traits, flash::SplitKvScheduler, flash::FwdSplitKvMainloop<Traits>, "
              "flash::FwdSplitKvEpilogue<Traits>>"};
    case Pass::fwd_combine: return {{"fwd/fwd_combine_kernel.cuh"}, "flash::FwdCombineKernel<Traits>"};
    case Pass::kv_append: return {{"kv_cache/kv_append_kernel.cuh"}, "flash::KvAppendKernel<Traits>"};
  }
  throw Error(Status::internal, "kernel_pieces: unknown pass");
}

}  // namespace flashgen
