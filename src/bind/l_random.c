/*
** l_random.c -- random tensors from Lua: rand/randn/randint/randperm/normal/bernoulli/
** multinomial, the in-place fills uniform_/normal_/bernoulli_/random_, and the Generator with the
** default generator's seeding and state functions. Random values are drawn in row-major logical
** order, so the same seed gives the same tensor whatever the thread count.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "lbind.h"
#include "../elementwise.h"
#include "../generator.h"
#include "l_creation.h"

/* ------------------------------------------------------------ random constructors */

static int random_new(lua_State *L, const char *op, bool normal) {
  lt_ctx *ctx = LTL_CTX(L);
  int64_t size[LT_MAX_DIMS];
  int opts;
  int n = ltL_cr_size_args(L, op, ltL_cr_opts_random, size, &opts);
  lt_dtype dt = ltL_cr_opt_dtype(L, opts, LT_FLOAT32);
  ltL_cr_check_float(L, op, dt);
  lt_generator *g = ltL_cr_opt_gen(L, opts);
  lt_tensor *t;
  LTL_TRY(L, ctx, lt_empty(ctx, &t, dt, n, size));
  ltL_push(L, t);
  if (normal)
    LTL_TRY(L, ctx, ltO_normal_(ctx, t, 0.0, 1.0, g));
  else
    LTL_TRY(L, ctx, ltO_uniform_(ctx, t, 0.0, 1.0, g));
  ltL_cr_finish(L, opts);
  return 1;
}

static int l_rand(lua_State *L) { return random_new(L, "rand", false); }
static int l_randn(lua_State *L) { return random_new(L, "randn", true); }

/* randint(low?, high, {sizes}, opts) */
static int l_randint(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  int64_t lo, hi, size[LT_MAX_DIMS];
  int k = 0;
  while (k < 2 && lua_type(L, 1 + k) == LUA_TNUMBER) k++;
  if (k > 0 && (!lua_istable(L, 1 + k) || ltL_test(L, 1 + k)))
    return luaL_error(L, "randint: expected a size table after the bounds, e.g. "
                      "randint(0, 10, {2, 3}), got %s", luaL_typename(L, 1 + k));
  int at = ltL_cr_low_high(L, "randint", 1, &lo, &hi), next;
  int n = ltL_checksizes(L, at, size, &next);
  int opts = lua_istable(L, next) ? next : 0;
  ltL_cr_check_opts(L, opts, "randint", ltL_cr_opts_random);
  ltL_cr_check_sizes(L, "randint", n, size);
  lt_dtype dt = ltL_cr_opt_dtype(L, opts, LT_INT64);
  lt_tensor *t;
  LTL_TRY(L, ctx, lt_empty(ctx, &t, dt, n, size));
  ltL_push(L, t);
  LTL_TRY(L, ctx, ltO_randint_(ctx, t, lo, hi, ltL_cr_opt_gen(L, opts)));
  ltL_cr_finish(L, opts);
  return 1;
}

/* randperm(n, opts): a random ordering of the positions 1..n */
static int l_randperm(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  lua_Integer n = luaL_checkinteger(L, 1);
  int opts = lua_istable(L, 2) ? 2 : 0;
  LTL_NOMORE(L, opts ? 2 : 1);
  ltL_cr_check_opts(L, opts, "randperm", ltL_cr_opts_random);
  lt_dtype dt = ltL_cr_opt_dtype(L, opts, LT_INT64);
  if (dt == LT_BOOL) return luaL_error(L, "randperm: dtype bool is not supported");
  lt_tensor *t;
  LTL_TRY(L, ctx, ltO_randperm(ctx, &t, (int64_t)n, ltL_cr_opt_gen(L, opts)));
  if (lt_binary_scalar_(ctx, LT_ADD, t, 1)) {   /* Lua's positions count from 1 */
    lt_release(t);
    return ltL_raise(L, ctx);
  }
  if (dt != LT_INT64) {
    lt_tensor *c;
    int rc = lt_to_dtype(ctx, &c, t, dt);
    lt_release(t);
    if (rc) return ltL_raise(L, ctx);
    t = c;
  }
  ltL_cr_push(L, t, opts);
  return 1;
}

