# GPU schedule parameters that cannot make a schedule are build errors that
# name the parameter and the value (never a silently different schedule):
#   cmake -DGEN=<fusedconv_generators> -DDIR=<scratch dir> -P schedule_param_errors.cmake
# The generator runs for a CUDA target (no GPU needed to generate code).
cmake_minimum_required(VERSION 3.22)
foreach (var GEN DIR)
    if (NOT DEFINED ${var})
        message(FATAL_ERROR "schedule_param_errors.cmake: -D${var}=... is required")
    endif ()
endforeach ()
file(MAKE_DIRECTORY "${DIR}")

# Runs generator `gen` with the params in ARGN; fails unless it exits non-zero
# with output matching `pattern`.
function(expect_refused gen pattern)
    execute_process(COMMAND "${GEN}" -g ${gen} -f x -o "${DIR}" -e stmt
                            target=host-cuda-cuda_capability_86 ${ARGN}
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 300)
    string(REPLACE ";" " " args "${ARGN}")
    message(STATUS "${gen} ${args}  -> exit ${rc}\n${out}${err}")
    if (rc EQUAL 0)
        message(FATAL_ERROR "the generator accepted ${args}")
    endif ()
    if (NOT "${out}${err}" MATCHES "${pattern}")
        message(FATAL_ERROR "output does not match '${pattern}'")
    endif ()
endfunction()

expect_refused(p24_conv3d_min_softmax "gpu_depth_block must be at least 1, not 0"
               gpu_depth_block=0)
expect_refused(p24_conv3d_min_softmax "cannot split into 4 x 2 pixel groups"
               gpu_tile_x=10 gpu_pixel_groups_x=4)
expect_refused(p83_conv3d_groupnorm_min_clamp_dropout
               "gpu_output_depth_unroll must be at least 1.*not -2" gpu_output_depth_unroll=-2)
expect_refused(p83_conv3d_groupnorm_min_clamp_dropout
               "gpu_output_vector must be 1, 2 or 4, not 3" gpu_output_vector=3)
expect_refused(p83_conv3d_groupnorm_min_clamp_dropout
               "gpu_output_tile_x \\(62\\) must be a multiple of gpu_output_vector \\(4\\)"
               gpu_conv_form=xy gpu_output_tile_x=62 gpu_output_vector=4)
expect_refused(p25_conv2d_min_tanh_tanh "gpu_wino2d_lanes must be 8, 16 or 32.*not 12"
               gpu_winograd_dims=xy gpu_wino2d_lanes=12)
expect_refused(p25_conv2d_min_tanh_tanh "tiles_per_thread \\(1\\) x 16 pixels must be a multiple of the 32 lanes"
               gpu_winograd_dims=xy gpu_wino2d_lanes=32 gpu_wino2d_tiles_per_thread=1)
