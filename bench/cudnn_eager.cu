// PyTorch-eager-like baselines: cuDNN convolution + bias, then one CUDA kernel
// per PyTorch op, each writing its full intermediate to global memory. See
// cudnn_eager.h for the API and /work/shared/PROBLEMS.md for the semantics.
//
// What is mirrored from PyTorch eager (so the comparison is fair, not a straw
// man, and not a fused kernel either):
//  - the conv is cuDNN's, algorithm picked by timing (torch.backends.cudnn.
//    benchmark = True), math FMA (strict fp32) or TENSOR_OP (TF32) as PyTorch
//    sets it;
//  - torch.min(x, dim) returns values AND int64 indices, so the reduction
//    kernels write both (KernelBench then drops the indices);
//  - dropout in training mode writes the output and a bool mask
//    (at::native_dropout); in eval mode PyTorch returns its input, so the only
//    work left is the copy into the caller's output;
//  - the bias is a separate in-place add kernel after the conv (PyTorch's
//    output.add_(bias), not cudnnAddTensor; see ConvStage);
//  - GroupNorm is a statistics kernel and an apply kernel.
// Elementwise kernels are grid-stride loops over float4s, as PyTorch's are
// vectorized by 4 (scalar loads reach only about half the memory bandwidth).
#include "cudnn_eager.h"

#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

