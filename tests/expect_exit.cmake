# Shared by the command-line tests run with `cmake -P` (cli_errors,
# cli_interchange, bench_errors):
#   run_and_expect(<program> <code> <stdout|stderr|both> <pattern> [args...])
# runs <program> with the args and fails the test unless it exits with
# <code> and the named output matches <pattern>. Leaves the program's stdout
# and stderr in OUT and ERR in the caller's scope.
function(run_and_expect program code stream pattern)
    execute_process(COMMAND "${program}" ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                    ERROR_VARIABLE err TIMEOUT 60)
    string(REPLACE ";" " " args "${ARGN}")
    get_filename_component(name "${program}" NAME)
    message(STATUS "${name} ${args}  -> exit ${rc}\n${out}${err}")
    if (NOT rc STREQUAL "${code}")
        message(FATAL_ERROR "expected exit code ${code}, got ${rc}")
    endif ()
    if (stream STREQUAL "stdout")
        set(text "${out}")
    elseif (stream STREQUAL "stderr")
        set(text "${err}")
    else ()
        set(text "${out}${err}")
    endif ()
    if (NOT text MATCHES "${pattern}")
        message(FATAL_ERROR "${stream} does not match '${pattern}'")
    endif ()
    set(OUT "${out}" PARENT_SCOPE)
    set(ERR "${err}" PARENT_SCOPE)
endfunction()
