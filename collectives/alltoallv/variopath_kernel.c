/* VarioPath online decomposition (paper 000, Algorithm 2) as one compiled loop (-O3, no FMA contraction, no -march: a built wheel may be shared between hosts).
 *
 * A line-for-line port of the numpy path of collectives/alltoallv/variopath.py
 * (VarioPathPlanner._plan_numpy): per activation the shape scores (Eqs. 5-6), the multi-start
 * Alternating Algorithm over every family of the shape beam (g x g assignments by permutation
 * enumeration), EVALUATE (Eqs. 9-10) and our extensions (pressure weights, coarse rounds,
 * channel reuse, quanta merging). The Python loop costs ~0.1 ms of numpy call overhead per
 * activation; this loop costs microseconds. Built when the project is installed (setup.py: the
 * extension module collectives.alltoallv._variopath_kernel) and called through ctypes by
 * collectives/alltoallv/kernel.py, which checks every array it passes; the numpy path stays the
 * reference and the fallback.
 *
 * Returns the number of activations written; *status: 1 drained, 0 no candidate (the caller
 * runs its fallback for one activation and calls again), 2 output capacity reached.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h> /* first, as Python's headers require; only for the module stub at the end */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int64_t i64;

#if defined(__GNUC__)
#define VP_EXPORT __attribute__((visibility("default")))
#else
#define VP_EXPORT
#endif

#define FORBID (-1e30)
#define SYNTH_PERIOD 4

enum { I_N, I_G, I_g, I_J, I_P, I_S, I_SWEEPS, I_BEAM, I_REUSE, I_MAXQ, I_WEIGHTED, I_CAPPED, I_MAXACTS,
       I_MAXROWS, I_RANKP_ON, I_DENSE, I_ROWBUDGET, I_R, I_SYNTH, I_F, I_NRES, I_POWER, I_WSCORE, I_NNODES,
       I_WARM, I_STALL, I_NCAND, I_RESCORE };
enum { D_TAU0, D_COARSE, D_MAXRATE, D_RANKP, D_PAIRP, D_OVERHEAD, D_REUSEFLOOR, D_NODEP, D_KROUNDS };

/* The maximum-weight assignment of a g x g credit matrix v (rows = lanes, columns = candidate
 * GPUs) as the index of the best permutation in itertools.permutations order (the numpy path's
 * enumeration); the first maximum wins, as numpy's argmax. g = 2 and 4 are unrolled.
 *
 * g = 4: the 24 sums in itertools.permutations order, each ((v0a + v1b) + v2c) + v3d as the
 * generic loop; permutations 2p and 2p + 1 share (a, b) and swap (c, d), so they are summed as
 * one pair. The first maximum: the largest value (max is exact in any order; credits are never
 * NaN), then the lowest index holding it, found from a bit mask without a data-dependent branch. */
#if defined(__SSE2__)
#include <emmintrin.h>
static i64 best_perm4(const double *r0, const double *r1, const double *r2, const double *r3) {
    /* rows 2 and 3 as halves; (r2[c], r2[d]) and (r3[d], r3[c]) for the 6 pairs c < d by shuffles
       (_mm_shuffle_pd(x, y, i): lane 0 = x[i & 1], lane 1 = y[i >> 1]) */
    const __m128d L2 = _mm_loadu_pd(r2), H2 = _mm_loadu_pd(r2 + 2), L3 = _mm_loadu_pd(r3), H3 = _mm_loadu_pd(r3 + 2);
    const __m128d c23 = H2, c13 = _mm_unpackhi_pd(L2, H2), c12 = _mm_shuffle_pd(L2, H2, 1), c03 = _mm_shuffle_pd(L2, H2, 2),
                  c02 = _mm_unpacklo_pd(L2, H2), c01 = L2;
    const __m128d d23 = _mm_shuffle_pd(H3, H3, 1), d13 = _mm_unpackhi_pd(H3, L3), d12 = _mm_shuffle_pd(H3, L3, 2),
                  d03 = _mm_shuffle_pd(H3, L3, 1), d02 = _mm_unpacklo_pd(H3, L3), d01 = _mm_shuffle_pd(L3, L3, 1);
#define VP_PAIR(a, b, C, D) _mm_add_pd(_mm_add_pd(_mm_set1_pd(r0[a] + r1[b]), C), D)
    /* (a, b) in itertools order, with the remaining (c, d) */
    const __m128d s[12] = {VP_PAIR(0, 1, c23, d23), VP_PAIR(0, 2, c13, d13), VP_PAIR(0, 3, c12, d12),
                           VP_PAIR(1, 0, c23, d23), VP_PAIR(1, 2, c03, d03), VP_PAIR(1, 3, c02, d02),
                           VP_PAIR(2, 0, c13, d13), VP_PAIR(2, 1, c03, d03), VP_PAIR(2, 3, c01, d01),
                           VP_PAIR(3, 0, c12, d12), VP_PAIR(3, 1, c02, d02), VP_PAIR(3, 2, c01, d01)};
#undef VP_PAIR
    __m128d m = _mm_max_pd(_mm_max_pd(_mm_max_pd(s[0], s[1]), _mm_max_pd(s[2], s[3])),
                           _mm_max_pd(_mm_max_pd(s[4], s[5]), _mm_max_pd(s[6], s[7])));
    m = _mm_max_pd(m, _mm_max_pd(_mm_max_pd(s[8], s[9]), _mm_max_pd(s[10], s[11])));
    m = _mm_max_pd(m, _mm_shuffle_pd(m, m, 1));
    unsigned mask = 0;
    for (int p = 0; p < 12; p++) mask |= (unsigned)_mm_movemask_pd(_mm_cmpeq_pd(s[p], m)) << (2 * p);
    if (mask) return __builtin_ctz(mask);
    double sc[24];  /* unreachable without NaN: the running scan's answer */
    for (int p = 0; p < 12; p++) _mm_storeu_pd(sc + 2 * p, s[p]);
    i64 best = 0;
    for (i64 p = 1; p < 24; p++) if (sc[p] > sc[best]) best = p;
    return best;
}
#else
static i64 best_perm4(const double *r0, const double *r1, const double *r2, const double *r3) {
    static const int AB[12][4] = {{0, 1, 2, 3}, {0, 2, 1, 3}, {0, 3, 1, 2}, {1, 0, 2, 3}, {1, 2, 0, 3}, {1, 3, 0, 2},
                                  {2, 0, 1, 3}, {2, 1, 0, 3}, {2, 3, 0, 1}, {3, 0, 1, 2}, {3, 1, 0, 2}, {3, 2, 0, 1}};
    double sc[24];
    for (int p = 0; p < 12; p++) {
        const int a = AB[p][0], b = AB[p][1], c = AB[p][2], d = AB[p][3];
        const double ab = r0[a] + r1[b];
        sc[2 * p] = (ab + r2[c]) + r3[d];
        sc[2 * p + 1] = (ab + r2[d]) + r3[c];
    }
    i64 best = 0;
    for (i64 p = 1; p < 24; p++) if (sc[p] > sc[best]) best = p;
    return best;
}
#endif

#if defined(__GNUC__) && defined(__x86_64__) && defined(__SSE2__)
#define VP_X86_SIMD 1
#include <immintrin.h>
/* -DVP_NO_AVX512 / -DVP_NO_AVX2 keep a build on the narrower paths (to check that they plan the same) */
/* cpu_has_FEATURE(): once per process, the CPU's answer (0 where the build turned the path off) */
#define VP_CPU_HAS(feature, off) \
    static int cpu_has_##feature(void) { \
        static int has = -1; \
        if (has < 0) has = !(off) && __builtin_cpu_supports(#feature) ? 1 : 0; \
        return has; \
    }
#if defined(VP_NO_AVX512)
VP_CPU_HAS(avx512f, 1)
#else
VP_CPU_HAS(avx512f, 0)
#endif
#if defined(VP_NO_AVX2)
VP_CPU_HAS(avx2, 1)
#else
VP_CPU_HAS(avx2, 0)
#endif
#undef VP_CPU_HAS

/* best_perm4 with the 24 sums in three 8-lane vectors: lane u of vector q is permutation 8q + u
 * (itertools order), its terms picked from the rows by permutes, summed ((a + b) + c) + d as the
 * SSE2 version; the first maximum as there (the lowest permutation holding the largest sum). */
__attribute__((target("avx512f"))) static inline i64 best_perm4_avx512(const double *r0, const double *r1,
                                                                       const double *r2, const double *r3) {
    /* (a, b, c, d) of the 24 permutations; b, d index the upper half (rows 1 and 3) */
    static const int64_t PA[24] = {0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3};
    static const int64_t PB[24] = {5, 5, 6, 6, 7, 7, 4, 4, 6, 6, 7, 7, 4, 4, 5, 5, 7, 7, 4, 4, 5, 5, 6, 6};
    static const int64_t PC[24] = {2, 3, 1, 3, 1, 2, 2, 3, 0, 3, 0, 2, 1, 3, 0, 3, 0, 1, 1, 2, 0, 2, 0, 1};
    static const int64_t PD[24] = {7, 6, 7, 5, 6, 5, 7, 6, 7, 4, 6, 4, 7, 5, 7, 4, 5, 4, 6, 5, 6, 4, 5, 4};
    const __m512d R01 = _mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_loadu_pd(r0)), _mm256_loadu_pd(r1), 1);
    const __m512d R23 = _mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_loadu_pd(r2)), _mm256_loadu_pd(r3), 1);
    __m512d s[3];
    for (int q = 0; q < 3; q++) {
        const __m512d A = _mm512_permutexvar_pd(_mm512_loadu_si512(PA + 8 * q), R01);
        const __m512d Bv = _mm512_permutexvar_pd(_mm512_loadu_si512(PB + 8 * q), R01);
        const __m512d C = _mm512_permutexvar_pd(_mm512_loadu_si512(PC + 8 * q), R23);
        const __m512d D = _mm512_permutexvar_pd(_mm512_loadu_si512(PD + 8 * q), R23);
        s[q] = _mm512_add_pd(_mm512_add_pd(_mm512_add_pd(A, Bv), C), D);
    }
    const double m = _mm512_reduce_max_pd(_mm512_max_pd(_mm512_max_pd(s[0], s[1]), s[2]));
    const __m512d mv = _mm512_set1_pd(m);
    const uint32_t mask = (uint32_t)_mm512_cmp_pd_mask(s[0], mv, _CMP_EQ_OQ)
                          | ((uint32_t)_mm512_cmp_pd_mask(s[1], mv, _CMP_EQ_OQ) << 8)
                          | ((uint32_t)_mm512_cmp_pd_mask(s[2], mv, _CMP_EQ_OQ) << 16);
    if (mask) return __builtin_ctz(mask);
    return best_perm4(r0, r1, r2, r3);  /* unreachable without NaN: the SSE2 answer */
}

/* best_perm4 with the 24 sums in six 4-lane vectors (AVX2, for CPUs without AVX-512): lane u of
 * vector q is permutation 4q + u (itertools order); each term is one row permuted by a constant
 * (vpermpd: the immediate's 2-bit fields name the row entry of lanes 0..3), summed
 * ((a + b) + c) + d; the first maximum as the SSE2 version. */
#define VP_P4(x, imm) _mm256_permute4x64_pd(x, imm)
#define VP_Q4(ia, ib, ic, id) \
    _mm256_add_pd(_mm256_add_pd(_mm256_add_pd(VP_P4(R0, ia), VP_P4(R1, ib)), VP_P4(R2, ic)), VP_P4(R3, id))
