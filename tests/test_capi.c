/* The C ABI (fusedconv_c.h) from plain C, linked against libfusedconv_c.so:
   every fc_* function on the CPU against a float64 reference written here,
   and every error path (a non-zero return and a message naming the
   offending argument, shape or value). Exit status: the number of failed
   checks (0: all passed). */
#include "fusedconv/fusedconv_c.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

#define CHECK(cond)                                                             \
    do {                                                                        \
        if (!(cond)) {                                                          \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            ++failures;                                                         \
        }                                                                       \
    } while (0)

/* A call that must fail with a message containing `keyword` (and, when
   not NULL, `keyword2`). */
static void expect_error(int rc, const char *what, const char *keyword, const char *keyword2) {
    const char *msg = fc_last_error();
    if (rc == 0) {
        fprintf(stderr, "%s: expected a failure, got success\n", what);
        ++failures;
        return;
    }
    if (!msg || !strstr(msg, keyword) || (keyword2 && !strstr(msg, keyword2))) {
        fprintf(stderr, "%s: message \"%s\" lacks \"%s\"%s%s\n", what, msg ? msg : "(null)",
                keyword, keyword2 ? " or " : "", keyword2 ? keyword2 : "");
        ++failures;
        return;
    }
    printf("[ refused ] %s: %s\n", what, msg);
}

/* ------------------------------------------------------------ tensors */

static unsigned long long rng_state = 88172645463325252ull;
static float uniform(float lo, float hi) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return lo + (hi - lo) * (float)((rng_state >> 11) * (1.0 / 9007199254740992.0));
}

static int64_t count(const fc_tensor *t) {
    int64_t n = 1;
    for (int d = 0; d < t->ndim; ++d) n *= t->shape[d];
    return n;
}

/* A host tensor of the given shape with values in [lo, hi) (malloc'ed). */
static fc_tensor make(int ndim, const int64_t *shape, float lo, float hi) {
    fc_tensor t;
    memset(&t, 0, sizeof t);
    t.ndim = ndim;
    for (int d = 0; d < ndim; ++d) t.shape[d] = shape[d];
    t.device = FC_DEVICE_CPU;
    t.data = malloc((size_t)count(&t) * sizeof(float));
    for (int64_t i = 0; i < count(&t); ++i) ((float *)t.data)[i] = uniform(lo, hi);
    return t;
}

static fc_tensor make_filled(int64_t n, float value) {
    int64_t shape[1] = {n};
    fc_tensor t = make(1, shape, 0, 1);
    for (int64_t i = 0; i < n; ++i) ((float *)t.data)[i] = value;
    return t;
}

/* ---------------------------------------------------- float64 reference */

/* conv over (N, Cin, D, H, W) with weight (Cout, Cin, kd, kh, kw): the 2D
   models use D = kd = 1. out: (N, Cout, D', H', W') doubles. */
static double *conv(const float *in, int64_t n, int64_t cin, int64_t d, int64_t h, int64_t w,
                    const float *wt, int64_t cout, int64_t kd, int64_t kh, int64_t kw,
                    const float *bias) {
    const int64_t od = d - kd + 1, oh = h - kh + 1, ow = w - kw + 1;
    double *out = malloc((size_t)(n * cout * od * oh * ow) * sizeof(double));
    for (int64_t b = 0; b < n; ++b)
        for (int64_t co = 0; co < cout; ++co)
            for (int64_t z = 0; z < od; ++z)
                for (int64_t y = 0; y < oh; ++y)
                    for (int64_t x = 0; x < ow; ++x) {
                        double s = bias[co];
                        for (int64_t ci = 0; ci < cin; ++ci)
                            for (int64_t a = 0; a < kd; ++a)
                                for (int64_t i = 0; i < kh; ++i)
                                    for (int64_t j = 0; j < kw; ++j)
                                        s += (double)in[(((b * cin + ci) * d + z + a) * h + y + i) * w + x + j] *
                                             (double)wt[(((co * cin + ci) * kd + a) * kh + i) * kw + j];
                        out[(((b * cout + co) * od + z) * oh + y) * ow + x] = s;
                    }
    return out;
}

