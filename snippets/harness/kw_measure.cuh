// kw_measure.cuh: the kernelwiki measuring harness for CUDA C++ programs on wiki pages.
//
// A page's program includes it with `#include "kw_measure.cuh"`; the runner puts the file next to
// the snippet (snippets/harness.py). It times GPU work the way benchmark suites do and hands the
// numbers to the runner on a file descriptor of their own, never through standard output:
//
//   kw::Bench bench("hw-tma");                      // device properties, NVML, L2 flush buffer
//   kw::Stats s = bench.time([&](int it) { kernel<<<g, b>>>(in[it % 2], out); });
//   bench.metric("copy_bw", bytes / (s.median_ms * 1e-3), "B/s", s, kw::Bound::Hbm);
//   return bench.finish();                          // JSON on $KERNELWIKI_METRICS_FD; 0, or 1 on a guard
//
// * warm-up launches, then `samples` launches each timed by its own pair of CUDA events, with an
//   L2 flush (a write over a buffer twice the device's L2) before every sample unless turned off;
// * the median, and a distribution-free 95% confidence interval of the median from order statistics;
// * SM and memory clocks, power, temperature and throttle reasons from NVML (libnvidia-ml.so.1,
//   opened with dlopen so the header also compiles and runs where NVML is absent: then "nvml": false);
// * guards: every launch is checked, the stream is synchronised before a sample is read, and a
//   roofline floor rejects a rate faster than the H200's datasheet peak (kw::h200_peak; the runner
//   re-checks the same bounds in runner/metrics.py).
// * KERNELWIKI_PROFILE=1 (for a run under Nsight Compute) takes one sample and no warm-up.
#pragma once
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace kw {

// Peaks of the NVIDIA H200 SXM (141 GB) from NVIDIA's H200 Tensor Core GPU datasheet: HBM3e
// 4.8 TB/s; BF16/FP16 tensor 1,979 TFLOPS *with sparsity*, so 989.5 dense; FP8 3,958 with sparsity,
// 1,979 dense. Shared memory has no datasheet figure: 32 banks x 4 B per clock per SM (CUDA C++
// Programming Guide, shared memory) x SM count x the device's maximum SM clock, computed at run time.
enum class Bound { None, Hbm, Smem, TensorBf16, TensorFp8 };
inline double h200_peak(Bound b) {
  switch (b) {
    case Bound::Hbm: return 4.8e12;          // B/s
    case Bound::TensorBf16: return 989.5e12; // FLOP/s, dense
    case Bound::TensorFp8: return 1979e12;   // FLOP/s, dense
    default: return 0.0;
  }
}
inline const char* bound_name(Bound b) {
  switch (b) {
    case Bound::Hbm: return "hbm";
    case Bound::Smem: return "smem";
    case Bound::TensorBf16: return "tensor_bf16";
    case Bound::TensorFp8: return "tensor_fp8";
    default: return "none";
  }
}

struct Stats {
  int n = 0;
  double median_ms = 0, ci_low_ms = 0, ci_high_ms = 0, min_ms = 0, max_ms = 0;
};

// Median and a 95% confidence interval of the median: the order statistics at ranks
// n/2 -/+ 1.96*sqrt(n)/2 (normal approximation to the binomial), clamped to the sample.
inline Stats summarize(std::vector<double> v) {
  Stats s;
  s.n = (int)v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  const int n = s.n;
  s.median_ms = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  const double half = 1.96 * std::sqrt((double)n) / 2.0;
  int lo = (int)std::floor(n / 2.0 - half), hi = (int)std::ceil(n / 2.0 + half);
  lo = std::max(0, std::min(n - 1, lo));
  hi = std::max(0, std::min(n - 1, hi));
  s.ci_low_ms = v[lo];
  s.ci_high_ms = v[hi];
  s.min_ms = v.front();
  s.max_ms = v.back();
  return s;
}

// NVML through dlopen: only the few entry points used, with their documented C signatures.
struct Nvml {
  typedef int (*InitFn)();
  typedef int (*ByPciFn)(const char*, void**);
  typedef int (*ClockFn)(void*, int, unsigned*);
  typedef int (*PowerFn)(void*, unsigned*);
  typedef int (*TempFn)(void*, int, unsigned*);
  typedef int (*ReasonsFn)(void*, unsigned long long*);
  void* lib = nullptr;
  void* dev = nullptr;
  ClockFn clock = nullptr;
  PowerFn power = nullptr;
  TempFn temp = nullptr;
  ReasonsFn reasons = nullptr;
  bool open(int cuda_device) {
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return false;
    InitFn init = (InitFn)dlsym(lib, "nvmlInit_v2");
    ByPciFn by_pci = (ByPciFn)dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2");
    clock = (ClockFn)dlsym(lib, "nvmlDeviceGetClockInfo");
    power = (PowerFn)dlsym(lib, "nvmlDeviceGetPowerUsage");
    temp = (TempFn)dlsym(lib, "nvmlDeviceGetTemperature");
    reasons = (ReasonsFn)dlsym(lib, "nvmlDeviceGetCurrentClocksEventReasons");
    if (!reasons) reasons = (ReasonsFn)dlsym(lib, "nvmlDeviceGetCurrentClocksThrottleReasons");
    char bus[32] = {0};
    if (!init || !by_pci || !clock || init() != 0) return false;
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, cuda_device) != cudaSuccess) return false;
    return by_pci(bus, &dev) == 0;
  }
};