#define VP_EQ4(x, q) ((unsigned)_mm256_movemask_pd(_mm256_cmp_pd(x, m, _CMP_EQ_OQ)) << (4 * (q)))
__attribute__((target("avx2"))) static inline i64 best_perm4_avx2(const double *r0, const double *r1,
                                                                   const double *r2, const double *r3) {
    const __m256d R0 = _mm256_loadu_pd(r0), R1 = _mm256_loadu_pd(r1), R2 = _mm256_loadu_pd(r2), R3 = _mm256_loadu_pd(r3);
    /* a, b, c, d of permutations 4q ... 4q + 3, one immediate per row and vector */
    const __m256d s0 = VP_Q4(0x00, 0xA5, 0xDE, 0x7B), s1 = VP_Q4(0x50, 0x0F, 0xE9, 0xB6);
    const __m256d s2 = VP_Q4(0x55, 0xFA, 0x8C, 0x23), s3 = VP_Q4(0xAA, 0x50, 0xCD, 0x37);
    const __m256d s4 = VP_Q4(0xFA, 0x0F, 0x94, 0x61), s5 = VP_Q4(0xFF, 0xA5, 0x48, 0x12);
    __m256d m = _mm256_max_pd(_mm256_max_pd(_mm256_max_pd(s0, s1), _mm256_max_pd(s2, s3)), _mm256_max_pd(s4, s5));
    m = _mm256_max_pd(m, _mm256_permute2f128_pd(m, m, 1));
    m = _mm256_max_pd(m, _mm256_permute_pd(m, 5));
    const unsigned mask = VP_EQ4(s0, 0) | VP_EQ4(s1, 1) | VP_EQ4(s2, 2) | VP_EQ4(s3, 3) | VP_EQ4(s4, 4) | VP_EQ4(s5, 5);
    if (mask) return __builtin_ctz(mask);
    return best_perm4(r0, r1, r2, r3);  /* unreachable without NaN: the SSE2 answer */
}
#undef VP_P4
#undef VP_Q4
#undef VP_EQ4
#endif

static i64 best_perm(const double *v, const i64 *perms, i64 P, i64 g) {
    if (g == 4) return best_perm4(v, v + 4, v + 8, v + 12);
    if (g == 2) return (v[1] + v[2] > v[0] + v[3]) ? 1 : 0;
    i64 best = 0;
    double bs = 0.0;
    for (i64 p = 0; p < P; p++) {
        const i64 *pp = perms + p * g;
        double s = 0.0;
        for (i64 l = 0; l < g; l++) s += v[l * g + pp[l]];
        if (p == 0 || s > bs) { bs = s; best = p; }
    }
    return best;
}

/* One sweep of the Alternating Algorithm over the B rows (family rfam[b], binding rsrc / rdst):
 * fix the destinations and assign the sources of every group (one g x g assignment each), then
 * fix the sources and assign the destinations. The body is compiled with the SSE2 and the
 * AVX-512 4 x 4 solver (same sums, same first maximum), groups of 4 consecutive ranks also with
 * the AVX2 one, and the CPU picks one at run time. */
#define VP_AA_SWEEP(BP4) \
for (i64 b = 0; b < B; b++) { \
    const i64 *rid = fam_rid + rfam[b] * N; \
    const i64 *in = fam_in + rfam[b] * N; \
    i64 *sb = rsrc + b * N, *db = rdst + b * N; \
    for (i64 a = 0; a < G; a++) {  /* fix destinations, assign sources per group */ \
        i64 pi_; \
        if (g4c) {  /* the g candidates of each lane lie side by side: no copy */ \
            const double *ct = credt + groups[a * g]; \
            const i64 k = a * g; \
            pi_ = BP4(ct + rid[k] * NN + db[k] * N, ct + rid[k + 1] * NN + db[k + 1] * N, \
                             ct + rid[k + 2] * NN + db[k + 2] * N, ct + rid[k + 3] * NN + db[k + 3] * N); \
            const i64 *pm = perms + pi_ * 4, base = groups[k];  /* group a = ranks base ... base + 3 */ \
            sb[k] = base + pm[0]; sb[k + 1] = base + pm[1]; sb[k + 2] = base + pm[2]; sb[k + 3] = base + pm[3]; \
            continue; \
        } else { \
            for (i64 l = 0; l < g; l++) { \
                i64 k = a * g + l, j = db[k]; \
                const double *cr = credt + rid[k] * NN + j * N;  /* candidates i of group a: h_ij */ \
                for (i64 c = 0; c < g; c++) v[l * g + c] = cr[groups[a * g + c]]; \
            } \
            pi_ = best_perm(v, perms, P, g); \
        } \
        const i64 *pm = perms + pi_ * g; \
        for (i64 l = 0; l < g; l++) sb[a * g + l] = groups[a * g + pm[l]]; \
    } \
    for (i64 d = 0; d < G; d++) {  /* fix sources, assign destinations per group */ \
        i64 pi_; \
        const i64 *ind = in + d * g; \
        if (g4c) { \
            const double *cg = cred + groups[d * g]; \
            pi_ = BP4(cg + rid[ind[0]] * NN + sb[ind[0]] * N, cg + rid[ind[1]] * NN + sb[ind[1]] * N, \
                             cg + rid[ind[2]] * NN + sb[ind[2]] * N, cg + rid[ind[3]] * NN + sb[ind[3]] * N); \
            const i64 *pm = perms + pi_ * 4, base = groups[d * 4]; \
            db[ind[0]] = base + pm[0]; db[ind[1]] = base + pm[1]; db[ind[2]] = base + pm[2]; db[ind[3]] = base + pm[3]; \
            continue; \
        } else { \
            for (i64 l = 0; l < g; l++) { \
                i64 kk = ind[l]; \
                const double *cr = cred + rid[kk] * NN + sb[kk] * N; \
                for (i64 c = 0; c < g; c++) v[l * g + c] = cr[groups[d * g + c]]; \
            } \
            pi_ = best_perm(v, perms, P, g); \
        } \
        const i64 *pm = perms + pi_ * g; \
        for (i64 l = 0; l < g; l++) db[in[d * g + l]] = groups[d * g + pm[l]]; \
    } \
}

static void aa_sweep_base(i64 B, i64 N, i64 G, i64 g, i64 P, int g4c, const i64 *rfam, const i64 *fam_rid,
                          const i64 *fam_in, const i64 *groups, const double *cred, const double *credt,
                          const i64 *perms, double *v, i64 *rsrc, i64 *rdst) {
    const i64 NN = N * N;
    VP_AA_SWEEP(best_perm4)
}

#if defined(VP_X86_SIMD)
/* groups of 4 consecutive ranks (g4c), AVX-512 or AVX2: two rows at a time, their assignments
 * interleaved group by group -- the rows are independent, so each gets the values it would get
 * alone, and one row's solver latency overlaps the other's */
#define VP_SRC4(BP4, sb, db, rid, a) do { \
    const double *ct = credt + groups[(a) * 4]; \
    const i64 k = (a) * 4; \
    const i64 *pm = perms + 4 * BP4(ct + rid[k] * NN + db[k] * N, ct + rid[k + 1] * NN + db[k + 1] * N, \
                                    ct + rid[k + 2] * NN + db[k + 2] * N, ct + rid[k + 3] * NN + db[k + 3] * N); \
    const i64 base = groups[k]; \
    sb[k] = base + pm[0]; sb[k + 1] = base + pm[1]; sb[k + 2] = base + pm[2]; sb[k + 3] = base + pm[3]; \
} while (0)
#define VP_DST4(BP4, sb, db, rid, in, d) do { \
    const i64 *ind = (in) + (d) * 4; \
    const double *cg = cred + groups[(d) * 4]; \
    const i64 *pm = perms + 4 * BP4(cg + rid[ind[0]] * NN + sb[ind[0]] * N, cg + rid[ind[1]] * NN + sb[ind[1]] * N, \
                                    cg + rid[ind[2]] * NN + sb[ind[2]] * N, cg + rid[ind[3]] * NN + sb[ind[3]] * N); \
    const i64 base = groups[(d) * 4]; \
    db[ind[0]] = base + pm[0]; db[ind[1]] = base + pm[1]; db[ind[2]] = base + pm[2]; db[ind[3]] = base + pm[3]; \
} while (0)
#define VP_AA_SWEEP_G4(BP4) \
    const i64 NN = N * N; \
    i64 b = 0; \
    for (; b + 2 <= B; b += 2) { \
        const i64 *rid0 = fam_rid + rfam[b] * N, *in0 = fam_in + rfam[b] * N; \
        const i64 *rid1 = fam_rid + rfam[b + 1] * N, *in1 = fam_in + rfam[b + 1] * N; \
        i64 *sb0 = rsrc + b * N, *db0 = rdst + b * N, *sb1 = rsrc + (b + 1) * N, *db1 = rdst + (b + 1) * N; \
        for (i64 a = 0; a < G; a++) { VP_SRC4(BP4, sb0, db0, rid0, a); VP_SRC4(BP4, sb1, db1, rid1, a); } \
        for (i64 d = 0; d < G; d++) { VP_DST4(BP4, sb0, db0, rid0, in0, d); VP_DST4(BP4, sb1, db1, rid1, in1, d); } \
    } \
    for (; b < B; b++) { \
        const i64 *rid = fam_rid + rfam[b] * N, *in = fam_in + rfam[b] * N; \
        i64 *sb = rsrc + b * N, *db = rdst + b * N; \
        for (i64 a = 0; a < G; a++) VP_SRC4(BP4, sb, db, rid, a); \
        for (i64 d = 0; d < G; d++) VP_DST4(BP4, sb, db, rid, in, d); \
    }
#define VP_AA_SWEEP_G4_ARGS i64 B, i64 N, i64 G, const i64 *rfam, const i64 *fam_rid, const i64 *fam_in, \
    const i64 *groups, const double *cred, const double *credt, const i64 *perms, i64 *rsrc, i64 *rdst

__attribute__((target("avx512f"))) static void aa_sweep_g4_avx512(VP_AA_SWEEP_G4_ARGS) { VP_AA_SWEEP_G4(best_perm4_avx512) }
__attribute__((target("avx2"))) static void aa_sweep_g4_avx2(VP_AA_SWEEP_G4_ARGS) { VP_AA_SWEEP_G4(best_perm4_avx2) }
#undef VP_SRC4
#undef VP_DST4
#undef VP_AA_SWEEP_G4

__attribute__((target("avx512f"))) static void aa_sweep_avx512(i64 B, i64 N, i64 G, i64 g, i64 P, int g4c,
                                                               const i64 *rfam, const i64 *fam_rid, const i64 *fam_in,
                                                               const i64 *groups, const double *cred,
                                                               const double *credt, const i64 *perms, double *v,
                                                               i64 *rsrc, i64 *rdst) {
    const i64 NN = N * N;
    VP_AA_SWEEP(best_perm4_avx512)
}
#endif

static void aa_sweep(i64 B, i64 N, i64 G, i64 g, i64 P, int g4c, const i64 *rfam, const i64 *fam_rid,
                     const i64 *fam_in, const i64 *groups, const double *cred, const double *credt, const i64 *perms,
                     double *v, i64 *rsrc, i64 *rdst) {
#if defined(VP_X86_SIMD)
    if (cpu_has_avx512f()) {
        if (g4c)
            aa_sweep_g4_avx512(B, N, G, rfam, fam_rid, fam_in, groups, cred, credt, perms, rsrc, rdst);
        else
            aa_sweep_avx512(B, N, G, g, P, g4c, rfam, fam_rid, fam_in, groups, cred, credt, perms, v, rsrc, rdst);
        return;
    }
    if (g4c && cpu_has_avx2()) {
        aa_sweep_g4_avx2(B, N, G, rfam, fam_rid, fam_in, groups, cred, credt, perms, rsrc, rdst);
        return;
    }
#endif
    aa_sweep_base(B, N, G, g, P, g4c, rfam, fam_rid, fam_in, groups, cred, credt, perms, v, rsrc, rdst);
}

/* The weights w, the credits h = min(q, bw) (x w) per distinct lane rate -- also transposed, so
 * the AA's source side reads contiguous candidates -- and the weighted D̂ (fractional: summed in
 * rank order, as the numpy path's np.add.at), row by row, each term a plain loop over j. Compiled
 * for SSE2, AVX2 and AVX-512 vectors (elementwise, so the same values) and chosen at run time. */
