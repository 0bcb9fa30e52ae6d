# The CLI's safetensors interchange end to end, on the CPU with tiny tensors:
#   cmake -DCLI=<fusedconv> -DFIXTURE=<make_interchange_fixture> -DDIR=<scratch dir>
#         -P cli_interchange.cmake
# The fixture writes a p25 state_dict and input, the CLI runs on them and saves
# its output, the fixture checks that output; then the file options' usage
# errors (exit 2) and a state_dict of the wrong model (a FAIL row, exit 1).
cmake_minimum_required(VERSION 3.22)
foreach (var CLI FIXTURE DIR)
    if (NOT DEFINED ${var})
        message(FATAL_ERROR "cli_interchange.cmake: -D${var}=... is required")
    endif ()
endforeach ()

file(REMOVE_RECURSE "${DIR}")
file(MAKE_DIRECTORY "${DIR}")
execute_process(COMMAND "${FIXTURE}" write "${DIR}" COMMAND_ERROR_IS_FATAL ANY)

include(${CMAKE_CURRENT_LIST_DIR}/expect_exit.cmake)

# Runs the CLI with ARGN; fails unless it exits with `code` and its stdout and
# stderr together match `pattern`.
function(expect code pattern)
    run_and_expect("${CLI}" ${code} both "${pattern}" ${ARGN})
endfunction()

set(W "${DIR}/weights.safetensors")
set(I "${DIR}/input.safetensors")
set(O "${DIR}/output.safetensors")

expect(0 "p25 +conv2d_min_tanh_tanh +\\(1, 16, 6, 9\\) +\\(1, 1, 4, 7\\) +cpu .* ok"
       -m p25 -d cpu --weights "${W}" --input "${I}" --output "${O}" -r 1 -w 0)
if (NOT EXISTS "${O}")
    message(FATAL_ERROR "--output did not write ${O}")
endif ()
execute_process(COMMAND "${FIXTURE}" check "${DIR}" COMMAND_ERROR_IS_FATAL ANY)

# --scale and --eval on inputs that are their file's only tensor.
expect(0 "p32 .* \\(1, 64, 5, 6\\) .* ok" -m p32 -d cpu --input "${DIR}/p32_input.safetensors"
       --scale -0.5 -r 1 -w 0)
expect(0 "p83 .* \\(1, 3, 5, 6, 7\\) .* ok.*eval mode" -m p83 -d cpu
       --input "${DIR}/p83_input.safetensors" --eval -r 1 -w 0)

# A user's own models: channel counts and kernel size from conv.weight's shape,
# the other init arguments from flags; the float64 check runs with them all
# (every output position: these outputs are smaller than --samples).
foreach (m p24 p25 p32 p83)
    set(UW_${m} "${DIR}/user_${m}_weights.safetensors")
    set(UI_${m} "${DIR}/user_${m}_input.safetensors")
endforeach ()
expect(0 "p24 .* \\(1, 2, 4, 5, 6\\) +\\(1, 5, 4, 5\\) +cpu .* ok" -m p24 -d cpu
       --weights "${UW_p24}" --input "${UI_p24}" --dim 2 -r 1 -w 0)
expect(0 "p25 .* \\(1, 3, 7, 8\\) +\\(1, 1, 3, 4\\) +cpu .* ok" -m p25 -d cpu
       --weights "${UW_p25}" --input "${UI_p25}" -r 1 -w 0)
expect(0 "p32 .* \\(2, 5, 6, 9\\) +\\(2, 1, 4, 7\\) +cpu .* ok" -m p32 -d cpu
       --weights "${UW_p32}" --input "${UI_p32}" --scale -1.5 -r 1 -w 0)
expect(0 "p83 .* \\(1, 2, 5, 6, 7\\) +\\(1, 8, 4, 5, 6\\) +cpu .* ok.*p = 0\\.3" -m p83 -d cpu
       --weights "${UW_p83}" --input "${UI_p83}" --groups 4 --min-value -0.5 --max-value 2
       --dropout-p 0.3 --eps 0.01 -r 1 -w 0)
