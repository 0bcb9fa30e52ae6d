#include "nan_check.h"

#include "fusedconv/error.h"
#include "halide_call.h"

#include "count_nan_cpu.h"
#include "count_nan_cuda.h"

#include <HalideBuffer.h>

namespace fusedconv::detail {

bool has_nan(const Tensor &t) {
    if (t.dim() != 4) throw Error("NaN check: needs a 4D tensor, got " + shape_string(t.shape()));
    Halide::Runtime::Buffer<int32_t> counts(static_cast<int>(t.shape()[0]));
    const bool gpu = t.device() == Device::GPU;
    auto fn = gpu ? fusedconv_count_nan_cuda : fusedconv_count_nan_cpu;
    check_halide(fn(t.raw(), counts.raw_buffer()), "NaN check of " + shape_string(t.shape()));
    if (gpu) check_halide(counts.copy_to_host(), "NaN check: copying the counts to the host");
    for (int n = 0; n < counts.dim(0).extent(); n++) {
        if (counts(n) != 0) return true;
    }
    return false;
}

}  // namespace fusedconv::detail
