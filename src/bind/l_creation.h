/*
** l_creation.h -- what the constructor bindings share (l_creation.c: tensor{}, filled and _like
** constructors, ranges; l_random.c: random constructors, fills and generators): the trailing
** options table and the finishing of a new tensor. Defined in l_creation.c.
*/
#ifndef LT_L_CREATION_H
#define LT_L_CREATION_H

#include "lbind.h"

/* The option keys each kind of constructor takes (NULL-terminated). */
extern const char *const ltL_cr_opts_new[];      /* dtype, requires_grad, device */
extern const char *const ltL_cr_opts_random[];   /* ... and generator */
extern const char *const ltL_cr_opts_gen[];      /* generator only (the in-place fills) */

/* Index of the trailing options table among args [first, top] (0 if none). */
int ltL_cr_opts_index(lua_State *L, int first);
/* The sizes from argument 1 on (a list or numbers) and the options table after them (*opts 0 if
** none), checked: unknown keys of `known`, the device, negative sizes. Returns the rank. */
int ltL_cr_size_args(lua_State *L, const char *op, const char *const *known, int64_t *size,
                     int *opts);
/* Raises for a negative size. */
void ltL_cr_check_sizes(lua_State *L, const char *op, int n, const int64_t *size);
/* Refuses keys outside `known` in the options table at opts (0: none), and a device that is no
** device or is not available, before anything is made. */
void ltL_cr_check_opts(lua_State *L, int opts, const char *op, const char *const *known);
/* The new tensor on the stack top moves to the options' device and gets requires_grad. */
void ltL_cr_finish(lua_State *L, int opts);
/* Pushes t (taking the reference) and finishes it as ltL_cr_finish. */
void ltL_cr_push(lua_State *L, lt_tensor *t, int opts);
/* The options' dtype (def when absent) and generator (NULL: the default one). */
lt_dtype ltL_cr_opt_dtype(lua_State *L, int opts, lt_dtype def);
lt_generator *ltL_cr_opt_gen(lua_State *L, int opts);
/* Raises unless dt is a float dtype (the random distributions). */
void ltL_cr_check_float(lua_State *L, const char *op, lt_dtype dt);
/* Reads (low?, high) integers from idx, low < high; returns the index after them. */
int ltL_cr_low_high(lua_State *L, const char *op, int idx, int64_t *lo, int64_t *hi);

#endif