#define VP_CREDIT_ROWS \
for (i64 i = 0; i < N; i++) {  /* row by row, each term a plain loop over j (vectorizes) */ \
    const double *ri = rem + i * N; \
    double *wi = w + i * N; \
    if (use_w) { \
        const double pui = pu[i]; \
        if (power > 1) \
            for (i64 j = 0; j < N; j++) wi[j] = 1.0 + rp * (pui + pv[j]) / 2.0; \
        else { \
            const double den = 2.0 * mx; \
            for (i64 j = 0; j < N; j++) wi[j] = 1.0 + rp * (pui + pv[j]) / den; \
        } \
        if (pp != 0.0) for (i64 j = 0; j < N; j++) wi[j] += pp * ri[j] / remmax; \
        if (nodes_on) { \
            const double *nr = nrow + node_of[i] * N; \
            for (i64 j = 0; j < N; j++) wi[j] += nr[j]; \
        } \
        if (wsc) { \
            double *dgwi = dgw + gof[i] * G; \
            if (gcons) {  /* group d holds ranks d g ... d g + g - 1: one running sum per pair, same order */ \
                for (i64 d = 0; d < G; d++) { \
                    double acc = dgwi[d]; \
                    for (i64 l = d * g; l < d * g + g; l++) acc += ri[l] * wi[l]; \
                    dgwi[d] = acc; \
                } \
            } else { \
                for (i64 j = 0; j < N; j++) dgwi[gof[j]] += ri[j] * wi[j]; \
            } \
        } \
    } \
    for (i64 rr = 0; rr < R; rr++) { \
        const double bw = rates_u[rr]; \
        double *cr = cred + rr * NN + i * N; \
        if (use_w) \
            for (i64 j = 0; j < N; j++) { const double qv = ri[j] * inv_tau; cr[j] = (qv < bw ? qv : bw) * wi[j]; } \
        else \
            for (i64 j = 0; j < N; j++) { const double qv = ri[j] * inv_tau; cr[j] = qv < bw ? qv : bw; } \
        cr[i] = use_w ? FORBID * wi[i] : FORBID;  /* q_ii = FORBID < bw */ \
    } \
}

#define VP_CREDIT_ARGS i64 N, i64 G, i64 g, i64 R, int use_w, int wsc, int nodes_on, int gcons, i64 power, double rp, \
    double pp, double mx, double remmax, double inv_tau, const double *restrict rem, const double *restrict pu, \
    const double *restrict pv, const double *restrict nrow, const i64 *node_of, const i64 *gof, \
    const double *rates_u, double *restrict w, double *restrict dgw, double *restrict cred, double *restrict credt

static void credit_rows_base(VP_CREDIT_ARGS) {
    const i64 NN = N * N;
    VP_CREDIT_ROWS
}

#if defined(VP_X86_SIMD)
__attribute__((target("avx512f"))) static void credit_rows_avx512(VP_CREDIT_ARGS) {
    const i64 NN = N * N;
    VP_CREDIT_ROWS
}

__attribute__((target("avx2"))) static void credit_rows_avx2(VP_CREDIT_ARGS) {
    const i64 NN = N * N;
    VP_CREDIT_ROWS
}
#endif

static void credit_rows_values(VP_CREDIT_ARGS) {
#if defined(VP_X86_SIMD)
    if (cpu_has_avx512f()) {
        credit_rows_avx512(N, G, g, R, use_w, wsc, nodes_on, gcons, power, rp, pp, mx, remmax, inv_tau, rem, pu, pv, nrow,
                           node_of, gof, rates_u, w, dgw, cred, credt);
        return;
    }
    if (cpu_has_avx2()) {
        credit_rows_avx2(N, G, g, R, use_w, wsc, nodes_on, gcons, power, rp, pp, mx, remmax, inv_tau, rem, pu, pv, nrow,
                         node_of, gof, rates_u, w, dgw, cred, credt);
        return;
    }
#endif
    credit_rows_base(N, G, g, R, use_w, wsc, nodes_on, gcons, power, rp, pp, mx, remmax, inv_tau, rem, pu, pv, nrow,
                     node_of, gof, rates_u, w, dgw, cred, credt);
}

/* credt = cred transposed, rate by rate: the AA's source side reads a lane's candidates side by
 * side there. A copy, so the same values; in 4 x 4 blocks where the ranks come in fours. */
static void transpose_base(const double *restrict a, double *restrict t, i64 N, i64 R) {
    const i64 NN = N * N;
    for (i64 r = 0; r < R; r++)
        for (i64 i = 0; i < N; i++)
            for (i64 j = 0; j < N; j++) t[r * NN + j * N + i] = a[r * NN + i * N + j];
}
#if defined(VP_X86_SIMD)
/* 4 x 4 blocks: unpack pairs of rows, then swap 128-bit halves */
__attribute__((target("avx2"))) static void transpose_avx2(const double *restrict a, double *restrict t, i64 N, i64 R) {
    const i64 NN = N * N;
    for (i64 r = 0; r < R; r++) {
        const double *ar = a + r * NN;
        double *tr = t + r * NN;
        for (i64 i = 0; i < N; i += 4)
            for (i64 j = 0; j < N; j += 4) {
                const double *p = ar + i * N + j;
                const __m256d r0 = _mm256_loadu_pd(p), r1 = _mm256_loadu_pd(p + N), r2 = _mm256_loadu_pd(p + 2 * N),
                              r3 = _mm256_loadu_pd(p + 3 * N);
                const __m256d t0 = _mm256_unpacklo_pd(r0, r1), t1 = _mm256_unpackhi_pd(r0, r1);
                const __m256d t2 = _mm256_unpacklo_pd(r2, r3), t3 = _mm256_unpackhi_pd(r2, r3);
                double *q = tr + j * N + i;
                _mm256_storeu_pd(q, _mm256_permute2f128_pd(t0, t2, 0x20));
                _mm256_storeu_pd(q + N, _mm256_permute2f128_pd(t1, t3, 0x20));
                _mm256_storeu_pd(q + 2 * N, _mm256_permute2f128_pd(t0, t2, 0x31));
                _mm256_storeu_pd(q + 3 * N, _mm256_permute2f128_pd(t1, t3, 0x31));
            }
    }
}
#endif
static void transpose_rates(const double *restrict a, double *restrict t, i64 N, i64 R) {
#if defined(VP_X86_SIMD)
    if (N % 4 == 0 && cpu_has_avx2()) { transpose_avx2(a, t, N, R); return; }
#endif
    transpose_base(a, t, N, R);
}

/* the credits of the AA run, both layouts */
static void credit_rows(VP_CREDIT_ARGS) {
    credit_rows_values(N, G, g, R, use_w, wsc, nodes_on, gcons, power, rp, pp, mx, remmax, inv_tau, rem, pu, pv, nrow,
                       node_of, gof, rates_u, w, dgw, cred, credt);
    transpose_rates(cred, credt, N, R);
}


/* Eq. 6 scores are linear in D̂: subtract an activation's bytes per group pair from the shapes
 * with lanes on that pair. Bytes are whole numbers and shape entries small integers, so every
 * product and partial sum is an exact float64 integer (< 2^53): the kept scores equal a fresh
 * computation bit for bit (and the numpy path's). */
static void update_scores(double *scores, const i64 *so, const i64 *dso, const double *xo, i64 N, i64 G,
                          const i64 *gof, const i64 *col_ptr, const i64 *col_shape, const double *col_val,
                          double *dpair, i64 *touched) {
    i64 nt = 0;
    for (i64 k = 0; k < N; k++) {
        if (xo[k] <= 0) continue;
        i64 c = gof[so[k]] * G + gof[dso[k]];
        if (dpair[c] == 0.0) touched[nt++] = c;
        dpair[c] += xo[k];
    }
    for (i64 t = 0; t < nt; t++) {
        i64 c = touched[t];
        double dx = dpair[c];
        for (i64 e = col_ptr[c]; e < col_ptr[c + 1]; e++) scores[col_shape[e]] -= col_val[e] * dx;
        dpair[c] = 0.0;
    }
}

/* A family synthesized online from the group-level demand (ours; paper 000's catalog is static).
 * g layers, each a partial group-level matching: group pairs in descending remaining demand D̂
 * take the fastest path instance whose resources are still free (each cross pair once per
 * family); every layer is completed by intra-group replicas (a -> a, empty footprint) or, failing
 * that, replaced by an all-intra layer. Writes lane k (source group k / g) into syn_*; returns 0
 * when no family can be built. */
static int synth_family(i64 G, i64 g, const double *dg, const i64 *order, i64 norder,
                        const i64 *pi_ptr, const i64 *pi, const i64 *ir_ptr, const i64 *ir,
                        const i64 *intra_rep, char *rused, i64 *rtouched, char *pused,
                        i64 *lane_a, i64 *lane_d, i64 *lane_inst, i64 *srcfree, i64 *dstfree, i64 *outc) {
    i64 nl = 0, nt = 0;
    for (i64 a = 0; a < G; a++) outc[a] = 0;
    for (i64 layer = 0; layer < g; layer++) {
        const i64 start_nl = nl, start_nt = nt;
        for (i64 a = 0; a < G; a++) { srcfree[a] = 1; dstfree[a] = 1; }
        for (i64 o = 0; o < norder; o++) {
            const i64 c = order[o], a = c / G, d = c % G;
            if (!srcfree[a] || !dstfree[d] || (a != d && pused[c])) continue;
            for (i64 e = pi_ptr[c]; e < pi_ptr[c + 1]; e++) {
                const i64 r = pi[e];
                int ok = 1;
                for (i64 x = ir_ptr[r]; x < ir_ptr[r + 1]; x++) if (rused[ir[x]]) { ok = 0; break; }
                if (!ok) continue;
                for (i64 x = ir_ptr[r]; x < ir_ptr[r + 1]; x++) { rused[ir[x]] = 1; rtouched[nt++] = ir[x]; }
                srcfree[a] = 0; dstfree[d] = 0;
                if (a != d) pused[c] = 1;
                lane_a[nl] = a; lane_d[nl] = d; lane_inst[nl] = r; nl++;
                break;
            }
        }
        int complete = 1;
        for (i64 a = 0; a < G; a++) {
            if (srcfree[a] && dstfree[a] && intra_rep[a] >= 0) {
                srcfree[a] = 0; dstfree[a] = 0;
                lane_a[nl] = a; lane_d[nl] = a; lane_inst[nl] = intra_rep[a]; nl++;
            }
            if (srcfree[a] || dstfree[a]) complete = 0;
        }
        if (!complete) {  /* undo the layer; all-intra instead */
            for (i64 k = start_nl; k < nl; k++) {
                i64 c = lane_a[k] * G + lane_d[k];
                if (lane_a[k] != lane_d[k]) pused[c] = 0;
            }
            for (i64 t = start_nt; t < nt; t++) rused[rtouched[t]] = 0;
            nl = start_nl; nt = start_nt;
            for (i64 a = 0; a < G; a++) {
                if (intra_rep[a] < 0) goto fail;
                lane_a[nl] = a; lane_d[nl] = a; lane_inst[nl] = intra_rep[a]; nl++;
            }
        }
    }
    for (i64 t = 0; t < nt; t++) rused[rtouched[t]] = 0;
    for (i64 k = 0; k < nl; k++) if (lane_a[k] != lane_d[k]) pused[lane_a[k] * G + lane_d[k]] = 0;
    return 1;
fail:
    for (i64 t = 0; t < nt; t++) rused[rtouched[t]] = 0;
    for (i64 k = 0; k < nl; k++) if (lane_a[k] != lane_d[k]) pused[lane_a[k] * G + lane_d[k]] = 0;
    return 0;
}

/* Eq. 6 scores of every shape from the dense (GG x J) shape entries: Σ_k M_jk dsc_k over the
 * group pairs k in ascending order, skipping zero pairs -- the sums of the column loop, the same
 * additions in the same order for every shape -- with blocks of W shapes held in registers over
 * all pairs, so the scores are written once instead of once per pair. W is wide enough for
 * W / lanes independent accumulators per pair (an addition's latency is ~4 cycles: with one or two
 * chains the loop waits on it); every shape's sum is still one sequential chain, so the lane
 * width never changes a value. */
/* the pairs with demand (a zero pair adds nothing; skipping it keeps the column loop's sums) */
static i64 nonzero_pairs(const double *dsc, i64 GG, i64 *nzk) {
    i64 nk = 0;
    for (i64 k = 0; k < GG; k++) if (dsc[k] != 0.0) nzk[nk++] = k;
    return nk;
}

