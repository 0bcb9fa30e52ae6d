// The probes' launches: a first launch whose result is checked, then the timing loop, each launch
// between two CUDA events, as the tables in README.md were measured.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <vector>

// Runs `launch` once, waits, and copies the `count` floats at `d_out` into *out. On a CUDA error
// prints it after `name` and returns false.
template <class Launch>
bool first_launch_output(const char *name, Launch launch, const float *d_out, size_t count,
                         std::vector<float> *out) {
    launch();
    if (cudaDeviceSynchronize() != cudaSuccess) {
        fprintf(stderr, "%s: %s\n", name, cudaGetErrorString(cudaGetLastError()));
        return false;
    }
    out->resize(count);
    cudaMemcpy(out->data(), d_out, count * sizeof(float), cudaMemcpyDeviceToHost);
    return true;
}

// Times `reps` calls of `launch` (which queues kernels on the default stream) into `ms`, sorted
// ascending, so ms[reps / 2] is the median and ms[0] the minimum. Returns the first CUDA error
// of waiting for a launch, cudaSuccess when there was none.
template <class Launch>
cudaError_t sorted_launch_ms(Launch launch, int reps, std::vector<float> *ms) {
    ms->assign(reps, 0.0f);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    cudaError_t error = cudaSuccess;
    for (int r = 0; r < reps && error == cudaSuccess; r++) {
        cudaEventRecord(e0);
        launch();
        cudaEventRecord(e1);
        error = cudaEventSynchronize(e1);
        if (error == cudaSuccess) cudaEventElapsedTime(&(*ms)[r], e0, e1);
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    std::sort(ms->begin(), ms->end());
    return error;
}
