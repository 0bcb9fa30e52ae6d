// splice_mma (runtime/src/mma_splice.h) on call sites written as LLVM's NVPTX backend writes them,
// and on the PTX Halide 14 writes for the probe's kernels and the library's tensor-core kernel
// (checked by ptxas when the CUDA toolkit is there); and the shape variants' PTX specialization
// (runtime/src/ptx_specialize.h) on hand-written entries and on p24's spliced module.
#include "mma_splice.h"
#include "ptx_specialize.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using fusedconv::cuda::entry_parameter_types;
using fusedconv::cuda::specialize_entry;
using fusedconv::cuda::splice_mma;

// One placeholder call as the NVPTX backend emits it: operands stored to params, the anchor
// last, the result loaded into `result`.
// The placeholder family's name: "8s", "8" (mma.sync) or "wg24" (wgmma).
std::string placeholder(const std::string &family) { return family == "wg24" ? "fc_wg24" : "fc_mma" + family; }

std::string call_site(int number, const std::string &family, int elem, const std::vector<std::string> &operands,
                      const std::string &result) {
    std::string n = std::to_string(number), s = "\t{ // callseq " + n + ", 0\n\t.reg .b32 temp_param_reg;\n";
    std::vector<std::string> all = operands;
    all.push_back("%f99");  // the anchor
    for (size_t k = 0; k < all.size(); k++) {
        s += "\t.param .b32 param" + std::to_string(k) + ";\n";
        s += "\tst.param.f32 \t[param" + std::to_string(k) + "+0], " + all[k] + ";\n";
    }
    s += "\t.param .b32 retval0;\n\tcall.uni (retval0), \n\t" + placeholder(family) + "_d" + std::to_string(elem) +
         ", \n\t(\n";
    for (size_t k = 0; k < all.size(); k++) s += "\tparam" + std::to_string(k) + (k + 1 < all.size() ? ", \n" : "\n");
    s += "\t);\n\tld.param.f32 \t" + result + ", [retval0+0];\n\t} // callseq " + n + "\n";
    return s;
}

std::string declaration(const std::string &family, int elem, size_t params) {
    std::string name = placeholder(family) + "_d" + std::to_string(elem);
    std::string s = ".extern .func  (.param .b32 func_retval0) " + name + "\n(\n";
    for (size_t k = 0; k < params; k++)
        s += "\t.param .b32 " + name + "_param_" + std::to_string(k) + (k + 1 < params ? ",\n" : "\n");
    return s + ")\n;\n";
}

std::vector<std::string> operands(size_t n) {
    std::vector<std::string> v;
    for (size_t k = 0; k < n; k++) v.push_back("%f" + std::to_string(10 + k));
    return v;
}

// A module with one group of calls (elements in `order`: 4, or wg24's 12) and `gaps[i]` before call i.
std::string module(const std::string &family, const std::vector<int> &order, const std::vector<std::string> &gaps = {},
                   std::vector<std::vector<std::string>> ops = {}) {
    const size_t n = family == "8s" ? 14 : family == "wg24" ? 17 : 10;
    const int elements = family == "wg24" ? 12 : 4;
    std::string s = ".version 7.0\n.target sm_80\n.address_size 64\n";
    for (int e = 0; e < elements; e++) s += declaration(family, e, n + 1);
    s += ".visible .entry k()\n{\n\t.reg .f32 %f<100>;\n\tmov.f32 \t%f1, 0f3F800000;\n";
    for (size_t i = 0; i < order.size(); i++) {
        if (i < gaps.size()) s += gaps[i];
        s += call_site(static_cast<int>(i), family, order[i], i < ops.size() ? ops[i] : operands(n),
                       "%f" + std::to_string(60 + order[i]));
    }
    return s + "\tret;\n}\n";
}

int count(const std::string &s, const std::string &what) {
    int n = 0;
    for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) n++;
    return n;
}