namespace fusedconv::bench {

EagerModel::~EagerModel() = default;

namespace {

// ---------------------------------------------------------------- errors

[[noreturn]] void fail(const char *call, const char *why, int line) {
    throw std::runtime_error(std::string("cudnn_eager.cu:") + std::to_string(line) + ": " +
                             call + " failed: " + why);
}

#define CUDA_CHECK(x)                                                  \
    do {                                                               \
        cudaError_t err_ = (x);                                        \
        if (err_ != cudaSuccess) fail(#x, cudaGetErrorString(err_), __LINE__); \
    } while (0)

#define CUDNN_CHECK(x)                                                 \
    do {                                                               \
        cudnnStatus_t st_ = (x);                                       \
        if (st_ != CUDNN_STATUS_SUCCESS) fail(#x, cudnnGetErrorString(st_), __LINE__); \
    } while (0)

// After every <<<>>> launch: catches bad configurations at once (asynchronous
// faults surface at the caller's next synchronizing call).
#define LAUNCH_CHECK(kernel_name)                                      \
    do {                                                               \
        cudaError_t err_ = cudaGetLastError();                         \
        if (err_ != cudaSuccess) fail("launch " kernel_name, cudaGetErrorString(err_), __LINE__); \
    } while (0)

#define REQUIRE(cond, msg)                                             \
    do {                                                               \
        if (!(cond)) fail("argument check " #cond, msg, __LINE__);     \
    } while (0)

// ---------------------------------------------------------------- RAII

// Destructors ignore errors: they may run while an exception unwinds.
template <class T, cudnnStatus_t (*Destroy)(T)>
struct CudnnDeleter {
    void operator()(T p) const { if (p) Destroy(p); }
};
template <class T, cudnnStatus_t (*Destroy)(T)>
using CudnnPtr = std::unique_ptr<std::remove_pointer_t<T>, CudnnDeleter<T, Destroy>>;

using Handle = CudnnPtr<cudnnHandle_t, cudnnDestroy>;
using TensorDesc = CudnnPtr<cudnnTensorDescriptor_t, cudnnDestroyTensorDescriptor>;
using FilterDesc = CudnnPtr<cudnnFilterDescriptor_t, cudnnDestroyFilterDescriptor>;
using ConvDesc = CudnnPtr<cudnnConvolutionDescriptor_t, cudnnDestroyConvolutionDescriptor>;

struct CudaFree {
    void operator()(void *p) const { if (p) cudaFree(p); }
};
using DevPtr = std::unique_ptr<void, CudaFree>;

DevPtr dev_alloc(size_t bytes) {
    void *p = nullptr;
    if (bytes) CUDA_CHECK(cudaMalloc(&p, bytes));
    return DevPtr(p);
}

// ---------------------------------------------------------------- helpers

constexpr int kThreads = 256;
constexpr size_t kWorkspaceLimit = size_t(4) << 30;  // 4 GiB, like a generous torch limit

// 1D grid for a grid-stride loop over n items (capped; the loop covers the rest).
unsigned grid_for(int64_t n) {
    int64_t blocks = (n + kThreads - 1) / kThreads;
    return unsigned(std::clamp<int64_t>(blocks, 1, int64_t(1) << 22));
}

int64_t product(const std::vector<int64_t> &v) {
    int64_t p = 1;
    for (int64_t d : v) p *= d;
    return p;
}

// Checks that the caller's pointer is device memory of the current device
// (a host pointer would otherwise fault asynchronously inside run()).
void check_device_ptr(const void *p, const char *name) {
    REQUIRE(p != nullptr, name);
    int dev = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    cudaPointerAttributes a{};
    CUDA_CHECK(cudaPointerGetAttributes(&a, p));
    bool ok = (a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged) &&
              a.device == dev;
    if (!ok) fail("check_device_ptr", (std::string(name) + " is not device memory of the current device").c_str(), __LINE__);
}

// Validates an (N, C, spatial...) shape and the kernel size.
void check_shape(const std::vector<int64_t> &in_shape, size_t rank, int cout, int k) {
    REQUIRE(in_shape.size() == rank, "input rank must be 4 (2D conv) or 5 (3D conv) as documented");
    for (int64_t d : in_shape)
        REQUIRE(d > 0 && d <= std::numeric_limits<int>::max(), "input dimensions must be positive ints");
    REQUIRE(cout > 0 && k > 0, "cout and k must be positive");
    for (size_t i = 2; i < rank; ++i) REQUIRE(in_shape[i] >= k, "kernel larger than the input");
}

const char *algo_name(cudnnConvolutionFwdAlgo_t a) {
    switch (a) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return "IMPLICIT_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: return "IMPLICIT_PRECOMP_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return "GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT: return "DIRECT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING: return "FFT_TILING";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: return "WINOGRAD";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
    default: return "?";
    }
}

const char *math_name(cudnnMathType_t m) {
    switch (m) {
    case CUDNN_DEFAULT_MATH: return "DEFAULT";
    case CUDNN_TENSOR_OP_MATH: return "TENSOR_OP";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return "TENSOR_OP_ALLOW_CONVERSION";
    case CUDNN_FMA_MATH: return "FMA";
    default: return "?";
    }
}

// ---------------------------------------------------------------- kernels

// PyTorch's min/max/clamp propagate NaN; fminf/fmaxf return the other operand.
__device__ __forceinline__ float nan_min(float a, float b) {
    return isnan(a) ? a : (isnan(b) ? b : fminf(a, b));
}
__device__ __forceinline__ float nan_max(float a, float b) {
    return isnan(a) ? a : (isnan(b) ? b : fmaxf(a, b));
}

#define GRID_STRIDE(i, n)                                                              \
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n);          \
         i += int64_t(gridDim.x) * blockDim.x)

// Memory-bound kernels move float4s when the pointers allow it: with one
// scalar load per thread an H200 streams only ~2 TB/s (too few bytes in
// flight); PyTorch's elementwise kernels vectorize by 4 the same way.
bool aligned16(const void *a, const void *b) {
    return ((reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b)) & 15) == 0;
}

template <class F>
__device__ __forceinline__ float4 map4(float4 a, const F &f) {
    return make_float4(f(a.x), f(a.y), f(a.z), f(a.w));
}

// torch.min(x, dim): x viewed as (outer, R, inner); out and idx are
// (outer, inner). One thread per output; neighbouring threads read
// neighbouring addresses. Index of the first minimum; the first NaN wins and
// stays (PyTorch's semantics).
__global__ void min_dim_kernel(const float *__restrict__ x, float *__restrict__ out,
                               int64_t *__restrict__ idx, int64_t n_out, int64_t R,
                               int64_t inner) {
    GRID_STRIDE(o, n_out) {
        const float *p = x + (o / inner) * R * inner + o % inner;
        float best = p[0];
        int64_t bi = 0;
        for (int64_t r = 1; r < R; ++r) {
            float v = p[r * inner];
            if (!isnan(best) && (isnan(v) || v < best)) best = v, bi = r;
        }
        out[o] = best;
        idx[o] = bi;
    }
}

// softmax over dim 1 of (N, C, S): exp(x - max) / sum, one thread per (n, s).
// A NaN anywhere in the column makes max NaN and so the whole column NaN.
__global__ void softmax_dim1_kernel(const float *__restrict__ x, float *__restrict__ out,
                                    int64_t n_out, int64_t C, int64_t S) {
    GRID_STRIDE(o, n_out) {
        const int64_t base = (o / S) * C * S + o % S;
        float m = -INFINITY;
        for (int64_t c = 0; c < C; ++c) m = nan_max(m, x[base + c * S]);
        float sum = 0.0f;
        for (int64_t c = 0; c < C; ++c) sum += expf(x[base + c * S] - m);
        for (int64_t c = 0; c < C; ++c) out[base + c * S] = expf(x[base + c * S] - m) / sum;
    }
}

// Elementwise ops, one kernel each (a new tensor every time, as in eager).
struct ScaleOp { float s; __device__ float operator()(float v) const { return v * s; } };
struct TanhOp { __device__ float operator()(float v) const { return tanhf(v); } };
struct MinScalarOp { float m; __device__ float operator()(float v) const { return nan_min(v, m); } };
// torch.clamp = min(max(v, lo), hi): hi wins when lo > hi; NaN propagates.
struct ClampOp {
    float lo, hi;
    __device__ float operator()(float v) const { return nan_min(nan_max(v, lo), hi); }
};

template <class Op>
__global__ void map_kernel(const float *__restrict__ x, float *__restrict__ out, int64_t n,
                           Op op, bool vec) {
    if (!vec) {
        GRID_STRIDE(i, n) out[i] = op(x[i]);
        return;
    }
    const int64_t n4 = n / 4;
    GRID_STRIDE(v, n4) reinterpret_cast<float4 *>(out)[v] = map4(reinterpret_cast<const float4 *>(x)[v], op);
    const int64_t t = n4 * 4 + threadIdx.x;  // the last n % 4 elements
    if (blockIdx.x == 0 && t < n) out[t] = op(x[t]);
}

template <class Op>
void launch_map(const float *x, float *out, int64_t n, Op op) {
    const bool vec = aligned16(x, out);
    map_kernel<<<grid_for(vec ? n / 4 : n), kThreads, 0, 0>>>(x, out, n, op, vec);
    LAUNCH_CHECK("map_kernel");
}

// Per-channel maps over an NC(DHW) tensor seen as rows (n, c) of S contiguous
// elements: grid.y walks rows, grid.x the row, so per-row constants are
// looked up once per thread and no 64-bit division happens per element.
// x may equal y (the in-place bias add), hence no __restrict__ on them.
struct BiasRow {  // conv output += bias[c], as PyTorch's output.add_(bias.view(1, C, 1...))
    const float *bias;
    int C;
    struct Fn {
        float b;
        __device__ float operator()(float v) const { return v + b; }
    };
    __device__ Fn row(int64_t r) const { return {bias[r % C]}; }
};
struct GroupNormRow {  // y = (x - mean) * rstd * gamma[c] + beta[c]
    const float2 *stats;  // (N, G) of {mean, rstd}
    const float *gamma, *beta;
    int C, cpg;
    struct Fn {
        float mean, rstd, g, b;
        __device__ float operator()(float v) const { return (v - mean) * rstd * g + b; }
    };
    __device__ Fn row(int64_t r) const {
        const int c = int(r % C);
        const float2 st = stats[(r / C) * (C / cpg) + c / cpg];
        return {st.x, st.y, gamma[c], beta[c]};
    }
};

template <class RowOp>
__global__ void rows_kernel(const float *x, float *y, int64_t rows, int64_t S, RowOp op,
                            bool vec) {
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const auto f = op.row(r);
        const float *xr = x + r * S;
        float *yr = y + r * S;
        if (vec) {
            GRID_STRIDE(v, S / 4)
            reinterpret_cast<float4 *>(yr)[v] = map4(reinterpret_cast<const float4 *>(xr)[v], f);
        } else {
            GRID_STRIDE(s, S) yr[s] = f(xr[s]);
        }
    }
}

