#include "problems.h"

#include "fusedconv/error.h"
#include "run_tools.h"

#include <sstream>

namespace fusedconv::bench {

namespace {

double product(const Shape &s, size_t from = 0) {
    double p = 1;
    for (size_t i = from; i < s.size(); ++i) p *= static_cast<double>(s[i]);
    return p;
}

// A problem whose input channels, output channels and kernel size are the
// KernelBench init arguments (tools::kernelbench_conv, where the models are
// built from them too); `batch` and `spatial` complete the default input.
Problem make_problem(const std::string &id, const std::string &name, int64_t batch,
                     const Shape &spatial, bool has_norm, bool channel_min) {
    const tools::KernelBenchConv &c = tools::kernelbench_conv(id);
    Shape input = {batch, c.in_channels};
    input.insert(input.end(), spatial.begin(), spatial.end());
    return {id, name, input, c.out_channels, c.kernel_size, int(spatial.size()), has_norm,
            channel_min};
}

}  // namespace

const std::vector<Problem> &problems() {
    static const std::vector<Problem> list = {
        make_problem("p24", "conv3d_min_softmax", 128, {24, 32, 32}, false, false),
        make_problem("p25", "conv2d_min_tanh_tanh", 128, {256, 256}, false, true),
        make_problem("p32", "conv2d_scale_min", 64, {256, 256}, false, true),
        make_problem("p83", "conv3d_groupnorm_min_clamp_dropout", 128, {16, 64, 64}, true, false),
    };
    return list;
}

const Problem &find_problem(const std::string &id) {
    for (const Problem &p : problems()) {
        if (p.id == id) return p;
    }
    throw Error("unknown problem '" + id + "' (expected p24, p25, p32 or p83)");
}

Shape parse_shape(const Problem &p, const std::string &text) {
    Shape s;
    std::stringstream ss(text);
    std::string item;
    while (std::getline(ss, item, ',')) {
        size_t used = 0;
        long long v = 0;
        try {
            v = std::stoll(item, &used);
        } catch (const std::exception &) {
            used = 0;
        }
        if (used == 0 || used != item.size() || v <= 0) {
            throw Error(p.id + ": shape '" + text + "' has a bad size '" + item + "'");
        }
        s.push_back(v);
    }
    if (s.size() != p.default_input.size()) {
        throw Error(p.id + ": shape '" + text + "' must have " +
                    std::to_string(p.default_input.size()) + " sizes, like " +
                    shape_string(p.default_input));
    }
    if (s[1] != p.default_input[1]) {
        throw Error(p.id + ": shape '" + text + "' must keep " +
                    std::to_string(p.default_input[1]) + " input channels");
    }
    for (size_t d = 2; d < s.size(); ++d) {
        if (s[d] < p.k) throw Error(p.id + ": shape '" + text + "' is smaller than the kernel");
    }
    return s;
}

Shape conv_shape(const Problem &p, const Shape &input) {
    Shape out = {input[0], p.cout};
    for (size_t d = 2; d < input.size(); ++d) out.push_back(input[d] - p.k + 1);
    return out;
}

Shape output_shape(const Problem &p, const Shape &input) {
    Shape c = conv_shape(p, input);
    if (p.channel_min) return {c[0], 1, c[2], c[3]};
    if (p.id == "p24") return {c[0], c[1], c[3], c[4]};  // min over depth
    return c;
}

double conv_flops(const Problem &p, const Shape &input) {
    double taps = 1;
    for (int d = 0; d < p.spatial_dims; ++d) taps *= p.k;
    return 2.0 * product(conv_shape(p, input)) * static_cast<double>(input[1]) * taps;
}

double unavoidable_bytes(const Problem &p, const Shape &input) {
    double taps = 1;
    for (int d = 0; d < p.spatial_dims; ++d) taps *= p.k;
    double params = p.cout * (static_cast<double>(input[1]) * taps + 1) + (p.has_norm ? 2 * p.cout : 0);
    return 4.0 * (product(input) + params + product(output_shape(p, input)));
}

}  // namespace fusedconv::bench