struct Reading {
  unsigned sm_mhz = 0, mem_mhz = 0, power_mw = 0, temp_c = 0;
  unsigned long long reasons = 0;
};

__global__ void kw_flush_kernel(int4* buf, size_t n, int salt) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    buf[i] = make_int4(salt, (int)i, salt, (int)i);
}

#define KW_CHECK(x)                                                                                   \
  do {                                                                                                \
    cudaError_t e_ = (x);                                                                             \
    if (e_ != cudaSuccess) {                                                                          \
      std::fprintf(stderr, "kw_measure: CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, \
                   __LINE__);                                                                         \
      std::exit(1);                                                                                   \
    }                                                                                                 \
  } while (0)

class Bench {
 public:
  int warmup = 3;        // untimed launches first
  int samples = 31;      // timed launches
  bool flush_l2 = true;  // write a 2x-L2 buffer before each sample (cold caches)

  explicit Bench(const char* name) : name_(name) {
    KW_CHECK(cudaGetDevice(&dev_));
    KW_CHECK(cudaGetDeviceProperties(&prop_, dev_));
    KW_CHECK(cudaDeviceGetAttribute(&max_sm_khz_, cudaDevAttrClockRate, dev_));
    flush_n_ = 2 * (size_t)prop_.l2CacheSize / sizeof(int4);
    KW_CHECK(cudaMalloc(&flush_, flush_n_ * sizeof(int4)));
    KW_CHECK(cudaEventCreate(&start_));
    KW_CHECK(cudaEventCreate(&stop_));
    nvml_ok_ = nvml_.open(dev_);
    first_ = read();
    const char* prof = std::getenv("KERNELWIKI_PROFILE");   // under a profiler: one untimed-warm-up-free sample
    if (prof && *prof == '1') warmup = 0, samples = 1;
  }
  ~Bench() {
    cudaFree(flush_);
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }

  const cudaDeviceProp& props() const { return prop_; }
  // 128 B per clock per SM (32 banks x 4 B) at the maximum SM clock: the shared-memory ceiling.
  double smem_peak_bytes_per_s() const { return 128.0 * prop_.multiProcessorCount * max_sm_khz_ * 1e3; }
  double peak(Bound b) const {
    if (std::strstr(prop_.name, "H200") == nullptr) return 0.0;  // peaks are known for the H200 only
    return b == Bound::Smem ? smem_peak_bytes_per_s() : h200_peak(b);
  }

  // Time `launch(iteration)` on the default stream; `launch` must only enqueue work.
  template <class F>
  Stats time(F&& launch) {
    for (int i = 0; i < warmup; ++i) launch(i);
    KW_CHECK(cudaGetLastError());
    KW_CHECK(cudaDeviceSynchronize());
    std::vector<double> ms;
    for (int i = 0; i < samples; ++i) {
      if (flush_l2) {
        kw_flush_kernel<<<4 * prop_.multiProcessorCount, 256>>>(flush_, flush_n_, i);
        KW_CHECK(cudaGetLastError());
      }
      KW_CHECK(cudaEventRecord(start_));
      launch(warmup + i);
      KW_CHECK(cudaEventRecord(stop_));
      KW_CHECK(cudaGetLastError());
      KW_CHECK(cudaEventSynchronize(stop_));
      float t = 0;
      KW_CHECK(cudaEventElapsedTime(&t, start_, stop_));
      ms.push_back(t);
      note(read());
    }
    KW_CHECK(cudaDeviceSynchronize());
    return summarize(ms);
  }

  // Record a rate or a time. `value` is what the claim compares; `s` gives the spread, `per_ms`
  // converts a time in ms into the value's unit (value = per_ms / ms for rates, ms * per_ms for times).
  void metric(const char* key, double value, const char* unit, const Stats& s, Bound bound = Bound::None,
              bool is_rate = true) {
    double lo = value, hi = value;
    if (s.median_ms > 0) {
      if (is_rate) {
        lo = value * s.median_ms / s.ci_high_ms;
        hi = value * s.median_ms / s.ci_low_ms;
      } else {
        lo = value * s.ci_low_ms / s.median_ms;
        hi = value * s.ci_high_ms / s.median_ms;
      }
    }
    add(key, value, unit, lo, hi, s.n, bound);
  }
  // A measured number without event timing (cycles from clock64, a ratio of two metrics).
  void value(const char* key, double v, const char* unit, double lo, double hi, int n) {
    add(key, v, unit, lo, hi, n, Bound::None);
  }

  // Write the JSON on the runner's descriptor; returns the program's exit status (1 if a guard failed).
  int finish() {
    Reading last = read();
    note(last);
    std::string j = "{\"harness\":\"kw_measure/1\",\"name\":\"" + esc(name_.c_str()) + "\",\"gpu\":{\"name\":\"" +
                    esc(prop_.name) + "\",\"cc\":\"" + std::to_string(prop_.major) + "." +
                    std::to_string(prop_.minor) + "\",\"sm_count\":" + std::to_string(prop_.multiProcessorCount) +
                    ",\"l2_bytes\":" + std::to_string(prop_.l2CacheSize) +
                    ",\"max_sm_mhz\":" + std::to_string(max_sm_khz_ / 1000) + "},\"clocks\":{\"nvml\":" +
                    (nvml_ok_ ? "true" : "false");
    if (nvml_ok_) {
      j += ",\"sm_mhz_min\":" + std::to_string(sm_min_) + ",\"sm_mhz_max\":" + std::to_string(sm_max_) +
           ",\"mem_mhz\":" + std::to_string(last.mem_mhz) + ",\"power_w_max\":" + num(power_max_ / 1000.0) +
           ",\"temp_c_max\":" + std::to_string(temp_max_) + ",\"throttle_reasons\":" + std::to_string(reasons_);
    }
    j += "},\"metrics\":{" + metrics_ + "},\"guard_failures\":" + std::to_string(guard_failures_) + "}";
    const char* fd_s = std::getenv("KERNELWIKI_METRICS_FD");
    if (fd_s && *fd_s) {
      const int fd = std::atoi(fd_s);
      size_t off = 0;
      while (off < j.size()) {
        const ssize_t w = ::write(fd, j.data() + off, j.size() - off);
        if (w <= 0) break;
        off += (size_t)w;
      }
      ::close(fd);
    } else {
      std::fprintf(stderr, "kw_measure: KERNELWIKI_METRICS_FD not set; metrics not reported\n");
    }
    return guard_failures_ ? 1 : 0;
  }

 private:
  Reading read() {
    Reading r;
    if (!nvml_ok_) return r;
    nvml_.clock(nvml_.dev, 1, &r.sm_mhz);   // NVML_CLOCK_SM
    nvml_.clock(nvml_.dev, 2, &r.mem_mhz);  // NVML_CLOCK_MEM
    if (nvml_.power) nvml_.power(nvml_.dev, &r.power_mw);
    if (nvml_.temp) nvml_.temp(nvml_.dev, 0, &r.temp_c);  // NVML_TEMPERATURE_GPU
    if (nvml_.reasons) nvml_.reasons(nvml_.dev, &r.reasons);
    return r;
  }
  void note(const Reading& r) {
    if (!nvml_ok_) return;
    sm_min_ = sm_min_ ? std::min(sm_min_, r.sm_mhz) : r.sm_mhz;
    sm_max_ = std::max(sm_max_, r.sm_mhz);
    power_max_ = std::max(power_max_, r.power_mw);
    temp_max_ = std::max(temp_max_, r.temp_c);
    reasons_ |= r.reasons;
  }
  static std::string esc(const char* s) {
    std::string o;
    for (; *s; ++s)
      if (*s == '"' || *s == '\\') o += ' ';
      else if ((unsigned char)*s >= 0x20) o += *s;
    return o;
  }
  static std::string num(double v) {
    if (!std::isfinite(v)) return "null";
    char b[64];
    std::snprintf(b, sizeof b, "%.6g", v);
    return b;
  }
  void add(const char* key, double v, const char* unit, double lo, double hi, int n, Bound bound) {
    const double pk = peak(bound);
    const bool over = pk > 0 && v > pk * 1.02;  // 2% for clock and rounding slack
    if (over) {
      ++guard_failures_;
      std::fprintf(stderr, "kw_measure: %s = %g %s exceeds the H200 %s peak %g: rejected\n", key, v, unit,
                   bound_name(bound), pk);
    }
    if (!metrics_.empty()) metrics_ += ",";
    metrics_ += "\"" + esc(key) + "\":{\"value\":" + num(v) + ",\"unit\":\"" + esc(unit) + "\",\"ci_low\":" +
                num(lo) + ",\"ci_high\":" + num(hi) + ",\"n\":" + std::to_string(n) + ",\"bound\":\"" +
                bound_name(bound) + "\",\"peak\":" + num(pk) + "}";
    std::printf("%s: %.4g %s (95%% CI %.4g .. %.4g, n=%d)\n", key, v, unit, lo, hi, n);
  }

  std::string name_;
  int dev_ = 0, max_sm_khz_ = 0;
  cudaDeviceProp prop_{};
  int4* flush_ = nullptr;
  size_t flush_n_ = 0;
  cudaEvent_t start_{}, stop_{};
  Nvml nvml_;
  bool nvml_ok_ = false;
  Reading first_;
  unsigned sm_min_ = 0, sm_max_ = 0, power_max_ = 0, temp_max_ = 0;
  unsigned long long reasons_ = 0;
  std::string metrics_;
  int guard_failures_ = 0;
};

}  // namespace kw
