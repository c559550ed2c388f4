/* The per-row diagnostics bundle of row_stats in one sweep per row, in float64: the row stays in cache
 * while every statistic reads it, where the torch-ops path (rows.py, concentration.py, dispersion.py,
 * gaps.py, which hold the definitions and which this file must match) makes some 40 passes through memory.
 * attnlab/native.py builds it into the same library as the row-map kernels; kernel.py declares its entry point.
 *
 * Rows are float64 with -inf at masked keys, each with a finite maximum and no NaN or +inf (row_stats
 * labels such rows first). For each row:
 *   1. maximum, allowed-key count and smallest allowed score; argmax and runner-up (first index of each);
 *   2. r_j = clamp(z_j + b, 0, tau), A_act and S_p = sum_{j != *} (r_j / r_*)^p: integer degrees up to
 *      MAX_BIT by repeated squaring, shared across degrees as concentration.s_p does, others by pow;
 *   3. per inverse temperature beta, softmax's partition sum Z, sum e_j (z_j - z_max) (the entropy without
 *      an elementwise log) and the support, with a vectorizable exp (exp_nonpos) since glibc's exp is
 *      not vectorized without -ffast-math;
 *   4. gap counting (Hayase & Karakida 2026 §4.2): the gaps go into bins, the bins that cannot hold Lambda_n or the
 *      contact point are pruned by the bounds of gaps._binned_candidates, and only the rest are sorted.
 * Results go to a column-major table, one column per statistic (OUT_* below, then S_p per degree, then
 * six columns per beta).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CH 256     /* keys per block of the S_p pass: its power table stays in L1 */
#define MAX_BIT 20 /* integer degrees up to 2^(MAX_BIT+1) - 1 go by repeated squaring */
#define MAX_BINS 1024
#define KEYS_PER_BIN 8
#define SLACK 1e-12 /* relative slack on bin edges for the rounding of g / h, as in gaps.py */
/* Counts in loops over doubles are kept in double (exact below 2^53): an integer counter next to double
 * sums made GCC's vectorized loop 6x slower here. */
#define COUNT(cond) ((cond) ? 1.0 : 0.0)

enum { OUT_NKEYS, OUT_FIRST, OUT_SECOND, OUT_REST, OUT_AACT, OUT_SINK, OUT_LAMBDA, OUT_TIE, OUT_CGAP,
       OUT_CCOUNT, OUT_ALPHA, OUT_CENT, OUT_LAMR, OUT_FIXED };
enum { B_ENTROPY, B_SUPPORT, B_MAXW, B_TOP2, B_TARGET, B_SINK, B_COLS };

/* c[0] x^(k-1) + ... + c[k-1], Horner's rule (constant k: GCC unrolls it inside vectorized loops). */
static inline double horner(const double *c, int k, double x) {
    double p = c[0];
    for (int i = 1; i < k; i++) p = p * x + c[i];
    return p;
}

/* exp(x) for x <= 0 (-inf included), within an ulp or two of glibc's, written so that GCC vectorizes it:
 * x = k ln 2 + r with |r| <= ln 2 / 2, exp(r) by its Taylor series to r^13 (truncation < 1e-17), and
 * 2^k built from bits in two factors so that results down to the smallest subnormal come out. */
static inline double exp_nonpos(double x) {
    x = x > -746.0 ? x : -746.0;
    const double shift = 0x1.8p52;
    const double t = x * 0x1.71547652b82fep0 + shift;
    const double kd = t - shift;
    int64_t tb, sb;
    memcpy(&tb, &t, 8);
    memcpy(&sb, &shift, 8);
    const int64_t k = tb - sb;
    const double r = (x - kd * 0x1.62e42fefa3800p-1) - kd * 0x1.ef35793c7673p-45;
    static const double taylor[] = {1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0,
                                    1.0 / 362880.0, 1.0 / 40320.0, 1.0 / 5040.0, 1.0 / 720.0, 1.0 / 120.0,
                                    1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0};
    const double p = horner(taylor, 14, r);
    const int64_t k1 = k >> 1, k2 = k - k1;
    const int64_t b1 = (k1 + 1023) << 52, b2 = (k2 + 1023) << 52;
    double s1, s2;
    memcpy(&s1, &b1, 8);
    memcpy(&s2, &b2, 8);
    return p * s1 * s2;
}

