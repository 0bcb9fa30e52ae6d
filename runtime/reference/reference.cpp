// Plain float64 references: direct loops in PyTorch's layout and semantics.
// See reference.h and ../shared/PROBLEMS.md.
#include "reference.h"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace fusedconv::reference {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

std::string shape_str(const std::vector<int64_t> &shape) {
    std::string s = "(";
    for (size_t i = 0; i < shape.size(); i++) {
        s += (i ? ", " : "") + std::to_string(shape[i]);
    }
    return s + ")";
}

void require(bool ok, const std::string &what) {
    if (!ok) {
        throw std::invalid_argument("fusedconv::reference: " + what);
    }
}

void require_rank(const HostTensor &t, size_t rank, const char *name) {
    require(t.shape.size() == rank, std::string(name) + " must have rank " +
                                        std::to_string(rank) + ", got shape " +
                                        shape_str(t.shape));
    require(static_cast<int64_t>(t.values.size()) == t.numel(),
            std::string(name) + " holds " + std::to_string(t.values.size()) +
                " values for shape " + shape_str(t.shape));
}

HostTensor make(std::vector<int64_t> shape) {
    HostTensor t;
    t.shape = std::move(shape);
    t.values.assign(static_cast<size_t>(t.numel()), 0.0);
    return t;
}

// A 2D or 3D convolution problem seen as 3D: 2D tensors get depth 1 and a
// kernel depth of 1. All sizes are PyTorch's.
struct ConvGeom {
    bool is3d;
    int64_t n, cin, d, h, w;       // input
    int64_t cout, kd, kh, kw;      // weight
    int64_t od, oh, ow;            // output spatial size
};

ConvGeom conv_geom(const HostTensor &input, const HostTensor &weight, const HostTensor &bias) {
    const size_t rank = input.shape.size();
    require(rank == 4 || rank == 5,
            "conv input must be 4D or 5D, got shape " + shape_str(input.shape));
    require_rank(input, rank, "conv input");
    require_rank(weight, rank, "conv weight");
    require_rank(bias, 1, "conv bias");
    ConvGeom g;
    g.is3d = rank == 5;
    g.n = input.shape[0];
    g.cin = input.shape[1];
    g.d = g.is3d ? input.shape[2] : 1;
    g.h = input.shape[rank - 2];
    g.w = input.shape[rank - 1];
    g.cout = weight.shape[0];
    require(weight.shape[1] == g.cin, "conv weight " + shape_str(weight.shape) +
                                          " does not match input " + shape_str(input.shape));
    require(bias.shape[0] == g.cout, "conv bias " + shape_str(bias.shape) +
                                         " does not match weight " + shape_str(weight.shape));
    g.kd = g.is3d ? weight.shape[2] : 1;
    g.kh = weight.shape[rank - 2];
    g.kw = weight.shape[rank - 1];
    require(g.kd >= 1 && g.kh >= 1 && g.kw >= 1 && g.kd <= g.d && g.kh <= g.h && g.kw <= g.w,
            "conv kernel " + shape_str(weight.shape) + " does not fit input " +
                shape_str(input.shape));
    g.od = g.d - g.kd + 1;
    g.oh = g.h - g.kh + 1;
    g.ow = g.w - g.kw + 1;
    return g;
}

std::vector<int64_t> conv_out_shape(const ConvGeom &g) {
    if (g.is3d) {
        return {g.n, g.cout, g.od, g.oh, g.ow};
    }
    return {g.n, g.cout, g.oh, g.ow};
}

// bias[co] + sum over (ci, kz, ky, kx) of weight * input, in float64.
double conv_point(const ConvGeom &g, const HostTensor &input, const HostTensor &weight,
                  const HostTensor &bias, int64_t n, int64_t co, int64_t z, int64_t y,
                  int64_t x) {
    double sum = 0.0;
    for (int64_t ci = 0; ci < g.cin; ci++) {
        for (int64_t kz = 0; kz < g.kd; kz++) {
            for (int64_t ky = 0; ky < g.kh; ky++) {
                const double *in_row =
                    &input.values[(((n * g.cin + ci) * g.d + z + kz) * g.h + y + ky) * g.w + x];
                const double *w_row =
                    &weight.values[(((co * g.cin + ci) * g.kd + kz) * g.kh + ky) * g.kw];
                for (int64_t kx = 0; kx < g.kw; kx++) {
                    sum += w_row[kx] * in_row[kx];
                }
            }
        }
    }
    return bias.values[co] + sum;
}