/* |got - ref| <= 1e-4 * max(1, |ref|) for every element. */
static int close_to(const float *got, const double *ref, int64_t n, const char *what) {
    for (int64_t i = 0; i < n; ++i) {
        const double err = fabs(got[i] - ref[i]);
        if (!(err <= 1e-4 * fmax(1.0, fabs(ref[i])))) {
            fprintf(stderr, "%s: element %lld is %.9g, float64 reference %.9g\n", what,
                    (long long)i, got[i], ref[i]);
            return 0;
        }
    }
    return 1;
}

/* ------------------------------------------------------------- models */

static void test_p24(void) {
    const int64_t xs[5] = {2, 3, 5, 6, 7}, ws[5] = {4, 3, 3, 3, 3};
    fc_tensor x = make(5, xs, -1, 1), w = make(5, ws, -0.3f, 0.3f), b = make_filled(4, 0.1f);
    fc_tensor out;
    CHECK(fc_output_shape("p24", &x, &w, 2, &out) == 0);
    CHECK(out.ndim == 4 && out.shape[0] == 2 && out.shape[1] == 4 && out.shape[2] == 4 &&
          out.shape[3] == 5 && out.shape[4] == 0 && out.device == FC_DEVICE_CPU);
    out.data = malloc((size_t)count(&out) * sizeof(float));
    CHECK(fc_p24_forward(&x, &w, &b, 2, &out, NULL) == 0);
    CHECK(fc_p24_forward(&x, &w, &b, -3, &out, NULL) == 0);  /* -3 is the depth too */

    double *c = conv(x.data, 2, 3, 5, 6, 7, w.data, 4, 3, 3, 3, b.data);  /* (2, 4, 3, 4, 5) */
    double *ref = malloc(2 * 4 * 4 * 5 * sizeof(double));
    for (int n = 0; n < 2; ++n)
        for (int p = 0; p < 20; ++p) {
            double m[4], mx = -INFINITY, sum = 0;
            for (int co = 0; co < 4; ++co) {
                m[co] = INFINITY;
                for (int z = 0; z < 3; ++z) m[co] = fmin(m[co], c[((n * 4 + co) * 3 + z) * 20 + p]);
                mx = fmax(mx, m[co]);
            }
            for (int co = 0; co < 4; ++co) sum += exp(m[co] - mx);
            for (int co = 0; co < 4; ++co) ref[(n * 4 + co) * 20 + p] = exp(m[co] - mx) / sum;
        }
    CHECK(close_to(out.data, ref, 160, "p24"));

    /* p24's errors: dim, channels, output shape, aliasing, device. */
    expect_error(fc_p24_forward(&x, &w, &b, 3, &out, NULL), "p24 dim 3", "dim 3", "not supported");
    expect_error(fc_output_shape("p24", &x, &w, 1, &out), "p24 shape dim 1", "dim 1", NULL);
    fc_tensor wrong_w = w;
    wrong_w.shape[1] = 2;  /* fewer input channels than x */
    expect_error(fc_p24_forward(&x, &wrong_w, &b, 2, &out, NULL), "p24 channels", "3 channels",
                 "expects 2");
    fc_tensor alias = out;
    alias.data = x.data;  /* out over x's storage */
    expect_error(fc_p24_forward(&x, &w, &b, 2, &alias, NULL), "p24 out aliasing x",
                 "shares storage", "input");
    fc_tensor wrong_out = out;
    wrong_out.shape[3] = 4;
    expect_error(fc_p24_forward(&x, &w, &b, 2, &wrong_out, NULL), "p24 output shape",
                 "(2, 4, 4, 4)", "expected (2, 4, 4, 5)");
    fc_tensor short_bias = b;
    short_bias.shape[0] = 3;
    expect_error(fc_p24_forward(&x, &w, &short_bias, 2, &out, NULL), "p24 bias shape", "conv.bias",
                 "(3,)");
    fc_tensor gpu_w = w;
    gpu_w.device = 0;  /* weight claims cuda:0, x is on the CPU */
    expect_error(fc_p24_forward(&x, &gpu_w, &b, 2, &out, NULL), "p24 device mismatch", "weight",
                 NULL);
    free(c);
    free(ref);
    free(x.data), free(w.data), free(b.data), free(out.data);
}

/* p25 (tanh(tanh(min))) and p32 (min of scaled): 3x3 kernels take the
   Winograd form plus its NaN check, 2x2 the direct form. */
