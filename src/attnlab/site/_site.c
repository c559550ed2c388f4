/* Fused causal attention with a row map on CPU float32: the forward of site.py's fused path without a
 * score tile in memory. attnlab/native.py builds this file with the row maps' kernels; site_kernel.py
 * declares the entry point and site.py decides when it applies.
 *
 * One task is one (batch x head, block of query rows). Its scores against the keys the block may attend
 * go into a buffer of the thread's own (rows x keys, 8 MiB for 32 rows at 65,536 keys, so it stays in the
 * shared L3 cache), each row is turned into weights in place while it is in L2 (the map's passes read it
 * there), and the weights-value product skips keys that no row of a group of four weights (the zeros of
 * entmax and ReLU^p). Keys come packed in tiles of KT keys x head_dim, so the query-key product reads each
 * tile once per block and holds a 4-row x KT-key block of scores in registers.
 *
 * A row's allowed keys are one interval (causal, optionally a sliding window), so no mask is written: the
 * map runs on the interval and the rest of the buffer row is set to 0. The arithmetic per score is that of
 * the unfused site: z = q_scaled . k, plus the position bias -m_h (i - j), times the row's multiplier, then
 * the map as rowmaps/_kernels.c computes it (alpha-entmax by the same functions).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define KT 16 /* keys per packed tile: two 8-float vectors */
#define GR 4  /* query rows whose scores (and weighted values) are accumulated together */
#define VC 128 /* keys whose values the weights-value product reads for every row of a block in turn */

enum { MAP_ENTMAX = 0, MAP_RELU = 1, MAP_SIGMOID = 2, MAP_SOFTMAX = 3 };
enum { OK = 0, NO_MEMORY = 1, DECLINED = 2 };

typedef float v8 __attribute__((vector_size(32), aligned(4)));

double entmax_f32_theta_k1(const float *z, double m, int64_t n, double a, double *buf, int64_t *kept);
double entmax_f32_theta_k2(const float *z, double m, int64_t n, double a, double *buf, int64_t *kept);
double entmax_f32_theta_k4(const float *z, double m, int64_t n, double a, double *buf, int64_t *kept);
double entmax_f32_total_k1(const double *buf, int64_t c, double theta);
double entmax_f32_total_k2(const double *buf, int64_t c, double theta);
double entmax_f32_total_k4(const double *buf, int64_t c, double theta);

typedef struct {
    int map, k, squarings;
    double a, b, floor;
} MapSpec;

/* Scores of GR query rows (q, GR x d) against one packed key tile (d x KT) into s (row stride ld). */
static inline __attribute__((always_inline)) void qk_tile(const float *q, const float *kp, int64_t d, float *s,
                                                         int64_t ld) {
    v8 acc[GR][2] = {{{0}}};
    for (int64_t c = 0; c < d; c++) {
        const v8 k0 = *(const v8 *)(kp + c * KT), k1 = *(const v8 *)(kp + c * KT + 8);
        for (int r = 0; r < GR; r++) {
            const float x = q[r * d + c];
            acc[r][0] += x * k0;
            acc[r][1] += x * k1;
        }
    }
    for (int r = 0; r < GR; r++) {
        *(v8 *)(s + r * ld) = acc[r][0];
        *(v8 *)(s + r * ld + 8) = acc[r][1];
    }
}

/* Adds sum_j p[r][j] v[j] over keys [j0, j1) to acc (GR rows x d) for GR rows of weights p (stride ld). The
 * keys that some row weights are listed first (branch-free: a branch per key mispredicts on ReLU's random
 * half), then each 16 columns of the GR rows are accumulated in registers over the listed keys. */
