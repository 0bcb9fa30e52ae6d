# `cmake --install <build> --prefix <p>`: the public headers, libfusedconv.a
# (AOT objects and one Halide runtime inside) and a CMake package, so that a
# project does find_package(fusedconv CONFIG REQUIRED) and links
# fusedconv::fusedconv (examples/ is such a project).
include(CMakePackageConfigHelpers)

set(FUSEDCONV_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/fusedconv)
# The installed targets, exported as fusedconv::<name>: the C++ library and
# the C ABI's shared library (fusedconv_c.h goes with the other headers).
set(FUSEDCONV_INSTALL_TARGETS fusedconv fusedconv_c)

install(TARGETS ${FUSEDCONV_INSTALL_TARGETS} EXPORT fusedconvTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/runtime/include/fusedconv
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")
install(EXPORT fusedconvTargets NAMESPACE fusedconv:: DESTINATION ${FUSEDCONV_CMAKE_DIR})

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/fusedconvConfig.cmake.in
    ${PROJECT_BINARY_DIR}/fusedconvConfig.cmake INSTALL_DESTINATION ${FUSEDCONV_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/fusedconvConfigVersion.cmake
    COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/fusedconvConfig.cmake
              ${PROJECT_BINARY_DIR}/fusedconvConfigVersion.cmake
        DESTINATION ${FUSEDCONV_CMAKE_DIR})
