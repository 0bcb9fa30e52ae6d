# The installed package, as a user's project sees it:
#   cmake -DBUILD=<build tree> -DEXAMPLE=<examples/> -DDIR=<scratch dir>
#         [-DCXX=<compiler>] [-DSANITIZE=ON] -P install_consumer.cmake
# installs the build tree into DIR/prefix, checks that nothing installed
# names Halide, then configures examples/ with a fresh cmake against that
# prefix alone, builds it and runs it.
cmake_minimum_required(VERSION 3.22)
foreach (var BUILD EXAMPLE DIR)
    if (NOT DEFINED ${var})
        message(FATAL_ERROR "install_consumer.cmake: -D${var}=... is required")
    endif ()
endforeach ()

function(run)
    execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(STATUS "${cmd}  -> exit ${rc}\n${out}")
    if (NOT rc STREQUAL "0")
        message(FATAL_ERROR "failed: ${cmd}")
    endif ()
    set(OUT "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE "${DIR}")
set(prefix "${DIR}/prefix")
run(${CMAKE_COMMAND} --install "${BUILD}" --prefix "${prefix}")

# The package stands alone: no Halide target, header or path in what was
# installed (the library holds the AOT objects and the Halide runtime).
file(GLOB_RECURSE headers "${prefix}/*.h")
file(GLOB_RECURSE configs "${prefix}/*.cmake")
foreach (f IN LISTS headers configs)
    if (f MATCHES "\\.h$")
        file(STRINGS "${f}" hits REGEX "#include.*(Halide|nlohmann)")
    else ()
        file(STRINGS "${f}" hits REGEX "^[^#]*(Halide|nlohmann|fusedconv_halide)")
    endif ()
    if (hits)
        message(FATAL_ERROR "${f} names a build dependency: ${hits}")
    endif ()
endforeach ()
file(GLOB libs "${prefix}/lib*/libfusedconv.a")
if (NOT libs)
    message(FATAL_ERROR "no libfusedconv.a under ${prefix}")
endif ()

# A sanitizer build installs an instrumented archive: its consumer must link
# the sanitizer runtimes too (and is checked by them as well).
set(flags "")
if (SANITIZE)
    set(flags "-DCMAKE_CXX_FLAGS=-fsanitize=address,undefined -fno-omit-frame-pointer"
              "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined")
endif ()
if (DEFINED CXX)
    list(APPEND flags "-DCMAKE_CXX_COMPILER=${CXX}")
endif ()
run(${CMAKE_COMMAND} -S "${EXAMPLE}" -B "${DIR}/build" -DCMAKE_BUILD_TYPE=Release
    "-DCMAKE_PREFIX_PATH=${prefix}" ${flags})
run(${CMAKE_COMMAND} --build "${DIR}/build")
run("${DIR}/build/fusedconv_example")
if (NOT OUT MATCHES "fusedconv example: .*: ok")
    message(FATAL_ERROR "the example did not report ok")
endif ()