/* normal(mean, std, {sizes}, opts) with number mean and std */
static int l_normal(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  double mean = luaL_checknumber(L, 1), std = luaL_checknumber(L, 2);
  int64_t size[LT_MAX_DIMS];
  int next;
  if (!lua_istable(L, 3) || ltL_test(L, 3))
    return luaL_error(L, "normal: expected (mean, std, {sizes}, opts) with number mean and "
                      "std, got %s as argument #3", luaL_typename(L, 3));
  int n = ltL_checksizes(L, 3, size, &next);
  int opts = lua_istable(L, next) ? next : 0;
  ltL_cr_check_opts(L, opts, "normal", ltL_cr_opts_random);
  ltL_cr_check_sizes(L, "normal", n, size);
  lt_dtype dt = ltL_cr_opt_dtype(L, opts, LT_FLOAT32);
  ltL_cr_check_float(L, "normal", dt);
  lt_tensor *t;
  LTL_TRY(L, ctx, lt_empty(ctx, &t, dt, n, size));
  ltL_push(L, t);
  LTL_TRY(L, ctx, ltO_normal_(ctx, t, mean, std, ltL_cr_opt_gen(L, opts)));
  ltL_cr_finish(L, opts);
  return 1;
}

/* The first probability outside [0, 1] (NaN included) and its flat position, from a copy of
** p (float64) on the host: only a call about to fail makes it. */
static int first_bad_probability(lt_ctx *ctx, lt_tensor *p, int64_t *pos, double *value) {
  lt_tensor *c, *h;
  if (lt_contiguous(ctx, &c, p)) return -1;
  int rc = lt_to_device(ctx, &h, c, LT_CPU, 0);
  lt_release(c);
  if (rc) return -1;
  const double *v = lt_data(h);
  for (int64_t i = 0, n = lt_numel(h); i < n; i++)
    if (!(v[i] >= 0 && v[i] <= 1)) {
      *pos = i;
      *value = v[i];
      break;
    }
  lt_release(h);
  return 0;
}

/* *out = 1 where a uniform draw from g (one per element, in row-major order) is below probs[i]
** as a float64, else 0, in probs' dtype and on its device: ops only, so it runs on any device.
** A probability outside [0, 1] sets *bad_pos (>= 0) and *bad_value instead. */
static int bernoulli_probs(lt_ctx *ctx, lt_tensor **out, lt_tensor *probs, lt_generator *g,
                           int64_t *bad_pos, double *bad_value) {
  lt_tensor *p = NULL, *ge = NULL, *le = NULL, *ok = NULL, *u = NULL, *hit = NULL;
  bool valid;
  int rc = -1;
  *bad_pos = -1;
  if (lt_to_dtype(ctx, &p, probs, LT_FLOAT64) ||
      lt_binary_scalar(ctx, &ge, LT_GE, p, 0, true, false) ||
      lt_binary_scalar(ctx, &le, LT_LE, p, 1, true, false) ||
      lt_binary(ctx, &ok, LT_LAND, ge, le) ||
      ltO_reduce_bool(ctx, "bernoulli", LT_RALL, ok, &valid))
    goto done;
  if (!valid) {
    rc = first_bad_probability(ctx, p, bad_pos, bad_value);
    goto done;
  }
  if (lt_empty_on(ctx, &u, LT_FLOAT64, p->ndim, p->size, lt_device(p), lt_device_index(p)) ||
      ltO_uniform_(ctx, u, 0, 1, g) || lt_binary(ctx, &hit, LT_LT, u, p) ||
      lt_to_dtype(ctx, out, hit, probs->dtype))
    goto done;
  rc = 0;
done:
  lt_release(p);
  lt_release(ge);
  lt_release(le);
  lt_release(ok);
  lt_release(u);
  lt_release(hit);
  return rc;
}

