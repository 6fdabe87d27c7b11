#pragma once
// Where a decode step's GPU time goes, from the GPU's own kernel records (cupti_capture.h).
// With overlapped launches kernels run partly at once, so a kernel's own duration overstates
// what it costs the step: here each kernel is charged what it *adds*, how much later than every
// kernel before it (by start) it ends. A step's adds sum to its busy time.
#include <cstdint>
#include <string>
#include <vector>

namespace luminal::cuda {

struct KernelRecord {
  std::string name;
  uint64_t start_ns = 0, end_ns = 0;
  uint32_t stream = 0;
  int blocks = 0, threads = 0;  // grid and block sizes, all dimensions multiplied
};

// A generated function's kind: lm_<kind>_<hash> -> <kind>; a library kernel's name, shortened.
std::string kernel_kind(const std::string& name);

struct KernelCost {
  std::string kind;
  double us = 0, adds_us = 0;  // its duration, and how much it adds to the step
  int blocks = 0, threads = 0;
};

struct KindCost {
  std::string kind;
  double count = 0, us = 0, adds_us = 0;  // per step, averaged over steps
};

struct TimelineReport {
  struct Step {
    int kernels = 0;
    double span_us = 0, busy_us = 0, idle_us = 0;  // first start to last end; covered by a kernel; not
  };
  std::vector<Step> steps;
  std::vector<KindCost> kinds;       // most added time first
  std::vector<KernelCost> sequence;  // the median-span step's kernels, in start order
};

// Each element of `steps` holds one step's kernels, in any order. Steps without kernels are skipped.
TimelineReport analyse_timeline(const std::vector<std::vector<KernelRecord>>& steps);

// A readable table: the steps, the kinds, then the first `show` kernels of the sequence.
std::string format_timeline(const TimelineReport& r, size_t show);

}  // namespace luminal::cuda
