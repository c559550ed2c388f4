/* alpha-entmax for k = 1/(alpha-1) in {1, 2, 4}, one row at a time, so that every pass after the first reads
 * data already in cache. attnlab/native.py builds this file and kernel.py declares its entry points; entmax.py
 * holds the derivation (Vasylenko et al. 2025 App. A) and the torch-ops path that it must match.
 *
 * With x_i = a (z_i - m) <= 0 (a = alpha - 1, m the row maximum) the threshold theta solves
 * sum_i [x_i - theta]_+^k = 1 and lies in [-1, 0). Newton's method on g(theta) = ||[x - theta]_+||_k - 1
 * rises monotonically to the root (g is convex and decreasing for k >= 1), so every iterate is a lower bound
 * and keys at or below one are outside the support. The row is read three times:
 *   1. Newton's first step from theta = -1, a vectorized reduction over the whole row;
 *   2. the keys above that iterate (less a margin far above the sums' rounding) are copied, as x in double,
 *      to a scratch buffer: for Gaussian rows about 5% of them at alpha = 1.5, 35% at alpha = 1.25;
 *      Newton then runs on the copy to double precision;
 *   3. p = r^k / sum r^k and, for the backward, s = p^(2-alpha) = r^(k-1), r = [x - theta]_+, with r below
 *      `floor` set to 0 (its power would be a denormal float, see _rows.denormal_floor).
 * Sums of float terms are taken in float over chunks of CHUNK keys and added in double: GCC vectorizes a
 * float reduction but not a float-to-double one, which measured 30x slower here.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#define MAX_ITER 100
#define CHUNK 1024
#define MARGIN 1e-4 /* x units; the first step's relative rounding is ~1e-6 */
#define TOL 1e-9    /* Newton step (x units) after which the error left is ~TOL^2 */

/* r^k for k in {0, ..., 4}, in the type of r */
#define POW_K(r, k) \
    ((k) == 0 ? 1 : (k) == 1 ? (r) : (k) == 2 ? (r) * (r) : (k) == 3 ? (r) * (r) * (r) : ((r) * (r)) * ((r) * (r)))

/* The chunks [c0, c1) of CHUNK keys that split a row of n (the header says why sums go by chunks). */
#define FOR_CHUNKS(c0, c1, n) \
    for (int64_t c0 = 0, c1 = CHUNK < (n) ? CHUNK : (n); c0 < (n); c0 = c1, c1 = c1 + CHUNK < (n) ? c1 + CHUNK : (n))

/* sum_i a_i b_i over a row, in float by chunks and in double across them. */
#define DOT_ROW(T, SUFFIX)                                                                                \
    static double dot_##SUFFIX(const T *a, const T *b, int64_t n) {                                       \
        double dot = 0.0;                                                                                 \
        FOR_CHUNKS(c0, c1, n) {                                                                           \
            T part = 0;                                                                                   \
            _Pragma("omp simd reduction(+ : part)")                                                       \
            for (int64_t i = c0; i < c1; i++) part += a[i] * b[i];                                        \
            dot += (double)part;                                                                          \
        }                                                                                                 \
        return dot;                                                                                       \
    }
DOT_ROW(float, f32)
DOT_ROW(double, f64)
#define DOT(a, b, n) _Generic((a), const float *: dot_f32, const double *: dot_f64)(a, b, n)

/* Newton's step on ||r||_k - 1 from total = sum r^k and slope = sum r^(k-1). */
static inline double newton_step(double total, double slope, int k) {
    const double norm = k == 1 ? total : k == 2 ? sqrt(total) : sqrt(sqrt(total));
    return (norm - 1.0) * POW_K(norm, k - 1) / slope;
}