template <class RowOp>
void launch_rows(const float *x, float *y, int64_t rows, int64_t S, RowOp op) {
    const bool vec = S % 4 == 0 && aligned16(x, y);  // every row then starts 16-byte aligned
    const int64_t per_row = vec ? S / 4 : S;
    dim3 grid(unsigned(std::min<int64_t>((per_row + kThreads - 1) / kThreads, 65535)),
              unsigned(std::min<int64_t>(rows, 65535)));
    rows_kernel<<<grid, kThreads, 0, 0>>>(x, y, rows, S, op, vec);
    LAUNCH_CHECK("rows_kernel");
}

// Running (count, mean, M2) of a set of values; merge() is Chan et al.'s
// parallel update, so no E[x^2] - E[x]^2 cancellation happens in float.
struct Moments {
    float n = 0.0f, mean = 0.0f, m2 = 0.0f;
    __device__ void merge(float nb, float mb, float m2b) {
        if (nb == 0.0f) return;  // an empty partner must not touch the mean
        if (n == 0.0f) {
            n = nb, mean = mb, m2 = m2b;
            return;
        }
        const float tot = n + nb, d = mb - mean, f = nb / tot;
        mean += d * f;
        m2 += m2b + d * d * n * f;
        n = tot;
    }
};

// GroupNorm statistics: one block per (n, group), whose cpg * S elements are
// contiguous in NC(DHW) layout. Each thread folds in float4 chunks (a chunk's
// own mean and M2, then one merge) or single values; the block then merges
// the threads' moments in a shared-memory tree. Writes {mean, 1/sqrt(var + eps)}
// with the biased variance, as GroupNorm uses.
__global__ void groupnorm_stats_kernel(const float *__restrict__ x, float2 *__restrict__ stats,
                                       int64_t group_elems, float eps, bool vec) {
    __shared__ float s_n[kThreads], s_mean[kThreads], s_m2[kThreads];
    const float *p = x + int64_t(blockIdx.x) * group_elems;
    Moments m;
    int64_t i = threadIdx.x;
    if (vec) {
        for (; i < group_elems / 4; i += kThreads) {
            const float4 a = reinterpret_cast<const float4 *>(p)[i];
            const float c = ((a.x + a.y) + (a.z + a.w)) * 0.25f;
            const float dx = a.x - c, dy = a.y - c, dz = a.z - c, dw = a.w - c;
            m.merge(4.0f, c, (dx * dx + dy * dy) + (dz * dz + dw * dw));
        }
        i = group_elems / 4 * 4 + threadIdx.x;  // the last group_elems % 4
    }
    for (; i < group_elems; i += kThreads) m.merge(1.0f, p[i], 0.0f);

    const int t = threadIdx.x;
    s_n[t] = m.n, s_mean[t] = m.mean, s_m2[t] = m.m2;
    __syncthreads();
    for (int half = kThreads / 2; half > 0; half >>= 1) {
        if (t < half) {
            Moments a{s_n[t], s_mean[t], s_m2[t]};
            a.merge(s_n[t + half], s_mean[t + half], s_m2[t + half]);
            s_n[t] = a.n, s_mean[t] = a.mean, s_m2[t] = a.m2;
        }
        __syncthreads();
    }
    if (t == 0)
        stats[blockIdx.x] = make_float2(s_mean[0], 1.0f / sqrtf(s_m2[0] / s_n[0] + eps));
}

