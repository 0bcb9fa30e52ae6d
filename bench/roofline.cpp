#include "roofline.h"

#include <algorithm>

namespace fusedconv::bench {

int fp32_lanes_per_sm(int cc_major, int cc_minor) {
    if (cc_major >= 9) return 128;
    if (cc_major == 8) return cc_minor == 0 ? 64 : 128;
    return 64;
}

Ceilings attribute_ceilings(const GpuInfo &info) {
    Ceilings c;
    c.fma_tflops = info.sm_count * fp32_lanes_per_sm(info.cc_major, info.cc_minor) * 2.0 *
                   info.sm_clock_mhz * 1e6 / 1e12;
    c.mem_gbps = info.mem_clock_mhz * 1e6 * 2.0 * (info.bus_width_bits / 8.0) / 1e9;
    c.source = "driver attributes";
    return c;
}

Roofline roofline(double flops, double bytes, double ms, const Ceilings &c) {
    Roofline r;
    double compute_ms = c.fma_tflops > 0 ? flops / (c.fma_tflops * 1e12) * 1e3 : 0;
    double memory_ms = c.mem_gbps > 0 ? bytes / (c.mem_gbps * 1e9) * 1e3 : 0;
    r.floor_ms = std::max(compute_ms, memory_ms);
    if (ms > 0) {
        r.tflops = flops / (ms * 1e-3) / 1e12;
        r.gbps = bytes / (ms * 1e-3) / 1e9;
        r.fma_frac = c.fma_tflops > 0 ? r.tflops / c.fma_tflops : 0;
        r.mem_frac = c.mem_gbps > 0 ? r.gbps / c.mem_gbps : 0;
    }
    return r;
}

}  // namespace fusedconv::bench