#define ENTMAX_ROWS(T, NAME, k)                                                                           \
    double NAME##_theta_k##k(const T *z, double m, int64_t n, double a, double *buf, int64_t *kept) {       \
        const T ta = (T)a, tm = (T)m;                                                                     \
        double total = 0.0, slope = 0.0;                                                                  \
        FOR_CHUNKS(c0, c1, n) {                                                                           \
            T part = 0, partd = 0;                                                                        \
            _Pragma("omp simd reduction(+ : part, partd)")                                                \
            for (int64_t i = c0; i < c1; i++) {                                                           \
                T r = ta * (z[i] - tm) + (T)1;                                                            \
                r = r > (T)0 ? r : (T)0;                                                                  \
                part += POW_K(r, k);                                                                      \
                partd += k == 1 ? (T)(r > (T)0) : POW_K(r, k - 1);                                        \
            }                                                                                             \
            total += (double)part;                                                                        \
            slope += (double)partd;                                                                       \
        }                                                                                                 \
        double theta = -1.0 + newton_step(total, slope, k);                                               \
        /* The cut-off is compared with z - m, not z with m + cut-off: the latter rounds to ulp(m), which \
         * at |m| >= 2^24 (float) exceeds the whole support and dropped keys in it. */                    \
        const T drop = (T)((theta - MARGIN) / a);                                                         \
        int64_t c = 0;                                                                                    \
        for (int64_t i0 = 0; i0 < n; i0 += 16) {                                                          \
            const int64_t i1 = i0 + 16 < n ? i0 + 16 : n;                                                 \
            int any = 0;                                                                                  \
            for (int64_t i = i0; i < i1; i++) any |= z[i] - tm > drop;                                    \
            if (!any) continue;                                                                           \
            for (int64_t i = i0; i < i1; i++) {                                                           \
                buf[c] = a * ((double)z[i] - m);                                                          \
                c += z[i] - tm > drop;                                                                    \
            }                                                                                             \
        }                                                                                                 \
        for (int it = 0; it < MAX_ITER; it++) {                                                           \
            total = 0.0;                                                                                  \
            slope = 0.0;                                                                                  \
            _Pragma("omp simd reduction(+ : total, slope)")                                               \
            for (int64_t j = 0; j < c; j++) {                                                             \
                double r = buf[j] - theta;                                                                \
                r = r > 0.0 ? r : 0.0;                                                                    \
                total += POW_K(r, k);                                                                     \
                slope += k == 1 ? (double)(r > 0.0) : POW_K(r, k - 1);                                    \
            }                                                                                             \
            const double step = newton_step(total, slope, k);                                             \
            theta += step;                                                                                \
            if (!(step > TOL)) break;                                                                     \
        }                                                                                                 \
        *kept = c;                                                                                        \
        return theta;                                                                                     \
    }                                                                                                     \
                                                                                                          \
    /* The row's sum of r^k at theta, over the copied keys (a superset of the support). Both this and     \
     * theta are also called by the fused attention kernel (_attention.c), one score row at a time. */    \
    double NAME##_total_k##k(const double *buf, int64_t c, double theta) {                                \
        double total = 0.0;                                                                               \
        _Pragma("omp simd reduction(+ : total)")                                                          \
        for (int64_t j = 0; j < c; j++) {                                                                 \
            double r = buf[j] - theta;                                                                    \
            r = r > 0.0 ? r : 0.0;                                                                        \
            total += POW_K(r, k);                                                                         \
        }                                                                                                 \
        return total;                                                                                     \
    }                                                                                                     \
                                                                                                          \
    static int NAME##_forward_k##k(const T *z, const T *m, T *p, T *s, int64_t rows, int64_t n, double a, \
                                   double floor, int threads) {                                           \
        int failed = 0;                                                                                   \
        _Pragma("omp parallel num_threads(threads) reduction(| : failed)")                                \
        {                                                                                                 \
            double *buf = malloc((size_t)n * sizeof(double));                                             \
            if (!buf) failed = 1;                                                                         \
            _Pragma("omp for schedule(static)")                                                           \
            for (int64_t row = 0; row < rows; row++) {                                                    \
                if (!buf) continue;                                                                       \
                const T *zr = z + row * n;                                                                \
                T *pr = p + row * n;                                                                      \
                const double mr = (double)m[row];                                                         \
                int64_t c;                                                                                \
                const double theta = NAME##_theta_k##k(zr, mr, n, a, buf, &c);                            \
                const T ta = (T)a, tm = (T)mr, tt = (T)theta, tf = (T)floor;                              \
                const T inv = (T)(1.0 / NAME##_total_k##k(buf, c, theta));                                \
                if (s) {                                                                                  \
                    T *sr = s + row * n;                                                                  \
                    _Pragma("omp simd")                                                                   \
                    for (int64_t i = 0; i < n; i++) {                                                     \
                        T r = ta * (zr[i] - tm) - tt;                                                     \
                        r = r > tf ? r : (T)0;                                                            \
                        pr[i] = POW_K(r, k) * inv;                                                        \
                        sr[i] = k == 1 ? (T)(r > (T)0) : POW_K(r, k - 1);                                 \
                    }                                                                                     \
                } else {                                                                                  \
                    _Pragma("omp simd")                                                                   \
                    for (int64_t i = 0; i < n; i++) {                                                     \
                        T r = ta * (zr[i] - tm) - tt;                                                     \
                        r = r > tf ? r : (T)0;                                                            \
                        pr[i] = POW_K(r, k) * inv;                                                        \
                    }                                                                                     \
                }                                                                                         \
            }                                                                                             \
            free(buf);                                                                                    \
        }                                                                                                 \
        return failed;                                                                                    \
    }

#define ENTMAX_KERNELS(T, NAME)                                                                           \
    ENTMAX_ROWS(T, NAME, 1)                                                                               \
    ENTMAX_ROWS(T, NAME, 2)                                                                               \
    ENTMAX_ROWS(T, NAME, 4)                                                                               \
                                                                                                          \
    /* k = 1 / (alpha - 1) in {1, 2, 4}; s may be NULL (no backward). Returns 0, or 1 if out of memory. */ \
    int NAME##_forward(const T *z, const T *m, T *p, T *s, int64_t rows, int64_t n, int k, double a,      \
                       double floor, int threads) {                                                       \
        if (k == 1) return NAME##_forward_k1(z, m, p, s, rows, n, a, floor, threads);                     \
        if (k == 2) return NAME##_forward_k2(z, m, p, s, rows, n, a, floor, threads);                     \
        return NAME##_forward_k4(z, m, p, s, rows, n, a, floor, threads);                                 \
    }                                                                                                     \
                                                                                                          \
    /* dz = s * (dp - <s, dp> / sum s): the Jacobian diag(s) - s s^T / sum s (Peters et al. 2019). */     \
    void NAME##_backward(const T *s, const T *dp, T *dz, int64_t rows, int64_t n, int threads) {          \
        _Pragma("omp parallel for schedule(static) num_threads(threads)")                                 \
        for (int64_t row = 0; row < rows; row++) {                                                        \
            const T *sr = s + row * n, *gr = dp + row * n;                                                \
            T *out = dz + row * n;                                                                        \
            double ss = 0.0, sg = 0.0;                                                                    \
            FOR_CHUNKS(c0, c1, n) {                                                                       \
                T ps = 0, pg = 0;                                                                         \
                _Pragma("omp simd reduction(+ : ps, pg)")                                                 \
                for (int64_t i = c0; i < c1; i++) {                                                       \
                    ps += sr[i];                                                                          \
                    pg += sr[i] * gr[i];                                                                  \
                }                                                                                         \
                ss += (double)ps;                                                                         \
                sg += (double)pg;                                                                         \
            }                                                                                             \
            const T q = (T)(sg / ss);                                                                     \
            _Pragma("omp simd")                                                                           \
            for (int64_t i = 0; i < n; i++) out[i] = sr[i] * (gr[i] - q);                                 \
        }                                                                                                 \
    }