// The project's dropout hash (generators/blocks.cpp): lowbias32.
__host__ __device__ __forceinline__ uint32_t hash32(uint32_t v) {
    v ^= v >> 16;
    v *= 0x7feb352du;
    v ^= v >> 15;
    v *= 0x846ca68bu;
    v ^= v >> 16;
    return v;
}

// Training-mode dropout of the element at contiguous index i: kept when
// u >= p, u = (hash32(uint32(i) + hash32(seed ^ 0x9e3779b9)) >> 8) / 2^24,
// exactly as the Halide pipeline (uint32(i) = i mod 2^32 there too), so the
// masks agree bit for bit. Kept: x / (1 - p), a true division as in Halide;
// dropped: x * 0, so NaN stays NaN. __fdiv_rn/__fmul_rn keep IEEE results
// even under -use_fast_math.
struct DropoutOp {
    uint32_t seed_hash;
    float p, one_minus_p;
    __device__ float operator()(float v, int64_t i, bool &keep) const {
        const uint32_t h = hash32(uint32_t(i) + seed_hash);
        keep = float(h >> 8) * (1.0f / 16777216.0f) >= p;
        return keep ? __fdiv_rn(v, one_minus_p) : __fmul_rn(v, 0.0f);
    }
};

// Writes the output and the bool mask, as at::native_dropout does.
__global__ void dropout_kernel(const float *__restrict__ x, float *__restrict__ out,
                               uint8_t *__restrict__ mask, int64_t n, DropoutOp op, bool vec) {
    if (!vec) {
        GRID_STRIDE(i, n) {
            bool k;
            out[i] = op(x[i], i, k);
            mask[i] = k;
        }
        return;
    }
    const int64_t n4 = n / 4;
    GRID_STRIDE(v, n4) {
        const float4 a = reinterpret_cast<const float4 *>(x)[v];
        bool k0, k1, k2, k3;
        const int64_t i = v * 4;
        reinterpret_cast<float4 *>(out)[v] =
            make_float4(op(a.x, i, k0), op(a.y, i + 1, k1), op(a.z, i + 2, k2), op(a.w, i + 3, k3));
        reinterpret_cast<uchar4 *>(mask)[v] = make_uchar4(k0, k1, k2, k3);
    }
    const int64_t t = n4 * 4 + threadIdx.x;
    if (blockIdx.x == 0 && t < n) {
        bool k;
        out[t] = op(x[t], t, k);
        mask[t] = k;
    }
}

// ---------------------------------------------------------------- cuDNN conv + bias

