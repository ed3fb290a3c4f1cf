"""kw_measure: the kernelwiki measuring harness for Python (CuPy) programs on wiki pages.

The runner puts this file next to the snippet (snippets/harness.py); a program imports it:

    import kw_measure
    bench = kw_measure.Bench("hw-wgmma")
    s = bench.time(lambda it: kernel((grid,), (block,), (bufs[it % 2], out)))
    bench.metric("tflops", flops / s.median_s, "FLOP/s", s, bound="tensor_bf16")
    sys.exit(bench.finish())

Same rules as kw_measure.cuh: warm-up, an L2 flush (a write over twice the device's L2) before each
sample, CUDA events per sample, median with a distribution-free 95% interval, NVML clocks/power
through ctypes (absent NVML: "nvml": false), a roofline floor from the H200 datasheet, and the JSON
written on the descriptor named by KERNELWIKI_METRICS_FD, never on standard output.
"""

from __future__ import annotations

import ctypes
import json
import math
import os
import sys
from dataclasses import dataclass

# NVIDIA H200 SXM datasheet: HBM3e 4.8 TB/s; BF16 1,979 TFLOPS with sparsity (989.5 dense);
# FP8 3,958 with sparsity (1,979 dense). Shared memory: 128 B/clock/SM x SMs x max SM clock.
H200_PEAKS = {"hbm": 4.8e12, "tensor_bf16": 989.5e12, "tensor_fp8": 1979e12}


@dataclass
class Stats:
    n: int
    median_s: float
    ci_low_s: float
    ci_high_s: float


def summarize(times_s: list[float]) -> Stats:
    v = sorted(times_s)
    n = len(v)
    med = v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])
    half = 1.96 * math.sqrt(n) / 2
    lo = max(0, min(n - 1, math.floor(n / 2 - half)))
    hi = max(0, min(n - 1, math.ceil(n / 2 + half)))
    return Stats(n, med, v[lo], v[hi])


class _Nvml:
    def __init__(self, bus_id: str) -> None:
        self.ok = False
        try:
            lib = ctypes.CDLL("libnvidia-ml.so.1")
            if lib.nvmlInit_v2() != 0:
                return
            self.dev = ctypes.c_void_p()
            if lib.nvmlDeviceGetHandleByPciBusId_v2(bus_id.encode(), ctypes.byref(self.dev)) != 0:
                return
            self.lib, self.ok = lib, True
        except (OSError, AttributeError):
            pass

    def read(self) -> dict[str, int]:
        if not self.ok:
            return {}
        out = {}
        for key, fn, arg in (
            ("sm", "nvmlDeviceGetClockInfo", 1),
            ("mem", "nvmlDeviceGetClockInfo", 2),
            ("temp", "nvmlDeviceGetTemperature", 0),
        ):
            v = ctypes.c_uint()
            if getattr(self.lib, fn)(self.dev, arg, ctypes.byref(v)) == 0:
                out[key] = v.value
        p = ctypes.c_uint()
        if self.lib.nvmlDeviceGetPowerUsage(self.dev, ctypes.byref(p)) == 0:
            out["power_mw"] = p.value
        return out


class Bench:
    def __init__(self, name: str, warmup: int = 3, samples: int = 31, flush_l2: bool = True) -> None:
        import cupy  # type: ignore[import-not-found]  # on the GPU machine only

        self.cp = cupy
        self.name, self.warmup, self.samples, self.flush_l2 = name, warmup, samples, flush_l2
        if os.environ.get("KERNELWIKI_PROFILE") == "1":  # under a profiler: one sample, no warm-up
            self.warmup, self.samples = 0, 1
        dev = cupy.cuda.Device()
        self.props = cupy.cuda.runtime.getDeviceProperties(dev.id)
        self.gpu_name = self.props["name"].decode() if isinstance(self.props["name"], bytes) else str(self.props["name"])
        l2 = int(dev.attributes["L2CacheSize"])
        self.flush = cupy.empty(2 * l2 // 4, dtype=cupy.int32)
        self.max_sm_mhz = int(dev.attributes["ClockRate"]) // 1000
        self.sm_count = int(dev.attributes["MultiProcessorCount"])
        self.l2 = l2
        self.nvml = _Nvml(cupy.cuda.runtime.deviceGetPCIBusId(dev.id))
        self.readings: list[dict[str, int]] = []
        self.metrics: dict[str, dict[str, object]] = {}
        self.guard_failures = 0

    def peak(self, bound: str) -> float:
        if "H200" not in self.gpu_name:
            return 0.0
        if bound == "smem":
            return 128.0 * self.sm_count * self.max_sm_mhz * 1e6
        return H200_PEAKS.get(bound, 0.0)

    def time(self, launch) -> Stats:
        cp = self.cp
        for i in range(self.warmup):
            launch(i)
        cp.cuda.Device().synchronize()
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        times = []
        for i in range(self.samples):
            if self.flush_l2:
                self.flush.fill(i)
            start.record()
            launch(self.warmup + i)
            stop.record()
            stop.synchronize()
            times.append(cp.cuda.get_elapsed_time(start, stop) * 1e-3)
            self.readings.append(self.nvml.read())
        cp.cuda.Device().synchronize()
        return summarize(times)

    def metric(self, key: str, value: float, unit: str, s: Stats, bound: str = "none", is_rate: bool = True) -> None:
        if is_rate:
            lo, hi = value * s.median_s / s.ci_high_s, value * s.median_s / s.ci_low_s
        else:
            lo, hi = value * s.ci_low_s / s.median_s, value * s.ci_high_s / s.median_s
        pk = self.peak(bound)
        if pk and value > pk * 1.02:
            self.guard_failures += 1
            print(f"kw_measure: {key} = {value:g} {unit} exceeds the H200 {bound} peak {pk:g}: rejected", file=sys.stderr)
        self.metrics[key] = {"value": value, "unit": unit, "ci_low": lo, "ci_high": hi, "n": s.n, "bound": bound, "peak": pk}
        print(f"{key}: {value:.4g} {unit} (95% CI {lo:.4g} .. {hi:.4g}, n={s.n})")

    def finish(self) -> int:
        self.readings.append(self.nvml.read())
        clocks: dict[str, object] = {"nvml": self.nvml.ok}
        sm = [r["sm"] for r in self.readings if "sm" in r]
        if sm:
            clocks.update(
                sm_mhz_min=min(sm),
                sm_mhz_max=max(sm),
                mem_mhz=self.readings[-1].get("mem", 0),
                power_w_max=max(r.get("power_mw", 0) for r in self.readings) / 1000,
                temp_c_max=max(r.get("temp", 0) for r in self.readings),
            )
        doc = {
            "harness": "kw_measure/1",
            "name": self.name,
            "gpu": {"name": self.gpu_name, "sm_count": self.sm_count, "l2_bytes": self.l2, "max_sm_mhz": self.max_sm_mhz},
            "clocks": clocks,
            "metrics": self.metrics,
            "guard_failures": self.guard_failures,
        }
        fd = os.environ.get("KERNELWIKI_METRICS_FD")
        if fd:
            with os.fdopen(int(fd), "w") as fh:
                fh.write(json.dumps(doc))
        else:
            print("kw_measure: KERNELWIKI_METRICS_FD not set; metrics not reported", file=sys.stderr)
        return 1 if self.guard_failures else 0
