/* VarioPath online decomposition (paper 000, Algorithm 2) as one compiled loop (-O3, no FMA contraction).
 *
 * A line-for-line port of the numpy path of collectives/alltoallv/variopath.py
 * (VarioPathPlanner._plan_numpy): per activation the shape scores (Eqs. 5-6), the multi-start
 * Alternating Algorithm over every family of the shape beam (g x g assignments by permutation
 * enumeration), EVALUATE (Eqs. 9-10) and our extensions (pressure weights, coarse rounds,
 * channel reuse, quanta merging). The Python loop costs ~0.1 ms of numpy call overhead per
 * activation; this loop costs microseconds. Built on first use by collectives/alltoallv/kernel.py;
 * the numpy path stays the reference and the fallback.
 *
 * Returns the number of activations written; *status: 1 drained, 0 no candidate (the caller
 * runs its fallback for one activation and calls again), 2 output capacity reached.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int64_t i64;

#define FORBID (-1e30)

enum { I_N, I_G, I_g, I_J, I_P, I_S, I_SWEEPS, I_BEAM, I_REUSE, I_MAXQ, I_WEIGHTED, I_CAPPED, I_MAXACTS,
       I_MAXROWS, I_RANKP_ON };
enum { D_TAU0, D_COARSE, D_MAXRATE, D_RANKP, D_PAIRP, D_OVERHEAD, D_REUSEFLOOR };

static i64 best_perm(const double *v, const i64 *perms, i64 P, i64 g) {
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

i64 vp_plan(const i64 *ip, const double *dp, const i64 *groups, const i64 *gof,
            const double *shapes_flat, const double *pair_rate, const i64 *fam_off,
            const double *fam_rate, const i64 *fam_in, const i64 *start_src, const i64 *start_dst,
            const i64 *perms, const double *cap_out, const double *cap_in,
            double *rem, double *out_x, i64 *out_src, i64 *out_dst, i64 *out_fam, i64 *status) {
    const i64 N = ip[I_N], G = ip[I_G], g = ip[I_g], J = ip[I_J], P = ip[I_P], S = ip[I_S];
    const i64 sweeps = ip[I_SWEEPS], beam = ip[I_BEAM], reuse = ip[I_REUSE], maxq = ip[I_MAXQ];
    const i64 weighted = ip[I_WEIGHTED], capped = ip[I_CAPPED], max_acts = ip[I_MAXACTS], max_rows = ip[I_MAXROWS];
    const i64 rank_on = ip[I_RANKP_ON];
    const double tau0 = dp[D_TAU0], coarse = dp[D_COARSE], max_rate = dp[D_MAXRATE];
    const double rp = dp[D_RANKP], pp = dp[D_PAIRP], lambda = dp[D_OVERHEAD], reuse_floor = dp[D_REUSEFLOOR];
    const i64 NN = N * N, GG = G * G;

    double *q = malloc(sizeof(double) * NN), *w = malloc(sizeof(double) * NN);
    double *ls = malloc(sizeof(double) * N), *lr = malloc(sizeof(double) * N);
    double *dg = malloc(sizeof(double) * GG), *scores = malloc(sizeof(double) * J);
    i64 *top = malloc(sizeof(i64) * (beam + 1));
    char *picked = calloc(J, 1);
    i64 *rsrc = malloc(sizeof(i64) * max_rows * N), *rdst = malloc(sizeof(i64) * max_rows * N);
    i64 *rfam = malloc(sizeof(i64) * max_rows);
    double *f = malloc(sizeof(double) * max_rows), *fbest = malloc(sizeof(double) * max_rows);
    double *v = malloc(sizeof(double) * g * g);
    /* pool of bound channels (ok rows of the last AA) for reuse */
    i64 *psrc = malloc(sizeof(i64) * max_rows * N), *pdst = malloc(sizeof(i64) * max_rows * N);
    i64 *pfam = malloc(sizeof(i64) * max_rows);
    double *pcap = malloc(sizeof(double) * max_rows * N), *pw = malloc(sizeof(double) * max_rows * N);
    double *pr = malloc(sizeof(double) * max_rows * N);
    i64 npool = 0, reuse_left = 0;
    double util0 = 0.0;
    double left = 0.0;
    for (i64 k = 0; k < NN; k++) left += rem[k];
    i64 A = 0;
    *status = 1;
    const int use_w = rank_on != 0;

    while (left > 0) {
        if (A >= max_acts) { *status = 2; break; }
        double *xo = out_x + A * N;
        i64 *so = out_src + A * N, *dso = out_dst + A * N;
        /* -- reuse: re-EVALUATE the last AA's channels on the new remaining demand -- */
        if (reuse_left > 0 && npool > 0) {
            i64 h = -1;
            double hu = 0.0;
            for (i64 b = 0; b < npool; b++) {
                double useful = 0.0, dur = 0.0;
                for (i64 k = 0; k < N; k++) {
                    i64 o = b * N + k;
                    double rr = rem[psrc[o] * N + pdst[o]];
                    double x = pcap[o] < rr ? pcap[o] : rr;
                    useful += weighted ? x * pw[o] : x;
                    double t = x * (1.0 / pr[o]);
                    if (t > dur) dur = t;
                }
                double u = useful / (lambda + dur + 1e-300);
                if (h < 0 || u > hu) { hu = u; h = b; }
            }
            if (h >= 0 && hu > 0 && hu >= reuse_floor * util0) {
                reuse_left--;
                double moved = 0.0;
                for (i64 k = 0; k < N; k++) {
                    i64 o = h * N + k;
                    double rr = rem[psrc[o] * N + pdst[o]];
                    double x = pcap[o] < rr ? pcap[o] : rr;
                    xo[k] = x; so[k] = psrc[o]; dso[k] = pdst[o];
                }
                for (i64 k = 0; k < N; k++) { rem[so[k] * N + dso[k]] -= xo[k]; moved += xo[k]; }
                out_fam[A] = pfam[h];
                left -= moved;
                A++;
                continue;
            }
        }
        /* -- τ (coarse rounds: up to 1/coarse of the remaining lower bound) -- */
        for (i64 i = 0; i < N; i++) { ls[i] = 0.0; lr[i] = 0.0; }
        for (i64 i = 0; i < N; i++)
            for (i64 j = 0; j < N; j++) { double r = rem[i * N + j]; ls[i] += r; lr[j] += r; }
        for (i64 k = 0; k < GG; k++) dg[k] = 0.0;
        for (i64 i = 0; i < N; i++)
            for (i64 j = 0; j < N; j++) dg[gof[i] * G + gof[j]] += rem[i * N + j];
        double mx = 0.0, remmax = 0.0;
        for (i64 i = 0; i < N; i++) { if (ls[i] > mx) mx = ls[i]; if (lr[i] > mx) mx = lr[i]; }
        for (i64 k = 0; k < NN; k++) if (rem[k] > remmax) remmax = rem[k];
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
        for (i64 k = 0; k < NN; k++) q[k] = rem[k] * inv_tau;
        for (i64 i = 0; i < N; i++) q[i * N + i] = FORBID;
        if (use_w) {
            for (i64 i = 0; i < N; i++)
                for (i64 j = 0; j < N; j++) {
                    double x = 1.0 + rp * (ls[i] + lr[j]) / (2.0 * mx);
                    if (pp != 0.0) x += pp * rem[i * N + j] / remmax;
                    w[i * N + j] = x;
                }
        }
        /* -- shape scores (Eq. 6, or capped) and the beam -- */
        /* shape-major inputs are transposed (GG x J) so the inner loop runs over shapes and
           vectorizes; each score still sums its group pairs in order k = 0..GG-1 */
        for (i64 j = 0; j < J; j++) scores[j] = 0.0;
        for (i64 k = 0; k < GG; k++) {
            const double dk = dg[k];
            if (dk == 0.0) continue;
            if (capped) {
                const double *pk = pair_rate + k * J;
                for (i64 j = 0; j < J; j++) { double c = pk[j] * tau; scores[j] += c < dk ? c : dk; }
            } else {
                const double *sk = shapes_flat + k * J;
                for (i64 j = 0; j < J; j++) scores[j] += sk[j] * dk;
            }
        }
        i64 ntop = 0;
        {
            i64 want = beam < J ? beam : J;
            for (i64 t = 0; t < want; t++) {
                i64 bj = -1;
                for (i64 j = 0; j < J; j++) if (!picked[j] && (bj < 0 || scores[j] > scores[bj])) bj = j;
                picked[bj] = 1;
                top[t] = bj;
            }
            for (i64 t = 0; t < want; t++) picked[top[t]] = 0;
            i64 first = top[0];
            for (i64 t = 0; t < want; t++) if (scores[top[t]] > 0) top[ntop++] = top[t];
            if (ntop == 0) { top[0] = first; ntop = 1; }
        }
        if (!(scores[top[0]] > 0)) { *status = 0; break; }
        /* -- rows: (family of the beam, start) -- */
        i64 B = 0;
        for (i64 t = 0; t < ntop; t++)
            for (i64 fi = fam_off[top[t]]; fi < fam_off[top[t] + 1]; fi++)
                for (i64 s = 0; s < S; s++) {
                    memcpy(rsrc + B * N, start_src + (fi * S + s) * N, sizeof(i64) * N);
                    memcpy(rdst + B * N, start_dst + (fi * S + s) * N, sizeof(i64) * N);
                    rfam[B] = fi;
                    B++;
                }
        /* -- multi-start Alternating Algorithm (Eqs. 7-8) -- */
        const int single = S == 1;
        int have_best = 0;
        for (i64 sweep = 0; sweep < sweeps; sweep++) {
            for (i64 b = 0; b < B; b++) {
                const double *rt = fam_rate + rfam[b] * N;
                const i64 *in = fam_in + rfam[b] * N;
                i64 *sb = rsrc + b * N, *db = rdst + b * N;
                for (i64 a = 0; a < G; a++) {  /* fix destinations, assign sources per group */
                    for (i64 l = 0; l < g; l++) {
                        i64 k = a * g + l, j = db[k];
                        double r = rt[k];
                        for (i64 c = 0; c < g; c++) {
                            i64 i = groups[a * g + c];
                            double x = q[i * N + j] < r ? q[i * N + j] : r;
                            if (use_w) x *= w[i * N + j];
                            v[l * g + c] = x;
                        }
                    }
                    const i64 *pm = perms + best_perm(v, perms, P, g) * g;
                    for (i64 l = 0; l < g; l++) sb[a * g + l] = groups[a * g + pm[l]];
                }
                for (i64 d = 0; d < G; d++) {  /* fix sources, assign destinations per group */
                    for (i64 l = 0; l < g; l++) {
                        i64 kk = in[d * g + l], i = sb[kk];
                        double r = rt[kk];
                        for (i64 c = 0; c < g; c++) {
                            i64 j = groups[d * g + c];
                            double x = q[i * N + j] < r ? q[i * N + j] : r;
                            if (use_w) x *= w[i * N + j];
                            v[l * g + c] = x;
                        }
                    }
                    const i64 *pm = perms + best_perm(v, perms, P, g) * g;
                    for (i64 l = 0; l < g; l++) db[in[d * g + l]] = groups[d * g + pm[l]];
                }
            }
            if (single && sweep + 1 < sweeps) continue;
            for (i64 b = 0; b < B; b++) {
                const double *rt = fam_rate + rfam[b] * N;
                double s = 0.0;
                for (i64 k = 0; k < N; k++) {
                    i64 o = rsrc[b * N + k] * N + rdst[b * N + k];
                    double x = q[o] < rt[k] ? q[o] : rt[k];
                    if (use_w) x *= w[o];
                    s += x;
                }
                f[b] = s;  /* F_B (Eq. 8); a self-pair makes it hugely negative */
            }
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
        /* -- EVALUATE (Eqs. 9-10) over the channels (rows without a self-pair) -- */
        npool = 0;
        i64 h = -1;
        double hu = 0.0;
        for (i64 b = 0; b < B; b++) {
            if (!(f[b] >= 0)) continue;
            const double *rt = fam_rate + rfam[b] * N;
            double useful = 0.0, dur = 0.0;
            for (i64 k = 0; k < N; k++) {
                i64 o = npool * N + k, s_ = rsrc[b * N + k], d_ = rdst[b * N + k];
                double cap = floor(tau * rt[k]);
                if (cap < 1.0) cap = 1.0;
                psrc[o] = s_; pdst[o] = d_; pcap[o] = cap; pr[o] = rt[k];
                pw[o] = use_w ? w[s_ * N + d_] : 1.0;
                double rr = rem[s_ * N + d_];
                double x = cap < rr ? cap : rr;
                useful += (weighted && use_w) ? x * pw[o] : x;
                double t = x * (1.0 / rt[k]);
                if (t > dur) dur = t;
            }
            pfam[npool] = rfam[b];
            double u = useful / (lambda + dur + 1e-300);
            if (h < 0 || u > hu) { hu = u; h = npool; }
            npool++;
        }
        if (h < 0 || !(hu > 0)) { npool = 0; *status = 0; break; }
        util0 = hu;
        reuse_left = reuse - 1;
        double moved = 0.0;
        int any_full = 0;
        for (i64 k = 0; k < N; k++) {
            i64 o = h * N + k;
            double rr = rem[psrc[o] * N + pdst[o]];
            xo[k] = pcap[o] < rr ? pcap[o] : rr;
            so[k] = psrc[o]; dso[k] = pdst[o];
            if (xo[k] >= floor(tau * pr[o])) any_full = 1;
        }
        if (maxq > 1 && any_full) {
            /* keep the channel while every full lane stays full (quanta merging) */
            i64 m = maxq;
            for (i64 k = 0; k < N; k++) {
                i64 o = h * N + k;
                if (xo[k] >= floor(tau * pr[o])) {
                    double rr = rem[so[k] * N + dso[k]];
                    i64 mk = (i64)floor(rr / xo[k]);
                    if (mk < m) m = mk;
                }
            }
            if (m > 1)
                for (i64 k = 0; k < N; k++) {
                    if (xo[k] > 0) {
                        double rr = rem[so[k] * N + dso[k]];
                        double c = (double)m * floor(tau * pr[h * N + k]);
                        xo[k] = c < rr ? c : rr;
                    }
                }
        }
        for (i64 k = 0; k < N; k++) { rem[so[k] * N + dso[k]] -= xo[k]; moved += xo[k]; }
        out_fam[A] = pfam[h];
        left -= moved;
        A++;
    }
    free(q); free(w); free(ls); free(lr); free(dg); free(scores); free(top); free(picked);
    free(rsrc); free(rdst); free(rfam); free(f); free(fbest); free(v);
    free(psrc); free(pdst); free(pfam); free(pcap); free(pw); free(pr);
    return A;
}