// y = conv(x, w) + b (cross-correlation, stride 1, no padding, dilation 1),
// all NC[D]HW contiguous float32. y is the caller-allocated intermediate; it
// also serves as scratch output while the algorithms are timed.
//
// The bias is added by our own kernel, in place, after the convolution. That
// is what PyTorch does ("cuDNN convolutions does not handle bias. Bias is
// handled outside", aten/src/ATen/native/cudnn/ConvShared.cpp: output.add_
// with ATen's vectorized kernel). cudnnAddTensor would also do, but measured
// on an H200 it is ~1.8x slower than a plain vectorized add (1.80 ms vs ~1 ms
// on p32's 2.1 GB conv output), which would handicap the baseline.
class ConvStage {
public:
    ConvStage(const float *x, const std::vector<int64_t> &xdims, const float *w, int cout, int k,
              const float *b, float *y, ConvMath math)
        : x_(x), w_(w), b_(b), y_(y) {
        const int nb = int(xdims.size());  // 4 or 5
        const int sp = nb - 2;
        CUDNN_CHECK(make(h_, cudnnCreate));
        CUDNN_CHECK(cudnnSetStream(h_.get(), nullptr));  // legacy default stream, as run() promises

        std::vector<int64_t> ydims = {xdims[0], cout};
        for (int i = 2; i < nb; ++i) ydims.push_back(xdims[i] - k + 1);
        set_tensor(xd_, xdims);
        set_tensor(yd_, ydims);
        cout_ = cout;
        rows_ = ydims[0] * cout;
        S_ = 1;
        for (int i = 2; i < nb; ++i) S_ *= ydims[i];

        CUDNN_CHECK(make(wd_, cudnnCreateFilterDescriptor));
        std::vector<int> wdims = {cout, int(xdims[1])};
        for (int i = 0; i < sp; ++i) wdims.push_back(k);
        CUDNN_CHECK(cudnnSetFilterNdDescriptor(wd_.get(), CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, nb,
                                               wdims.data()));

        CUDNN_CHECK(make(cd_, cudnnCreateConvolutionDescriptor));
        std::vector<int> pad(sp, 0), stride(sp, 1), dil(sp, 1);
        // PyTorch's conv is cross-correlation; float accumulation.
        CUDNN_CHECK(cudnnSetConvolutionNdDescriptor(cd_.get(), sp, pad.data(), stride.data(),
                                                    dil.data(), CUDNN_CROSS_CORRELATION,
                                                    CUDNN_DATA_FLOAT));
        // FMA_MATH, not DEFAULT_MATH: on Ampere+ DEFAULT_MATH lets cuDNN use
        // TF32 for float data. This is what PyTorch sets for allow_tf32=False.
        const cudnnMathType_t want = math == ConvMath::TF32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
        CUDNN_CHECK(cudnnSetConvolutionMathType(cd_.get(), want));

        std::vector<int> got(nb);
        CUDNN_CHECK(cudnnGetConvolutionNdForwardOutputDim(cd_.get(), xd_.get(), wd_.get(), nb,
                                                          got.data()));
        for (int i = 0; i < nb; ++i)
            REQUIRE(got[i] == ydims[i], "cuDNN's conv output shape differs from in - k + 1");

        pick_algorithm(math, want);
    }

    // Two launches, as in PyTorch: the cuDNN conv, then the in-place bias add.
    void run() {
        const float one = 1.0f, zero = 0.0f;
        CUDNN_CHECK(cudnnConvolutionForward(h_.get(), &one, xd_.get(), x_, wd_.get(), w_,
                                            cd_.get(), algo_, ws_.get(), ws_bytes_, &zero,
                                            yd_.get(), y_));
        launch_rows(y_, y_, rows_, S_, BiasRow{b_, cout_});
    }

    size_t workspace_bytes() const { return ws_bytes_; }
    const std::string &describe() const { return desc_; }

private:
    template <class P, class Create>
    static cudnnStatus_t make(P &ptr, Create create) {
        typename P::pointer raw = nullptr;
        cudnnStatus_t st = create(&raw);
        ptr.reset(raw);
        return st;
    }

    void set_tensor(TensorDesc &d, const std::vector<int64_t> &dims) {
        CUDNN_CHECK(make(d, cudnnCreateTensorDescriptor));
        const int nb = int(dims.size());
        std::vector<int> di(nb), st(nb);
        int64_t s = 1;  // contiguous strides; cuDNN takes them as int
        for (int i = nb - 1; i >= 0; --i) {
            REQUIRE(dims[i] <= std::numeric_limits<int>::max() && s <= std::numeric_limits<int>::max(),
                    "tensor dimension or stride does not fit cuDNN's int");
            di[i] = int(dims[i]);
            st[i] = int(s);
            s *= dims[i];
        }
        CUDNN_CHECK(cudnnSetTensorNdDescriptor(d.get(), CUDNN_DATA_FLOAT, nb, di.data(), st.data()));
    }