/* bernoulli(probs, opts): 1 with probability probs[i], elementwise, same dtype as probs;
** bernoulli(t, p, opts): a tensor of t's shape and dtype with 1 at probability p (PyTorch's
** Tensor.bernoulli(p)). */
static int l_bernoulli(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *pr = ltL_check(L, 1), *t;
  int opts = ltL_cr_opts_index(L, 2);
  ltL_cr_check_opts(L, opts, "bernoulli", ltL_cr_opts_gen);
  lt_generator *g = ltL_cr_opt_gen(L, opts);
  if (!g) g = ctx->gen;
  if (lua_type(L, 2) == LUA_TNUMBER) {
    double p = lua_tonumber(L, 2);
    if (!(p >= 0 && p <= 1)) {
      char num[32];
      /* "2" as PyTorch prints it, not Lua's "2.0"; any NaN as "nan" (0/0 has its sign set) */
      snprintf(num, sizeof num, "%g", p != p ? NAN : p);
      return luaL_error(L, "bernoulli: expects p to be in [0, 1], but got p=%s", num);
    }
    LTL_TRY(L, ctx, lt_empty_on(ctx, &t, pr->dtype, pr->ndim, pr->size, lt_device(pr),
                                lt_device_index(pr)));
    ltL_push(L, t);
    LTL_TRY(L, ctx, ltO_bernoulli_(ctx, t, p, g));
    return 1;
  }
  if (!lua_isnoneornil(L, 2) && !opts)
    return luaL_error(L, "bernoulli: bad argument #2 (number p or options table expected, got "
                      "%s)", luaL_typename(L, 2));
  ltL_cr_check_float(L, "bernoulli", pr->dtype);
  int64_t bad_pos;
  double bad_value = 0;
  bool grad = lt_set_grad_enabled(ctx, false);   /* the draws have no gradient */
  int rc = bernoulli_probs(ctx, &t, pr, g, &bad_pos, &bad_value);
  lt_set_grad_enabled(ctx, grad);
  if (rc) return ltL_raise(L, ctx);
  if (bad_pos >= 0)
    return luaL_error(L, "bernoulli: probabilities must be in [0, 1], got %f at flat "
                      "position %d", bad_value, (int)(bad_pos + 1));
  ltL_push(L, t);
  return 1;
}

/* ------------------------------------------------------------ in-place random fills */

/* Optional number at idx (nil or absent: def); an options table there means "absent". */
static double optnum(lua_State *L, int idx, double def) {
  if (lua_isnoneornil(L, idx) || lua_istable(L, idx)) return def;
  return luaL_checknumber(L, idx);
}

/* The generator of an in-place fill's options ({generator=}; NULL: the default), checked;
** `float_only` for the fills that need a float tensor. */
static lt_generator *fill_gen(lua_State *L, const char *op, const lt_tensor *t, bool float_only) {
  int opts = ltL_cr_opts_index(L, 2);
  ltL_cr_check_opts(L, opts, op, ltL_cr_opts_gen);
  if (float_only) ltL_cr_check_float(L, op, t->dtype);
  return ltL_cr_opt_gen(L, opts);
}

static int t_uniform_(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *t = ltL_check(L, 1);
  double a = optnum(L, 2, 0.0), b = optnum(L, 3, 1.0);
  LTL_RETURN_SELF(L, ctx, ltO_uniform_(ctx, t, a, b, fill_gen(L, "uniform_", t, true)));
}

static int t_normal_(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *t = ltL_check(L, 1);
  double mean = optnum(L, 2, 0.0), std = optnum(L, 3, 1.0);
  LTL_RETURN_SELF(L, ctx, ltO_normal_(ctx, t, mean, std, fill_gen(L, "normal_", t, true)));
}