static void test_p25_p32(int k) {
    const int64_t xs[4] = {2, 3, 7, 9}, ws[4] = {5, 3, k, k};
    fc_tensor x = make(4, xs, -1, 1), w = make(4, ws, -0.4f, 0.4f), b = make(1, ws, -0.2f, 0.2f);
    b.ndim = 1;
    b.shape[0] = 5;
    fc_tensor out;
    CHECK(fc_output_shape("p25", &x, &w, 0, &out) == 0);
    CHECK(out.ndim == 4 && out.shape[0] == 2 && out.shape[1] == 1 && out.shape[2] == 8 - k &&
          out.shape[3] == 10 - k);
    out.data = malloc((size_t)count(&out) * sizeof(float));
    const int64_t oh = 8 - k, ow = 10 - k, plane = oh * ow;
    double *c = conv(x.data, 2, 3, 1, 7, 9, w.data, 5, 1, k, k, b.data);
    double *ref = malloc((size_t)(2 * plane) * sizeof(double));

    CHECK(fc_p25_forward(&x, &w, &b, &out, NULL) == 0);
    for (int n = 0; n < 2; ++n)
        for (int64_t p = 0; p < plane; ++p) {
            double m = INFINITY;
            for (int co = 0; co < 5; ++co) m = fmin(m, c[(n * 5 + co) * plane + p]);
            ref[n * plane + p] = tanh(tanh(m));
        }
    CHECK(close_to(out.data, ref, 2 * plane, "p25"));

    const float scale = -1.5f;  /* negative: the min picks the largest conv value */
    fc_tensor shape32;
    CHECK(fc_output_shape("p32", &x, &w, 0, &shape32) == 0);
    CHECK(shape32.ndim == 4 && shape32.shape[2] == oh && shape32.shape[3] == ow);
    CHECK(fc_p32_forward(&x, &w, &b, scale, &out, NULL) == 0);
    for (int n = 0; n < 2; ++n)
        for (int64_t p = 0; p < plane; ++p) {
            double m = INFINITY;
            for (int co = 0; co < 5; ++co) m = fmin(m, c[(n * 5 + co) * plane + p] * scale);
            ref[n * plane + p] = m;
        }
    CHECK(close_to(out.data, ref, 2 * plane, "p32"));

    fc_tensor rank5 = w;
    rank5.ndim = 5;
    rank5.shape[4] = k;
    expect_error(fc_p25_forward(&x, &rank5, &b, &out, NULL), "p25 weight rank", "rank 4",
                 "conv.weight");
    fc_tensor uneven = w;
    uneven.shape[3] = k + 1;
    expect_error(fc_p32_forward(&x, &uneven, &b, 1.0f, &out, NULL), "p32 uneven kernel",
                 "kernel sizes", NULL);
    fc_tensor small = x;
    small.shape[2] = k - 1 > 0 ? k - 1 : 1;
    expect_error(fc_output_shape("p32", &small, &w, 0, &out), "p32 small input",
                 "smaller than the kernel size", NULL);
    fc_tensor alias = out;
    alias.data = w.data;  /* out over the weight */
    alias.shape[0] = 1, alias.shape[2] = 1, alias.shape[3] = 1;
    fc_tensor tiny_x = x;
    tiny_x.shape[0] = 1, tiny_x.shape[2] = k, tiny_x.shape[3] = k;
    expect_error(fc_p25_forward(&tiny_x, &w, &b, &alias, NULL), "p25 out aliasing weight",
                 "shares storage", "conv.weight");
    free(c);
    free(ref);
    free(x.data), free(w.data), free(b.data), free(out.data);
}

