/*
** generator.h -- seedable random generators (xoshiro256**, seeded through splitmix64).
** A generator's whole state is LT_GEN_STATE_WORDS 64-bit words, so it can be saved in a
** checkpoint and restored to continue the exact same sequence.
*/
#ifndef LT_GENERATOR_H
#define LT_GENERATOR_H

#include "core.h"

#define LT_GEN_STATE_WORDS 5   /* four state words + the seed it was last seeded with */

struct lt_generator {
  uint64_t s[4];
  uint64_t seed;
};

lt_generator *ltB_generator_new(uint64_t seed);
void ltB_generator_free(lt_generator *g);
void ltB_generator_seed(lt_generator *g, uint64_t seed);
void ltB_generator_get_state(const lt_generator *g, uint64_t *words);
void ltB_generator_set_state(lt_generator *g, const uint64_t *words);

static inline uint64_t ltB_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t ltB_next_u64(lt_generator *g) {
  uint64_t *s = g->s;
  uint64_t r = ltB_rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = ltB_rotl(s[3], 45);
  return r;
}

/* Uniform double in [0, 1) with 53 random bits. */
static inline double ltB_next_double(lt_generator *g) {
  return (double)(ltB_next_u64(g) >> 11) * 0x1.0p-53;
}

/* Uniform integer in [0, n) without modulo bias (n >= 1). */
uint64_t ltB_next_below(lt_generator *g, uint64_t n);

/* The two draws of one Box-Muller pair (cpu/random.c transforms them): u[0] = 1 - a draw (in
** (0, 1], so its log is finite), u[1] the next. */
static inline void ltB_normal_draws(lt_generator *g, double u[2]) {
  u[0] = 1.0 - ltB_next_double(g);
  u[1] = ltB_next_double(g);
}

/* Tensor fills (random.c); gen NULL = ctx's default generator. */
int ltO_uniform_(lt_ctx *ctx, lt_tensor *t, double lo, double hi, lt_generator *gen);
int ltO_normal_(lt_ctx *ctx, lt_tensor *t, double mean, double std, lt_generator *gen);
int ltO_randint_(lt_ctx *ctx, lt_tensor *t, int64_t lo, int64_t hi, lt_generator *gen);
int ltO_bernoulli_(lt_ctx *ctx, lt_tensor *t, double p, lt_generator *gen);
/* A random permutation of 0..n-1 as int64. */
int ltO_randperm(lt_ctx *ctx, lt_tensor **out, int64_t n, lt_generator *gen);
/* num categories drawn from each row of the weights probs (1-d or 2-d, float, finite, >= 0,
** each row's sum > 0), with or without replacement: int64 positions counted from base, of
** shape (num) or (rows, num). */
int ltO_multinomial(lt_ctx *ctx, lt_tensor **out, lt_tensor *probs, int64_t num,
                    bool replacement, lt_generator *gen, int64_t base);

#endif