/* shapes j0 .. J-1 (the tail of a blocked loop): four at a time, then one at a time */
static void dense_tail(double *scores, const float *dense_val, const double *dsc, i64 J, i64 j0,
                       const i64 *nzk, i64 nk) {
    for (; j0 + 4 <= J; j0 += 4) {
        double a0 = 0.0, a1 = 0.0, a2 = 0.0, a3 = 0.0;
        for (i64 t = 0; t < nk; t++) {
            const double dk = dsc[nzk[t]];
            const float *row = dense_val + nzk[t] * J + j0;
            a0 += (double)row[0] * dk; a1 += (double)row[1] * dk; a2 += (double)row[2] * dk; a3 += (double)row[3] * dk;
        }
        scores[j0] = a0; scores[j0 + 1] = a1; scores[j0 + 2] = a2; scores[j0 + 3] = a3;
    }
    for (; j0 < J; j0++) {
        double acc = 0.0;
        for (i64 t = 0; t < nk; t++) acc += (double)dense_val[nzk[t] * J + j0] * dsc[nzk[t]];
        scores[j0] = acc;
    }
}

/* The blocked loop for vectors of L doubles (type VT and its intrinsics): blocks of 8 L shapes in
 * 8 independent accumulators, then up to 7 blocks of L in one pass, then dense_tail. */
#define VP_DENSE_SCORES(VT, L, ZERO, SET1, LOAD, MUL, ADD, STORE)                                      \
    const i64 nk = nonzero_pairs(dsc, GG, nzk);                                                      \
    i64 j0 = 0;                                                                                      \
    for (; j0 + 8 * (L) <= J; j0 += 8 * (L)) {                                                       \
        VT a[8];                                                                                     \
        for (int u = 0; u < 8; u++) a[u] = ZERO();                                                   \
        for (i64 t = 0; t < nk; t++) {                                                               \
            const VT dk = SET1(dsc[nzk[t]]);                                                         \
            const float *row = dense_val + nzk[t] * J + j0;                                          \
            for (int u = 0; u < 8; u++) a[u] = ADD(a[u], MUL(LOAD(row + (L) * u), dk));              \
        }                                                                                            \
        for (int u = 0; u < 8; u++) STORE(scores + j0 + (L) * u, a[u]);                              \
    }                                                                                                \
    const int nb = (int)((J - j0) / (L));                                                            \
    if (nb > 0) {                                                                                    \
        VT a[7];                                                                                     \
        for (int u = 0; u < nb; u++) a[u] = ZERO();                                                  \
        for (i64 t = 0; t < nk; t++) {                                                               \
            const VT dk = SET1(dsc[nzk[t]]);                                                         \
            const float *row = dense_val + nzk[t] * J + j0;                                          \
            for (int u = 0; u < nb; u++) a[u] = ADD(a[u], MUL(LOAD(row + (L) * u), dk));             \
        }                                                                                            \
        for (int u = 0; u < nb; u++) STORE(scores + j0 + (L) * u, a[u]);                             \
        j0 += (L) * nb;                                                                              \
    }                                                                                                \
    dense_tail(scores, dense_val, dsc, J, j0, nzk, nk);

#if defined(__SSE2__)
/* the shape entries are float32 (small whole numbers: exact), widened to float64 as they load */
static inline __m128d vp_load2f(const float *p) { return _mm_cvtps_pd(_mm_castsi128_ps(_mm_loadl_epi64((const __m128i *)p))); }
#endif

static void dense_scores_base(double *restrict scores, const float *restrict dense_val, const double *restrict dsc,
                              i64 GG, i64 J, i64 *restrict nzk) {
#if defined(__SSE2__)
    VP_DENSE_SCORES(__m128d, 2, _mm_setzero_pd, _mm_set1_pd, vp_load2f, _mm_mul_pd, _mm_add_pd, _mm_storeu_pd)
#else
    dense_tail(scores, dense_val, dsc, J, 0, nzk, nonzero_pairs(dsc, GG, nzk));
#endif
}

#if defined(VP_X86_SIMD)
#include <immintrin.h>
/* The same loop compiled for AVX2 and AVX-512F, chosen at run time where the CPU has them: the
 * build stays runnable on any x86-64 (no -march). Mul and add stay separate instructions (the
 * targets do not enable FMA), so every value equals the scalar loop's. */
__attribute__((target("avx2"))) static inline __m256d vp_load4f(const float *p) { return _mm256_cvtps_pd(_mm_loadu_ps(p)); }
__attribute__((target("avx2"))) static void dense_scores_avx2(double *restrict scores, const float *restrict dense_val,
                                                              const double *restrict dsc, i64 GG, i64 J,
                                                              i64 *restrict nzk) {
    VP_DENSE_SCORES(__m256d, 4, _mm256_setzero_pd, _mm256_set1_pd, vp_load4f, _mm256_mul_pd, _mm256_add_pd,
                    _mm256_storeu_pd)
}
#endif

#if defined(VP_X86_SIMD)
__attribute__((target("avx512f"))) static inline __m512d vp_load8f(const float *p) { return _mm512_cvtps_pd(_mm256_loadu_ps(p)); }
__attribute__((target("avx512f"))) static void dense_scores_avx512(double *restrict scores,
                                                                   const float *restrict dense_val,
                                                                   const double *restrict dsc, i64 GG, i64 J,
                                                                   i64 *restrict nzk) {
    VP_DENSE_SCORES(__m512d, 8, _mm512_setzero_pd, _mm512_set1_pd, vp_load8f, _mm512_mul_pd, _mm512_add_pd,
                    _mm512_storeu_pd)
}
#endif

static void dense_scores(double *restrict scores, const float *restrict dense_val, const double *restrict dsc,
                         i64 GG, i64 J, i64 *restrict nzk) {
#if defined(VP_X86_SIMD)
    if (cpu_has_avx512f()) { dense_scores_avx512(scores, dense_val, dsc, GG, J, nzk); return; }
    if (cpu_has_avx2()) { dense_scores_avx2(scores, dense_val, dsc, GG, J, nzk); return; }
#endif
    dense_scores_base(scores, dense_val, dsc, GG, J, nzk);
}

/* the largest of x[0..7] (a maximum is the same in any order) */
static inline double max8(const double *x) {
    const double a = x[0] > x[1] ? x[0] : x[1], b = x[2] > x[3] ? x[2] : x[3];
    const double c = x[4] > x[5] ? x[4] : x[5], d = x[6] > x[7] ? x[6] : x[7];
    const double ab = a > b ? a : b, cd = c > d ? c : d;
    return ab > cd ? ab : cd;
}

/* The `want` best shapes into top[] (best first, ties by lower index: numpy's stable argsort of
 * -scores) among j = cand[0 .. n-1] (ascending indices) or, cand NULL, j = 0 .. n-1: one pass with
 * insertion into the short sorted list; returns min(want, n). */
static i64 best_shapes(const double *scores, const i64 *cand, i64 n, i64 want, i64 *top) {
    i64 cnt = 0;
    double thr = 0.0;  /* the last kept score once the list is full */
    for (i64 c = 0; c < n; c++) {
        if (!cand && cnt == want && (c & 7) == 0 && c + 8 <= n && !(max8(scores + c) > thr)) {
            c += 7;  /* no score of these 8 beats the list's last: none would enter */
            continue;
        }
        const i64 j = cand ? cand[c] : c;
        const double sj = scores[j];
        if (cnt == want && !(sj > thr)) continue;
        i64 pos = cnt < want ? cnt : want - 1;
        while (pos > 0 && sj > scores[top[pos - 1]]) { top[pos] = top[pos - 1]; pos--; }
        top[pos] = j;
        if (cnt < want) cnt++;
        if (cnt == want) thr = scores[top[want - 1]];
    }
    return cnt;
}

/* shape a ranks below shape b: a lower score, or the same score and a higher index */
static inline int ranks_below(const double *scores, i64 a, i64 b) {
    return scores[a] < scores[b] || (scores[a] == scores[b] && a > b);
}

static void sift_down(const double *scores, i64 *h, i64 n, i64 i) {
    for (;;) {
        i64 l = 2 * i + 1, m = i;
        if (l < n && ranks_below(scores, h[l], h[m])) m = l;
        if (l + 1 < n && ranks_below(scores, h[l + 1], h[m])) m = l + 1;
        if (m == i) return;
        const i64 t = h[i]; h[i] = h[m]; h[m] = t;
        i = m;
    }
}

/* The shape candidates (ours): the `want` best of scores[0 .. J-1] (the set best_shapes would
 * give: higher score, ties by lower index) in ascending index order. The want-th largest maximum
 * of blocks of 8 shapes, lo, is a floor: at least `want` shapes score >= lo, so a shape below it
 * is never among the best, and only blocks whose maximum reaches lo are read. Their shapes at or
 * above lo (ascending) go through a heap whose root is the lowest-ranked kept one. Work buffers:
 * bmax J / 8 + want doubles, lst J indices, mark J bytes (zero, left zero). Returns min(want, J). */
static i64 candidate_shapes(const double *scores, i64 J, i64 want, i64 *out, double *bmax, i64 *lst, char *mark) {
    double lo = -HUGE_VAL;
    const i64 nb = J / 8;
    i64 nl = 0;
    if (nb >= want) {
        for (i64 b = 0; b < nb; b++) bmax[b] = max8(scores + 8 * b);
        double *h = bmax + nb;  /* min-heap of the `want` largest block maxima: its root is lo */
        for (i64 b = 0; b < nb; b++) {
            const double x = bmax[b];
            if (b >= want && !(x > h[0])) continue;
            i64 i = b < want ? b : 0;
            if (b < want) {  /* sift up */
                while (i > 0 && h[(i - 1) / 2] > x) { h[i] = h[(i - 1) / 2]; i = (i - 1) / 2; }
            } else {  /* replace the root, sift down */
                for (;;) {
                    const i64 l = 2 * i + 1;
                    if (l >= want) break;
                    const i64 m = l + 1 < want && h[l + 1] < h[l] ? l + 1 : l;
                    if (!(h[m] < x)) break;
                    h[i] = h[m];
                    i = m;
                }
            }
            h[i] = x;
        }
        lo = h[0];
        for (i64 b = 0; b < nb; b++)
            if (bmax[b] >= lo)
                for (i64 j = 8 * b; j < 8 * b + 8; j++) if (scores[j] >= lo) lst[nl++] = j;
        for (i64 j = 8 * nb; j < J; j++) if (scores[j] >= lo) lst[nl++] = j;
    } else {
        for (i64 j = 0; j < J; j++) lst[nl++] = j;
    }
    if (nl <= want) {
        memcpy(out, lst, sizeof(i64) * nl);
        return nl;
    }
    i64 n = 0;
    for (i64 p = 0; p < nl; p++) {  /* lst ascending: a later shape enters only with a higher score */
        const i64 j = lst[p];
        if (n < want) {  /* fill, then heapify once */
            out[n++] = j;
            if (n == want)
                for (i64 i = n / 2 - 1; i >= 0; i--) sift_down(scores, out, n, i);
            continue;
        }
        if (!(scores[j] > scores[out[0]])) continue;
        out[0] = j;
        sift_down(scores, out, n, 0);
    }
    /* ascending index (ties among candidates go to the lower one): mark, then collect from lst */
    for (i64 t = 0; t < n; t++) mark[out[t]] = 1;
    i64 m = 0;
    for (i64 p = 0; p < nl; p++)
        if (mark[lst[p]]) { mark[lst[p]] = 0; out[m++] = lst[p]; }
    return n;
}

/* The largest entry of x (>= 0; 0 when empty): eight running maxima, since a maximum is the
 * same in any order and one chain would wait on every comparison. */
