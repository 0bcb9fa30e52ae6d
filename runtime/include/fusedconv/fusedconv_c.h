/* The C ABI of fusedconv: the four models as stateless functions over
   caller-owned float32 tensors (host or CUDA memory), for ctypes and other
   foreign callers. Built as libfusedconv_c.so (CMake target fusedconv_c),
   which contains the whole library and exports only the fc_* functions.

   Every function returns 0 on success and non-zero on failure; then
   fc_last_error() gives the message of the calling thread's last failure,
   naming the offending shape or value. No input makes a function crash:
   null pointers, ndim out of range, non-positive sizes, tensors on
   different devices and an output sharing storage with an input are
   reported as failures. All functions may be called from several threads
   at once (see fusedconv/ops.h for streams and CUDA graph capture). */
#ifndef FUSEDCONV_C_H
#define FUSEDCONV_C_H

#include <stdint.h>

#if defined(FUSEDCONV_C_BUILD)
#define FC_API __attribute__((visibility("default")))
#else
#define FC_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define FC_DEVICE_CPU (-1)
#define FC_MAX_DIMS 8

typedef struct fc_tensor {      /* a float32, C-contiguous (PyTorch layout) view; nothing copied */
    void *data;                 /* host pointer (device == FC_DEVICE_CPU) or CUDA device pointer */
    int32_t ndim;
    int64_t shape[FC_MAX_DIMS];
    int32_t device;             /* FC_DEVICE_CPU, or the CUDA device index (cuda:N) */
} fc_tensor;

FC_API const char *fc_last_error(void);
FC_API int fc_abi_version(void);                 /* 1 */
FC_API int fc_cuda_device_count(void);           /* usable CUDA devices; 0 without GPU or driver */
FC_API const char *fc_gpu_unavailable_reason(void); /* "" when a GPU is usable */
FC_API int fc_has_gpu_kernels(void);             /* 1 when this build holds the CUDA libraries */

/* Stateless forwards: parameters are passed in each call (the caller owns
   them). `stream` is a CUstream / cudaStream_t of x's device (NULL: that
   device's legacy default stream); ignored on the CPU. All tensors must be
   on the same device; out must have the model's output shape and not alias
   any input. On the GPU the call returns once the work is queued on
   `stream`, except p25 / p32 with 3x3 kernels, whose NaN check copies a
   count per sample to the host and so waits for that stream only. */
FC_API int fc_p24_forward(const fc_tensor *x, const fc_tensor *weight, const fc_tensor *bias,
                          int32_t dim, fc_tensor *out, void *stream);
FC_API int fc_p25_forward(const fc_tensor *x, const fc_tensor *weight, const fc_tensor *bias,
                          fc_tensor *out, void *stream);
FC_API int fc_p32_forward(const fc_tensor *x, const fc_tensor *weight, const fc_tensor *bias,
                          float scale_factor, fc_tensor *out, void *stream);
FC_API int fc_p83_forward(const fc_tensor *x, const fc_tensor *weight, const fc_tensor *bias,
                          const fc_tensor *norm_weight, const fc_tensor *norm_bias,
                          int32_t groups, float eps, float min_value, float clamp_min,
                          float clamp_max, float dropout_p, int32_t training, uint32_t seed,
                          fc_tensor *out, void *stream);
/* Output shape for an input and weight shape (validated as the forwards
   do; their data pointers are not used): writes ndim, shape (unused entries
   0) and device (x's) of out_shape_only, leaves its data. dim_or_groups is
   p24's dim, p83's groups, ignored for p25 and p32. */
FC_API int fc_output_shape(const char *model /* "p24","p25","p32","p83" */, const fc_tensor *x,
                           const fc_tensor *weight, int32_t dim_or_groups,
                           fc_tensor *out_shape_only);
/* Waits for all work on a CUDA device (cuCtxSynchronize of its primary
   context); FC_DEVICE_CPU: returns 0 at once. */
FC_API int fc_synchronize(int32_t device);

#ifdef __cplusplus
}
#endif

#endif /* FUSEDCONV_C_H */