static int t_bernoulli_(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *t = ltL_check(L, 1);
  double p = optnum(L, 2, 0.5);
  LTL_RETURN_SELF(L, ctx, ltO_bernoulli_(ctx, t, p, fill_gen(L, "bernoulli_", t, false)));
}

/* random_(): [0, 2^mantissa] for floats, [0, 2^63) for int64, {0,1} for bool;
** random_(to): [0, to); random_(from, to): [from, to). */
static int t_random_(lua_State *L) {
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *t = ltL_check(L, 1);
  lt_generator *g = fill_gen(L, "random_", t, false);
  int64_t lo = 0, hi;
  if (lua_type(L, 2) == LUA_TNUMBER) {
    ltL_cr_low_high(L, "random_", 2, &lo, &hi);
  } else {
    switch (t->dtype) {
      case LT_FLOAT32: hi = ((int64_t)1 << 24) + 1; break;
      case LT_FLOAT64: hi = ((int64_t)1 << 53) + 1; break;
      case LT_BOOL: hi = 2; break;
      default: hi = INT64_MAX; break;
    }
  }
  LTL_RETURN_SELF(L, ctx, ltO_randint_(ctx, t, lo, hi, g));
}

/* ------------------------------------------------------------ generators */

/* A Generator userdata boxes an lt_generator*; user value 1 is true when the box owns it
** (the default generator belongs to the context). */
static lt_generator *push_gen(lua_State *L, lt_generator *g, bool owned) {
  lt_generator **box = lua_newuserdatauv(L, sizeof *box, 1);
  *box = g;
  lua_pushboolean(L, owned);
  lua_setiuservalue(L, -2, 1);
  luaL_setmetatable(L, LTL_GEN_MT);
  return g;
}

static int gen_gc(lua_State *L) {
  lt_generator **box = luaL_checkudata(L, 1, LTL_GEN_MT);
  lua_getiuservalue(L, 1, 1);
  if (lua_toboolean(L, -1) && *box) ltB_generator_free(*box);
  *box = NULL;
  return 0;
}

static uint64_t check_seed(lua_State *L, int idx) {
  if (!lua_isinteger(L, idx))
    luaL_error(L, "manual_seed: seed must be an integer, got %s",
               lua_type(L, idx) == LUA_TNUMBER ? "a float" : luaL_typename(L, idx));
  return (uint64_t)lua_tointeger(L, idx);
}

/* lt.Generator(seed?) -- a new generator, seeded with `seed` (default 67280421310721 as
** PyTorch's default_rng_seed_val). */
static int l_generator_new(lua_State *L) {
  uint64_t seed = lua_isnoneornil(L, 1) ? 67280421310721ULL : check_seed(L, 1);
  lt_generator **box = lua_newuserdatauv(L, sizeof *box, 1);
  *box = NULL;
  lua_pushboolean(L, 1);
  lua_setiuservalue(L, -2, 1);
  luaL_setmetatable(L, LTL_GEN_MT);
  *box = ltB_generator_new(seed);
  if (!*box) return luaL_error(L, "Generator: out of memory");
  return 1;
}

/* A non-deterministic seed (time and address entropy), below 2^63 so it stays a positive
** Lua integer. */
static uint64_t fresh_seed(lua_State *L) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t x = (uint64_t)ts.tv_sec * 1000000007ULL ^ (uint64_t)ts.tv_nsec ^
               ((uint64_t)(uintptr_t)L << 16) ^ ((uint64_t)(uintptr_t)&ts >> 4);
  static _Thread_local uint64_t counter;
  x += 0x9e3779b97f4a7c15ULL * ++counter;
  x = (x ^ (x >> 31)) * 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 29;
  return x & 0x7fffffffffffffffULL;
}

static int gen_manual_seed(lua_State *L) {
  lt_generator *g = ltL_checkgen(L, 1);
  ltB_generator_seed(g, check_seed(L, 2));
  lua_settop(L, 1);
  return 1;
}

