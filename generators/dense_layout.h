// Layout constraints that generators put on their buffer Inputs.
#pragma once

namespace fusedconv {

// Requires `buf` to be dense, innermost dimension first: each stride is the
// previous dimension's stride times its extent (PyTorch-contiguous, which is
// what the runtime's tensors always are; Halide checks it on every call).
// Strides then follow from the extents, so once a specialization fixes the
// extents (a 3x3x3 kernel, say) every offset in the buffer is a constant.
template <typename BufferInput>
void require_dense(BufferInput &buf) {
    for (int i = 1; i < buf.dimensions(); ++i) {
        buf.dim(i).set_stride(buf.dim(i - 1).stride() * buf.dim(i - 1).extent());
    }
}

}  // namespace fusedconv
