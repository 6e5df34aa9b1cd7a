#include "runtime/kernel_timer.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <vector>

#include "flashgen/flashgen.hpp"
#include "runtime/cuda_driver.h"

namespace flashgen {

namespace {

// Two events per timed run; destroyed however the timing ends (an exception from
// `enqueue` included). Destroying an event still pending on the stream is allowed.
class EventPairs {
 public:
  explicit EventPairs(int count) {
    const CudaDriver& d = cuda_driver();
    events_.reserve(2 * static_cast<std::size_t>(count));
    for (int i = 0; i < 2 * count; ++i) {
      CUevent e = nullptr;
      check_cuda(d.cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate");
      events_.push_back(e);
    }
  }
  ~EventPairs() {
    for (CUevent e : events_) cuda_driver().cuEventDestroy(e);
  }
  EventPairs(const EventPairs&) = delete;
  EventPairs& operator=(const EventPairs&) = delete;

  CUevent start(int run) const { return events_[2 * run]; }
  CUevent stop(int run) const { return events_[2 * run + 1]; }

 private:
  std::vector<CUevent> events_;
};

// The buffer written to evict L2: twice the device's L2, allocated on first use for
// each device and kept for the life of the process (the driver frees it at exit).
// It lives in the context current at first use; flashgen works in primary contexts.
struct FlushBuffer {
  CUdeviceptr ptr = 0;
  std::size_t bytes = 0;
};

FlushBuffer flush_buffer(CUdevice device) {
  static std::mutex mutex;
  static std::map<CUdevice, FlushBuffer> buffers;
  std::lock_guard lock(mutex);
  auto found = buffers.find(device);
  if (found != buffers.end()) return found->second;

  const CudaDriver& d = cuda_driver();
  int l2_bytes = 0;
  check_cuda(d.cuDeviceGetAttribute(&l2_bytes, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, device),
             "cuDeviceGetAttribute(L2_CACHE_SIZE)", fmt::format("device {}", device));
  constexpr std::size_t kMinimumBytes = std::size_t{8} << 20;
  FlushBuffer b;
  b.bytes = std::max(2 * static_cast<std::size_t>(std::max(l2_bytes, 0)), kMinimumBytes);
  check_cuda(d.cuMemAlloc(&b.ptr, b.bytes), "cuMemAlloc (L2 flush buffer)",
             fmt::format("device {}, {} bytes", device, b.bytes));
  buffers.emplace(device, b);
  return b;
}

CUdevice current_device() {
  const CudaDriver& d = cuda_driver();
  CUcontext context = nullptr;
  check_cuda(d.cuCtxGetCurrent(&context), "cuCtxGetCurrent");
  if (context == nullptr)
    throw Error(Status::invalid_argument,
                "time_on_stream: no CUDA context is current on this thread, expected one (ensure_context(device))");
  CUdevice device = 0;
  check_cuda(d.cuCtxGetDevice(&device), "cuCtxGetDevice");
  return device;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

}  // namespace

Timing time_on_stream(CUstream stream, const std::function<void()>& enqueue, const std::function<void()>& reset,
                      const TimingOptions& options) {
  if (!enqueue) throw Error(Status::invalid_argument, "time_on_stream: enqueue is empty, expected a callable");
  if (options.warmup < 0)
    throw Error(Status::invalid_argument,
                fmt::format("TimingOptions::warmup: is {}, expected a count >= 0", options.warmup));
  if (options.repeats < 1)
    throw Error(Status::invalid_argument,
                fmt::format("TimingOptions::repeats: is {}, expected a count >= 1", options.repeats));

  const CudaDriver& d = cuda_driver();
  const CUdevice device = current_device();
  const FlushBuffer flush = options.flush_l2 ? flush_buffer(device) : FlushBuffer{};

  // Warm-up: first-call costs (kernel compilation, module load, pool growth) stay out
  // of the timed runs; synchronising here surfaces their errors before timing starts.
  for (int i = 0; i < options.warmup; ++i) enqueue();
  check_cuda(d.cuStreamSynchronize(stream), "cuStreamSynchronize (after warm-up)");

  const EventPairs events(options.repeats);
  for (int run = 0; run < options.repeats; ++run) {
    if (reset) reset();
    if (options.flush_l2)
      check_cuda(d.cuMemsetD32Async(flush.ptr, static_cast<unsigned>(run), flush.bytes / 4, stream),
                 "cuMemsetD32Async (L2 flush)");
    check_cuda(d.cuEventRecord(events.start(run), stream), "cuEventRecord");
    enqueue();
    check_cuda(d.cuEventRecord(events.stop(run), stream), "cuEventRecord");
  }
  check_cuda(d.cuEventSynchronize(events.stop(options.repeats - 1)), "cuEventSynchronize");

  std::vector<double> runs_ms;
  for (int run = 0; run < options.repeats; ++run) {
    float ms = 0;
    check_cuda(d.cuEventElapsedTime(&ms, events.start(run), events.stop(run)), "cuEventElapsedTime");
    runs_ms.push_back(ms);
  }
  const auto [min, max] = std::minmax_element(runs_ms.begin(), runs_ms.end());
  return Timing{median(runs_ms), *min, *max};
}

}  // namespace flashgen
