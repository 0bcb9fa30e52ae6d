// Device ceilings and where a measured time sits against them. GPU-free.
#pragma once

#include "fusedconv/device.h"

#include <string>

namespace fusedconv::bench {

struct Ceilings {
    double fma_tflops = 0;  // float32 FMA peak (2 FLOPs per FMA)
    double mem_gbps = 0;    // device memory bandwidth
    std::string source;     // "datasheet (driver attributes)" or "measured"
};

// FP32 lanes per multiprocessor by compute capability (64 on 7.x and 8.0,
// 128 on 8.6, 8.9 and 9.0 and later).
int fp32_lanes_per_sm(int cc_major, int cc_minor);
// Peaks from the driver's attributes: SMs x lanes x 2 x clock; memory clock x
// 2 (double data rate) x bus width. Zero where an attribute is missing.
Ceilings attribute_ceilings(const GpuInfo &info);

struct Roofline {
    double floor_ms = 0;   // max(flops / fma peak, bytes / bandwidth)
    double tflops = 0;     // achieved
    double gbps = 0;       // achieved, on the unavoidable bytes
    double fma_frac = 0;   // achieved / peak
    double mem_frac = 0;
};
Roofline roofline(double flops, double bytes, double ms, const Ceilings &c);

}  // namespace fusedconv::bench