static void test_p83(void) {
    const int64_t xs[5] = {2, 2, 4, 5, 6}, ws[5] = {4, 2, 2, 2, 2};
    fc_tensor x = make(5, xs, -1, 1), w = make(5, ws, -0.5f, 0.5f), b = make_filled(4, 0.05f);
    fc_tensor gamma = make_filled(4, 1.5f), beta = make_filled(4, -0.25f);
    const int groups = 2;
    const float eps = 1e-5f, min_value = 0.8f, lo = -0.5f, hi = 0.6f, p = 0.3f;
    fc_tensor out;
    CHECK(fc_output_shape("p83", &x, &w, groups, &out) == 0);
    CHECK(out.ndim == 5 && out.shape[1] == 4 && out.shape[2] == 3 && out.shape[3] == 4 &&
          out.shape[4] == 5);
    out.data = malloc((size_t)count(&out) * sizeof(float));
    const int64_t sp = 3 * 4 * 5, total = 2 * 4 * sp;

    /* Eval mode: GroupNorm, min, clamp, no dropout. */
    CHECK(fc_p83_forward(&x, &w, &b, &gamma, &beta, groups, eps, min_value, lo, hi, p, 0, 7,
                         &out, NULL) == 0);
    double *c = conv(x.data, 2, 2, 4, 5, 6, w.data, 4, 2, 2, 2, b.data);
    double *ref = malloc((size_t)total * sizeof(double));
    for (int n = 0; n < 2; ++n)
        for (int g = 0; g < groups; ++g) {
            const double *base = c + (n * 4 + g * 2) * sp;
            double mean = 0, var = 0;
            for (int64_t i = 0; i < 2 * sp; ++i) mean += base[i];
            mean /= 2 * sp;
            for (int64_t i = 0; i < 2 * sp; ++i) var += (base[i] - mean) * (base[i] - mean);
            var /= 2 * sp;
            for (int cc = 0; cc < 2; ++cc)
                for (int64_t i = 0; i < sp; ++i) {
                    const int co = g * 2 + cc;
                    double v = (base[cc * sp + i] - mean) / sqrt(var + eps) * 1.5 - 0.25;
                    v = fmin(v, min_value);
                    v = fmin(fmax(v, lo), hi);
                    ref[(n * 4 + co) * sp + i] = v;
                }
        }
    CHECK(close_to(out.data, ref, total, "p83 eval"));

    /* Training mode: each element dropped (0) or kept and scaled by 1/(1-p);
       the same seed gives the same mask. */
    float *first = malloc((size_t)total * sizeof(float));
    CHECK(fc_p83_forward(&x, &w, &b, &gamma, &beta, groups, eps, min_value, lo, hi, p, 1, 7,
                         &out, NULL) == 0);
    memcpy(first, out.data, (size_t)total * sizeof(float));
    CHECK(fc_p83_forward(&x, &w, &b, &gamma, &beta, groups, eps, min_value, lo, hi, p, 1, 7,
                         &out, NULL) == 0);
    CHECK(memcmp(first, out.data, (size_t)total * sizeof(float)) == 0);
    int64_t dropped = 0, bad = 0;
    for (int64_t i = 0; i < total; ++i) {
        const float v = ((float *)out.data)[i];
        if (v == 0.0f && ref[i] != 0.0) {
            ++dropped;
        } else if (!(fabs(v - ref[i] / (1.0 - p)) <= 1e-4 * fmax(1.0, fabs(ref[i])))) {
            ++bad;
        }
    }
    CHECK(bad == 0);
    CHECK(dropped > 0 && dropped < total);

    expect_error(fc_p83_forward(&x, &w, &b, &gamma, &beta, 3, eps, min_value, lo, hi, p, 1, 7,
                                &out, NULL),
                 "p83 groups 3", "groups 3", "does not divide out_channels 4");
    expect_error(fc_output_shape("p83", &x, &w, 0, &out), "p83 groups 0", "groups",
                 "got 0");
    expect_error(fc_p83_forward(&x, &w, &b, &gamma, &beta, groups, eps, min_value, lo, hi, 1.5f,
                                1, 7, &out, NULL),
                 "p83 dropout 1.5", "between 0 and 1", "1.5");
    expect_error(fc_p83_forward(&x, &w, &b, &gamma, &beta, groups, -1.0f, min_value, lo, hi, p,
                                1, 7, &out, NULL),
                 "p83 eps -1", "eps", "-1");
    fc_tensor long_gamma = gamma;
    long_gamma.shape[0] = 5;
    expect_error(fc_p83_forward(&x, &w, &b, &long_gamma, &beta, groups, eps, min_value, lo, hi,
                                p, 1, 7, &out, NULL),
                 "p83 norm.weight shape", "norm.weight", "(5,)");
    expect_error(fc_p83_forward(&x, &w, &b, NULL, &beta, groups, eps, min_value, lo, hi, p, 1, 7,
                                &out, NULL),
                 "p83 null norm_weight", "norm_weight", "null");
    free(c), free(ref), free(first);
    free(x.data), free(w.data), free(b.data), free(gamma.data), free(beta.data), free(out.data);
}