// Writes `ptx` to the test's temporary `file` and expects `ptxas -v` to assemble it for `arch`;
// returns the registers it reports for each entry ("Used N registers"), none (and assembles
// nothing) when the CUDA toolkit's ptxas is not there.
std::vector<int> assemble(const std::string &ptx, const std::string &arch, const std::string &file) {
    std::vector<int> used;
    const std::string ptxas = TC_PTXAS;
    if (ptxas.empty()) {
        printf("ptxas not found: the spliced module is not assembled\n");
        return used;
    }
    // Named after the test too: ctest runs each test as its own process, several at once.
    const std::string path =
        testing::TempDir() + testing::UnitTest::GetInstance()->current_test_info()->name() + "_" + file;
    std::ofstream(path) << ptx;
    FILE *p = popen((ptxas + " -v -arch=" + arch + " " + path + " -o /dev/null 2>&1").c_str(), "r");
    EXPECT_NE(p, nullptr) << path;
    if (!p) return used;
    char line[512];
    while (std::fgets(line, sizeof line, p)) {
        const char *at = std::strstr(line, "Used ");
        int n = 0;
        if (at && std::strstr(line, " registers") && std::sscanf(at, "Used %d registers", &n) == 1) used.push_back(n);
    }
    EXPECT_EQ(pclose(p), 0) << path;
    return used;
}

