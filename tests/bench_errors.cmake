# fusedconv_bench's usage errors, end to end (no GPU needed):
#   cmake -DBENCH=<fusedconv_bench> -DDIR=<scratch dir> -P bench_errors.cmake
# Each bad command line must exit 2 with a message naming the problem, found
# before any measurement (so before the GPU check on a machine without one).
cmake_minimum_required(VERSION 3.22)
if (NOT DEFINED BENCH OR NOT DEFINED DIR)
    message(FATAL_ERROR "bench_errors.cmake: -DBENCH=... and -DDIR=... are required")
endif ()
file(REMOVE_RECURSE "${DIR}")
file(MAKE_DIRECTORY "${DIR}")

include(${CMAKE_CURRENT_LIST_DIR}/expect_exit.cmake)

function(expect code pattern)
    run_and_expect("${BENCH}" ${code} stderr "${pattern}" ${ARGN})
endfunction()

# CLI11's own parse errors exit 2, with the project's messages for counts.
expect(2 "--reps: must be an integer >= 1, got 0" -r 0)
expect(2 "--warmup: must be a non-negative integer, got -1" -w -1)
expect(2 "--samples: expected an integer >= 1, got 'abc'" --samples abc)
expect(2 "not expected: --bogus" --bogus)
# Nothing to run, unknown names, malformed shapes (-s halide: a build
# without cuDNN, such as the sanitizer pass's, refuses the default cuDNN
# systems first).
expect(2 "nothing to run" -s halide -p ,)
expect(2 "--only-shapes without --shape" -s halide --only-shapes)
expect(2 "unknown system 'foo'" -s foo)
# An unknown system is refused naming the build's systems.
expect(2 "unknown system 'nonesuch' \\(this build's systems: halide" -s halide,nonesuch --results -)
expect(2 "unknown problem 'p99'" -s halide -p p99)
expect(2 "--shape 'p24': expected ID=N,C" -s halide --shape p24)
# --results: a directory that cannot be created is refused before any
# measurement (before the GPU check too); a missing one is created first.
file(WRITE "${DIR}/plain" "a file, not a directory")
expect(2 "cannot create the directory .*plain of results file" -s halide --results "${DIR}/plain/r.json")
execute_process(COMMAND "${BENCH}" -s halide -p p24 -r 1 -w 0 --results "${DIR}/new/r.json"
                RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET TIMEOUT 100)
if (NOT IS_DIRECTORY "${DIR}/new")
    message(FATAL_ERROR "fusedconv_bench did not create the results directory ${DIR}/new (exit ${rc})")
endif ()
# --help exits 0.
execute_process(COMMAND "${BENCH}" --help RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
if (NOT rc STREQUAL "0")
    message(FATAL_ERROR "--help exited with ${rc}")
endif ()