/* Malformed tensors and arguments, through every function that takes them. */
static void test_bad_arguments(void) {
    const int64_t xs[4] = {1, 2, 5, 5}, ws[4] = {3, 2, 3, 3};
    fc_tensor x = make(4, xs, -1, 1), w = make(4, ws, -1, 1), b = make_filled(3, 0.0f);
    fc_tensor out;
    CHECK(fc_output_shape("p25", &x, &w, 0, &out) == 0);
    out.data = malloc((size_t)count(&out) * sizeof(float));

    expect_error(fc_p25_forward(NULL, &w, &b, &out, NULL), "null x", "x", "null pointer");
    expect_error(fc_p25_forward(&x, &w, &b, NULL, NULL), "null out", "out", "null pointer");
    expect_error(fc_p32_forward(&x, NULL, &b, 1.0f, &out, NULL), "null weight", "weight",
                 "null pointer");
    expect_error(fc_p24_forward(&x, &w, NULL, 2, &out, NULL), "null bias", "bias",
                 "null pointer");
    fc_tensor t = x;
    t.ndim = 0;
    expect_error(fc_p25_forward(&t, &w, &b, &out, NULL), "ndim 0", "ndim 0", "1..8");
    t.ndim = 9;
    expect_error(fc_p25_forward(&t, &w, &b, &out, NULL), "ndim 9", "ndim 9", "1..8");
    t.ndim = -3;
    expect_error(fc_output_shape("p25", &t, &w, 0, &out), "ndim -3", "ndim -3", NULL);
    t = x;
    t.shape[2] = -5;
    expect_error(fc_p25_forward(&t, &w, &b, &out, NULL), "negative size", "(1, 2, -5, 5)",
                 "non-positive");
    expect_error(fc_output_shape("p25", &t, &w, 0, &out), "negative size (shape)",
                 "(1, 2, -5, 5)", "non-positive");
    t = x;
    t.shape[0] = 0;
    expect_error(fc_p25_forward(&t, &w, &b, &out, NULL), "zero size", "(0, 2, 5, 5)",
                 "non-positive");
    t = x;
    t.data = NULL;
    expect_error(fc_p25_forward(&t, &w, &b, &out, NULL), "null data", "x", "null data");
    t = x;
    t.device = -2;
    expect_error(fc_p25_forward(&t, &w, &b, &out, NULL), "device -2", "device -2", NULL);
    t = x;
    t.shape[0] = (int64_t)1 << 40;
    expect_error(fc_output_shape("p25", &t, &w, 0, &out), "huge shape", "32-bit", NULL);
    expect_error(fc_p25_forward(&x, &w, &b, &x, NULL), "out is x", "output", NULL);
    expect_error(fc_output_shape("p99", &x, &w, 0, &out), "unknown model", "p99", NULL);
    expect_error(fc_output_shape(NULL, &x, &w, 0, &out), "null model", "model", "null");
    expect_error(fc_output_shape("p25", &x, &w, 0, NULL), "null out_shape_only",
                 "out_shape_only", "null");
    expect_error(fc_output_shape("p25", &x, NULL, 0, &out), "null weight (shape)", "weight",
                 "null");
    expect_error(fc_synchronize(-5), "synchronize -5", "-5", NULL);
    expect_error(fc_synchronize(1000), "synchronize 1000", "", NULL);
    /* A failure does not stop later calls. */
    CHECK(fc_p25_forward(&x, &w, &b, &out, NULL) == 0);
    free(x.data), free(w.data), free(b.data), free(out.data);
}

static void test_library_queries(void) {
    CHECK(fc_abi_version() == 1);
    CHECK(fc_has_gpu_kernels() == 1);
    const int n = fc_cuda_device_count();
    const char *why = fc_gpu_unavailable_reason();
    CHECK(n >= 0);
    CHECK(why != NULL);
    CHECK((n > 0) == (why && why[0] == '\0'));
    printf("[ info ] %d CUDA device(s)%s%s\n", n, n ? "" : ": ", n ? "" : why);
    CHECK(fc_synchronize(FC_DEVICE_CPU) == 0);
    if (n > 0) CHECK(fc_synchronize(0) == 0);
    CHECK(fc_last_error() != NULL);
}

int main(void) {
    test_library_queries();
    test_p24();
    test_p25_p32(3);
    test_p25_p32(2);
    test_p83();
    test_bad_arguments();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("all C ABI checks passed\n");
    return 0;
}
