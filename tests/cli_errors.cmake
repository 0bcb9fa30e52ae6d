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
# A model named twice.
expect(2 "--models names 'p24' more than once \\('p24,p25,p24'\\)" -m p24,p25,p24 -d cpu)
# Init arguments outside what the models take, or for a model not named.
expect(2 "--dim 3: only 2" -m p24 -d cpu --dim 3)
expect(2 "--dim -1: only 2" -m p24 -d cpu --dim -1)
expect(2 "--dim sets p24's min dimension, but p24 is not in --models" -m p25 -d cpu --dim 2)
expect(2 "--groups 5 does not divide the 16 output channels of KernelBench's p83" -m p83 -d cpu --groups 5)
expect(2 "--groups: must be an integer >= 1, got 0" -m p83 -d cpu --groups 0)
expect(2 "--dropout-p must be between 0 and 1, got 1.5" -m p83 -d cpu --dropout-p 1.5)
expect(2 "--dropout-p must be between 0 and 1, got nan" -m p83 -d cpu --dropout-p nan)
expect(2 "--eps must be a finite number > 0, got 0" -m p83 -d cpu --eps 0)
expect(2 "--eps must be a finite number > 0, got -1" -m p83 -d cpu --eps -1)
expect(2 "--min-value must be a finite number, got inf" -m p83 -d cpu --min-value inf)
expect(2 "--max-value must be a finite number, got nan" -m p83 -d cpu --max-value nan)
foreach (flag --groups --min-value --max-value --dropout-p --eps)
    expect(2 "${flag} sets an init argument of p83, but p83 is not in --models" -m p25 -d cpu ${flag} 1)
endforeach ()
# A batch whose input would be past Halide's 32-bit indexing: the run fails
# before any work (exit 1, the shape named in its FAIL row).
expect(1 "p83 .*FAIL: .*\\(100000000, 3, 16, 64, 64\\).*32-bit" -m p83 -d cpu -b 100000000)
# An input that fits but whose output does not (p83 -b 700: a 550 MB input, a
# 2.4 GB output) fails before the input is allocated: under a 400 MB address
# space limit the message is still the 32-bit one, not an allocation failure.
# The sanitizer build reserves terabytes of shadow memory, so it runs without
# the limit.
if (SANITIZE)
    expect(1 "p83 .*FAIL: .*\\(700, 16, 14, 62, 62\\).*32-bit" -m p83 -d cpu -b 700)
else ()
    run_and_expect(sh 1 stdout "p83 .*FAIL: .*\\(700, 16, 14, 62, 62\\).*32-bit"
                   -c "ulimit -v 400000 && exec \"$0\" \"$@\"" "${CLI}" -m p83 -d cpu -b 700)
endif ()
# --help still exits 0.
execute_process(COMMAND "${CLI}" --help RESULT_VARIABLE rc OUTPUT_QUIET ERROR_QUIET)
if (NOT rc STREQUAL "0")
    message(FATAL_ERROR "--help exited with ${rc}")
endif ()