    // Like torch.backends.cudnn.benchmark = True: give cuDNN the largest
    // workspace any algorithm wants (up to kWorkspaceLimit), time them all on
    // the real buffers (FindEx: no hidden allocation of a second copy of the
    // multi-GB tensors, unlike plain Find), keep the fastest that succeeded,
    // then keep only the workspace that one needs.
    void pick_algorithm(ConvMath math, cudnnMathType_t want) {
        size_t ws_max = 0;
        for (int a = 0; a < CUDNN_CONVOLUTION_FWD_ALGO_COUNT; ++a) {
            size_t sz = 0;
            // Unsupported algorithms return an error here: skip them.
            if (cudnnGetConvolutionForwardWorkspaceSize(h_.get(), xd_.get(), wd_.get(), cd_.get(),
                                                        yd_.get(), cudnnConvolutionFwdAlgo_t(a),
                                                        &sz) == CUDNN_STATUS_SUCCESS &&
                sz <= kWorkspaceLimit)
                ws_max = std::max(ws_max, sz);
        }
        // If the device is short of memory, time with what fits (as PyTorch does).
        DevPtr scratch;
        for (;;) {
            void *p = nullptr;
            if (ws_max == 0 || cudaMalloc(&p, ws_max) == cudaSuccess) {
                scratch.reset(p);
                break;
            }
            (void)cudaGetLastError();  // clear the out-of-memory error
            ws_max /= 2;
        }

        int max_count = 0;
        CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(h_.get(), &max_count));
        std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(std::max(max_count, 1));
        int returned = 0;
        CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(
            h_.get(), xd_.get(), x_, wd_.get(), w_, cd_.get(), yd_.get(), y_, int(perf.size()),
            &returned, perf.data(), scratch.get(), ws_max));
        scratch.reset();

        // Results come sorted by time. FP32 must not run on tensor cores.
        const cudnnConvolutionFwdAlgoPerf_t *best = nullptr;
        for (int i = 0; i < returned && !best; ++i) {
            const auto &r = perf[i];
            bool tensor_op = r.mathType == CUDNN_TENSOR_OP_MATH ||
                             r.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
            if (r.status == CUDNN_STATUS_SUCCESS && r.memory <= ws_max &&
                !(math == ConvMath::FP32 && tensor_op))
                best = &r;
        }
        if (!best) fail("cudnnFindConvolutionForwardAlgorithmEx", "no algorithm succeeded", __LINE__);
        algo_ = best->algo;

        // TF32: run with the math type the timed variant used (PyTorch does the
        // same); FP32: keep FMA_MATH on the descriptor.
        cudnnMathType_t used = math == ConvMath::TF32 ? best->mathType : want;
        CUDNN_CHECK(cudnnSetConvolutionMathType(cd_.get(), used));
        CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(h_.get(), xd_.get(), wd_.get(),
                                                            cd_.get(), yd_.get(), algo_,
                                                            &ws_bytes_));
        ws_ = dev_alloc(ws_bytes_);

        char buf[160];
        std::snprintf(buf, sizeof buf, "%s/%s ws=%.1fMB %.3fms", algo_name(algo_),
                      math_name(used), ws_bytes_ / 1e6, double(best->time));
        desc_ = buf;
    }

    const float *x_, *w_, *b_;
    float *y_;
    Handle h_;
    TensorDesc xd_, yd_;
    int cout_ = 0;
    int64_t rows_ = 0, S_ = 0;  // bias rows (n, c) of S elements
    FilterDesc wd_;
    ConvDesc cd_;
    cudnnConvolutionFwdAlgo_t algo_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
    DevPtr ws_;
    size_t ws_bytes_ = 0;
    std::string desc_;
};

// ---------------------------------------------------------------- models

// Shared parts: the conv stage, owned intermediates and their byte count.
class ModelBase : public EagerModel {
public:
    size_t device_bytes() const override {
        return bytes_ + (conv_ ? conv_->workspace_bytes() : 0);
    }
    std::string conv_algo() const override { return conv_ ? conv_->describe() : std::string(); }

protected:
    template <class T>
    T *alloc(int64_t count) {
        size_t bytes = size_t(count) * sizeof(T);
        bufs_.push_back(dev_alloc(bytes));
        bytes_ += bytes;
        return static_cast<T *>(bufs_.back().get());
    }

    std::vector<DevPtr> bufs_;
    size_t bytes_ = 0;
    std::unique_ptr<ConvStage> conv_;
};

// Conv output shape (N, Cout, in - k + 1 ...) for an (N, Cin, ...) input.
std::vector<int64_t> conv_out_shape(const std::vector<int64_t> &in, int cout, int k) {
    std::vector<int64_t> s = {in[0], cout};
    for (size_t i = 2; i < in.size(); ++i) s.push_back(in[i] - k + 1);
    return s;
}