TEST(MmaSplice, GroupOfFourBecomesThreeMma) {
    int groups = 0;
    const std::string out = splice_mma(module("8", {0, 1, 2, 3}), &groups);
    EXPECT_EQ(groups, 1);
    EXPECT_EQ(count(out, "fc_mma"), 0);
    EXPECT_EQ(count(out, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"), 3);
    // The accumulator's operands, the split of A's and B's six registers, the four results.
    for (int k = 0; k < 10; k++) EXPECT_EQ(count(out, ", %f" + std::to_string(10 + k) + ";"), 1) << k;
    // Six operands split: each rounded to tf32 by half an ulp added to its bits, the 13 low bits
    // cleared; the remainders are not rounded (a NaN's bits would wrap).
    EXPECT_EQ(count(out, ", 4096;"), 6);
    EXPECT_EQ(count(out, ", -8192;"), 6);
    EXPECT_EQ(count(out, "add.u32 %tcl"), 0);
    for (int e = 0; e < 4; e++) EXPECT_EQ(count(out, "mov.f32 %f" + std::to_string(60 + e) + ", %tcd"), 1) << e;
    // A_lo B_hi first, onto C; then A_hi B_lo and A_hi B_hi onto D.
    const size_t first = out.find("{%tcl0, %tcl1, %tcl2, %tcl3}, {%tch4, %tch5}, {%tcc0");
    const size_t second = out.find("{%tch0, %tch1, %tch2, %tch3}, {%tcl4, %tcl5}, {%tcd0");
    const size_t third = out.find("{%tch0, %tch1, %tch2, %tch3}, {%tch4, %tch5}, {%tcd0");
    EXPECT_TRUE(first < second && second < third && third != std::string::npos);
}

TEST(MmaSplice, PresplitTakesAAsGivenAndImmediates) {
    std::vector<std::string> ops = operands(14);
    ops[0] = "0f00000000";  // a zero accumulator
    ops[4] = "0f3F800000";  // a_hi0 as an immediate
    const std::string out = splice_mma(module("8s", {2, 0, 3, 1}, {}, {ops, ops, ops, ops}));
    EXPECT_EQ(count(out, "mma.sync.aligned.m16n8k8"), 3);
    EXPECT_EQ(count(out, ", -8192;"), 2);  // B only
    EXPECT_EQ(count(out, "mov.f32 %tcc0, 0f00000000;"), 1);
    EXPECT_EQ(count(out, "mov.b32 %tca0, 0f3F800000;"), 1);
    EXPECT_EQ(count(out, "mov.b32 %tca4, %f18;"), 1);  // a_lo0 is operand 8
}

TEST(MmaSplice, WgmmaGroupOfTwelveBecomesOneWaitedStep) {
    int groups = 0;
    std::vector<std::string> ops = operands(17);
    ops[16] = "1536";  // B's shared-memory address (step 1 of p24's weights)
    const std::vector<int> order = {3, 0, 1, 2, 4, 5, 6, 7, 8, 9, 10, 11};
    const std::string out = splice_mma(module("wg24", order, {}, std::vector<std::vector<std::string>>(12, ops)), &groups);
    EXPECT_EQ(groups, 1);
    EXPECT_EQ(count(out, "fc_wg24"), 0);
    EXPECT_EQ(count(out, "wgmma.mma_async.sync.aligned.m64n24k8.f32.tf32.tf32"), 3);
    EXPECT_EQ(count(out, "wgmma.fence.sync.aligned;"), 1);
    EXPECT_EQ(count(out, "fence.proxy.async.shared::cta;"), 0);  // the module has no barrier
    EXPECT_EQ(count(out, "wgmma.commit_group.sync.aligned;"), 1);
    EXPECT_EQ(count(out, "wgmma.wait_group.sync.aligned 0;"), 1);
    EXPECT_EQ(count(out, ".target sm_90a"), 1);
    EXPECT_EQ(count(out, ".version 8.0"), 1);
    EXPECT_EQ(count(out, "mov.b32 %twb, 1536;"), 1);
    EXPECT_EQ(count(out, ", -8192;"), 4);  // A's four values split
    for (int e = 0; e < 12; e++) EXPECT_EQ(count(out, "mov.f32 %f" + std::to_string(60 + e) + ", %twc"), 1) << e;
    // A_lo B_hi, then A_hi B_lo (the remainders 768 bytes on), then A_hi B_hi.
    const size_t first = out.find("{%twl0, %twl1, %twl2, %twl3}, %twd0");
    const size_t second = out.find("{%twh0, %twh1, %twh2, %twh3}, %twd1");
    const size_t third = out.find("{%twh0, %twh1, %twh2, %twh3}, %twd0");
    EXPECT_TRUE(first < second && second < third && third != std::string::npos);
    assemble(out, "sm_90a", "tc_wgmma_spliced.ptx");
}

// Threads' stores to B reach the steps' async reads through a proxy fence before each barrier
// (not one in every step); modules without wgmma keep their barriers as they are.
TEST(MmaSplice, WgmmaModulesFenceTheProxyBeforeEachBarrier) {
    std::vector<std::string> ops = operands(17);
    ops[16] = "0";
    const std::vector<int> order = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    std::vector<std::string> gaps(order.size());
    gaps[0] = "\tbar.sync \t0;\n";
    const std::string ptx = module("wg24", order, gaps, std::vector<std::vector<std::string>>(12, ops));
    const std::string out = splice_mma(ptx);
    EXPECT_EQ(count(out, "fence.proxy.async.shared::cta;"), 1);
    const size_t fence = out.find("\tfence.proxy.async.shared::cta;\n\tbar.sync \t0;");
    EXPECT_NE(fence, std::string::npos) << out;
    EXPECT_LT(fence, out.find("wgmma.mma_async"));
    assemble(out, "sm_90a", "tc_wgmma_fenced.ptx");
    const std::string mma = module("8", {0, 1, 2, 3}, {"\tbar.sync \t0;\n"});
    EXPECT_EQ(count(splice_mma(mma), "fence.proxy.async"), 0);
}

TEST(MmaSplice, WgmmaGroupsMustBeWhole) {
    EXPECT_THROW(splice_mma(module("wg24", {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10})), std::runtime_error);
    EXPECT_THROW(splice_mma(module("wg24", {0, 1, 2, 3})), std::runtime_error);
}

TEST(MmaSplice, InstructionsBetweenCallsThatMayMove) {
    // Storing d0's element elsewhere, and unrelated arithmetic, between the calls.
    const std::vector<std::string> gaps = {"", "\tselp.f32 \t%f70, %f8, %f60, %p1;\n"
                                           "\tld.global.nc.v2.f32 \t{%f72, %f73}, [%rd8];\n",
                                           "\tadd.f32 \t%f71, %f1, %f1;  // a comment\n", ""};
    int groups = 0;
    EXPECT_NO_THROW(splice_mma(module("8", {0, 1, 2, 3}, gaps), &groups));
    EXPECT_EQ(groups, 1);
}

TEST(MmaSplice, RefusesGroupsItCannotReplace) {
    const std::vector<std::string> writes_operand = {"", "\tadd.f32 \t%f12, %f1, %f1;\n"};
    const std::vector<std::string> reads_later_result = {"", "\tadd.f32 \t%f70, %f63, %f1;\n"};
    const std::vector<std::string> vector_writes_operand = {"", "\tld.global.nc.v4.f32 \t{%f40, %f15, %f41, %f42}, [%rd8];\n"};
    const std::vector<std::string> branch = {"", "\t@%p1 bra \tLBB0_2;\n"};
    const std::vector<std::string> label = {"", "LBB0_2:\n"};
    std::vector<std::string> other = operands(10);
    other[9] = "%f50";
    for (const std::string &ptx : {module("8", {0, 1, 2}),                        // d3 missing
                                   module("8", {0, 1, 1, 3}),                     // d1 twice
                                   module("8", {0, 1, 2, 3}, writes_operand),      // an operand changes
                                   module("8", {0, 1, 2, 3}, reads_later_result),  // d3's register read early
                                   module("8", {0, 1, 2, 3}, vector_writes_operand),
                                   module("8", {0, 1, 2, 3}, branch),
                                   module("8", {0, 1, 2, 3}, label),
                                   module("8", {0, 1, 2, 3}, {}, {operands(10), operands(10), other, operands(10)})})
        EXPECT_THROW(splice_mma(ptx), std::runtime_error);
}

TEST(MmaSplice, ModulesWithoutPlaceholdersAreUnchanged) {
    const std::string ptx = ".version 7.0\n.target sm_80\n.visible .entry k()\n{\n\tret;\n}\n";
    int groups = -1;
    EXPECT_EQ(splice_mma(ptx, &groups), ptx);
    EXPECT_EQ(groups, 0);
}

// The probe's PTX as Halide 14 writes it, from its lowered statement.
std::string probe_ptx(const char *stmt_path) {
    std::ifstream f(stmt_path);
    if (!f) throw std::runtime_error(std::string("cannot read ") + stmt_path);
    std::stringstream ss;
    ss << f.rdbuf();
    std::string s = ss.str();
    s.erase(std::remove(s.begin(), s.end(), '\0'), s.end());
    const size_t begin = s.find(".version"), end = s.rfind("// -- End function\n}\n");
    if (begin == std::string::npos || end == std::string::npos || end < begin)
        throw std::runtime_error(std::string("no PTX module in ") + stmt_path);
    return s.substr(begin, end + 21 - begin);
}

// `steps`: the mma steps of one pass of the loop (points x blocks a warp); `instruction` the
// mma each step becomes three of, `arch` the target ptxas assembles the spliced module for;
// `max_registers` (0: none) a bound on each entry's registers as ptxas allocates them.
void check_probe(const char *stmt_path, int steps, const std::string &instruction = "mma.sync.aligned.m16n8k8",
                 const std::string &arch = "sm_90", int max_registers = 0) {
    int groups = 0;
    const std::string out = splice_mma(probe_ptx(stmt_path), &groups);
    EXPECT_EQ(groups, steps);
    EXPECT_EQ(count(out, instruction), 3 * steps);
    const std::vector<int> used = assemble(out, arch, "tc_probe_spliced.ptx");
    if (max_registers == 0 || std::string(TC_PTXAS).empty()) return;
    EXPECT_FALSE(used.empty()) << "ptxas -v reported no register counts for tc_probe_spliced.ptx";
    for (int n : used) EXPECT_LE(n, max_registers) << "tc_probe_spliced.ptx";
}

TEST(MmaSplice, ProbePresplit) { check_probe(TC_PROBE_PRESPLIT_STMT, 36); }
TEST(MmaSplice, ProbeSplit) { check_probe(TC_PROBE_SPLIT_STMT, 36); }
TEST(MmaSplice, ProbeWide) { check_probe(TC_PROBE_WIDE_STMT, 9 * 2 * 2); }
TEST(MmaSplice, ProbeWider) { check_probe(TC_PROBE_WIDER_STMT, 4 * 2 * 4); }
// The library's p25 kernel (p25_tc_cuda): a warp's 9 points x 2 tile blocks a step, both of its
// input-channel steps unrolled.
TEST(MmaSplice, LibraryP25TensorCore) { check_probe(P25_TC_CUDA_STMT, 9 * 2 * 2); }
// p24's wgmma kernel (p24_wg_cuda): a depth's 14 k-steps, each 3 wgmma, in each of its two
// kernels (3 input channels, and any), for sm_90a. At most 88 registers: the generator turns
// LLVM's loop strength reduction off, without which each tap's input offset becomes an induction
// variable held across the depth loop (106 registers, 58 without; schedules/NOTES.md).
TEST(MmaSplice, LibraryP24Wgmma) {
    check_probe(P24_WG_CUDA_STMT, 2 * 14, "wgmma.mma_async.sync.aligned.m64n24k8", "sm_90a", 88);
}

// An entry as LLVM's NVPTX backend writes one: a pointer, two 32-bit integers, a float.
const char *kTwoInts = R"(.visible .entry k(
	.param .u64 k_param_0,
	.param .u32 k_param_1,
	.param .s32 k_param_2,
	.param .f32 k_param_3
)
{
	.reg .b32 	%r<4>;
	ld.param.u32 	%r1, [k_param_1];
	ld.param.s32 	%r2, [k_param_2];
	{ // a scoped block
	add.s32 	%r3, %r1, %r2;
	}
	ret;
}
.visible .entry k2(
	.param .u32 k2_param_0
)
{
	ld.param.u32 	%r1, [k2_param_0];
	ret;
}
)";