ENTMAX_KERNELS(float, entmax_f32)
ENTMAX_KERNELS(double, entmax_f64)

/* Normalized ReLU^p for p = 2^SQ (Polynomial Concentration Alg. 1, pointwise.py's _ReluPower): q = [(z + b) / r_max]_+ with
 * r_max per row as _ReluPower computed it, q below `floor` set to 0, y = q^p / sum q^p; q is kept
 * for the backward when q_out is given. Two passes: powers and their sum, then the division. */
#define RELU_ROWS(T, NAME, SQ)                                                                            \
    static void NAME##_forward_sq##SQ(const T *z, const T *r, T *y, T *q_out, int64_t rows, int64_t n,    \
                                      double b, double floor, int threads) {                              \
        _Pragma("omp parallel for schedule(static) num_threads(threads)")                                 \
        for (int64_t row = 0; row < rows; row++) {                                                        \
            const T *zr = z + row * n;                                                                    \
            T *yr = y + row * n, *qr = q_out ? q_out + row * n : 0;                                       \
            const T tb = (T)b, tf = (T)floor;                                                             \
            const T rmax = r[row];                                                                        \
            double total = 0.0;                                                                           \
            FOR_CHUNKS(c0, c1, n) {                                                                       \
                T part = 0;                                                                               \
                if (qr) { /* two loops: a store under a condition kept GCC from vectorizing (15x slower) */ \
                    _Pragma("omp simd reduction(+ : part)")                                               \
                    for (int64_t i = c0; i < c1; i++) {                                                   \
                        T q = (zr[i] + tb) / rmax;                                                        \
                        q = q > tf ? q : (T)0;                                                            \
                        qr[i] = q;                                                                        \
                        T w = q;                                                                          \
                        for (int s = 0; s < SQ; s++) w *= w;                                              \
                        yr[i] = w;                                                                        \
                        part += w;                                                                        \
                    }                                                                                     \
                } else {                                                                                  \
                    _Pragma("omp simd reduction(+ : part)")                                               \
                    for (int64_t i = c0; i < c1; i++) {                                                   \
                        T q = (zr[i] + tb) / rmax;                                                        \
                        q = q > tf ? q : (T)0;                                                            \
                        T w = q;                                                                          \
                        for (int s = 0; s < SQ; s++) w *= w;                                              \
                        yr[i] = w;                                                                        \
                        part += w;                                                                        \
                    }                                                                                     \
                }                                                                                         \
                total += (double)part;                                                                    \
            }                                                                                             \
            const T inv = (T)(1.0 / (total > 0.0 ? total : 1.0));                                         \
            _Pragma("omp simd")                                                                           \
            for (int64_t i = 0; i < n; i++) yr[i] *= inv;                                                 \
        }                                                                                                 \
    }