class P24 final : public ModelBase {
public:
    P24(const float *in, const std::vector<int64_t> &shape, const float *w, const float *b,
        int cout, int k, float *out, ConvMath math)
        : out_(out) {
        auto cs = conv_out_shape(shape, cout, k);  // N, C, D', H', W'
        N_ = cs[0], C_ = cs[1], D_ = cs[2], S_ = cs[3] * cs[4];
        conv_buf_ = alloc<float>(product(cs));
        min_buf_ = alloc<float>(N_ * C_ * S_);
        min_idx_ = alloc<int64_t>(N_ * C_ * S_);
        conv_ = std::make_unique<ConvStage>(in, shape, w, cout, k, b, conv_buf_, math);
    }
    void run() override {
        conv_->run();
        // torch.min(x, dim=2)[0]
        int64_t n = N_ * C_ * S_;
        min_dim_kernel<<<grid_for(n), kThreads, 0, 0>>>(conv_buf_, min_buf_, min_idx_, n, D_, S_);
        LAUNCH_CHECK("min_dim_kernel");
        // torch.softmax(x, dim=1)
        int64_t cols = N_ * S_;
        softmax_dim1_kernel<<<grid_for(cols), kThreads, 0, 0>>>(min_buf_, out_, cols, C_, S_);
        LAUNCH_CHECK("softmax_dim1_kernel");
    }
    int launches() const override { return 4; }

private:
    float *out_, *conv_buf_, *min_buf_;
    int64_t *min_idx_;
    int64_t N_, C_, D_, S_;
};

// p32 and p25 share conv2d -> [scale] -> min over channels -> [tanh, tanh].
class Conv2dMin final : public ModelBase {
public:
    Conv2dMin(const float *in, const std::vector<int64_t> &shape, const float *w, const float *b,
              int cout, int k, bool scaled, float scale, bool tanh2, float *out, ConvMath math)
        : scaled_(scaled), tanh2_(tanh2), scale_(scale), out_(out) {
        auto cs = conv_out_shape(shape, cout, k);  // N, C, H', W'
        N_ = cs[0], C_ = cs[1], S_ = cs[2] * cs[3];
        conv_buf_ = alloc<float>(product(cs));
        if (scaled_) scaled_buf_ = alloc<float>(product(cs));
        if (tanh2_) {
            min_buf_ = alloc<float>(N_ * S_);
            tanh_buf_ = alloc<float>(N_ * S_);
        }
        min_idx_ = alloc<int64_t>(N_ * S_);
        conv_ = std::make_unique<ConvStage>(in, shape, w, cout, k, b, conv_buf_, math);
    }
    void run() override {
        conv_->run();
        const float *x = conv_buf_;
        const int64_t n_conv = N_ * C_ * S_, n_out = N_ * S_;
        if (scaled_) {  // x * scale_factor
            launch_map(x, scaled_buf_, n_conv, ScaleOp{scale_});
            x = scaled_buf_;
        }
        // torch.min(x, dim=1, keepdim=True)[0]
        float *m = tanh2_ ? min_buf_ : out_;
        min_dim_kernel<<<grid_for(n_out), kThreads, 0, 0>>>(x, m, min_idx_, n_out, C_, S_);
        LAUNCH_CHECK("min_dim_kernel");
        if (tanh2_) {  // torch.tanh twice
            launch_map(min_buf_, tanh_buf_, n_out, TanhOp{});
            launch_map(tanh_buf_, out_, n_out, TanhOp{});
        }
    }
    int launches() const override { return 3 + (scaled_ ? 1 : 0) + (tanh2_ ? 2 : 0); }

private:
    bool scaled_, tanh2_;
    float scale_;
    float *out_, *conv_buf_, *scaled_buf_ = nullptr, *min_buf_ = nullptr, *tanh_buf_ = nullptr;
    int64_t *min_idx_;
    int64_t N_, C_, S_;
};