static double max_entry(const double *x, i64 n) {
    double m[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    i64 k = 0;
    for (; k + 8 <= n; k += 8)
        for (int u = 0; u < 8; u++) m[u] = x[k + u] > m[u] ? x[k + u] : m[u];
    for (; k < n; k++) m[0] = x[k] > m[0] ? x[k] : m[0];
    double r = 0.0;
    for (int u = 0; u < 8; u++) r = m[u] > r ? m[u] : r;
    return r;
}

/* The sums the loop keeps while it drains rem: rank loads out (ls) and in (lr), D̂ per group
 * pair (dg) and every node's bytes to (tro) and from (tri) other nodes. rem holds whole bytes
 * (< 2^53) and every activation moves whole bytes, so the running sums equal a fresh pass over
 * rem in any order, bit for bit. */
static void row_sums(const double *rem, i64 N, i64 G, i64 K, const i64 *gof, const i64 *node_of, double *ls,
                     double *lr, double *dg, double *tro, double *tri) {
    for (i64 i = 0; i < N; i++) { ls[i] = 0.0; lr[i] = 0.0; }
    for (i64 k = 0; k < G * G; k++) dg[k] = 0.0;
    for (i64 c = 0; c < K; c++) { tro[c] = 0.0; tri[c] = 0.0; }
    for (i64 i = 0; i < N; i++) {
        const double *ri = rem + i * N;
        double *dgi = dg + gof[i] * G;
        double si = 0.0;
        for (i64 j = 0; j < N; j++) {
            const double r = ri[j];
            si += r; lr[j] += r;
            dgi[gof[j]] += r;
            if (node_of[j] != node_of[i]) { tro[node_of[i]] += r; tri[node_of[j]] += r; }
        }
        ls[i] = si;
    }
}

/* Subtracts one activation (lane k moves xo[k] bytes so[k] -> dso[k]) from rem and the running
 * sums of row_sums; returns the bytes moved. */
static double drain_lanes(double *rem, const i64 *so, const i64 *dso, const double *xo, i64 N, i64 G, const i64 *gof,
                          const i64 *node_of, double *ls, double *lr, double *dg, double *tro, double *tri) {
    double moved = 0.0;
    for (i64 k = 0; k < N; k++) {
        const double x = xo[k];
        const i64 s = so[k], d = dso[k];
        rem[s * N + d] -= x;
        moved += x;
        ls[s] -= x; lr[d] -= x;
        dg[gof[s] * G + gof[d]] -= x;
        if (node_of[s] != node_of[d]) { tro[node_of[s]] -= x; tri[node_of[d]] -= x; }
    }
    return moved;
}

/* τ of the invocation (variopath.quantum_s, the same float64 operations): the busiest rank at the
 * fastest rate or the busiest rank group's traffic to (from) other groups at its best
 * contention-free rate, whichever is longer, over K_target = k N rounds (k_rounds = k N). The
 * sums are whole bytes, exact in any order; a group without cross lanes (cap 0) adds no bound. */
static double base_quantum(const double *ls, const double *lr, const double *dg, i64 N, i64 G, const double *cap_out,
                           const double *cap_in, double max_rate, double k_rounds) {
    double mx = 0.0;
    for (i64 i = 0; i < N; i++) { if (ls[i] > mx) mx = ls[i]; if (lr[i] > mx) mx = lr[i]; }
    double t_est = mx / max_rate;
    for (i64 a = 0; a < G; a++) {
        double so = 0.0, si = 0.0;
        for (i64 d = 0; d < G; d++) if (d != a) { so += dg[a * G + d]; si += dg[d * G + a]; }
        if (cap_out[a] > 0 && so / cap_out[a] > t_est) t_est = so / cap_out[a];
        if (cap_in[a] > 0 && si / cap_in[a] > t_est) t_est = si / cap_in[a];
    }
    const double tau = t_est / k_rounds;
    return tau > 1e-15 ? tau : 1e-15;
}

/* EVALUATE (Eqs. 9-10) of the bound channels (lane k: sb[k] -> db[k] at rate id rid[k]) on the
 * remaining demand: x_k = min(cap(rate), rem), utility = Σ x (x w when weighted) / (λ + max x / bw),
 * cap and 1 / bw per distinct rate, computed once per τ (the same values as per lane).
 * VP_BEST_CHANNEL(LANE) is the best of the pool rows prow[0 .. npool-1]: the index of the first
 * one with the largest utility (-1 when npool = 0), its utility in *best. LANE(s, d, rid, k, xw, t)
 * gives lane k's bytes (x w) and time. Four rows at a time: each row's bytes are still summed lane
 * by lane in order, but the rows' additions overlap instead of waiting on each other. */
#define VP_BEST_CHANNEL(LANE) \
    i64 h = -1; \
    double hu = 0.0; \
    i64 b = 0; \
    for (; b + 4 <= npool; b += 4) { \
        const i64 r0 = prow[b], r1 = prow[b + 1], r2 = prow[b + 2], r3 = prow[b + 3]; \
        const i64 *s0 = rsrc + r0 * N, *d0 = rdst + r0 * N, *i0 = fam_rid + rfam[r0] * N; \
        const i64 *s1 = rsrc + r1 * N, *d1 = rdst + r1 * N, *i1 = fam_rid + rfam[r1] * N; \
        const i64 *s2 = rsrc + r2 * N, *d2 = rdst + r2 * N, *i2 = fam_rid + rfam[r2] * N; \
        const i64 *s3 = rsrc + r3 * N, *d3 = rdst + r3 * N, *i3 = fam_rid + rfam[r3] * N; \
        double use0 = 0.0, use1 = 0.0, use2 = 0.0, use3 = 0.0, dur0 = 0.0, dur1 = 0.0, dur2 = 0.0, dur3 = 0.0; \
        for (i64 k = 0; k < N; k++) { \
            double xw0, t0, xw1, t1, xw2, t2, xw3, t3; \
            LANE(s0, d0, i0, k, xw0, t0); \
            LANE(s1, d1, i1, k, xw1, t1); \
            LANE(s2, d2, i2, k, xw2, t2); \
            LANE(s3, d3, i3, k, xw3, t3); \
            use0 += xw0; use1 += xw1; use2 += xw2; use3 += xw3; \
            if (t0 > dur0) dur0 = t0; \
            if (t1 > dur1) dur1 = t1; \
            if (t2 > dur2) dur2 = t2; \
            if (t3 > dur3) dur3 = t3; \
        } \
        const double u0 = use0 / (lambda + dur0 + 1e-300), u1 = use1 / (lambda + dur1 + 1e-300); \
        const double u2 = use2 / (lambda + dur2 + 1e-300), u3 = use3 / (lambda + dur3 + 1e-300); \
        if (uout) { uout[b] = u0; uout[b + 1] = u1; uout[b + 2] = u2; uout[b + 3] = u3; } \
        if (h < 0 || u0 > hu) { hu = u0; h = b; } \
        if (u1 > hu) { hu = u1; h = b + 1; } \
        if (u2 > hu) { hu = u2; h = b + 2; } \
        if (u3 > hu) { hu = u3; h = b + 3; } \
    } \
    for (; b < npool; b++) { \
        const i64 row = prow[b]; \
        const i64 *sr = rsrc + row * N, *dr = rdst + row * N, *ir = fam_rid + rfam[row] * N; \
        double use = 0.0, dur = 0.0; \
        for (i64 k = 0; k < N; k++) { \
            double xw, t; \
            LANE(sr, dr, ir, k, xw, t); \
            use += xw; \
            if (t > dur) dur = t; \
        } \
        const double u = use / (lambda + dur + 1e-300); \
        if (uout) uout[b] = u; \
        if (h < 0 || u > hu) { hu = u; h = b; } \
    } \
    *best = hu; \
    return h;

/* One lane's terms: x = min(cap, rem) bytes (x w when weighted) and its time x / bw. */
static inline void lane_term(double rr, double cap, double inv, double wo, int wsel, double *xw, double *t) {
    const double x = cap < rr ? cap : rr;
    *xw = wsel ? x * wo : x;
    *t = x * inv;
}

/* a lane's terms from the remaining demand and the per-rate caps */
#define VP_LANE_DIRECT(s, d, rid, k, xw, t) do { \
    const i64 o_ = (s)[k] * N + (d)[k]; \
    lane_term(rem[o_], capr[(rid)[k]], invr[(rid)[k]], w[o_], wsel, &(xw), &(t)); \
} while (0)

/* a lane's terms read from the lane-term tables (lane_terms) */
#define VP_LANE_TABLE(s, d, rid, k, xw, t) do { \
    const i64 o_ = (rid)[k] * NN + (s)[k] * N + (d)[k]; \
    xw = xwt[o_]; \
    t = tt[o_]; \
} while (0)

static i64 best_channel(const i64 *prow, i64 npool, const i64 *rsrc, const i64 *rdst, const i64 *rfam,
                        const i64 *fam_rid, const double *rem, const double *w, int wsel, const double *capr,
                        const double *invr, i64 N, double lambda, double *best, double *uout) {
    VP_BEST_CHANNEL(VP_LANE_DIRECT)
}

/* The lane terms of EVALUATE per (rate id, source, destination) for one AA run's channels: the
 * lane_term of every entry. Worth building when the pool holds more lanes than the table has entries
 * (16 GPUs: 2 rates x 256 pairs against ~20 rows x 16 lanes, each evaluated twice with reuse);
 * lane_terms_at keeps the entries of drained pairs current between reuses. */
static void lane_terms_at(const i64 *so, const i64 *dso, i64 n, const double *rem, const double *w, int wsel,
                          const double *capr, const double *invr, i64 N, i64 R, double *xw, double *tt) {
    const i64 NN = N * N;
    for (i64 k = 0; k < n; k++) {
        const i64 o = so[k] * N + dso[k];
        for (i64 r = 0; r < R; r++) lane_term(rem[o], capr[r], invr[r], w[o], wsel, xw + r * NN + o, tt + r * NN + o);
    }
}

/* lane_terms: every entry's lane_term, compiled for SSE2, AVX2 and AVX-512 vectors (elementwise, so
 * the same values) and chosen at run time */
#define VP_LANE_TERMS_ARGS const double *restrict rem, const double *restrict w, int wsel, const double *capr, \
    const double *invr, i64 N, i64 R, double *restrict xw, double *restrict tt
#define VP_LANE_TERMS \
    const i64 NN = N * N; \
    for (i64 r = 0; r < R; r++) { \
        const double cap = capr[r], inv = invr[r]; \
        double *restrict xr = xw + r * NN, *restrict tr = tt + r * NN; \
        for (i64 o = 0; o < NN; o++) lane_term(rem[o], cap, inv, w[o], wsel, xr + o, tr + o); \
    }
static void lane_terms_base(VP_LANE_TERMS_ARGS) { VP_LANE_TERMS }
#if defined(VP_X86_SIMD)
__attribute__((target("avx512f"))) static void lane_terms_avx512(VP_LANE_TERMS_ARGS) { VP_LANE_TERMS }
__attribute__((target("avx2"))) static void lane_terms_avx2(VP_LANE_TERMS_ARGS) { VP_LANE_TERMS }
#endif
static void lane_terms(VP_LANE_TERMS_ARGS) {
#if defined(VP_X86_SIMD)
    if (cpu_has_avx512f()) { lane_terms_avx512(rem, w, wsel, capr, invr, N, R, xw, tt); return; }
    if (cpu_has_avx2()) { lane_terms_avx2(rem, w, wsel, capr, invr, N, R, xw, tt); return; }
#endif
    lane_terms_base(rem, w, wsel, capr, invr, N, R, xw, tt);
}
#undef VP_LANE_TERMS
#undef VP_LANE_TERMS_ARGS

/* best_channel on the lane terms: per lane two loads instead of the rate lookups and products
 * (the same sums in the same order, so the same utilities). */
static i64 best_channel_terms(const i64 *prow, i64 npool, const i64 *rsrc, const i64 *rdst, const i64 *rfam,
                              const i64 *fam_rid, const double *xwt, const double *tt, i64 N, double lambda,
                              double *best, double *uout) {
    const i64 NN = N * N;
    VP_BEST_CHANNEL(VP_LANE_TABLE)
}
#undef VP_BEST_CHANNEL
#undef VP_LANE_DIRECT
#undef VP_LANE_TABLE

/* EVALUATE of the pool: on the lane-term tables when this AA run built them, else directly. */
static i64 pool_best(int terms, const i64 *prow, i64 npool, const i64 *rsrc, const i64 *rdst, const i64 *rfam,
                     const i64 *fam_rid, const double *rem, const double *w, int wsel, const double *capr,
                     const double *invr, const double *xw, const double *tt, i64 N, double lambda, double *best,
                     double *uout) {
    if (terms) return best_channel_terms(prow, npool, rsrc, rdst, rfam, fam_rid, xw, tt, N, lambda, best, uout);
    return best_channel(prow, npool, rsrc, rdst, rfam, fam_rid, rem, w, wsel, capr, invr, N, lambda, best, uout);
}