void check_conv_position(const ConvGeom &g, int64_t n, int64_t co, int64_t z, int64_t y,
                         int64_t x) {
    if (n < 0 || n >= g.n || co < 0 || co >= g.cout || z < 0 || z >= g.od || y < 0 ||
        y >= g.oh || x < 0 || x >= g.ow) {
        throw std::out_of_range("fusedconv::reference: conv position (n=" + std::to_string(n) +
                                ", c=" + std::to_string(co) + ", z=" + std::to_string(z) +
                                ", y=" + std::to_string(y) + ", x=" + std::to_string(x) +
                                ") is outside the output " + shape_str(conv_out_shape(g)));
    }
}

uint32_t hash32(uint32_t v) {
    v ^= v >> 16;
    v *= 0x7feb352du;
    v ^= v >> 15;
    v *= 0x846ca68bu;
    v ^= v >> 16;
    return v;
}

double group_norm_value(double v, const GroupStats &s, double eps, double gamma, double beta) {
    return (v - s.mean) / std::sqrt(s.var + eps) * gamma + beta;
}

double p83_epilogue(double normed, const P83Args &args, uint32_t index) {
    double v = torch_clamp(nan_min(normed, args.min_value), args.clamp_lo, args.clamp_hi);
    return dropout(v, index, args.seed, args.p, args.training);
}

// Exact two-pass mean and biased variance.
GroupStats two_pass_stats(const std::vector<double> &v) {
    double sum = 0.0;
    for (double x : v) {
        sum += x;
    }
    const double mean = sum / static_cast<double>(v.size());
    double m2 = 0.0;
    for (double x : v) {
        m2 += (x - mean) * (x - mean);
    }
    return {mean, m2 / static_cast<double>(v.size())};
}

}  // namespace

int64_t HostTensor::numel() const {
    int64_t n = 1;
    for (int64_t s : shape) {
        n *= s;
    }
    return n;
}

int64_t HostTensor::offset(const std::vector<int64_t> &index) const {
    if (index.size() != shape.size()) {
        throw std::out_of_range("fusedconv::reference: index of rank " +
                                std::to_string(index.size()) + " into a tensor of shape " +
                                shape_str(shape));
    }
    int64_t off = 0;
    for (size_t i = 0; i < shape.size(); i++) {
        if (index[i] < 0 || index[i] >= shape[i]) {
            throw std::out_of_range("fusedconv::reference: index " + shape_str(index) +
                                    " is outside shape " + shape_str(shape));
        }
        off = off * shape[i] + index[i];
    }
    return off;
}

HostTensor from_float(const std::vector<int64_t> &shape, const float *data) {
    HostTensor t;
    t.shape = shape;
    for (int64_t s : shape) {
        require(s >= 0, "negative size in shape " + shape_str(shape));
    }
    const int64_t n = t.numel();
    require(n == 0 || data != nullptr, "from_float: null data");
    t.values.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; i++) {
        t.values[i] = static_cast<double>(data[i]);
    }
    return t;
}

double nan_min(double a, double b) {
    if (std::isnan(a) || std::isnan(b)) {
        return kNaN;
    }
    return a < b ? a : b;
}

double nan_max(double a, double b) {
    if (std::isnan(a) || std::isnan(b)) {
        return kNaN;
    }
    return a > b ? a : b;
}

double torch_clamp(double v, double lo, double hi) { return nan_min(nan_max(v, lo), hi); }

double conv_at(const HostTensor &input, const HostTensor &weight, const HostTensor &bias,
               int64_t n, int64_t co, const std::vector<int64_t> &spatial) {
    const ConvGeom g = conv_geom(input, weight, bias);
    const size_t nsp = g.is3d ? 3 : 2;
    if (spatial.size() != nsp) {
        throw std::out_of_range("fusedconv::reference: conv_at needs " + std::to_string(nsp) +
                                " spatial coordinates, got " + std::to_string(spatial.size()));
    }
    const int64_t z = g.is3d ? spatial[0] : 0;
    const int64_t y = spatial[nsp - 2];
    const int64_t x = spatial[nsp - 1];
    check_conv_position(g, n, co, z, y, x);
    return conv_point(g, input, weight, bias, n, co, z, y, x);
}