static int gen_seed(lua_State *L) {
  lt_generator *g = ltL_checkgen(L, 1);
  uint64_t s = fresh_seed(L);
  ltB_generator_seed(g, s);
  lua_pushinteger(L, (lua_Integer)s);
  return 1;
}

static int gen_initial_seed(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)ltL_checkgen(L, 1)->seed);
  return 1;
}

static int push_state(lua_State *L, const lt_generator *g) {
  lt_ctx *ctx = LTL_CTX(L);
  int64_t n = LT_GEN_STATE_WORDS;
  lt_tensor *t;
  LTL_TRY(L, ctx, lt_empty(ctx, &t, LT_INT64, 1, &n));
  ltB_generator_get_state(g, (uint64_t *)lt_data(t));
  ltL_push(L, t);
  return 1;
}

static void set_state(lua_State *L, lt_generator *g, int idx) {
  lt_tensor *t = ltL_check(L, idx);
  if (t->dtype != LT_INT64 || t->ndim != 1 || t->size[0] != LT_GEN_STATE_WORDS) {
    char buf[256];
    luaL_error(L, "set_state: expected an int64 tensor of %d elements (from get_state), got "
               "%s %s", LT_GEN_STATE_WORDS, lt_dtype_name(t->dtype), LT_SHAPE(t, buf));
  }
  uint64_t w[LT_GEN_STATE_WORDS];
  lt_tensor *h = ltL_host(L, t);   /* a state moved to a device is read from a host copy */
  const int64_t *p = lt_data(h);
  for (int i = 0; i < LT_GEN_STATE_WORDS; i++) w[i] = (uint64_t)p[i * h->stride[0]];
  lt_release(h);
  ltB_generator_set_state(g, w);
}

static int gen_get_state(lua_State *L) { return push_state(L, ltL_checkgen(L, 1)); }

static int gen_set_state(lua_State *L) {
  set_state(L, ltL_checkgen(L, 1), 2);
  lua_settop(L, 1);
  return 1;
}

static int gen_tostring(lua_State *L) {
  lt_generator *g = ltL_checkgen(L, 1);
  lua_pushfstring(L, "Generator(seed=%I)", (lua_Integer)g->seed);
  return 1;
}

/* The default generator as a (non-owning) Generator userdata, cached in the registry. */
static void push_default_gen(lua_State *L, lt_ctx *ctx) {
  if (lua_getfield(L, LUA_REGISTRYINDEX, "lantern.default_generator") == LUA_TUSERDATA) return;
  lua_pop(L, 1);
  push_gen(L, ctx->gen, false);
  lua_pushvalue(L, -1);
  lua_setfield(L, LUA_REGISTRYINDEX, "lantern.default_generator");
}

static int l_manual_seed(lua_State *L) {
  ltB_generator_seed(LTL_CTX(L)->gen, check_seed(L, 1));
  push_default_gen(L, LTL_CTX(L));
  return 1;
}

static int l_seed(lua_State *L) {
  uint64_t s = fresh_seed(L);
  ltB_generator_seed(LTL_CTX(L)->gen, s);
  lua_pushinteger(L, (lua_Integer)s);
  return 1;
}

static int l_initial_seed(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)LTL_CTX(L)->gen->seed);
  return 1;
}

static int l_get_rng_state(lua_State *L) { return push_state(L, LTL_CTX(L)->gen); }

static int l_set_rng_state(lua_State *L) {
  set_state(L, LTL_CTX(L)->gen, 1);
  return 0;
}

