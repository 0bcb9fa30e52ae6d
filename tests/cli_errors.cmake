# The CLI's usage errors, end to end:
#   cmake -DCLI=<fusedconv> -P cli_errors.cmake
# Each bad command line must exit non-zero (2 for usage errors, as the README
# says; 1 for a run that fails) with a message naming the problem, and never
# print a results row for a usage error (no work is done).
cmake_minimum_required(VERSION 3.22)
if (NOT DEFINED CLI)
    message(FATAL_ERROR "cli_errors.cmake: -DCLI=... is required")
endif ()

include(${CMAKE_CURRENT_LIST_DIR}/expect_exit.cmake)

# Runs the CLI with ARGN; fails unless it exits with `code` and its stderr
# matches `pattern` (stdout for `code` 1: the FAIL row).
function(expect code pattern)
    if (code STREQUAL "1")
        run_and_expect("${CLI}" ${code} stdout "${pattern}" ${ARGN})
    else ()
        run_and_expect("${CLI}" ${code} stderr "${pattern}" ${ARGN})
    endif ()
    if (code STREQUAL "2" AND OUT MATCHES "median_ms")
        message(FATAL_ERROR "a usage error printed the results header: work was started")
    endif ()
endfunction()

# Unknown model names, alone or in a list, and no model at all.
expect(2 "unknown model 'p99'" -m p99 -d cpu)
expect(2 "unknown model 'conv'" -m p24,conv -d cpu)
expect(2 "unknown model 'P24'" -m P24 -d cpu)
expect(2 "no model named" -m , -d cpu)
# Bad --device.
expect(2 "unknown device 'tpu'.*auto, cpu or gpu" -m p24 -d tpu)
expect(2 "--device" -m p24 -d "")  # CLI11: an empty value is a missing one
expect(2 "unknown device 'CPU'" -m p24 -d CPU)
# Negative or malformed counts: rejected by name.
expect(2 "--batch: must be a non-negative integer, got -1" -m p24 -d cpu --batch -1)
expect(2 "--batch: must be a non-negative integer, got -5" -m p24 -d cpu -b -5)
expect(2 "--batch: expected a non-negative integer, got 'abc'" -m p24 -d cpu -b abc)
expect(2 "--batch: expected a non-negative integer, got '1.5'" -m p24 -d cpu -b 1.5)
expect(2 "--reps: must be a non-negative integer, got -3" -m p24 -d cpu -r -3)
expect(2 "--warmup: must be a non-negative integer, got -1" -m p24 -d cpu -w -1)
expect(2 "--reps: must be at most 2147483647, got 4294967296" -m p24 -d cpu -r 4294967296)
expect(2 "--samples: must be an integer >= 1, got 0" -m p24 -d cpu -s 0)
expect(2 "--scale must be a finite number" -m p32 -d cpu --scale nan)
# --seed: 0 .. 2^64 - 1; a negative or overflowing one used to wrap or clamp.
expect(2 "--seed: expected an integer from 0 to 18446744073709551615, got '-1'" -m p24 -d cpu --seed -1)
expect(2 "--seed: expected an integer from 0 to 18446744073709551615, got '18446744073709551616'" -m p24 -d cpu --seed 18446744073709551616)
expect(2 "--seed: expected an integer" -m p24 -d cpu --seed 1e3)
# Options CLI11 does not know, or missing values.
expect(2 "not expected: --frobnicate" -m p24 -d cpu --frobnicate)
expect(2 "--batch: 1 required .* missing" -m p24 -d cpu --batch)
# A batch whose input would be past Halide's 32-bit indexing: the run fails
# before any work (exit 1, the shape named in its FAIL row).
expect(1 "p83 .*FAIL: .*\\(100000000, 3, 16, 64, 64\\).*32-bit" -m p83 -d cpu -b 100000000)
# --help still exits 0.
execute_process(COMMAND "${CLI}" --help RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
if (NOT rc STREQUAL "0")
    message(FATAL_ERROR "--help exited with ${rc}")
endif ()