TEST(PtxSpecialize, ReadsTheParameterTypes) {
    EXPECT_EQ(entry_parameter_types(kTwoInts, "k"), (std::vector<std::string>{".u64", ".u32", ".s32", ".f32"}));
    EXPECT_EQ(entry_parameter_types(kTwoInts, "k2"), (std::vector<std::string>{".u32"}));
    EXPECT_THROW(entry_parameter_types(kTwoInts, "k3"), std::runtime_error);
}

TEST(PtxSpecialize, LoadsOfTheGivenIntegersBecomeMoves) {
    const std::string out = specialize_entry(kTwoInts, "k", {std::nullopt, 62u, static_cast<uint32_t>(-3)});
    EXPECT_NE(out.find("mov.b32 \t%r1, 0x0000003E;"), std::string::npos) << out;
    EXPECT_NE(out.find("mov.b32 \t%r2, 0xFFFFFFFD;"), std::string::npos) << out;
    EXPECT_EQ(out.find("[k_param_1]"), std::string::npos);
    // The other entry's load, the scoped block and the rest stay as they were.
    EXPECT_NE(out.find("ld.param.u32 \t%r1, [k2_param_0];"), std::string::npos);
    EXPECT_EQ(count(out, "{"), count(kTwoInts, "{"));
    // Nothing given: the module as it was.
    EXPECT_EQ(specialize_entry(kTwoInts, "k", {}), kTwoInts);
}