static inline __attribute__((always_inline)) void pv_rows(const float *p, int64_t ld, const float *v, int64_t d,
                                                          int64_t j0, int64_t j1, float *acc, int32_t *keys) {
    int64_t c = 0;
    for (int64_t j = j0; j < j1; j++) {
        keys[c] = (int32_t)j;
        c += (p[j] != 0.0f) | (p[ld + j] != 0.0f) | (p[2 * ld + j] != 0.0f) | (p[3 * ld + j] != 0.0f);
    }
    if (d % 16) {
        for (int64_t t = 0; t < c; t++) {
            const int64_t j = keys[t];
            const float p0 = p[j], p1 = p[ld + j], p2 = p[2 * ld + j], p3 = p[3 * ld + j], *vr = v + j * d;
#pragma omp simd
            for (int64_t e = 0; e < d; e++) {
                acc[e] += p0 * vr[e];
                acc[d + e] += p1 * vr[e];
                acc[2 * d + e] += p2 * vr[e];
                acc[3 * d + e] += p3 * vr[e];
            }
        }
        return;
    }
    for (int64_t e = 0; e < d; e += 16) {
        v8 a[GR][2];
        for (int r = 0; r < GR; r++) {
            a[r][0] = *(const v8 *)(acc + r * d + e);
            a[r][1] = *(const v8 *)(acc + r * d + e + 8);
        }
        for (int64_t t = 0; t < c; t++) {
            const int64_t j = keys[t];
            const v8 v0 = *(const v8 *)(v + j * d + e), v1 = *(const v8 *)(v + j * d + e + 8);
            for (int r = 0; r < GR; r++) {
                const float x = p[r * ld + j];
                a[r][0] += x * v0;
                a[r][1] += x * v1;
            }
        }
        for (int r = 0; r < GR; r++) {
            *(v8 *)(acc + r * d + e) = a[r][0];
            *(v8 *)(acc + r * d + e + 8) = a[r][1];
        }
    }
}

/* e^x for x <= 0 (Cephes' expf: x = n ln 2 + r, a degree-6 polynomial in r, 2^n through the exponent bits),
 * within 2 ulp, and 0 below -87 where e^x leaves the normal floats. Plain arithmetic, so that GCC vectorizes
 * the loop that calls it (libm's expf stays scalar without -ffast-math). */
