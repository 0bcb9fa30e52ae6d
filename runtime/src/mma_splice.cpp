#include "mma_splice.h"

#include <cstdint>
#include <regex>
#include <stdexcept>
#include <vector>

namespace fusedconv::cuda {
namespace {

struct CallSite {
    size_t begin = 0, end = 0;       // the call's `{ // callseq N, 0 ... } // callseq N` block
    int number = 0;                  // N, for messages
    std::string family;              // "mma8s", "mma8" or "wg24"
    int elem = 0;                    // which element of D it returns
    std::vector<std::string> args;   // operands without the anchor: registers or immediates
    std::string result;              // the register receiving the element
};

size_t operand_count(const std::string &family) {
    return family == "mma8s" ? 14 : family == "mma8" ? 10 : 17;
}
// The elements of D a group returns: mma.m16n8k8's 4, wgmma.m64n24k8's 12.
size_t element_count(const std::string &family) { return family == "wg24" ? 12 : 4; }

std::vector<CallSite> find_calls(const std::string &ptx) {
    static const std::regex block(R"(\{ // callseq (\d+), 0\n([\s\S]*?)\} // callseq \1\n)");
    static const std::regex callee(R"(call\.uni \(retval0\),\s*fc_(mma8s|mma8|wg24)_d(\d+),)");
    static const std::regex param(R"(st\.param\.[bf]32\s+\[param(\d+)\+0\],\s*([^;]+);)");
    static const std::regex result(R"(ld\.param\.f32\s+([^,]+),\s*\[retval0\+0\];)");
    std::vector<CallSite> sites;
    for (auto it = std::sregex_iterator(ptx.begin(), ptx.end(), block); it != std::sregex_iterator(); ++it) {
        const std::string body = (*it)[2];
        std::smatch m;
        if (!std::regex_search(body, m, callee)) continue;
        CallSite s;
        s.begin = static_cast<size_t>(it->position(0));
        s.end = s.begin + static_cast<size_t>(it->length(0));
        s.number = std::stoi((*it)[1]);
        s.family = m[1];
        s.elem = std::stoi(m[2]);
        if (static_cast<size_t>(s.elem) >= element_count(s.family))
            throw std::runtime_error("callseq " + std::to_string(s.number) + ": fc_" + s.family + "_d" +
                                     std::to_string(s.elem) + " is past the family's elements");
        const size_t n = operand_count(s.family);
        s.args.assign(n, "");
        for (auto p = std::sregex_iterator(body.begin(), body.end(), param); p != std::sregex_iterator(); ++p) {
            const size_t k = std::stoul((*p)[1]);
            if (k > n)
                throw std::runtime_error("callseq " + std::to_string(s.number) + ": fc_" + s.family +
                                         " has a parameter " + std::to_string(k) + " past its " +
                                         std::to_string(n + 1));
            if (k < n) s.args[k] = (*p)[2];
        }
        for (size_t k = 0; k < n; k++)
            if (s.args[k].empty())
                throw std::runtime_error("callseq " + std::to_string(s.number) + ": fc_" + s.family +
                                         " without operand " + std::to_string(k));
        if (!std::regex_search(body, m, result))
            throw std::runtime_error("callseq " + std::to_string(s.number) + ": fc_" + s.family + " result not read");
        s.result = m[1];
        sites.push_back(s);
    }
    return sites;
}

// Whether the instructions between two calls of a group let the group run at its first call:
// each line a plain instruction (no label, branch, predicate, store, call, barrier or
// warp-level operation) whose destinations (its first operand, or a leading {vector}) are none
// of the group's operands, and that names none of the results of the group's calls still to
// come.
bool gap_allows_move(const std::string &gap, const std::vector<std::string> &operands,
                     const std::vector<std::string> &later_results) {
    static const std::regex reg(R"(%[A-Za-z_][A-Za-z0-9_]*)");
    static const char *const barred[] = {"st.", "bra", "bar", "call", "ret", "atom", "red",
                                         "mma", "shfl", "vote", "membar", "fence", "exit"};
    size_t start = 0;
    while (start < gap.size()) {
        size_t nl = gap.find('\n', start);
        if (nl == std::string::npos) nl = gap.size();
        std::string line = gap.substr(start, nl - start);
        start = nl + 1;
        const size_t comment = line.find("//");
        if (comment != std::string::npos) line.resize(comment);
        const size_t first = line.find_first_not_of(" \t");
        if (first == std::string::npos) continue;
        line = line.substr(first, line.find_last_not_of(" \t") - first + 1);
        if (line[0] == '@' || line[0] == '{' || line[0] == '}' || line.back() != ';') return false;
        const std::string opcode = line.substr(0, line.find_first_of(" \t"));
        for (const char *b : barred)
            if (opcode.rfind(b, 0) == 0) return false;
        // The destinations: the first operand, or all of a leading {vector}.
        const std::string rest = line.substr(opcode.size());
        const size_t open = rest.find_first_not_of(" \t");
        const size_t dest_end = open != std::string::npos && rest[open] == '{' ? rest.find('}') : rest.find(',');
        for (auto it = std::sregex_iterator(rest.begin(), rest.end(), reg); it != std::sregex_iterator(); ++it) {
            for (const auto &r : later_results)
                if (it->str() == r) return false;
            if (static_cast<size_t>(it->position(0)) < dest_end)
                for (const auto &o : operands)
                    if (it->str() == o) return false;
        }
    }
    return true;
}

// x (register or immediate `src`) split into a tf32 value `hi` and the remainder `lo` (b32
// registers, as the mma takes them), through the f32 registers `x` and `hf`: hi is x's bits with
// the 13 low bits cleared, after adding half a tf32 ulp where `round_hi` (to nearest, ties away
// from zero; else truncated), lo = x - hi is exact, and the tensor cores truncate it.
std::string tf32_split(const std::string &src, const std::string &x, const std::string &hf,
                       const std::string &hi, const std::string &lo, bool round_hi) {
    std::string t = "\tmov.f32 " + x + ", " + src + ";\n";
    t += "\tmov.b32 " + hi + ", " + x + ";\n";
    if (round_hi) t += "\tadd.u32 " + hi + ", " + hi + ", 4096;\n";  // half a tf32 ulp
    t += "\tand.b32 " + hi + ", " + hi + ", -8192;\n";                // the 13 low bits cleared
    t += "\tmov.b32 " + hf + ", " + hi + ";\n";
    t += "\tsub.rn.f32 " + x + ", " + x + ", " + hf + ";\n";           // lo, exact
    t += "\tmov.b32 " + lo + ", " + x + ";\n";
    return t;
}

// The inline replacement of one group: operands copied into registers of a scope of its own
// (the placeholders' operands may be immediates), B (and for "8", A) split into tf32 high and
// low parts, three mma.sync, the four elements copied to the calls' result registers.
//
// The split, three instructions: hi is x's bits plus half a tf32 ulp with the 13 low bits
// cleared (x rounded to tf32, ties away from zero), lo = x - hi is exact, and the mma truncates
// lo to tf32 (a product's error at most about 2^-22 of it, twice that of lo rounded). Veltkamp's
// split, 5 instructions with lo rounded, made p32 6.5% and p25 8% slower (H200;
// schedules/NOTES.md). lo is never rounded by adding to its bits: the GPU's NaN 0x7fffffff plus
// 0x1000 wraps to a finite value. A NaN x gives a NaN lo (hi may wrap to a zero), an infinite
// x hi infinite and lo NaN, and an |x| that rounds up past the float32 maximum hi infinite and
// lo infinite: the step's sums are not finite, and the caller's check takes the direct form.
std::string replacement(const CallSite &first, const std::vector<std::string> &results) {
    const auto &a = first.args;
    const bool presplit = first.family == "mma8s";
    std::string t = "{ // a tensor-core step: 3xTF32 mma.sync.m16n8k8\n"
                    "\t.reg .b32 %tch<6>, %tcl<6>, %tca<8>;\n"
                    "\t.reg .f32 %tcx<6>, %tct<6>, %tcc<4>, %tcd<4>;\n";
    for (int k = 0; k < 4; k++) t += "\tmov.f32 %tcc" + std::to_string(k) + ", " + a[k] + ";\n";
    auto split = [&t](const std::string &src, int k) {
        const std::string K = std::to_string(k);
        t += tf32_split(src, "%tcx" + K, "%tct" + K, "%tch" + K, "%tcl" + K, true);
    };
    std::string ah, al;
    if (presplit) {
        for (int k = 0; k < 8; k++) t += "\tmov.b32 %tca" + std::to_string(k) + ", " + a[4 + k] + ";\n";
        ah = "{%tca0, %tca1, %tca2, %tca3}";
        al = "{%tca4, %tca5, %tca6, %tca7}";
    } else {
        for (int k = 0; k < 4; k++) split(a[4 + k], k);
        ah = "{%tch0, %tch1, %tch2, %tch3}";
        al = "{%tcl0, %tcl1, %tcl2, %tcl3}";
    }
    const size_t b = presplit ? 12 : 8;
    split(a[b], 4);
    split(a[b + 1], 5);
    const std::string bh = "{%tch4, %tch5}", bl = "{%tcl4, %tcl5}";
    const std::string op = "\tmma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%tcd0, %tcd1, %tcd2, %tcd3}, ";
    t += op + al + ", " + bh + ", {%tcc0, %tcc1, %tcc2, %tcc3};\n";
    t += op + ah + ", " + bl + ", {%tcd0, %tcd1, %tcd2, %tcd3};\n";
    t += op + ah + ", " + bh + ", {%tcd0, %tcd1, %tcd2, %tcd3};\n";
    for (int k = 0; k < 4; k++) t += "\tmov.f32 " + results[k] + ", %tcd" + std::to_string(k) + ";\n";
    return t + "}\n";
}

// One step of the fc_wg24 family: D (12 floats a thread: wgmma.m64n24k8's accumulator) plus A B
// in 3xTF32, A (4 floats a thread, the RS form's fragment) split here, B the split weights in
// shared memory at the byte address of operand 16 (the tf32 values; their remainders 768 bytes
// on), as K-major core matrices (8 rows x 16 bytes; the two k-cores 384 bytes apart, the n-cores
// 128). The split: the tf32 value is x's bits with the low 13 cleared, the remainder x minus that
// (exact; the tensor cores truncate it). The three wgmma are issued, committed and waited for
// at once. B was written by ordinary stores before a barrier: fence_barriers_for_wgmma fences
// the generic proxy there.
std::string wgmma_replacement(const CallSite &first, const std::vector<std::string> &results) {
    const auto &a = first.args;
    std::string t = "{ // a tensor-core step: 3xTF32 wgmma.m64n24k8\n"
                    "\t.reg .b32 %twh<4>, %twl<4>, %twb;\n"
                    "\t.reg .f32 %twx<4>, %twy<4>, %twc<12>;\n"
                    "\t.reg .b64 %twd<2>;\n"
                    "\t.reg .pred %twp;\n";
    for (int k = 0; k < 12; k++) t += "\tmov.f32 %twc" + std::to_string(k) + ", " + a[k] + ";\n";
    for (int k = 0; k < 4; k++) {
        const std::string K = std::to_string(k);
        t += tf32_split(a[12 + k], "%twx" + K, "%twy" + K, "%twh" + K, "%twl" + K, false);
    }
    // Descriptors: start address >> 4 (14 bits), leading-dimension offset (between the k-cores)
    // >> 4 at bit 16, stride-dimension offset (between the n-cores) >> 4 at bit 32, no swizzle.
    // A core matrix is 8 rows of 16 bytes; n = 24 channels are 3 n-cores, so a k-core of all of
    // them is 384 bytes, and a step's values (two k-cores) 768 (generators/conv3d_wgmma.h stores
    // B so: kWgmmaStepBytes).
    constexpr uint64_t kN = 24, kCoreBytes = 8 * 16;
    constexpr uint64_t kStride = kCoreBytes, kLeading = kN / 8 * kCoreBytes, kRemainders = 2 * kLeading;
    const std::string fields = std::to_string(((kLeading >> 4) << 16) | ((kStride >> 4) << 32));
    t += "\tmov.b32 %twb, " + a[16] + ";\n";
    for (int d = 0; d < 2; d++) {
        const std::string D = "%twd" + std::to_string(d);
        t += "\tcvt.u64.u32 " + D + ", %twb;\n\tshr.u64 " + D + ", " + D + ", 4;\n";
        t += "\tand.b64 " + D + ", " + D + ", 16383;\n\tor.b64 " + D + ", " + D + ", " + fields + ";\n";
        if (d == 0) t += "\tadd.u32 %twb, %twb, " + std::to_string(kRemainders) + ";\n";
    }
    t += "\tsetp.ne.b32 %twp, 1, 0;\n"
         "\twgmma.fence.sync.aligned;\n";
    const std::string op = "\twgmma.mma_async.sync.aligned.m64n24k8.f32.tf32.tf32 {%twc0, %twc1, %twc2, %twc3, "
                           "%twc4, %twc5, %twc6, %twc7, %twc8, %twc9, %twc10, %twc11}, ";
    t += op + "{%twl0, %twl1, %twl2, %twl3}, %twd0, %twp, 1, 1;\n";
    t += op + "{%twh0, %twh1, %twh2, %twh3}, %twd1, %twp, 1, 1;\n";
    t += op + "{%twh0, %twh1, %twh2, %twh3}, %twd0, %twp, 1, 1;\n";
    t += "\twgmma.commit_group.sync.aligned;\n\twgmma.wait_group.sync.aligned 0;\n";
    for (int k = 0; k < 12; k++) t += "\tmov.f32 " + results[k] + ", %twc" + std::to_string(k) + ";\n";
    return t + "}\n";
}

// The steps read B (shared memory) through the async proxy, which sees the threads' ordinary
// stores only after a proxy fence. Halide separates a shared Func's producer nest from its
// consumers by a barrier: each thread fences its own writes just before every barrier, so that
// after it the whole block's writes are visible to the steps (CUTLASS's order for threads'
// stores that wgmma reads). Once a barrier, not once a step: a fence in every step cost p24's
// probe 7% (schedules/NOTES.md).
std::string fence_barriers_for_wgmma(const std::string &ptx) {
    static const std::regex barrier(R"((^|\n)([ \t]*)((@!?%p\d+[ \t]+)?bar(rier)?\.sync))");
    return std::regex_replace(ptx, barrier, "$1$2fence.proxy.async.shared::cta;\n$2$3");
}

// wgmma needs PTX ISA 8.0 and the sm_90a target: the module's header raised to them.
std::string retarget_sm90a(const std::string &ptx) {
    static const std::regex version(R"(\.version \d+\.\d+)"), target(R"(\.target sm_\d+a?)");
    std::string out = std::regex_replace(ptx, version, ".version 8.0", std::regex_constants::format_first_only);
    return std::regex_replace(out, target, ".target sm_90a", std::regex_constants::format_first_only);
}

}  // namespace

std::string splice_mma(const std::string &ptx, int *groups) {
    if (ptx.find("fc_mma") == std::string::npos && ptx.find("fc_wg24") == std::string::npos) {
        if (groups) *groups = 0;
        return ptx;
    }
    static const std::regex decl(
        R"(\.extern \.func\s*\(\.param \.b32 func_retval0\) fc_(mma8s?|wg24)_d\d+\s*\([^)]*\)\s*;)");
    const std::string text = std::regex_replace(ptx, decl, "");
    const std::vector<CallSite> sites = find_calls(text);
    std::string out;
    size_t pos = 0;
    int count = 0;
    bool wgmma = false;
    for (size_t i = 0; i < sites.size();) {
        const size_t elems = element_count(sites[i].family);
        std::vector<std::string> results(elems);
        size_t j = i;
        for (; j < sites.size() && j < i + elems; j++) {
            const CallSite &s = sites[j];
            if (s.family != sites[i].family || s.args != sites[i].args || !results[s.elem].empty()) break;
            if (j > i) {
                std::vector<std::string> later;
                for (size_t q = j; q < sites.size() && q < i + elems; q++) later.push_back(sites[q].result);
                if (!gap_allows_move(text.substr(sites[j - 1].end, s.begin - sites[j - 1].end), sites[i].args, later))
                    break;
            }
            results[s.elem] = s.result;
        }
        if (j != i + elems)
            throw std::runtime_error("callseq " + std::to_string(sites[j < sites.size() ? j : i].number) +
                                     ": fc_" + sites[i].family + " calls are not in groups of d0..d" +
                                     std::to_string(elems - 1) +
                                     " with the same operands and movable instructions between them");
        const bool wg = sites[i].family == "wg24";
        wgmma = wgmma || wg;
        out += text.substr(pos, sites[i].begin - pos) +
               (wg ? wgmma_replacement(sites[i], results) : replacement(sites[i], results));
        pos = sites[i + elems - 1].end;
        count++;
        i += elems;
    }
    out += text.substr(pos);
    if (out.find("fc_mma") != std::string::npos || out.find("fc_wg24") != std::string::npos)
        throw std::runtime_error("a reference to a placeholder is left that is not a placeholder call");
    if (groups) *groups = count;
    return wgmma ? retarget_sm90a(fence_barriers_for_wgmma(out)) : out;
}

}  // namespace fusedconv::cuda
