// Linked into the Halide generator executables of a -DFUSEDCONV_SANITIZE=ON
// build only (see the top-level CMakeLists.txt and bench/tensor_core_probe/).
// LeakSanitizer reads these suppressions at exit: leaks whose allocation stack
// passes through libHalide are not reported. They are Halide 14's reference
// cycles: Func::clone_in's (halide/Halide#7735), and a Parameter's whose
// constraints name its own extents. Leaks allocated by the project's own
// generator code still are reported.
extern "C" const char *__lsan_default_suppressions() { return "leak:libHalide14.so\n"; }