#define RELU_KERNELS(T, NAME)                                                                             \
    RELU_ROWS(T, NAME, 0)                                                                                 \
    RELU_ROWS(T, NAME, 1)                                                                                 \
    RELU_ROWS(T, NAME, 2)                                                                                 \
    RELU_ROWS(T, NAME, 3)                                                                                 \
    RELU_ROWS(T, NAME, 4)                                                                                 \
                                                                                                          \
    /* p = 2^squarings, squarings in 0..4; q_out may be NULL (no backward). */                            \
    void NAME##_forward(const T *z, const T *r, T *y, T *q_out, int64_t rows, int64_t n, int squarings,   \
                        double b, double floor, int threads) {                                            \
        switch (squarings) {                                                                              \
        case 0: NAME##_forward_sq0(z, r, y, q_out, rows, n, b, floor, threads); break;                    \
        case 1: NAME##_forward_sq1(z, r, y, q_out, rows, n, b, floor, threads); break;                    \
        case 2: NAME##_forward_sq2(z, r, y, q_out, rows, n, b, floor, threads); break;                    \
        case 3: NAME##_forward_sq3(z, r, y, q_out, rows, n, b, floor, threads); break;                    \
        default: NAME##_forward_sq4(z, r, y, q_out, rows, n, b, floor, threads); break;                   \
        }                                                                                                 \
    }                                                                                                     \
                                                                                                          \
    /* dz = (p / r_max) y (dy - <dy, y>) / max(q, floor), per row (r_max one number per row). A subnormal  \
     * r_max can make p / r_max overflow: such a row divides by r_max last instead, so a zero-weight key   \
     * keeps dz = 0 (not 0 * inf = NaN) and a weighted one overflows only where its own value does. */     \
    void NAME##_backward(const T *y, const T *q, const T *rmax, const T *dy, T *dz, int64_t rows,         \
                         int64_t n, double p, double floor, int threads) {                                \
        _Pragma("omp parallel for schedule(static) num_threads(threads)")                                 \
        for (int64_t row = 0; row < rows; row++) {                                                        \
            const T *yr = y + row * n, *qr = q + row * n, *gr = dy + row * n;                             \
            T *out = dz + row * n;                                                                        \
            const double dot = DOT(gr, yr, n);                                                            \
            const T c = (T)dot, scale = (T)(p / (double)rmax[row]), tf = (T)floor;                        \
            if (isinf(scale)) {                                                                           \
                for (int64_t i = 0; i < n; i++)                                                           \
                    out[i] = (gr[i] - c) * yr[i] / (qr[i] > tf ? qr[i] : tf) * (T)p / rmax[row];          \
                continue;                                                                                 \
            }                                                                                             \
            _Pragma("omp simd")                                                                           \
            for (int64_t i = 0; i < n; i++) out[i] = (gr[i] - c) * yr[i] / (qr[i] > tf ? qr[i] : tf) * scale; \
        }                                                                                                 \
    }

RELU_KERNELS(float, relu_power_f32)
RELU_KERNELS(double, relu_power_f64)

/* Normalized sigmoid's backward (pointwise.py's _SigmoidNormalized): with y = sigma(u) / S and S the row's
 * sum of sigma, du = y (1 - sigma) (dy - <dy, y>), sigma = y S. Two passes. */
#define SIGMOID_KERNELS(T, NAME)                                                                          \
    void NAME##_backward(const T *y, const T *total, const T *dy, T *du, int64_t rows, int64_t n,         \
                         int threads) {                                                                   \
        _Pragma("omp parallel for schedule(static) num_threads(threads)")                                 \
        for (int64_t row = 0; row < rows; row++) {                                                        \
            const T *yr = y + row * n, *gr = dy + row * n;                                                \
            T *out = du + row * n;                                                                        \
            const double dot = DOT(gr, yr, n);                                                            \
            const T c = (T)dot, s = total[row];                                                           \
            _Pragma("omp simd")                                                                           \
            for (int64_t i = 0; i < n; i++) out[i] = yr[i] * ((T)1 - yr[i] * s) * (gr[i] - c);            \
        }                                                                                                 \
    }

SIGMOID_KERNELS(float, sigmoid_f32)
SIGMOID_KERNELS(double, sigmoid_f64)