TEST(PtxSpecialize, RefusesWhatItCannotSpecialize) {
    // Not a 32-bit integer.
    EXPECT_THROW(specialize_entry(kTwoInts, "k", {std::nullopt, std::nullopt, std::nullopt, 1u}), std::runtime_error);
    EXPECT_THROW(specialize_entry(kTwoInts, "k", {1u}), std::runtime_error);
    // More values than parameters; an entry that is not there.
    EXPECT_THROW(specialize_entry(kTwoInts, "k2", {1u, 2u}), std::runtime_error);
    EXPECT_THROW(specialize_entry(kTwoInts, "k3", {1u}), std::runtime_error);
    // A parameter used otherwise than loaded whole.
    std::string other = kTwoInts;
    other.replace(other.find("[k_param_2]"), 11, "[k_param_2+0]");
    EXPECT_THROW(specialize_entry(other, "k", {std::nullopt, std::nullopt, 5u}), std::runtime_error);
}

// Every kernel of p24's spliced module with its integer parameters as constants: no parameter
// load left, and ptxas assembles it for sm_90a.
TEST(PtxSpecialize, P24WgmmaModuleAssembles) {
    std::string ptx = splice_mma(probe_ptx(P24_WG_CUDA_STMT));
    std::vector<std::string> entries;
    for (size_t at = ptx.find(".entry "); at != std::string::npos; at = ptx.find(".entry ", at + 1)) {
        entries.push_back(ptx.substr(at + 7, ptx.find('(', at) - at - 7));
    }
    ASSERT_GE(entries.size(), 3u);
    for (const std::string &entry : entries) {
        const std::vector<std::string> types = entry_parameter_types(ptx, entry);
        std::vector<std::optional<uint32_t>> values(types.size());
        for (size_t k = 0; k < types.size(); k++) {
            if (fusedconv::cuda::is_int32_parameter(types[k])) values[k] = static_cast<uint32_t>(k + 1);
        }
        ptx = specialize_entry(ptx, entry, values);
        for (size_t k = 0; k < types.size(); k++) {
            if (values[k]) EXPECT_EQ(ptx.find("[" + entry + "_param_" + std::to_string(k) + "]"), std::string::npos);
        }
    }
    assemble(ptx, "sm_90a", "tc_p24_variant.ptx");
}

}  // namespace