HostTensor conv(const HostTensor &input, const HostTensor &weight, const HostTensor &bias) {
    const ConvGeom g = conv_geom(input, weight, bias);
    HostTensor out = make(conv_out_shape(g));
    int64_t i = 0;  // output is (n, co, z, y, x) contiguous
    for (int64_t n = 0; n < g.n; n++) {
        for (int64_t co = 0; co < g.cout; co++) {
            for (int64_t z = 0; z < g.od; z++) {
                for (int64_t y = 0; y < g.oh; y++) {
                    for (int64_t x = 0; x < g.ow; x++) {
                        out.values[i++] = conv_point(g, input, weight, bias, n, co, z, y, x);
                    }
                }
            }
        }
    }
    return out;
}

HostTensor min_over_depth(const HostTensor &t) {
    require_rank(t, 5, "min_over_depth input");
    const int64_t N = t.shape[0], C = t.shape[1], D = t.shape[2], H = t.shape[3], W = t.shape[4];
    HostTensor out = make({N, C, H, W});
    for (int64_t n = 0; n < N; n++) {
        for (int64_t c = 0; c < C; c++) {
            for (int64_t y = 0; y < H; y++) {
                for (int64_t x = 0; x < W; x++) {
                    double m = kInf;
                    for (int64_t z = 0; z < D; z++) {
                        m = nan_min(m, t.values[(((n * C + c) * D + z) * H + y) * W + x]);
                    }
                    out.values[((n * C + c) * H + y) * W + x] = m;
                }
            }
        }
    }
    return out;
}

HostTensor min_over_channels(const HostTensor &t) {
    require_rank(t, 4, "min_over_channels input");
    const int64_t N = t.shape[0], C = t.shape[1], H = t.shape[2], W = t.shape[3];
    HostTensor out = make({N, 1, H, W});
    for (int64_t n = 0; n < N; n++) {
        for (int64_t y = 0; y < H; y++) {
            for (int64_t x = 0; x < W; x++) {
                double m = kInf;
                for (int64_t c = 0; c < C; c++) {
                    m = nan_min(m, t.values[((n * C + c) * H + y) * W + x]);
                }
                out.values[(n * H + y) * W + x] = m;
            }
        }
    }
    return out;
}

HostTensor softmax_channels(const HostTensor &t) {
    require_rank(t, 4, "softmax_channels input");
    const int64_t N = t.shape[0], C = t.shape[1], H = t.shape[2], W = t.shape[3];
    HostTensor out = make(t.shape);
    for (int64_t n = 0; n < N; n++) {
        for (int64_t y = 0; y < H; y++) {
            for (int64_t x = 0; x < W; x++) {
                auto idx = [&](int64_t c) { return ((n * C + c) * H + y) * W + x; };
                double m = -kInf;
                for (int64_t c = 0; c < C; c++) {
                    m = nan_max(m, t.values[idx(c)]);
                }
                // A NaN anywhere makes m NaN and so every exp NaN: the whole row is NaN.
                double sum = 0.0;
                for (int64_t c = 0; c < C; c++) {
                    const double e = std::exp(t.values[idx(c)] - m);
                    out.values[idx(c)] = e;
                    sum += e;
                }
                for (int64_t c = 0; c < C; c++) {
                    out.values[idx(c)] /= sum;
                }
            }
        }
    }
    return out;
}