static inline float exp_nonpositive(float x) {
    const float low = x < -87.0f ? -87.0f : x;
    const float n = (low * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* round to nearest */
    float r = low - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    float y = 1.9875691500e-4f;
    y = y * r + 1.3981999507e-3f;
    y = y * r + 8.3334519073e-3f;
    y = y * r + 4.1665795894e-2f;
    y = y * r + 1.6666665459e-1f;
    y = y * r + 5.0000001201e-1f;
    y = y * r * r + r + 1.0f;
    const int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return x < -87.0f ? 0.0f : y * scale;
}

/* The row map on one row z of n allowed scores with maximum m, in place. Returns DECLINED for a row the
 * kernel leaves to the torch path (normalized sigmoid whose sigma underflows: it needs log space). */
static int map_row(float *z, int64_t n, float m, const MapSpec *spec, double *buf) {
    if (spec->map == MAP_ENTMAX) {
        int64_t c;
        const double theta = spec->k == 1   ? entmax_f32_theta_k1(z, m, n, spec->a, buf, &c)
                             : spec->k == 2 ? entmax_f32_theta_k2(z, m, n, spec->a, buf, &c)
                                            : entmax_f32_theta_k4(z, m, n, spec->a, buf, &c);
        const double total = spec->k == 1   ? entmax_f32_total_k1(buf, c, theta)
                             : spec->k == 2 ? entmax_f32_total_k2(buf, c, theta)
                                            : entmax_f32_total_k4(buf, c, theta);
        const float ta = (float)spec->a, tt = (float)theta, tf = (float)spec->floor, inv = (float)(1.0 / total);
        const int k = spec->k;
#pragma omp simd
        for (int64_t j = 0; j < n; j++) {
            float r = ta * (z[j] - m) - tt;
            r = r > tf ? r : 0.0f;
            z[j] = (k == 1 ? r : k == 2 ? r * r : (r * r) * (r * r)) * inv;
        }
        return OK;
    }
    const float tb = (float)spec->b;
    double total = 0.0;
    if (spec->map == MAP_RELU) {
        const float rmax = m + tb > 0.0f ? m + tb : 1.0f, tf = (float)spec->floor;
        const int sq = spec->squarings;
        for (int64_t c0 = 0; c0 < n; c0 += 1024) {
            const int64_t c1 = c0 + 1024 < n ? c0 + 1024 : n;
            float part = 0.0f;
#pragma omp simd reduction(+ : part)
            for (int64_t j = c0; j < c1; j++) {
                float q = (z[j] + tb) / rmax;
                q = q > tf ? q : 0.0f;
                for (int s = 0; s < sq; s++) q *= q;
                z[j] = q;
                part += q;
            }
            total += (double)part;
        }
    } else if (spec->map == MAP_SOFTMAX) {
        for (int64_t c0 = 0; c0 < n; c0 += 1024) {
            const int64_t c1 = c0 + 1024 < n ? c0 + 1024 : n;
            float part = 0.0f;
#pragma omp simd reduction(+ : part)
            for (int64_t j = c0; j < c1; j++) {
                const float w = exp_nonpositive(z[j] - m);
                z[j] = w;
                part += w;
            }
            total += (double)part;
        }
    } else {
        if (m + tb < -60.0f) return DECLINED;
        for (int64_t j = 0; j < n; j++) {
            z[j] = 1.0f / (1.0f + expf(-(z[j] + tb)));
            total += (double)z[j];
        }
    }
    const float inv = (float)(1.0 / (total > 0.0 ? total : 1.0));
#pragma omp simd
    for (int64_t j = 0; j < n; j++) z[j] *= inv;
    return OK;
}

/* One task: rows [r0, r0 + nr) of query-key pair i (out row stride heads x d at column h). */
static inline __attribute__((always_inline)) int task(const float *q, const float *kp, const float *v, float *out,
                                                      int64_t nq, int64_t nk, int64_t d, int64_t window, float slope,
                                                      const float *rowmul, const MapSpec *spec, int64_t r0,
                                                      int64_t nr, int64_t out_stride, float *s, double *buf,
                                                      float *qb, float *acc, int32_t *keys) {
    const int64_t offset = nk - nq, hi = r0 + nr + offset;
    const int64_t lo = window ? (r0 + offset - window + 1 > 0 ? r0 + offset - window + 1 : 0) : 0;
    const int64_t t0 = lo / KT, t1 = (hi + KT - 1) / KT, base = t0 * KT, ld = (t1 - t0) * KT;
    const int64_t padded = (nr + GR - 1) / GR * GR;
    memcpy(qb, q + r0 * d, nr * d * sizeof(float));
    memset(qb + nr * d, 0, (padded - nr) * d * sizeof(float));
    for (int64_t t = t0; t < t1; t++)
        for (int64_t g = 0; g < padded; g += GR)
            qk_tile(qb + g * d, kp + t * d * KT, d, s + g * ld + (t - t0) * KT, ld);
    for (int64_t r = 0; r < padded; r++) {
        float *row = s + r * ld;
        if (r >= nr) {
            memset(row, 0, ld * sizeof(float));
            continue;
        }
        const int64_t pos = r0 + r + offset;
        const int64_t first = window && pos - window + 1 > 0 ? pos - window + 1 : 0, n = pos + 1 - first;
        float *z = row + (first - base);
        const float neg = -slope, mul = rowmul ? rowmul[r0 + r] : 1.0f;
        float m = -INFINITY;
        if (slope != 0.0f || rowmul) {
#pragma omp simd reduction(max : m)
            for (int64_t j = 0; j < n; j++) {
                z[j] = (z[j] + neg * (float)(pos - first - j)) * mul;
                m = z[j] > m ? z[j] : m;
            }
        } else {
#pragma omp simd reduction(max : m)
            for (int64_t j = 0; j < n; j++) m = z[j] > m ? z[j] : m;
        }
        if (!isfinite(m)) return DECLINED;
        const int status = map_row(z, n, m, spec, buf);
        if (status) return status;
        memset(row, 0, (first - base) * sizeof(float));
        memset(z + n, 0, (ld - (pos + 1 - base)) * sizeof(float));
    }
    /* by chunks of VC keys, whose values stay in L1 while every group of rows reads them */
    memset(acc, 0, padded * d * sizeof(float));
    for (int64_t c0 = 0; c0 < ld; c0 += VC) {
        const int64_t c1 = c0 + VC < ld ? c0 + VC : ld;
        for (int64_t g = 0; g < padded; g += GR) {
            const int64_t last = r0 + (g + GR < nr ? g + GR : nr) - 1 + offset;
            const int64_t first = window && r0 + g + offset - window + 1 > 0 ? r0 + g + offset - window + 1 : 0;
            const int64_t j0 = first - base > c0 ? first - base : c0, j1 = last + 1 - base < c1 ? last + 1 - base : c1;
            if (j0 < j1) pv_rows(s + g * ld, ld, v + base * d, d, j0, j1, acc + g * d, keys);
        }
    }
    for (int64_t r = 0; r < nr; r++) memcpy(out + (r0 + r) * out_stride, acc + r * d, d * sizeof(float));
    return OK;
}

/* Causal attention of every (batch x head) pair with one row map.
 *   q (pairs, nq, d), scaled; kp (pairs, ceil(nk / KT), d, KT), keys packed by tile and zero-padded;
 *   v (pairs, nk, d); out (batch, nq, heads, d); window 0 for none; slopes (heads) or NULL; rowmul
 *   (pairs, nq) or NULL; map MAP_ENTMAX (k = 1 / (alpha - 1) in {1, 2, 4}, a = alpha - 1), MAP_RELU
 *   (p = 2^squarings, bias b), MAP_SIGMOID (bias b) or MAP_SOFTMAX; floor as rowmaps/_rows.denormal_floor; rows per
 *   block at most 64.
 * Returns OK, NO_MEMORY, or DECLINED when a row needs the torch path (non-finite scores, sigmoid underflow). */
int site_f32_forward(const float *q, const float *kp, const float *v, float *out, int64_t pairs, int64_t heads,
                     int64_t nq, int64_t nk, int64_t d, int64_t window, const float *slopes, const float *rowmul,
                     int map, int k, int squarings, double a, double b, double floor, int64_t rows, int threads) {
    const MapSpec spec = {map, k, squarings, a, b, floor};
    const int64_t blocks = (nq + rows - 1) / rows, tiles = (nk + KT - 1) / KT;
    const int64_t padded = (rows + GR - 1) / GR * GR;
    int status = OK;
#pragma omp parallel num_threads(threads) reduction(| : status)
    {
        float *s = malloc((size_t)padded * tiles * KT * sizeof(float));
        double *buf = malloc((size_t)tiles * KT * sizeof(double));
        float *qb = malloc((size_t)padded * d * sizeof(float));
        float *acc = malloc((size_t)padded * d * sizeof(float));
        int32_t *keys = malloc((size_t)tiles * KT * sizeof(int32_t));
        if (!s || !buf || !qb || !acc || !keys) status = NO_MEMORY;
        /* the longest blocks (the last queries) first, so that threads finish together */
#pragma omp for schedule(dynamic, 1)
        for (int64_t t = 0; t < pairs * blocks; t++) {
            if (status) continue;
            const int64_t i = t % pairs, r0 = (blocks - 1 - t / pairs) * rows;
            const int64_t nr = r0 + rows < nq ? rows : nq - r0;
            const int64_t b_ = i / heads, h = i % heads;
            const float slope = slopes ? slopes[h] : 0.0f;
            const float *qi = q + i * nq * d, *kpi = kp + i * tiles * d * KT, *vi = v + i * nk * d;
            const float *rm = rowmul ? rowmul + i * nq : NULL;
            float *oi = out + (b_ * nq * heads + h) * d;
            /* constant head widths let the compiler unroll the products over head_dim */
            switch (d) {
            case 32: status = task(qi, kpi, vi, oi, nq, nk, 32, window, slope, rm, &spec, r0, nr, heads * 32, s,
                                   buf, qb, acc, keys); break;
            case 64: status = task(qi, kpi, vi, oi, nq, nk, 64, window, slope, rm, &spec, r0, nr, heads * 64, s,
                                   buf, qb, acc, keys); break;
            default: status = task(qi, kpi, vi, oi, nq, nk, d, window, slope, rm, &spec, r0, nr, heads * d, s,
                                   buf, qb, acc, keys);
            }
        }
        free(s);
        free(buf);
        free(qb);
        free(acc);
        free(keys);
    }
    return status;
}