/* The first i != skip with z[i] == v (one exists), scanning blocks of 64 with a vectorized test first. */
static int64_t first_equal(const double *z, int64_t n, double v, int64_t skip) {
    for (int64_t i0 = 0; i0 < n; i0 += 64) {
        const int64_t i1 = i0 + 64 < n ? i0 + 64 : n;
        int any = 0;
        #pragma omp simd reduction(| : any)
        for (int64_t i = i0; i < i1; i++) any |= z[i] == v && i != skip;
        if (!any) continue;
        for (int64_t i = i0; i < i1; i++)
            if (z[i] == v && i != skip) return i;
    }
    return skip;
}

/* log x for counts x >= 1 (exact integers), to a few ulps, vectorizable: x = 2^e m with m in
 * [sqrt(1/2), sqrt(2)), log m = 2 atanh(f), f = (m - 1) / (m + 1), |f| < 0.172, by its series to f^21. */
static inline double log_count(double x) {
    int64_t bits;
    memcpy(&bits, &x, 8);
    const int64_t mb = (bits & 0xfffffffffffffLL) | 0x3ff0000000000000LL;
    double m;
    memcpy(&m, &mb, 8);
    const int big = m > 0x1.6a09e667f3bcdp0;
    m = big ? 0.5 * m : m;
    const double e = (double)(int32_t)((bits >> 52) - 1023 + big);
    const double f = (m - 1.0) / (m + 1.0), f2 = f * f;
    static const double atanh_series[] = {1.0 / 21, 1.0 / 19, 1.0 / 17, 1.0 / 15, 1.0 / 13, 1.0 / 11, 1.0 / 9,
                                          1.0 / 7, 1.0 / 5, 1.0 / 3};
    const double t = horner(atanh_series, 10, f2);
    return e * 0x1.62e42fefa3800p-1 + (2.0 * f + 2.0 * f * (f2 * t) + e * 0x1.ef35793c7673p-45);
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Ascending: by insertion for the few gaps a bin usually holds, by qsort for crowded bins (all the
 * gaps but an outlier's can share bin 0, as with an additive -1e9 mask). */
static void sort_gaps(double *g, int64_t c) {
    if (c > 32) {
        qsort(g, (size_t)c, sizeof(double), cmp_double);
        return;
    }
    for (int64_t i = 1; i < c; i++) {
        const double v = g[i];
        int64_t j = i;
        for (; j > 0 && g[j - 1] > v; j--) g[j] = g[j - 1];
        g[j] = v;
    }
}

typedef struct {
    const int64_t *target;
    double b, tau, eps, r;
    const double *deg;
    int64_t n_deg;
    const double *beta;
    int64_t n_beta, sink;
    int r_mode; /* 0: no Lambda_n^(r); 1: r as given; 2: r = log(1 + log n) */
} Options;

typedef struct {
    double *gaps;    /* n: the gaps still needed, then sorted */
    int64_t *hist;   /* MAX_BINS + 2: the last bin takes masked keys */
    int32_t *bin;    /* n: each key's bin */
    double *lg;      /* MAX_BINS + 1: log C_k */
    double *levels;  /* (MAX_BIT + 1) x CH: q^(2^k) over a block */
    double *acc;     /* CH */
    double *sums;    /* one per degree */
} Scratch;

/* r = clamp(u, 0, tau) (Polynomial Concentration §3), branch-free for vectorized loops. */
static inline double capped_relu(double u, double tau) {
    const double r = u > 0.0 ? u : 0.0;
    return r < tau ? r : tau;
}

/* True for the degrees taken by repeated squaring (concentration.s_p uses the same rule). */
static inline int squared_degree(double p) { return p == floor(p) && p < (double)(2 << MAX_BIT); }

static void s_p_row(const double *z, int64_t n, int64_t t, double r_star, const Options *o, Scratch *s) {
    double *sums = s->sums;
    int top_bit = -1;
    for (int64_t d = 0; d < o->n_deg; d++) {
        sums[d] = 0.0;
        if (squared_degree(o->deg[d])) {
            const int hb = 63 - __builtin_clzll((unsigned long long)o->deg[d]);
            top_bit = hb > top_bit ? hb : top_bit;
        }
    }
    const double b = o->b, tau = o->tau;
    for (int64_t c0 = 0; c0 < n; c0 += CH) {
        const int64_t len = c0 + CH < n ? CH : n - c0;
        double *q = s->levels;
        #pragma omp simd
        for (int64_t i = 0; i < len; i++) {
            q[i] = c0 + i == t ? 0.0 : capped_relu(z[c0 + i] + b, tau) / r_star;
        }
        for (int k = 1; k <= top_bit; k++) {
            const double *prev = s->levels + (k - 1) * CH;
            double *cur = s->levels + k * CH;
            #pragma omp simd
            for (int64_t i = 0; i < len; i++) cur[i] = prev[i] * prev[i];
        }
        for (int64_t d = 0; d < o->n_deg; d++) {
            double part = 0.0;
            if (squared_degree(o->deg[d])) {
                /* the product over the degree's bits, lowest first, as concentration.s_p forms it */
                unsigned long long e = (unsigned long long)o->deg[d];
                const double *src = 0;
                for (int k = 0; e; k++, e >>= 1) {
                    if (!(e & 1)) continue;
                    const double *lev = s->levels + k * CH;
                    if (!src) {
                        src = lev;
                        continue;
                    }
                    #pragma omp simd
                    for (int64_t i = 0; i < len; i++) s->acc[i] = src[i] * lev[i];
                    src = s->acc;
                }
                #pragma omp simd reduction(+ : part)
                for (int64_t i = 0; i < len; i++) part += src[i];
            } else {
                for (int64_t i = 0; i < len; i++) part += pow(q[i], o->deg[d]);
            }
            sums[d] += part;
        }
    }
}

/* Gap counting of one row with `count` >= 2 allowed keys, maximum m and smallest allowed score lo:
 * writes Lambda_n, tie, the contact point and Lambda_n^(r) (res < 0: none), as gaps.gap_stats. */
static void gap_row(const double *z, int64_t n, int64_t count, double m, double lo, double eps, double res,
                    Scratch *s, double *out, int64_t stride) {
    const int64_t bins = n / KEYS_PER_BIN < 1 ? 1 : n / KEYS_PER_BIN > MAX_BINS ? MAX_BINS : n / KEYS_PER_BIN;
    const double top = m - lo, h = top > 0 ? top / (double)bins : 1.0;
    /* Bin k = floor(g / h) by a product with 1 / h: its few ulps of error sit far inside SLACK. */
    const double inv_h = 1.0 / h, last_bin = (double)bins;
    int64_t *hist = s->hist;
    int32_t *bin = s->bin;
    memset(hist, 0, (size_t)(bins + 2) * sizeof(int64_t));
    #pragma omp simd
    for (int64_t i = 0; i < n; i++) {
        double k = (m - z[i]) * inv_h;
        k = k < last_bin ? k : last_bin;
        k = z[i] > -INFINITY ? k : last_bin + 1.0; /* masked keys have a bin of their own */
        bin[i] = (int32_t)k;
    }
    for (int64_t i = 0; i < n; i++) hist[bin[i]]++;
    /* The bounds of gaps._binned_candidates: with C_k the gaps in bins 0..k, every gap of bin k >= 1 has
     * log N / u <= log C_k / (k h), and bin k's largest gap has log N / u > log C_k / ((k + 1) h). */
    double *lg = s->lg, upto = 0.0;
    for (int64_t k = 0; k <= bins; k++) {
        upto += (double)hist[k];
        lg[k] = upto;
    }
    #pragma omp simd
    for (int64_t k = 0; k <= bins; k++) lg[k] = log_count(lg[k]);
    double lb = -INFINITY, lb_r = -INFINITY;
    #pragma omp simd reduction(max : lb, lb_r)
    for (int64_t k = 0; k <= bins; k++) {
        const int informative = hist[k] > (k == 0);
        const double upper = (double)(k + 1) * h * (1 + SLACK);
        const double lbk = informative ? lg[k] / upper : -INFINITY;
        lb = lbk > lb ? lbk : lb;
        const double lbrk = informative && lg[k] - res > 0 ? (lg[k] - res) / upper : -INFINITY;
        lb_r = lbrk > lb_r ? lbrk : lb_r;
    }
    if (res < 0) lb_r = INFINITY; /* no Lambda_n^(r): no bin is kept for it */
    /* The last bin kept, scanning down from the last one whose bound could reach: log C_k <= log C_bins. */
    const double reach = fmax(lg[bins] / ((1 - eps) * lb), res < 0 ? 0.0 : (lg[bins] - res) / lb_r);
    int64_t last = (int64_t)fmin((double)bins, reach / (h * (1 - SLACK)) + 1.0);
    for (; last > 0; last--) { /* bin 0 is always kept: its upper bound is infinite */
        const double lower = (double)last * h * (1 - SLACK);
        if (hist[last] > 0 && (lg[last] / lower >= (1 - eps) * lb ||
                               (lg[last] - res > 0 && (lg[last] - res) / lower >= lb_r)))
            break;
    }
    /* The gaps of bins 0..last, a prefix of the sorted gaps (bins rise with the gap), so each one's rank
     * is its exact count N_n: placed bin by bin (hist becomes each bin's next slot, then its end), then
     * sorted within each bin. */
    int64_t c = 0;
    for (int64_t k = 0; k <= last; k++) {
        const int64_t size = hist[k];
        hist[k] = c;
        c += size;
    }
    const int32_t top_bin = (int32_t)last;
    for (int64_t i0 = 0; i0 < n; i0 += 16) { /* few keys are taken: test blocks of 16 at once first */
        const int64_t i1 = i0 + 16 < n ? i0 + 16 : n;
        int any = 0;
        #pragma omp simd reduction(| : any)
        for (int64_t i = i0; i < i1; i++) any |= bin[i] <= top_bin;
        if (!any) continue;
        for (int64_t i = i0; i < i1; i++)
            if (bin[i] <= top_bin) s->gaps[hist[bin[i]]++] = m - z[i];
    }
    for (int64_t k = 0, start = 0; k <= last; start = hist[k++]) sort_gaps(s->gaps + start, hist[k] - start);
    /* gaps.counts: position j holds N_n at the last of each run of equal gaps, j + 1 */
    int64_t n_max = 0;
    double lam = 0.0, lam_r = 0.0;
    while (n_max < c && s->gaps[n_max] == 0.0) n_max++;
    for (int64_t j = n_max; j < c; j++) {
        const double lg = log_count((double)(j + 1));
        const double ratio = lg / s->gaps[j], ratio_r = res >= 0 && lg > res ? (lg - res) / s->gaps[j] : 0.0;
        lam = ratio > lam ? ratio : lam;
        lam_r = ratio_r > lam_r ? ratio_r : lam_r;
    }
    const int tie = n_max >= 2;
    int64_t at = 0;
    double contact = NAN;
    if (!tie) {
        for (int64_t j = c - 1; j >= n_max; j--) {
            if (log_count((double)(j + 1)) / s->gaps[j] >= (1 - eps) * lam) {
                at = j + 1;
                contact = s->gaps[j];
                break;
            }
        }
    }
    out[OUT_LAMBDA * stride] = tie ? INFINITY : lam;
    out[OUT_TIE * stride] = tie;
    out[OUT_CGAP * stride] = contact;
    out[OUT_CCOUNT * stride] = at ? (double)at : NAN;
    out[OUT_ALPHA * stride] = at ? log((double)at) / log((double)count) : NAN;
    out[OUT_CENT * stride] = at ? log((double)at) : NAN;
    out[OUT_LAMR * stride] = res < 0 ? NAN : log((double)n_max) > res ? INFINITY : lam_r;
}

/* Partition sum, entropy, support and the weights at four keys of softmax(beta z) for one row. The max is
   subtracted before beta scales: beta z - beta m rounds beta z to ulp(beta m), which at |m| ~ 1e15 moves the
   weights in their third digit. */
static void softmax_row(const double *z, int64_t n, double m, double beta, int64_t first, int64_t second,
                        int64_t t, int64_t sink, double *out, int64_t stride) {
    double total = 0.0, spread = 0.0, support = 0.0, tiny = 0.0; /* counts in double: see COUNT */
    #pragma omp simd reduction(+ : total, spread, support, tiny)
    for (int64_t i = 0; i < n; i++) {
        const double d = z[i] - m;
        const double e = exp_nonpos(beta * d);
        total += e;
        spread += e * (d > -INFINITY ? d : 0.0);
        support += COUNT(e > 0.0);
        tiny += COUNT(e > 0.0 && e < 0x1p-1000);
    }
    if (tiny > 0) { /* a subnormal weight e / Z may round to 0: count w > 0 as the weights themselves would */
        support = 0.0;
        for (int64_t i = 0; i < n; i++) support += COUNT(exp_nonpos(beta * (z[i] - m)) / total > 0.0);
    }
    const double w_max = 1.0 / total;
    const double w_2nd = first == second ? 0.0 : exp_nonpos(beta * (z[second] - m)) / total;
    out[B_ENTROPY * stride] = fmax(log(total) - beta * spread / total, 0.0);
    out[B_SUPPORT * stride] = support;
    out[B_MAXW * stride] = w_max;
    out[B_TOP2 * stride] = w_max - w_2nd;
    out[B_TARGET * stride] = exp_nonpos(beta * (z[t] - m)) / total;
    out[B_SINK * stride] = sink < 0 ? NAN : exp_nonpos(beta * (z[sink] - m)) / total;
}

static void one_row(const double *z, int64_t n, int64_t row, const Options *o, Scratch *s, double *out,
                    int64_t stride) {
    const double b = o->b;
    double m = -INFINITY, lo = INFINITY, allowed = 0.0, active = 0.0;
    #pragma omp simd reduction(max : m) reduction(min : lo) reduction(+ : allowed, active)
    for (int64_t i = 0; i < n; i++) {
        m = z[i] > m ? z[i] : m;
        const double low = z[i] > -INFINITY ? z[i] : INFINITY;
        lo = low < lo ? low : lo;
        allowed += COUNT(z[i] > -INFINITY);
        active += COUNT(z[i] + b > 0.0);
    }
    const int64_t count = (int64_t)allowed;
    const int64_t first = first_equal(z, n, m, -1);
    double rest = -INFINITY;
    #pragma omp simd reduction(max : rest)
    for (int64_t i = 0; i < n; i++) {
        const double v = i == first ? -INFINITY : z[i];
        rest = v > rest ? v : rest;
    }
    const int64_t second = rest > -INFINITY ? first_equal(z, n, rest, first) : first;
    const int64_t t = o->target ? o->target[row] : first;
    int64_t sink = -1;
    if (count > o->sink) {
        if (count == n) {
            sink = o->sink;
        } else {
            for (int64_t i = 0, seen = 0; i < n; i++) {
                seen += z[i] > -INFINITY;
                if (seen > o->sink) {
                    sink = i;
                    break;
                }
            }
        }
    }
    const double r_star = capped_relu(z[t] + b, o->tau);
    out[OUT_NKEYS * stride] = (double)count;
    out[OUT_FIRST * stride] = (double)first;
    out[OUT_SECOND * stride] = (double)second;
    out[OUT_REST * stride] = rest;
    out[OUT_AACT * stride] = active - COUNT(z[t] + b > 0.0); /* tau > 0, so r_j > 0 iff z_j + b > 0 */
    out[OUT_SINK * stride] = (double)sink;
    double *sp = out + OUT_FIXED * stride;
    if (r_star > 0.0) s_p_row(z, n, t, r_star, o, s);
    for (int64_t d = 0; d < o->n_deg; d++) sp[d * stride] = r_star > 0.0 ? s->sums[d] : NAN;
    double *bo = sp + o->n_deg * stride;
    for (int64_t k = 0; k < o->n_beta; k++)
        softmax_row(z, n, m, o->beta[k], first, second, t, sink, bo + k * B_COLS * stride, stride);
    if (count < 2) {
        for (int c = OUT_LAMBDA; c <= OUT_LAMR; c++) out[c * stride] = NAN;
        out[OUT_TIE * stride] = 0.0;
        return;
    }
    const double res = o->r_mode == 0 ? -1.0 : o->r_mode == 1 ? o->r : log1p(log((double)count));
    gap_row(z, n, count, m, lo, o->eps, res, s, out, stride);
}

/* The bundle for `rows` rows of n float64 scores into out, (OUT_FIXED + n_deg + 6 n_beta) columns of
 * `rows` values. Returns 1 if a thread could not allocate its scratch (out is then incomplete). */
int diag_rows_f64(const double *z, int64_t rows, int64_t n, const int64_t *target, double b, double tau,
                  const double *deg, int64_t n_deg, const double *beta, int64_t n_beta, int64_t sink,
                  double eps, int r_mode, double r, double *out, int threads) {
    const Options o = {target, b, tau, eps, r, deg, n_deg, beta, n_beta, sink, r_mode};
    int failed = 0;
    #pragma omp parallel num_threads(threads) reduction(| : failed)
    {
        Scratch s = {malloc((size_t)n * sizeof(double)), malloc((MAX_BINS + 2) * sizeof(int64_t)),
                     malloc((size_t)n * sizeof(int32_t)), malloc((MAX_BINS + 1) * sizeof(double)),
                     malloc((MAX_BIT + 1) * CH * sizeof(double)), malloc(CH * sizeof(double)),
                     malloc((size_t)(n_deg > 0 ? n_deg : 1) * sizeof(double))};
        const int ok = s.gaps && s.hist && s.bin && s.lg && s.levels && s.acc && s.sums;
        if (!ok) failed = 1;
        #pragma omp for schedule(dynamic, 4)
        for (int64_t row = 0; row < rows; row++)
            if (ok) one_row(z + row * n, n, row, &o, &s, out + row, rows);
        free(s.gaps);
        free(s.hist);
        free(s.bin);
        free(s.lg);
        free(s.levels);
        free(s.acc);
        free(s.sums);
    }
    return failed;
}