HostTensor group_norm(const HostTensor &t, int groups, const HostTensor &gamma,
                      const HostTensor &beta, double eps) {
    require_rank(t, 5, "group_norm input");
    require_rank(gamma, 1, "group_norm gamma");
    require_rank(beta, 1, "group_norm beta");
    const int64_t N = t.shape[0], C = t.shape[1];
    require(groups >= 1 && C % groups == 0, "group_norm: " + std::to_string(groups) +
                                                " groups do not divide " + std::to_string(C) +
                                                " channels");
    require(gamma.shape[0] == C && beta.shape[0] == C,
            "group_norm: gamma " + shape_str(gamma.shape) + " / beta " +
                shape_str(beta.shape) + " do not match " + std::to_string(C) + " channels");
    const int64_t spatial = t.shape[2] * t.shape[3] * t.shape[4];
    const int64_t cpg = C / groups;
    const int64_t group_size = cpg * spatial;  // contiguous in (N, C, D, H, W)
    HostTensor out = make(t.shape);
    std::vector<double> vals(static_cast<size_t>(group_size));
    for (int64_t n = 0; n < N; n++) {
        for (int64_t g = 0; g < groups; g++) {
            const int64_t base = (n * C + g * cpg) * spatial;
            for (int64_t i = 0; i < group_size; i++) {
                vals[i] = t.values[base + i];
            }
            const GroupStats s = two_pass_stats(vals);
            for (int64_t i = 0; i < group_size; i++) {
                const int64_t c = g * cpg + i / spatial;
                out.values[base + i] =
                    group_norm_value(vals[i], s, eps, gamma.values[c], beta.values[c]);
            }
        }
    }
    return out;
}

double uniform01(uint32_t seed, uint32_t index) {
    const uint32_t h = hash32(index + hash32(seed ^ 0x9e3779b9u));
    return static_cast<double>(h >> 8) * (1.0 / 16777216.0);
}

double dropout(double v, uint32_t index, uint32_t seed, double p, bool training) {
    if (!training) {
        return v;
    }
    // The pipelines take p as a float32 and compare a float32 uniform (exact
    // here too: 24 bits) with it, so compare with float(p) as they do.
    const float pf = static_cast<float>(p);
    if (uniform01(seed, index) >= static_cast<double>(pf)) {
        // Survivors are computed in float32, exactly as the pipelines do.
        return static_cast<double>(static_cast<float>(v) / (1.0f - pf));
    }
    return v * 0.0;  // NaN stays NaN
}

HostTensor p24(const HostTensor &input, const HostTensor &weight, const HostTensor &bias) {
    require(input.shape.size() == 5, "p24 input must be 5D, got " + shape_str(input.shape));
    return softmax_channels(min_over_depth(conv(input, weight, bias)));
}

HostTensor p32(const HostTensor &input, const HostTensor &weight, const HostTensor &bias,
               double scale) {
    require(input.shape.size() == 4, "p32 input must be 4D, got " + shape_str(input.shape));
    HostTensor c = conv(input, weight, bias);
    for (double &v : c.values) {
        v *= scale;
    }
    return min_over_channels(c);
}

HostTensor p25(const HostTensor &input, const HostTensor &weight, const HostTensor &bias) {
    require(input.shape.size() == 4, "p25 input must be 4D, got " + shape_str(input.shape));
    HostTensor m = min_over_channels(conv(input, weight, bias));
    for (double &v : m.values) {
        v = std::tanh(std::tanh(v));
    }
    return m;
}

HostTensor p83(const HostTensor &input, const HostTensor &weight, const HostTensor &bias,
               const HostTensor &gamma, const HostTensor &beta, const P83Args &args) {
    require(input.shape.size() == 5, "p83 input must be 5D, got " + shape_str(input.shape));
    HostTensor y = group_norm(conv(input, weight, bias), args.groups, gamma, beta, args.eps);
    for (int64_t i = 0; i < y.numel(); i++) {
        y.values[i] = p83_epilogue(y.values[i], args, static_cast<uint32_t>(i));
    }
    return y;
}

std::vector<double> p24_pixel(const HostTensor &input, const HostTensor &weight,
                              const HostTensor &bias, int64_t n, int64_t y, int64_t x) {
    const ConvGeom g = conv_geom(input, weight, bias);
    require(g.is3d, "p24 input must be 5D, got " + shape_str(input.shape));
    check_conv_position(g, n, 0, 0, y, x);
    std::vector<double> row(static_cast<size_t>(g.cout));
    double m = -kInf;
    for (int64_t co = 0; co < g.cout; co++) {
        double mind = kInf;
        for (int64_t z = 0; z < g.od; z++) {
            mind = nan_min(mind, conv_point(g, input, weight, bias, n, co, z, y, x));
        }
        row[co] = mind;
        m = nan_max(m, mind);
    }
    double sum = 0.0;
    for (double &v : row) {
        v = std::exp(v - m);
        sum += v;
    }
    for (double &v : row) {
        v /= sum;
    }
    return row;
}

