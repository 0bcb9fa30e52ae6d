// Ceilings measured on the device itself (METHOD.md: datasheet rates are
// leads). Built only with the CUDA toolkit; no CUDA header here.
#pragma once

#include <cstddef>

namespace fusedconv::bench {

// Best of several device-to-device copies of `bytes`, counting bytes read
// plus bytes written, in GB/s.
double measure_copy_gbps(size_t bytes);
// A kernel of independent float32 FMA chains on every multiprocessor, TFLOP/s.
double measure_fma_tflops();

}  // namespace fusedconv::bench
