// Linked into the Halide generator executable of a -DFUSEDCONV_SANITIZE=ON
// build only (see the top-level CMakeLists.txt). LeakSanitizer reads these
// suppressions at exit: leaks whose allocation stack passes through libHalide
// (Halide 14's Func::clone_in reference cycle, halide/Halide#7735) are not
// reported. Leaks allocated by the project's own generator code still are.
extern "C" const char *__lsan_default_suppressions() { return "leak:libHalide14.so\n"; }
