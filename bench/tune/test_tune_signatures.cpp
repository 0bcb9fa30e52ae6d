// Compile-time check that the tuning table's function types (tune_table.h)
// are those of the generated libraries: tune.py's generated table converts
// each candidate's function to them, so a generator Input added without
// updating tune_table.h would otherwise surface only when a user's tuning
// round fails to build (as when p25 and p32 gained `winograd`).
#include "tune_table.h"

#include "p24_cuda.h"
#include "p25_cuda.h"
#include "p25_tc_cuda.h"
#include "p32_cuda.h"
#include "p32_tc_cuda.h"
#include "p83_cuda.h"

#include <type_traits>

namespace fusedconv::tune {

static_assert(std::is_same_v<decltype(&fusedconv_p24_cuda), P24Fn>,
              "tune_table.h: P24Fn is not the signature of the p24 generator");
static_assert(std::is_same_v<decltype(&fusedconv_p25_cuda), P25Fn>,
              "tune_table.h: P25Fn is not the signature of the p25 generator");
static_assert(std::is_same_v<decltype(&fusedconv_p32_cuda), P32Fn>,
              "tune_table.h: P32Fn is not the signature of the p32 generator");
static_assert(std::is_same_v<decltype(&fusedconv_p25_tc_cuda), P25TcFn>,
              "tune_table.h: P25TcFn is not the signature of the p25 tensor-core generator");
static_assert(std::is_same_v<decltype(&fusedconv_p32_tc_cuda), P32TcFn>,
              "tune_table.h: P32TcFn is not the signature of the p32 tensor-core generator");
static_assert(std::is_same_v<decltype(&fusedconv_p83_cuda), P83Fn>,
              "tune_table.h: P83Fn is not the signature of the p83 generator");

}  // namespace fusedconv::tune