static void open_generator(lua_State *L) {
  /* stack: module, methods */
  static const luaL_Reg gen_methods[] = {
      {"manual_seed", gen_manual_seed}, {"seed", gen_seed},
      {"initial_seed", gen_initial_seed}, {"get_state", gen_get_state},
      {"set_state", gen_set_state},     {NULL, NULL},
  };
  lua_getfield(L, LUA_REGISTRYINDEX, "lantern.ctx");
  int ctxi = lua_gettop(L);
  if (luaL_newmetatable(L, LTL_GEN_MT)) {
    lua_pushcfunction(L, gen_gc);
    lua_setfield(L, -2, "__gc");
    lua_pushvalue(L, ctxi);
    lua_pushcclosure(L, gen_tostring, 1);
    lua_setfield(L, -2, "__tostring");
    lua_pushliteral(L, "Generator");
    lua_setfield(L, -2, "__name");
    lua_newtable(L);
    for (const luaL_Reg *r = gen_methods; r->name; r++) {
      lua_pushvalue(L, ctxi);
      lua_pushcclosure(L, r->func, 1);
      lua_setfield(L, -2, r->name);
    }
    lua_setfield(L, -2, "__index");
  }
  lua_pop(L, 1);   /* metatable */
  push_default_gen(L, lua_touserdata(L, ctxi));
  lua_setfield(L, -4, "default_generator");
  lua_pop(L, 1);   /* ctx */
}
/* multinomial(probs, num_samples, replacement=false, {replacement=, generator=}): categories
** drawn from each row of the weights, as 1-based positions (ltO_multinomial). */
static int l_multinomial(lua_State *L) {
  static const char *const known[] = {"replacement", "generator", NULL};
  lt_ctx *ctx = LTL_CTX(L);
  lt_tensor *probs = ltL_check(L, 1), *out;
  int isint;
  lua_Integer num = lua_tointegerx(L, 2, &isint);
  if (!isint)
    return luaL_error(L, "multinomial: num_samples must be an integer, got %s",
                      lua_type(L, 2) == LUA_TNUMBER ? "a fractional number" : luaL_typename(L, 2));
  bool replacement = false;
  int opts = 0;
  if (lua_isboolean(L, 3)) {
    replacement = lua_toboolean(L, 3);
    opts = lua_isnoneornil(L, 4) ? 0 : 4;
  } else if (!lua_isnoneornil(L, 3)) {
    opts = 3;
  }
  if (opts && (!lua_istable(L, opts) || ltL_test(L, opts)))
    return luaL_error(L, "multinomial: bad argument #%d (boolean replacement or options table "
                      "expected, got %s)", opts, luaL_typename(L, opts));
  ltL_cr_check_opts(L, opts, "multinomial", known);
  if (opts) replacement = ltL_optbool_field(L, opts, "replacement", replacement);
  LTL_TRY(L, ctx, ltO_multinomial(ctx, &out, probs, (int64_t)num, replacement,
                                  ltL_cr_opt_gen(L, opts), 1));
  ltL_push(L, out);
  return 1;
}


void ltL_open_random(lua_State *L) {
  static const ltL_Reg regs[] = {
      {"rand", l_rand, LTL_FN},
      {"randn", l_randn, LTL_FN},
      {"randint", l_randint, LTL_FN},
      {"randperm", l_randperm, LTL_FN},
      {"normal", l_normal, LTL_FN},
      {"bernoulli", l_bernoulli, LTL_FN | LTL_METHOD},
      {"multinomial", l_multinomial, LTL_FN | LTL_METHOD},
      {"uniform_", t_uniform_, LTL_METHOD},
      {"normal_", t_normal_, LTL_METHOD},
      {"bernoulli_", t_bernoulli_, LTL_METHOD},
      {"random_", t_random_, LTL_METHOD},
      {"Generator", l_generator_new, LTL_FN},
      {"manual_seed", l_manual_seed, LTL_FN},
      {"seed", l_seed, LTL_FN},
      {"initial_seed", l_initial_seed, LTL_FN},
      {"get_rng_state", l_get_rng_state, LTL_FN},
      {"set_rng_state", l_set_rng_state, LTL_FN},
      {NULL, NULL, 0},
  };
  ltL_register(L, regs);
  open_generator(L);
}