/* F_B (Eq. 8) of one binding: its credits summed lane by lane in order; < 0 exactly when it keeps
 * a self-pair (that credit is FORBID, every other one >= 0). */
static inline double binding_credit(const i64 *sb, const i64 *db, const i64 *rid, const double *cred, i64 N) {
    const i64 NN = N * N;
    double s = 0.0;
    for (i64 k = 0; k < N; k++) s += cred[rid[k] * NN + sb[k] * N + db[k]];
    return s;
}

/* Early stop of starts (ours): one family's starts in row order; a start improves when its F_B
 * beats the family's best so far by more than 1e-12 relative (the AA's convergence test); after
 * `stall` starts in a row without improvement the rest are dropped (F set to -1: no channel).
 * *since / *best carry the family's state; returns 1 once stopped. */
static inline int stall_step(double fb, int first, i64 stall, double *best, i64 *since) {
    if (first || fb > *best * (1 + 1e-12) + 1e-300) { *best = fb; *since = 0; return 0; }
    return ++*since >= stall;
}

static void stall_mask(i64 B, const i64 *rfam, i64 stall, double *f) {
    for (i64 b0 = 0, b1; b0 < B; b0 = b1) {
        for (b1 = b0 + 1; b1 < B && rfam[b1] == rfam[b0]; b1++) {}
        double best = 0.0;
        i64 since = 0, b = b0;
        while (b < b1 && !stall_step(f[b], b == b0, stall, &best, &since)) b++;
        for (b++; b < b1; b++) f[b] = -1.0;
    }
}

/* One AA sweep per start, a family's starts in order (two rows per call: rows are independent,
 * so a row swept past the stop is simply dropped), F_B after each, stopped as stall_mask does. */
static void aa_starts_until_stall(i64 B, i64 N, i64 G, i64 g, i64 P, int g4c, const i64 *rfam, const i64 *fam_rid,
                                  const i64 *fam_in, const i64 *groups, const double *cred, const double *credt,
                                  const i64 *perms, double *v, i64 *rsrc, i64 *rdst, i64 stall, double *f) {
    for (i64 b0 = 0, b1; b0 < B; b0 = b1) {
        for (b1 = b0 + 1; b1 < B && rfam[b1] == rfam[b0]; b1++) {}
        double best = 0.0;
        i64 since = 0, b = b0;
        int stopped = 0;
        while (b < b1 && !stopped) {
            const i64 nb = b + 2 <= b1 ? 2 : 1;
            aa_sweep(nb, N, G, g, P, g4c, rfam + b, fam_rid, fam_in, groups, cred, credt, perms, v, rsrc + b * N,
                     rdst + b * N);
            for (i64 t = b; t < b + nb; t++) {
                if (stopped) { f[t] = -1.0; continue; }
                f[t] = binding_credit(rsrc + t * N, rdst + t * N, fam_rid + rfam[t] * N, cred, N);
                stopped = stall_step(f[t], t == b0, stall, &best, &since);
            }
            b += nb;
        }
        for (; b < b1; b++) f[b] = -1.0;
    }
}

/* Warm starts (ours): after an AA run, each catalog family of the batch remembers its best W
 * distinct bindings among the channels (pool rows) by EVALUATE utility, ties by row order; the
 * next AA run of the family starts from them. A family without a channel in this run keeps what it
 * had; the synthesized family (index F) changes between runs and remembers nothing. The pool rows
 * of one family are consecutive. */
static void remember_bindings(i64 npool, const i64 *prow, const double *upool, const i64 *rfam, const i64 *rsrc,
                              const i64 *rdst, i64 N, i64 W, i64 F, i64 *wdst, i64 *wcnt, i64 *wrank) {
    for (i64 p0 = 0, p1; p0 < npool; p0 = p1) {
        const i64 fi = rfam[prow[p0]];
        for (p1 = p0 + 1; p1 < npool && rfam[prow[p1]] == fi; p1++) {}
        if (fi == F) continue;
        i64 n = 0;  /* wrank: the best n pool indices so far, best first */
        for (i64 p = p0; p < p1; p++) {
            const i64 *sp = rsrc + prow[p] * N, *dp_ = rdst + prow[p] * N;
            int dup = 0;
            for (i64 t = 0; t < n && !dup; t++) {
                const i64 q = prow[wrank[t]];
                dup = !memcmp(sp, rsrc + q * N, sizeof(i64) * N) && !memcmp(dp_, rdst + q * N, sizeof(i64) * N);
            }
            if (dup) continue;  /* the same binding again: its utility is the same */
            i64 pos = n < W ? n : W - 1;
            if (n == W && !(upool[p] > upool[wrank[W - 1]])) continue;
            while (pos > 0 && upool[p] > upool[wrank[pos - 1]]) { wrank[pos] = wrank[pos - 1]; pos--; }
            wrank[pos] = p;
            if (n < W) n++;
        }
        for (i64 t = 0; t < n; t++)  /* destinations only: they are all a start is read for */
            memcpy(wdst + (fi * W + t) * N, rdst + prow[wrank[t]] * N, sizeof(i64) * N);
        wcnt[fi] = n;
    }
}

/* f[b] = -1 for the rows whose binding keeps a self-pair (source = destination on a lane), else 0;
 * a plain loop compiled for SSE2, AVX2 and AVX-512 (integer compares: the same flags). */
#define VP_SELFPAIR_FLAGS \
for (i64 b = 0; b < B; b++) { \
    const i64 *sb = rsrc + b * N, *db = rdst + b * N; \
    int selfpair = 0; \
    for (i64 k = 0; k < N; k++) selfpair |= sb[k] == db[k]; \
    f[b] = selfpair ? -1.0 : 0.0; \
}
#define VP_SELFPAIR_ARGS i64 B, i64 N, const i64 *restrict rsrc, const i64 *restrict rdst, double *restrict f
static void selfpair_flags_base(VP_SELFPAIR_ARGS) { VP_SELFPAIR_FLAGS }
#if defined(VP_X86_SIMD)
__attribute__((target("avx512f"))) static void selfpair_flags_avx512(VP_SELFPAIR_ARGS) { VP_SELFPAIR_FLAGS }
__attribute__((target("avx2"))) static void selfpair_flags_avx2(VP_SELFPAIR_ARGS) { VP_SELFPAIR_FLAGS }
#endif
#undef VP_SELFPAIR_FLAGS

static void selfpair_flags(VP_SELFPAIR_ARGS) {
#if defined(VP_X86_SIMD)
    if (cpu_has_avx512f()) { selfpair_flags_avx512(B, N, rsrc, rdst, f); return; }
    if (cpu_has_avx2()) { selfpair_flags_avx2(B, N, rsrc, rdst, f); return; }
#endif
    selfpair_flags_base(B, N, rsrc, rdst, f);
}
#undef VP_SELFPAIR_ARGS

static const double *sort_key;
static int by_key_desc(const void *x, const void *y) {
    const i64 a = *(const i64 *)x, b = *(const i64 *)y;
    if (sort_key[a] > sort_key[b]) return -1;
    if (sort_key[a] < sort_key[b]) return 1;
    return (a > b) - (a < b);
}

/* Interface version of vp_plan (argument list and parameter slots); kernel.py refuses a build
 * whose version differs (a stale build from older sources), so it never calls with the wrong arguments. */
#define VP_ABI 7
VP_EXPORT i64 vp_abi(void) { return VP_ABI; }

/* -DVP_PHASE_TICKS: time-stamp-counter ticks per phase of vp_plan (benchmarks/variopath_kernel_pairs.py
 * --phases reads them with vp_phase_ticks); the default build has no probes. Phases, in VP_PHASES order. */
#define VP_PHASES 10
#if defined(VP_PHASE_TICKS) && defined(__x86_64__)
#include <x86intrin.h>
static unsigned long long vp_ticks[VP_PHASES], vp_ticks_n[VP_PHASES], vp_ticks_last;
#define VP_TICK_START() (vp_ticks_last = __rdtsc())
#define VP_TICK(k) do { const unsigned long long now_ = __rdtsc(); vp_ticks[k] += now_ - vp_ticks_last; \
                        vp_ticks_n[k]++; vp_ticks_last = now_; } while (0)
/* out[k] = ticks of phase k, out[VP_PHASES + k] = its count since the last read (then reset) */
VP_EXPORT void vp_phase_ticks(unsigned long long *out) {
    for (int k = 0; k < VP_PHASES; k++) {
        out[k] = vp_ticks[k]; out[VP_PHASES + k] = vp_ticks_n[k];
        vp_ticks[k] = vp_ticks_n[k] = 0;
    }
}
#else
#define VP_TICK_START() ((void)0)
#define VP_TICK(k) ((void)0)
#endif