expect(0 "p83 .* ok.*eval mode" -m p83 -d cpu --weights "${UW_p83}" --input "${UI_p83}"
       --groups 2 --eps 0.5 --eval -r 1 -w 0)
# Without --input the default shape takes the weights' channel count.
expect(0 "p25 .* \\(1, 3, 256, 256\\) +\\(1, 1, 252, 252\\) .* ok" -m p25 -d cpu
       --weights "${UW_p25}" -b 1 -r 1 -w 0)
# Mismatches: exit 2, naming both shapes.
expect(2 "--input has shape \\(1, 3, 5, 6, 7\\) with 3 channels, but conv\\.weight \\(8, 2, 2, 2, 2\\) of --weights takes 2"
       -m p83 -d cpu --weights "${UW_p83}" --input "${DIR}/p83_input.safetensors")
expect(2 "--input has shape \\(1, 3, 7, 8\\) with 3 channels, but conv\\.weight \\(6, 5, 3, 3\\) of --weights takes 5"
       -m p32 -d cpu --weights "${UW_p32}" --input "${UI_p25}")
expect(2 "--input has shape \\(1, 3, 7, 8\\) with 3 channels, but KernelBench's p25 \\(conv\\.weight \\(64, 16, 3, 3\\)\\) takes 16"
       -m p25 -d cpu --input "${UI_p25}")
expect(2 "--input has shape \\(1, 3, 7, 8\\), but p83 takes \\(N, C, D, H, W\\)"
       -m p83 -d cpu --input "${UI_p25}")
expect(2 "--weights: conv\\.weight has shape \\(4, 3, 3\\), but p25 takes \\(Cout, Cin, k, k\\)"
       -m p25 -d cpu --weights "${DIR}/rank3_weights.safetensors")
expect(2 "--weights: conv\\.weight has shape \\(4, 3, 3, 5\\): the kernel is not square"
       -m p25 -d cpu --weights "${DIR}/nonsquare_weights.safetensors")
expect(2 "--weights: no tensor conv\\.weight" -m p25 -d cpu --weights "${I}")
expect(2 "--groups 3 does not divide the 8 output channels of conv\\.weight \\(8, 2, 2, 2, 2\\) of --weights"
       -m p83 -d cpu --weights "${UW_p83}" --groups 3)

# Usage errors: exit 2 before any work, the reason on stderr.
expect(2 "exactly one model" -m p25,p32 -d cpu --weights "${W}")
expect(2 "exactly one model" -m p25,p32 -d cpu --output "${DIR}/never.safetensors")
expect(2 "--batch cannot be combined with --input" -m p25 -d cpu --input "${I}" -b 1)
expect(2 "bad\\.safetensors.*header length" -m p25 -d cpu --weights "${DIR}/bad.safetensors")
expect(2 "missing\\.safetensors.*cannot open" -m p25 -d cpu --input "${DIR}/missing.safetensors")
expect(2 "no tensor \"input\" \\(it holds 2: .conv\\.bias., .conv\\.weight.\\)" -m p25 -d cpu --input "${W}")
expect(2 "--scale sets p32" -m p25 -d cpu --scale 3)
expect(2 "directory .* does not exist" -m p25 -d cpu --output "${DIR}/no/such/out.safetensors")
# --output that would replace the input, or something that is not a file:
# refused before any work, the input left as it was.
file(SHA256 "${I}" input_hash)
expect(2 "is the --input file" -m p25 -d cpu --input "${I}" --output "${I}")
file(SHA256 "${I}" input_hash_after)
if (NOT input_hash STREQUAL input_hash_after)
    message(FATAL_ERROR "--output equal to --input changed the input file")
endif ()
expect(2 "not a regular file" -m p25 -d cpu -b 1 --output /dev/null)
# A state_dict of another model (p83's, with GroupNorm parameters, for p24):
# the run fails, naming the parameter.
expect(1 "FAIL: load_state_dict\\(Conv3dMinSoftmax\\).*norm\\.(weight|bias)"
       -m p24 -d cpu --weights "${UW_p83}" -b 1)
if (EXISTS "${DIR}/never.safetensors")
    message(FATAL_ERROR "an output was written despite a usage error")
endif ()
