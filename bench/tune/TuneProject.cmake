# The tuning build, included by the CMakeLists.txt that bench/tune/tune.py
# writes into <work>/gen/ for each round:
#
#   cmake_minimum_required(VERSION 3.22)
#   project(fusedconv_tune LANGUAGES C CXX)
#   set(FUSEDCONV_SOURCE_DIR /path/to/repo)
#   set(FUSEDCONV_TUNE_TABLE ${CMAKE_CURRENT_SOURCE_DIR}/tune_table.cpp)
#   include(${FUSEDCONV_SOURCE_DIR}/bench/tune/TuneProject.cmake)
#   fusedconv_tune_candidate(p32_cuda c017 p32_conv2d_scale_min "gpu_tile_x=64;gpu_tile_y=4")
#   fusedconv_tune_li2018(p32_cuda p32_conv2d_scale_min)
#   fusedconv_tune_executable()
#
# The main project is a subdirectory, built with the schedules' default
# GeneratorParams (its fusedconv_<model>_cuda libraries are the reference),
# without tests or cuDNN. Every candidate is one more AOT-compiled library of
# the same generator executable with a unique FUNCTION_NAME, sharing the main
# project's Halide runtime.

set(FUSEDCONV_TESTS OFF)
set(FUSEDCONV_BENCH_CUDA OFF)
set(FUSEDCONV_TUNED "")  # the reference is the schedules' defaults
add_subdirectory(${FUSEDCONV_SOURCE_DIR} fusedconv)

# Imported targets are local to the directory that found them.
find_package(Halide REQUIRED)
find_package(Threads REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(CLI11 REQUIRED)

get_directory_property(FUSEDCONV_TUNE_RUNTIME DIRECTORY ${FUSEDCONV_SOURCE_DIR}/generators
                       DEFINITION FUSEDCONV_RUNTIME)
if (NOT TARGET "${FUSEDCONV_TUNE_RUNTIME}")
    message(FATAL_ERROR "fusedconv tune: cannot find the main project's Halide runtime "
                        "(FUSEDCONV_RUNTIME in generators/CMakeLists.txt)")
endif ()

# The candidates' Halide target: CUDA; the CPU target only for tune.py's
# --smoke-cpu check of the whole flow on a machine without a GPU.
if (FUSEDCONV_TUNE_SMOKE_CPU)
    set(FUSEDCONV_TUNE_HALIDE_TARGET ${FUSEDCONV_CPU_TARGET})
else ()
    set(FUSEDCONV_TUNE_HALIDE_TARGET ${FUSEDCONV_CUDA_TARGET})
endif ()

set_property(GLOBAL PROPERTY FUSEDCONV_TUNE_LIBRARIES "")

# One candidate: library `lib` (p32_cuda) with id `id` (c017), GeneratorParams
# `params` ("name=value;name=value").
function(fusedconv_tune_candidate lib id generator params)
    set(name fusedconv_tune_${lib}_${id})
    add_halide_library(${name} FROM fusedconv_generators
        GENERATOR ${generator}
        FUNCTION_NAME ${name}
        TARGETS ${FUSEDCONV_TUNE_HALIDE_TARGET}
        PARAMS ${params}
        USE_RUNTIME ${FUSEDCONV_TUNE_RUNTIME})
    set_property(GLOBAL APPEND PROPERTY FUSEDCONV_TUNE_LIBRARIES ${name})
endfunction()

# The library scheduled by Halide 14's Li2018 autoscheduler (the generator
# then only sets estimates; tune.py has already checked that it builds).
function(fusedconv_tune_li2018 lib generator)
    set(name fusedconv_tune_${lib}_li2018)
    add_halide_library(${name} FROM fusedconv_generators
        GENERATOR ${generator}
        FUNCTION_NAME ${name}
        TARGETS ${FUSEDCONV_CUDA_TARGET}
        AUTOSCHEDULER Halide::Li2018
        SCHEDULE ${name}_SCHEDULE
        USE_RUNTIME ${FUSEDCONV_TUNE_RUNTIME})
    set_property(GLOBAL APPEND PROPERTY FUSEDCONV_TUNE_LIBRARIES ${name})
endfunction()

function(fusedconv_tune_executable)
    get_property(libs GLOBAL PROPERTY FUSEDCONV_TUNE_LIBRARIES)
    add_executable(fusedconv_tune ${FUSEDCONV_SOURCE_DIR}/bench/tune/tune_main.cpp
                                  ${FUSEDCONV_TUNE_TABLE})
    target_include_directories(fusedconv_tune PRIVATE ${FUSEDCONV_SOURCE_DIR}/runtime/src)
    target_link_libraries(fusedconv_tune PRIVATE fusedconv_tune_core fusedconv_bench_core
                          fusedconv CLI11::CLI11 ${libs})
    # What tune.py needs to check the Li2018 builds before the main build.
    file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/tune_build_info.json CONTENT
"{
 \"generator\": \"$<TARGET_FILE:fusedconv_generators>\",
 \"li2018_plugin\": \"$<TARGET_FILE:Halide::Li2018>\",
 \"cuda_target\": \"${FUSEDCONV_CUDA_TARGET}\",
 \"tune_binary\": \"$<TARGET_FILE:fusedconv_tune>\"
}
")
endfunction()
