# Writes OUT, a header defining FUSEDCONV_COMMIT as the short hash of HEAD in
# SRC, with "+dirty" when the sources the benchmarks build from (generators,
# schedules, runtime, bench; not the recorded results or the Markdown notes)
# differ from it, or "unknown" outside a git tree.
# Run at every build, not at configure time: a configure-time hash went stale
# when commits came after the configure, and results recorded the wrong code.
execute_process(COMMAND git rev-parse --short HEAD WORKING_DIRECTORY ${SRC}
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE rc ERROR_QUIET)
if (NOT rc EQUAL 0 OR commit STREQUAL "")
    set(commit "unknown")
else ()
    execute_process(COMMAND git status --porcelain --untracked-files=no -- generators
                            schedules runtime bench ":(exclude)bench/results" ":(exclude)*.md"
                    WORKING_DIRECTORY ${SRC} OUTPUT_VARIABLE changes ERROR_QUIET)
    if (NOT changes STREQUAL "")
        string(APPEND commit "+dirty")
    endif ()
endif ()
file(WRITE ${OUT}.tmp "#define FUSEDCONV_COMMIT \"${commit}\"\n")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUT}.tmp)