class P83 final : public ModelBase {
public:
    P83(const float *in, const std::vector<int64_t> &shape, const float *w, const float *b,
        const float *gamma, const float *beta, int cout, int k, const P83Scalars &s, float *out,
        ConvMath math)
        : gamma_(gamma), beta_(beta), s_(s), out_(out) {
        REQUIRE(s.groups > 0 && cout % s.groups == 0, "cout must be a multiple of groups");
        auto cs = conv_out_shape(shape, cout, k);  // N, C, D', H', W'
        N_ = cs[0], C_ = cout, S_ = cs[2] * cs[3] * cs[4];
        total_ = product(cs);
        conv_buf_ = alloc<float>(total_);
        stats_ = alloc<float2>(N_ * s.groups);
        norm_buf_ = alloc<float>(total_);
        min_buf_ = alloc<float>(total_);
        clamp_buf_ = alloc<float>(total_);
        if (s.training) mask_ = alloc<uint8_t>(total_);
        conv_ = std::make_unique<ConvStage>(in, shape, w, cout, k, b, conv_buf_, math);
    }
    void run() override {
        conv_->run();
        const int cpg = C_ / s_.groups;
        // GroupNorm: statistics, then the normalized tensor.
        const int64_t group_elems = int64_t(cpg) * S_;
        groupnorm_stats_kernel<<<unsigned(N_ * s_.groups), kThreads, 0, 0>>>(
            conv_buf_, stats_, group_elems, s_.eps,
            group_elems % 4 == 0 && aligned16(conv_buf_, conv_buf_));
        LAUNCH_CHECK("groupnorm_stats_kernel");
        launch_rows(conv_buf_, norm_buf_, N_ * C_, S_, GroupNormRow{stats_, gamma_, beta_, C_, cpg});
        // torch.min(x, torch.tensor(min_value)); torch.clamp(x, lo, hi)
        launch_map(norm_buf_, min_buf_, total_, MinScalarOp{s_.min_value});
        launch_map(min_buf_, clamp_buf_, total_, ClampOp{s_.clamp_lo, s_.clamp_hi});
        // nn.Dropout(p). Eval mode: PyTorch returns its input; the caller's
        // output buffer still has to be filled, so one device-to-device copy.
        if (s_.training) {
            const DropoutOp op{hash32(s_.seed ^ 0x9e3779b9u), s_.p, 1.0f - s_.p};
            const bool vec = aligned16(clamp_buf_, out_);  // mask_ is cudaMalloc'd: aligned
            dropout_kernel<<<grid_for(vec ? total_ / 4 : total_), kThreads, 0, 0>>>(
                clamp_buf_, out_, mask_, total_, op, vec);
            LAUNCH_CHECK("dropout_kernel");
        } else {
            CUDA_CHECK(cudaMemcpyAsync(out_, clamp_buf_, size_t(total_) * sizeof(float),
                                       cudaMemcpyDeviceToDevice, 0));
        }
    }
    int launches() const override { return 7; }

private:
    const float *gamma_, *beta_;
    P83Scalars s_;
    float *out_, *conv_buf_, *norm_buf_, *min_buf_, *clamp_buf_;
    float2 *stats_;
    uint8_t *mask_ = nullptr;
    int64_t N_, S_, total_;
    int C_;
};

}  // namespace

// ---------------------------------------------------------------- factories

std::unique_ptr<EagerModel> make_p24(const float *in, const std::vector<int64_t> &in_shape,
                                     const float *w, const float *b, int cout, int k,
                                     float *out, ConvMath math) {
    check_shape(in_shape, 5, cout, k);
    for (auto [p, name] : {std::pair<const void *, const char *>{in, "in"}, {w, "w"}, {b, "b"}, {out, "out"}})
        check_device_ptr(p, name);
    return std::make_unique<P24>(in, in_shape, w, b, cout, k, out, math);
}

std::unique_ptr<EagerModel> make_p32(const float *in, const std::vector<int64_t> &in_shape,
                                     const float *w, const float *b, int cout, int k,
                                     float scale, float *out, ConvMath math) {
    check_shape(in_shape, 4, cout, k);
    for (auto [p, name] : {std::pair<const void *, const char *>{in, "in"}, {w, "w"}, {b, "b"}, {out, "out"}})
        check_device_ptr(p, name);
    return std::make_unique<Conv2dMin>(in, in_shape, w, b, cout, k, true, scale, false, out, math);
}

std::unique_ptr<EagerModel> make_p25(const float *in, const std::vector<int64_t> &in_shape,
                                     const float *w, const float *b, int cout, int k,
                                     float *out, ConvMath math) {
    check_shape(in_shape, 4, cout, k);
    for (auto [p, name] : {std::pair<const void *, const char *>{in, "in"}, {w, "w"}, {b, "b"}, {out, "out"}})
        check_device_ptr(p, name);
    return std::make_unique<Conv2dMin>(in, in_shape, w, b, cout, k, false, 1.0f, true, out, math);
}

std::unique_ptr<EagerModel> make_p83(const float *in, const std::vector<int64_t> &in_shape,
                                     const float *w, const float *b, const float *gamma,
                                     const float *beta, int cout, int k, const P83Scalars &s,
                                     float *out, ConvMath math) {
    check_shape(in_shape, 5, cout, k);
    for (auto [p, name] : {std::pair<const void *, const char *>{in, "in"}, {w, "w"}, {b, "b"},
                           {gamma, "gamma"}, {beta, "beta"}, {out, "out"}})
        check_device_ptr(p, name);
    return std::make_unique<P83>(in, in_shape, w, b, gamma, beta, cout, k, s, out, math);
}

}  // namespace fusedconv::bench