VP_EXPORT i64 vp_plan(const i64 *ip, double *dp, const i64 *groups, const i64 *gof,
            const i64 *restrict col_ptr, const i64 *restrict col_shape, const double *restrict col_val,
            const double *restrict col_rate, const float *restrict dense_val, const double *restrict dense_rate,
            const i64 *fam_off, const i64 *fam_rid, const double *rates_u,
            const double *fam_rate, const i64 *fam_in, const i64 *start_dst,
            const i64 *perms, const double *cap_out, const double *cap_in,
            const i64 *pi_ptr, const i64 *pi, const i64 *ir_ptr, const i64 *ir, const i64 *intra_rep,
            const double *inst_rate, const i64 *inst_rid, const i64 *node_of, const double *node_cap_out,
            const double *node_cap_in, double *fam_rate_w, i64 *fam_in_w, i64 *fam_rid_w,
            i64 *syn_inst, i64 *out_inst,
            double *rem, double *out_x, i64 *out_src, i64 *out_dst, i64 *out_fam, i64 *status) {
    const i64 N = ip[I_N], G = ip[I_G], g = ip[I_g], J = ip[I_J], P = ip[I_P], S = ip[I_S];
    const i64 sweeps = ip[I_SWEEPS], beam = ip[I_BEAM], reuse = ip[I_REUSE], maxq = ip[I_MAXQ];
    const i64 weighted = ip[I_WEIGHTED], capped = ip[I_CAPPED], max_acts = ip[I_MAXACTS], max_rows = ip[I_MAXROWS];
    const i64 rank_on = ip[I_RANKP_ON], dense = ip[I_DENSE], row_budget = ip[I_ROWBUDGET], R = ip[I_R];
    const i64 synth = ip[I_SYNTH], F = ip[I_F], nres = ip[I_NRES];
    const i64 power = ip[I_POWER], wscore = ip[I_WSCORE], K = ip[I_NNODES];
    const i64 W = ip[I_WARM], stall = ip[I_STALL], C = ip[I_NCAND], rescore = ip[I_RESCORE];
    const double coarse = dp[D_COARSE], max_rate = dp[D_MAXRATE];
    const double rp = dp[D_RANKP], pp = dp[D_PAIRP], lambda = dp[D_OVERHEAD], reuse_floor = dp[D_REUSEFLOOR];
    const double np_ = dp[D_NODEP];
    const i64 NN = N * N, GG = G * G;

    double *w = calloc(NN, sizeof(double));  /* read by lane_term even when unweighted (then unused) */
    double *cred = malloc(sizeof(double) * NN * R), *credt = malloc(sizeof(double) * NN * R);
    double *nterm = malloc(sizeof(double) * K * K), *nrow = malloc(sizeof(double) * K * N);
    char *rused = calloc(nres + 1, 1), *pused = calloc(GG, 1);
    i64 *rtouched = malloc(sizeof(i64) * (nres + N + 1)), *order = malloc(sizeof(i64) * GG);
    i64 *la = malloc(sizeof(i64) * N), *ld = malloc(sizeof(i64) * N), *li = malloc(sizeof(i64) * N);
    i64 *srcfree = malloc(sizeof(i64) * G), *dstfree = malloc(sizeof(i64) * G), *outc = malloc(sizeof(i64) * G);
    i64 *slot_dst = malloc(sizeof(i64) * N);  /* destination group of each synthesized lane */
    double *ls = malloc(sizeof(double) * N), *lr = malloc(sizeof(double) * N);
    double *dg = malloc(sizeof(double) * GG), *scores = malloc(sizeof(double) * J);
    double *dgw = malloc(sizeof(double) * GG);  /* pressure-weighted D̂ (shape_score weighted) */
    double *pu = malloc(sizeof(double) * N), *pv = malloc(sizeof(double) * N);
    double *t_out = malloc(sizeof(double) * (K + 1)), *t_in = malloc(sizeof(double) * (K + 1));
    i64 *top = malloc(sizeof(i64) * (beam + 1));
    i64 *rsrc = malloc(sizeof(i64) * max_rows * N), *rdst = malloc(sizeof(i64) * max_rows * N);
    i64 *rfam = malloc(sizeof(i64) * max_rows);
    double *f = malloc(sizeof(double) * max_rows), *fbest = malloc(sizeof(double) * max_rows);
    double *v = malloc(sizeof(double) * g * g);
    /* pool of bound channels for reuse: the ok rows of the last AA run (their rsrc / rdst rows) */
    i64 *prow = malloc(sizeof(i64) * max_rows);
    double *capr = malloc(sizeof(double) * R), *invr = malloc(sizeof(double) * R), *flr = malloc(sizeof(double) * R);
    /* EVALUATE's lane terms (lane_terms), used when the pool has more lanes than they have entries */
    double *xw = malloc(sizeof(double) * R * NN), *tt = malloc(sizeof(double) * R * NN);
    int terms = 0;
    i64 npool = 0, reuse_left = 0;
    /* warm starts (ours): each family's best W bindings of its last AA run in this plan */
    i64 *wdst = malloc(sizeof(i64) * (W ? (F + 1) * W * N : 1));
    i64 *wcnt = calloc(F + 1, sizeof(i64)), *wrank = malloc(sizeof(i64) * (W + 1));
    double *upool = malloc(sizeof(double) * max_rows);
    /* shape candidates (ours): the C best shapes of the last full scoring, ascending index */
    i64 *cand = malloc(sizeof(i64) * (C + 1)), ncand = 0;
    float *cdense = malloc(sizeof(float) * (dense && C ? GG * C : 1));
    double *cscore = malloc(sizeof(double) * (C + 1));
    double *cbmax = malloc(sizeof(double) * (J / 8 + C + 1));
    char *cmark = calloc(J + 1, 1);
    i64 *clst = malloc(sizeof(i64) * (C ? J + 1 : 1));
    int have_scores = 0, have_synth = 0;
    i64 aa_runs = 0;
    double *dpair = calloc(GG, sizeof(double));
    i64 *touched = malloc(sizeof(i64) * N), *touched_k = malloc(sizeof(i64) * GG);
    double util0 = 0.0;
    double left = 0.0;
    for (i64 k = 0; k < NN; k++) left += rem[k];
    double *tro = calloc(K, sizeof(double)), *tri = calloc(K, sizeof(double));
    row_sums(rem, N, G, K, gof, node_of, ls, lr, dg, tro, tri);
    if (!(dp[D_TAU0] > 0)) dp[D_TAU0] = base_quantum(ls, lr, dg, N, G, cap_out, cap_in, max_rate, dp[D_KROUNDS]);
    const double tau0 = dp[D_TAU0];
    i64 A = 0;
    *status = 1;
    const int use_w = rank_on != 0;
    const int wsc = wscore && use_w;
    const int wsel = weighted && use_w;  /* EVALUATE counts pressure-weighted bytes */
    int gcons = 1;  /* group a holds ranks a g ... a g + g - 1 */
    for (i64 a = 0; a < G && gcons; a++)
        for (i64 c = 0; c < g; c++) if (groups[a * g + c] != a * g + c) gcons = 0;
    int g4c = g == 4;  /* groups of 4 consecutive ranks: the AA reads its 4 x 4 credits in place */
    for (i64 a = 0; a < G && g4c; a++)
        for (i64 c = 1; c < g; c++) if (groups[a * g + c] != groups[a * g] + c) g4c = 0;  /* weighted scores change with w: recomputed every activation */

    while (left > 0) {
        if (A >= max_acts) { *status = 2; break; }
        double *xo = out_x + A * N;
        i64 *so = out_src + A * N, *dso = out_dst + A * N;
        /* -- reuse: re-EVALUATE the last AA's channels on the new remaining demand (the pool
              rows, their w and per-rate caps are those of that AA run, unchanged since) -- */
        VP_TICK_START();
        if (reuse_left > 0 && npool > 0) {
            double hu;
            const i64 h = pool_best(terms, prow, npool, rsrc, rdst, rfam, fam_rid, rem, w, wsel, capr, invr, xw, tt, N,
                                    lambda, &hu, NULL);
            if (h >= 0 && hu > 0 && hu >= reuse_floor * util0) {
                reuse_left--;
                const i64 row = prow[h];
                const i64 *rid = fam_rid + rfam[row] * N;
                double moved = 0.0;
                for (i64 k = 0; k < N; k++) {
                    const i64 s_ = rsrc[row * N + k], d_ = rdst[row * N + k];
                    const double rr = rem[s_ * N + d_], cap = capr[rid[k]];
                    xo[k] = cap < rr ? cap : rr; so[k] = s_; dso[k] = d_;
                }
                moved = drain_lanes(rem, so, dso, xo, N, G, gof, node_of, ls, lr, dg, tro, tri);
                if (terms && reuse_left > 0) lane_terms_at(so, dso, N, rem, w, wsel, capr, invr, N, R, xw, tt);
                if (have_scores) update_scores(scores, so, dso, xo, N, G, gof, col_ptr, col_shape, col_val, dpair, touched);
                out_fam[A] = rfam[row];
                if (rfam[row] == F) memcpy(out_inst + A * N, syn_inst, sizeof(i64) * N);
                left -= moved;
                VP_TICK(7);
                A++;
                continue;
            }
        }
        VP_TICK(0);  /* a reuse attempt that failed (or none) */
        /* -- τ (coarse rounds: up to 1/coarse of the remaining lower bound) -- */
        /* the rank loads, D̂ and the nodes' cross traffic are running sums (drain_lanes), so only
           the largest entry needs a pass over rem */
        const int nodes_on = use_w && np_ != 0.0 && K > 1;
        const double remmax = max_entry(rem, NN);
        for (i64 c = 0; c < K; c++) { t_out[c] = tro[c]; t_in[c] = tri[c]; }
        double mx = 0.0;
        for (i64 i = 0; i < N; i++) { if (ls[i] > mx) mx = ls[i]; if (lr[i] > mx) mx = lr[i]; }
        double tau = tau0;
        if (coarse > 0) {
            double t_est = mx / max_rate;
            for (i64 a = 0; a < G; a++) {
                double so_ = 0.0, si_ = 0.0;
                for (i64 d = 0; d < G; d++) if (d != a) { so_ += dg[a * G + d]; si_ += dg[d * G + a]; }
                if (so_ > 0 && cap_out[a] > 0 && so_ / cap_out[a] > t_est) t_est = so_ / cap_out[a];
                if (si_ > 0 && cap_in[a] > 0 && si_ / cap_in[a] > t_est) t_est = si_ / cap_in[a];
            }
            double tq = t_est / (double)N;
            if (tq < 1e-15) tq = 1e-15;
            double tc = tq * (double)N / coarse;
            if (tc > tau) tau = tc;
        }
        const double inv_tau = 1.0 / tau;
        VP_TICK(8);  /* τ */
        if (use_w) {
            /* rank terms (VarioPathPlanner._rank_weights): linear, or (load / max)^p as repeated products */
            for (i64 i = 0; i < N; i++) {
                if (power > 1) {
                    const double u = ls[i] / mx, vv = lr[i] / mx;
                    double a = u, b = vv;
                    for (i64 e = 1; e < power; e++) { a = a * u; b = b * vv; }
                    pu[i] = a; pv[i] = b;
                } else {
                    pu[i] = ls[i]; pv[i] = lr[i];
                }
            }
            /* node terms (VarioPathPlanner._node_weights): each node's remaining bytes out (in) over its
               best contention-free rate, over the largest such time or the busiest rank's; one
               value per (node of i, node of j), 0 inside a node */
            for (i64 c = 0; c < K * K; c++) nterm[c] = 0.0;
            if (nodes_on) {
                double t_max = mx / max_rate;
                for (i64 c = 0; c < K; c++) {
                    t_out[c] = t_out[c] / node_cap_out[c];
                    t_in[c] = t_in[c] / node_cap_in[c];
                    if (t_out[c] > t_max) t_max = t_out[c];
                    if (t_in[c] > t_max) t_max = t_in[c];
                }
                if (t_max > 0)
                    for (i64 a = 0; a < K; a++)
                        for (i64 b = 0; b < K; b++)
                            if (a != b) nterm[a * K + b] = np_ * ((t_out[a] + t_in[b]) / (2.0 * t_max));
            }
        }
        /* the weights, the credits and the weighted D̂ (credit_rows) */
        if (wsc) for (i64 k = 0; k < GG; k++) dgw[k] = 0.0;
        if (nodes_on)  /* the node term of row i: nrow[node of i][j] (0 inside the node: adding it changes nothing) */
            for (i64 a = 0; a < K; a++)
                for (i64 j = 0; j < N; j++) nrow[a * N + j] = node_of[j] != a ? nterm[a * K + node_of[j]] : 0.0;
        VP_TICK(9);  /* rank and node pressure terms */
        credit_rows(N, G, g, R, use_w, wsc, nodes_on, gcons, power, rp, pp, mx, remmax, inv_tau, rem, pu, pv, nrow, node_of,
                    gof, rates_u, w, dgw, cred, credt);
        VP_TICK(1);  /* weights and credits */
        /* -- shape scores (Eq. 6, or capped) and the beam -- */
        /* sparse shapes by group pair (column k lists the shapes with lanes on pair k): O(nnz),
           and consecutive updates hit different shapes, so they pipeline; every score still sums
           its pairs in ascending k */
        /* shape candidates (ours): between full scorings (every `rescore` AA runs) only the
           candidates are scored and the beam is chosen among them */
        int restricted = ncand > 0 && aa_runs % rescore != 0;
    score_again:
        if (restricted && wsc && dense && !capped) {
            /* the candidates' dense columns side by side (cdense): the same sums, ncand wide */
            dense_scores(cscore, cdense, dgw, GG, ncand, touched_k);
            for (i64 c = 0; c < ncand; c++) scores[cand[c]] = cscore[c];
            goto scored;
        }
        if (!capped && !wsc && have_scores) goto scored;  /* Eq. 6 scores are kept up to date incrementally */
        const double *dsc = wsc ? dgw : dg;
        if (dense && !capped) {
            dense_scores(scores, dense_val, dsc, GG, J, touched_k);
            goto summed;
        }
        for (i64 j = 0; j < J; j++) scores[j] = 0.0;
        for (i64 k = 0; k < GG; k++) {
            const double dk = dsc[k];
            if (dk == 0.0) continue;
            if (dense) {  /* capped (Eq. 6 went to dense_scores): the dense (GG x J) rows vectorize over shapes */
                const double *restrict sk = dense_rate + k * J;
                double *restrict sc = scores;
                for (i64 j = 0; j < J; j++) { double c = sk[j] * tau; sc[j] += c < dk ? c : dk; }
                continue;
            }
            if (capped) {
                for (i64 e = col_ptr[k]; e < col_ptr[k + 1]; e++) {
                    double c = col_rate[e] * tau;
                    scores[col_shape[e]] += c < dk ? c : dk;
                }
            } else {
                for (i64 e = col_ptr[k]; e < col_ptr[k + 1]; e++) scores[col_shape[e]] += col_val[e] * dk;
            }
        }
    summed:
        have_scores = !capped && !wsc;
    scored:;
        i64 ntop = 0;
        {
            const i64 n = restricted ? ncand : J, want = beam < n ? beam : n;
            best_shapes(scores, restricted ? cand : NULL, n, want, top);
            i64 first = top[0];
            for (i64 t = 0; t < want; t++) if (scores[top[t]] > 0) top[ntop++] = top[t];
            if (ntop == 0) { top[0] = first; ntop = 1; }
        }
        if (!(scores[top[0]] > 0)) {
            if (restricted) { restricted = 0; goto score_again; }  /* no candidate left: score them all */
            *status = 0;
            break;
        }
        if (C > 0 && !restricted) {  /* a full scoring: its C best shapes are the next candidates */
            ncand = candidate_shapes(scores, J, C < J ? C : J, cand, cbmax, clst, cmark);
            if (dense)
                for (i64 k = 0; k < GG; k++)
                    for (i64 c = 0; c < ncand; c++) cdense[k * ncand + c] = dense_val[k * J + cand[c]];
        }
        VP_TICK(2);  /* shape scores and the beam */
        /* -- rows: (family of the beam, start) -- */
        i64 B = 0, nfam = 0;
        for (i64 t = 0; t < ntop; t++) nfam += fam_off[top[t] + 1] - fam_off[top[t]];
        i64 Se = row_budget / (nfam > 0 ? nfam : 1);  /* starts per family (VarioPathPlanner.starts_for) */
        if (Se > S) Se = S;
        if (Se < 1) Se = 1;
        for (i64 t = 0; t < ntop; t++)
            for (i64 fi = fam_off[top[t]]; fi < fam_off[top[t] + 1]; fi++)
                for (i64 s = 0; s < Se; s++) {
                    /* the family's remembered bindings first (warm starts), then its fixed starts;
                       destinations only: the AA assigns a row's sources first, from its
                       destinations, so the sources it starts with are never read */
                    const i64 nw = wcnt[fi] < Se ? wcnt[fi] : Se;
                    const i64 *sd = s < nw ? wdst + (fi * W + s) * N : start_dst + (fi * S + s - nw) * N;
                    memcpy(rdst + B * N, sd, sizeof(i64) * N);
                    rfam[B] = fi;
                    B++;
                }
        if (synth) {
            /* rebuilt every SYNTH_PERIOD AA runs (sorting G^2 group pairs dominates at 128+ GPUs);
               in between the last synthesized family is bound again on the new demand */
            int built = 0;
            if (aa_runs % SYNTH_PERIOD == 0) {
                i64 norder = 0;
                for (i64 c = 0; c < GG; c++) if (dg[c] > 0) order[norder++] = c;
                sort_key = dg;
                qsort(order, norder, sizeof(i64), by_key_desc);
                built = synth_family(G, g, dg, order, norder, pi_ptr, pi, ir_ptr, ir, intra_rep, rused, rtouched,
                                     pused, la, ld, li, srcfree, dstfree, outc);
                have_synth = built;
            }
            if (built) {
                /* lanes by source group (lane k leaves group k / g), then the in-lanes by destination */
                for (i64 a = 0; a < G; a++) outc[a] = 0;
                for (i64 k = 0; k < N; k++) {
                    const i64 a = la[k], slot = a * g + outc[a]++;
                    syn_inst[slot] = li[k];
                    slot_dst[slot] = ld[k];
                    fam_rate_w[F * N + slot] = inst_rate[li[k]];
                    fam_rid_w[F * N + slot] = inst_rid[li[k]];
                }
                for (i64 d = 0; d < G; d++) outc[d] = 0;
                for (i64 slot = 0; slot < N; slot++) {
                    const i64 d = slot_dst[slot];
                    fam_in_w[F * N + d * g + outc[d]++] = slot;
                }
            }
            if (have_synth) {
                for (i64 s = 0; s < Se && B < max_rows; s++) {  /* starts: rotations of the group order */
                    for (i64 slot = 0; slot < N; slot++) {
                        const i64 a = slot / g, l = slot % g;
                        rsrc[B * N + slot] = groups[a * g + (l + s) % g];
                    }
                    for (i64 d = 0; d < G; d++)
                        for (i64 l = 0; l < g; l++)
                            rdst[B * N + fam_in_w[F * N + d * g + l]] = groups[d * g + (l + 2 * s + 1) % g];
                    rfam[B] = F;
                    B++;
                }
            }
        }
        VP_TICK(3);  /* the rows' starts */
        aa_runs++;
        /* -- multi-start Alternating Algorithm (Eqs. 7-8) -- */
        const int single = Se == 1;
        int have_best = 0;
        if (stall > 0 && sweeps == 1 && Se > stall + 1) {
            /* early stop (ours): a family's starts in order, stopped after `stall` starts in a row
               without a better F_B; the starts after the stop are never swept */
            aa_starts_until_stall(B, N, G, g, P, g4c, rfam, fam_rid, fam_in, groups, cred, credt, perms, v, rsrc, rdst,
                                  stall, f);
            goto bound;
        }
        for (i64 sweep = 0; sweep < sweeps; sweep++) {
            aa_sweep(B, N, G, g, P, g4c, rfam, fam_rid, fam_in, groups, cred, credt, perms, v, rsrc, rdst);
            if (single && sweep + 1 < sweeps) continue;
            if (sweep + 1 == sweeps) {
                /* the last sweep: F only tells the channels from the bindings that kept a self-pair
                   (F < 0 exactly then: every other credit is >= 0), so test the pairs instead */
                selfpair_flags(B, N, rsrc, rdst, f);
                break;
            }
            for (i64 b = 0; b < B; b++)  /* F_B (Eq. 8); a self-pair makes it hugely negative */
                f[b] = binding_credit(rsrc + b * N, rdst + b * N, fam_rid + rfam[b] * N, cred, N);
            if (single) break;
            if (have_best) {
                int improved = 0;
                for (i64 b = 0; b < B; b++) if (f[b] > fbest[b] * (1 + 1e-12) + 1e-300) { improved = 1; break; }
                if (!improved) break;
                for (i64 b = 0; b < B; b++) if (f[b] > fbest[b]) fbest[b] = f[b];
            } else {
                memcpy(fbest, f, sizeof(double) * B);
                have_best = 1;
            }
        }
        if (stall > 0) {  /* the same stop on the final bindings (several sweeps: all rows ran) */
            for (i64 b = 0; b < B; b++) f[b] = binding_credit(rsrc + b * N, rdst + b * N, fam_rid + rfam[b] * N, cred, N);
            stall_mask(B, rfam, stall, f);
        }
    bound:
        VP_TICK(4);  /* the Alternating Algorithm */
        /* -- EVALUATE (Eqs. 9-10) over the channels (rows without a self-pair); they stay the
              pool for reuse -- */
        for (i64 ri = 0; ri < R; ri++) {
            const double fl = floor(tau * rates_u[ri]);
            flr[ri] = fl;
            capr[ri] = fl < 1.0 ? 1.0 : fl;
            invr[ri] = 1.0 / rates_u[ri];
        }
        npool = 0;
        for (i64 b = 0; b < B; b++) if (f[b] >= 0) prow[npool++] = b;
        double hu;
        /* the lanes this pool is evaluated on: now, and once per reuse (-DVP_NO_LANE_TERMS: never,
           a build that checks the direct path plans the same) */
#if defined(VP_NO_LANE_TERMS)
        terms = 0;
#else
        terms = R * NN <= npool * N * reuse;
#endif
        if (terms) lane_terms(rem, w, wsel, capr, invr, N, R, xw, tt);
        const i64 h = pool_best(terms, prow, npool, rsrc, rdst, rfam, fam_rid, rem, w, wsel, capr, invr, xw, tt, N,
                                lambda, &hu, W ? upool : NULL);
        if (h < 0 || !(hu > 0)) { npool = 0; *status = 0; break; }
        VP_TICK(5);  /* EVALUATE */
        if (W) remember_bindings(npool, prow, upool, rfam, rsrc, rdst, N, W, F, wdst, wcnt, wrank);
        util0 = hu;
        reuse_left = reuse - 1;
        double moved = 0.0;
        int any_full = 0;
        const i64 hrow = prow[h];
        const i64 *hrid = fam_rid + rfam[hrow] * N;
        for (i64 k = 0; k < N; k++) {
            const i64 s_ = rsrc[hrow * N + k], d_ = rdst[hrow * N + k];
            const double rr = rem[s_ * N + d_], cap = capr[hrid[k]];
            xo[k] = cap < rr ? cap : rr;
            so[k] = s_; dso[k] = d_;
            if (xo[k] >= flr[hrid[k]]) any_full = 1;
        }
        if (maxq > 1 && any_full) {
            /* keep the channel while every full lane stays full (quanta merging) */
            i64 m = maxq;
            for (i64 k = 0; k < N; k++) {
                if (xo[k] >= flr[hrid[k]]) {
                    double rr = rem[so[k] * N + dso[k]];
                    i64 mk = (i64)floor(rr / xo[k]);
                    if (mk < m) m = mk;
                }
            }
            if (m > 1)
                for (i64 k = 0; k < N; k++) {
                    if (xo[k] > 0) {
                        double rr = rem[so[k] * N + dso[k]];
                        double c = (double)m * flr[hrid[k]];
                        xo[k] = c < rr ? c : rr;
                    }
                }
        }
        moved = drain_lanes(rem, so, dso, xo, N, G, gof, node_of, ls, lr, dg, tro, tri);
        if (terms && reuse_left > 0) lane_terms_at(so, dso, N, rem, w, wsel, capr, invr, N, R, xw, tt);
        if (have_scores) update_scores(scores, so, dso, xo, N, G, gof, col_ptr, col_shape, col_val, dpair, touched);
        out_fam[A] = rfam[hrow];
        if (rfam[hrow] == F) memcpy(out_inst + A * N, syn_inst, sizeof(i64) * N);
        left -= moved;
        VP_TICK(6);  /* draining and bookkeeping */
        A++;
    }
    free(w); free(cred); free(credt); free(nterm); free(nrow); free(rused); free(pused); free(rtouched); free(order);
    free(la); free(ld); free(li); free(srcfree); free(dstfree); free(outc); free(slot_dst); free(ls); free(lr); free(dg); free(scores); free(dgw); free(pu); free(pv); free(t_out); free(t_in); free(tro); free(tri); free(top);
    free(rsrc); free(rdst); free(rfam); free(f); free(fbest); free(v);
    free(cand); free(cdense); free(cscore); free(cbmax); free(cmark); free(clst); free(wdst); free(wcnt); free(wrank); free(upool);
    free(prow); free(capr); free(invr); free(flr); free(xw); free(tt); free(dpair); free(touched); free(touched_k);
    return A;
}