double p32_at(const HostTensor &input, const HostTensor &weight, const HostTensor &bias,
              double scale, int64_t n, int64_t y, int64_t x) {
    const ConvGeom g = conv_geom(input, weight, bias);
    require(!g.is3d, "p32 input must be 4D, got " + shape_str(input.shape));
    check_conv_position(g, n, 0, 0, y, x);
    double m = kInf;
    for (int64_t co = 0; co < g.cout; co++) {
        m = nan_min(m, conv_point(g, input, weight, bias, n, co, 0, y, x) * scale);
    }
    return m;
}

double p25_at(const HostTensor &input, const HostTensor &weight, const HostTensor &bias,
              int64_t n, int64_t y, int64_t x) {
    const ConvGeom g = conv_geom(input, weight, bias);
    require(!g.is3d, "p25 input must be 4D, got " + shape_str(input.shape));
    check_conv_position(g, n, 0, 0, y, x);
    double m = kInf;
    for (int64_t co = 0; co < g.cout; co++) {
        m = nan_min(m, conv_point(g, input, weight, bias, n, co, 0, y, x));
    }
    return std::tanh(std::tanh(m));
}

GroupStats p83_group_stats(const HostTensor &input, const HostTensor &weight,
                           const HostTensor &bias, int groups, int64_t n, int64_t g) {
    const ConvGeom geo = conv_geom(input, weight, bias);
    require(geo.is3d, "p83 input must be 5D, got " + shape_str(input.shape));
    require(groups >= 1 && geo.cout % groups == 0,
            "p83: " + std::to_string(groups) + " groups do not divide " +
                std::to_string(geo.cout) + " channels");
    if (n < 0 || n >= geo.n || g < 0 || g >= groups) {
        throw std::out_of_range("fusedconv::reference: p83_group_stats (n=" + std::to_string(n) +
                                ", g=" + std::to_string(g) + ") outside " +
                                std::to_string(geo.n) + " samples x " + std::to_string(groups) +
                                " groups");
    }
    const int64_t cpg = geo.cout / groups;
    std::vector<double> vals;
    vals.reserve(static_cast<size_t>(cpg * geo.od * geo.oh * geo.ow));
    for (int64_t co = g * cpg; co < (g + 1) * cpg; co++) {
        for (int64_t z = 0; z < geo.od; z++) {
            for (int64_t y = 0; y < geo.oh; y++) {
                for (int64_t x = 0; x < geo.ow; x++) {
                    vals.push_back(conv_point(geo, input, weight, bias, n, co, z, y, x));
                }
            }
        }
    }
    return two_pass_stats(vals);
}

double p83_at(const HostTensor &input, const HostTensor &weight, const HostTensor &bias,
              const HostTensor &gamma, const HostTensor &beta, const P83Args &args,
              const GroupStats &stats, int64_t n, int64_t c, int64_t z, int64_t y, int64_t x) {
    const ConvGeom g = conv_geom(input, weight, bias);
    require(g.is3d, "p83 input must be 5D, got " + shape_str(input.shape));
    require_rank(gamma, 1, "p83 gamma");
    require_rank(beta, 1, "p83 beta");
    require(gamma.shape[0] == g.cout && beta.shape[0] == g.cout,
            "p83: gamma " + shape_str(gamma.shape) + " / beta " + shape_str(beta.shape) +
                " do not match " + std::to_string(g.cout) + " channels");
    check_conv_position(g, n, c, z, y, x);
    const double v = conv_point(g, input, weight, bias, n, c, z, y, x);
    const double normed = group_norm_value(v, stats, args.eps, gamma.values[c], beta.values[c]);
    const int64_t index = (((n * g.cout + c) * g.od + z) * g.oh + y) * g.ow + x;
    return p83_epilogue(normed, args, static_cast<uint32_t>(index));
}

}  // namespace fusedconv::reference
