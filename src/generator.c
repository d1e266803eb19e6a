/*
** generator.c -- seedable generators (xoshiro256**, seeded through splitmix64) and the draws the
** kernels make from them. Part of the base: the context owns one, and it calls nothing above.
*/
#include <stdlib.h>

#include "generator.h"

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

lt_generator *ltB_generator_new(uint64_t seed) {
  lt_generator *g = malloc(sizeof *g);
  if (g) ltB_generator_seed(g, seed);
  return g;
}

void ltB_generator_free(lt_generator *g) { free(g); }

void ltB_generator_seed(lt_generator *g, uint64_t seed) {
  uint64_t x = seed;
  for (int i = 0; i < 4; i++) g->s[i] = splitmix64(&x);
  g->seed = seed;
}

void ltB_generator_get_state(const lt_generator *g, uint64_t *w) {
  for (int i = 0; i < 4; i++) w[i] = g->s[i];
  w[4] = g->seed;
}

void ltB_generator_set_state(lt_generator *g, const uint64_t *w) {
  for (int i = 0; i < 4; i++) g->s[i] = w[i];
  g->seed = w[4];
  if (!(g->s[0] | g->s[1] | g->s[2] | g->s[3])) ltB_generator_seed(g, g->seed);
}

uint64_t ltB_next_below(lt_generator *g, uint64_t n) {
  uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t r;
  do r = ltB_next_u64(g); while (r >= limit);
  return r % n;
}