/* vp_plan with its 40 arguments packed in one array of pointers (kernel.py fills it once per
 * binding and changes only dp and rem between calls): one argument for ctypes to convert instead of 40. */
VP_EXPORT i64 vp_plan_packed(void *const *a) {
    return vp_plan((const i64 *)a[0], (double *)a[1], (const i64 *)a[2], (const i64 *)a[3], (const i64 *)a[4],
                   (const i64 *)a[5], (const double *)a[6], (const double *)a[7], (const float *)a[8],
                   (const double *)a[9], (const i64 *)a[10], (const i64 *)a[11], (const double *)a[12],
                   (const double *)a[13], (const i64 *)a[14], (const i64 *)a[15], (const i64 *)a[16],
                   (const double *)a[17], (const double *)a[18], (const i64 *)a[19], (const i64 *)a[20],
                   (const i64 *)a[21], (const i64 *)a[22], (const i64 *)a[23], (const double *)a[24],
                   (const i64 *)a[25], (const i64 *)a[26], (const double *)a[27], (const double *)a[28],
                   (double *)a[29], (i64 *)a[30], (i64 *)a[31], (i64 *)a[32], (i64 *)a[33], (double *)a[34],
                   (double *)a[35], (i64 *)a[36], (i64 *)a[37], (i64 *)a[38], (i64 *)a[39]);
}

/* The extension module stub: no Python-level functions. Importing
 * collectives.alltoallv._variopath_kernel finds the built library the way every module is found
 * (site-packages, an editable install, PYTHONPATH); kernel.py then loads vp_plan from that file
 * with ctypes. */
static struct PyModuleDef vp_module = {PyModuleDef_HEAD_INIT, "_variopath_kernel",
                                       "VarioPath planning loop; call vp_plan via collectives.alltoallv.kernel", 0, NULL};

PyMODINIT_FUNC PyInit__variopath_kernel(void) { return PyModuleDef_Init(&vp_module); }
