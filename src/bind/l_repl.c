/*
** l_repl.c -- what the interactive session (lua/lantern/repl.lua) needs from C.
**
** Lua cannot catch SIGINT, so, as lua.c does, a signal handler sets a hook that raises
** "interrupted!" at the next Lua instruction. Unlike lua.c the handler stays installed, so
** any number of Ctrl-C's each interrupt one evaluation, and at the prompt it only records the
** interrupt (and, installed without SA_RESTART there, wakes a blocked read or poll), so the
** session can clear the line instead of ending.
**
**   core._repl_eval(msgh, f, ...)   like xpcall(f, msgh, ...), with Ctrl-C interrupting f
**   core._repl_prompt(on)           on: Ctrl-C records an interrupt; off: the old handler back
**   core._repl_interrupted()        true once for each interrupt recorded since the last call
**   core._repl_readline(prompt)     a line read with GNU readline: the line, nil at end of
**                                   input, false when Ctrl-C abandoned it; or nothing when
**                                   readline is not loaded (see below)
**   core._embedded_source(name)     source of a module compiled into the library, or nil
**
** Readline: lua-readline's blocking readline() acts on Ctrl-C only at Enter, and its wrappers
** of the callback interface close the terminal stream before readline's last write to it, so
** the session drives readline's callback interface itself, the way Python's prompt does. The
** library is the one lua-readline has loaded (dlopen with RTLD_NOLOAD): Lantern neither links
** nor loads readline, and lua-readline's history and completion, which act on the same
** library's state, keep working.
*/
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lbind.h"

enum { MODE_OFF, MODE_PROMPT, MODE_EVAL };

static volatile sig_atomic_t mode = MODE_OFF;
static volatile sig_atomic_t pending;
static lua_State *volatile target;   /* the state whose evaluation Ctrl-C interrupts */
static pthread_t main_thread;
static struct sigaction previous;
static int installed;

/* The message names the place that was running (level 0 in a hook), not its caller. */
static void interrupt_hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  lua_sethook(L, NULL, 0, 0);
  luaL_where(L, 0);
  lua_pushliteral(L, "interrupted!");
  lua_concat(L, 2);
  lua_error(L);
}

static void on_sigint(int sig) {
  /* the kernel may hand the signal to a worker or OpenBLAS thread; only the main thread's
  ** blocked read is woken by it, so it is passed on */
  if (!pthread_equal(pthread_self(), main_thread)) {
    pthread_kill(main_thread, sig);
    return;
  }
  pending = 1;
  lua_State *L = target;
  if (mode == MODE_EVAL && L)
    lua_sethook(L, interrupt_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
}

/* At the prompt the handler must interrupt a blocked read (no SA_RESTART); during an
** evaluation the program's own reads and writes must not see EINTR (SA_RESTART). */
static int set_mode(lua_State *L, int m) {
  if (m == MODE_OFF) {
    if (installed) sigaction(SIGINT, &previous, NULL);
    installed = 0;
    mode = MODE_OFF;
    target = NULL;
    return 0;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = m == MODE_EVAL ? SA_RESTART : 0;
  target = L;
  mode = m;
  main_thread = pthread_self();
  if (sigaction(SIGINT, &sa, installed ? NULL : &previous) != 0) {
    mode = MODE_OFF;
    target = NULL;
    return -1;
  }
  installed = 1;
  return 0;
}

/* A hook set by a signal that came after the last Lua instruction of the evaluation would
** fire in the session's own code; it is removed (a hook the user set is left alone). */
static void drop_hook(lua_State *L) {
  if (lua_gethook(L) == interrupt_hook) lua_sethook(L, NULL, 0, 0);
}

static int l_repl_eval(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  int nargs = lua_gettop(L) - 2;
  int prev = mode;
  lua_State *prev_target = target;
  pending = 0;
  if (set_mode(L, MODE_EVAL) != 0)
    return luaL_error(L, "_repl_eval: sigaction failed: %s", strerror(errno));
  int rc = lua_pcall(L, nargs, LUA_MULTRET, 1);
  if (prev == MODE_OFF) {
    set_mode(L, MODE_OFF);
  } else {
    set_mode(prev_target ? prev_target : L, prev);
  }
  drop_hook(L);
  pending = 0;
  lua_pushboolean(L, rc == LUA_OK);
  lua_replace(L, 1);   /* [ok, results...] or [false, error], as xpcall returns */
  return lua_gettop(L);
}

static int l_repl_prompt(lua_State *L) {
  int on = lua_toboolean(L, 1);
  drop_hook(L);
  if (set_mode(L, on ? MODE_PROMPT : MODE_OFF) != 0)
    return luaL_error(L, "_repl_prompt: sigaction failed: %s", strerror(errno));
  return 0;
}

static int l_repl_interrupted(lua_State *L) {
  lua_pushboolean(L, pending);
  pending = 0;
  return 1;
}

static struct {
  int tried, ok;
  void (*install)(const char *, void (*)(char *));
  void (*read_char)(void);
  void (*remove)(void);
  void (*sigcleanup)(void);
  void (*free_line_state)(void);
  void (*cleanup_after_signal)(void);
} rl;
static char *rl_line;
static int rl_done;

static int rl_open(void) {
  if (rl.tried) return rl.ok;
  rl.tried = 1;
  const char *names[] = {"libreadline.so.8", "libreadline.so"};
  void *h = NULL;
  for (size_t i = 0; i < sizeof names / sizeof names[0] && !h; i++)
    h = dlopen(names[i], RTLD_LAZY | RTLD_NOLOAD);
  if (!h) return 0;
  /* POSIX's way to take a function from dlsym's object pointer */
  *(void **)&rl.install = dlsym(h, "rl_callback_handler_install");
  *(void **)&rl.read_char = dlsym(h, "rl_callback_read_char");
  *(void **)&rl.remove = dlsym(h, "rl_callback_handler_remove");
  *(void **)&rl.sigcleanup = dlsym(h, "rl_callback_sigcleanup");
  *(void **)&rl.free_line_state = dlsym(h, "rl_free_line_state");
  *(void **)&rl.cleanup_after_signal = dlsym(h, "rl_cleanup_after_signal");
  rl.ok = rl.install && rl.read_char && rl.remove && rl.sigcleanup && rl.free_line_state &&
          rl.cleanup_after_signal;
  return rl.ok;
}

/* Readline has restored the terminal before it calls this; removing the handler here stops it
** from showing the prompt again. */
static void rl_on_line(char *line) {
  rl_line = line;
  rl_done = 1;
  rl.remove();
}

static int l_repl_readline(lua_State *L) {
  const char *prompt = luaL_checkstring(L, 1);
  if (!rl_open()) return 0;
  rl_line = NULL;
  rl_done = 0;
  pending = 0;
  /* SIGINT stays blocked except inside ppoll and readline, so that one arriving between the
  ** check of `pending` and the wait cannot leave the wait blocked until the next key */
  sigset_t block, orig;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  pthread_sigmask(SIG_BLOCK, &block, &orig);
  rl.install(prompt, rl_on_line);
  int err = 0;
  while (!rl_done) {
    if (pending) {
      /* what Python's prompt does on Ctrl-C: drop the line and readline's state for it */
      pending = 0;
      rl.free_line_state();
      rl.sigcleanup();
      rl.cleanup_after_signal();
      rl.remove();
      fputs("^C\n", stdout);
      fflush(stdout);
      pthread_sigmask(SIG_SETMASK, &orig, NULL);
      lua_pushboolean(L, 0);
      return 1;
    }
    struct pollfd p = {.fd = 0, .events = POLLIN};
    int r = ppoll(&p, 1, NULL, &orig);
    if (r > 0) {
      pthread_sigmask(SIG_SETMASK, &orig, NULL);
      rl.read_char();   /* may run the Lua completion function (lua-readline's) */
      pthread_sigmask(SIG_BLOCK, &block, NULL);
    } else if (r < 0 && errno != EINTR) {
      err = errno;
      rl.remove();
      break;
    }
  }
  pthread_sigmask(SIG_SETMASK, &orig, NULL);
  if (err) return luaL_error(L, "_repl_readline: poll failed: %s", strerror(err));
  if (!rl_line) {
    lua_pushnil(L);
    return 1;
  }
  lua_pushstring(L, rl_line);
  free(rl_line);
  return 1;
}

extern const char *const lantern_lua_sources[];

static int l_embedded_source(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  for (int i = 0; lantern_lua_sources[i]; i += 2) {
    if (strcmp(lantern_lua_sources[i], name) == 0) {
      lua_pushstring(L, lantern_lua_sources[i + 1]);
      return 1;
    }
  }
  lua_pushnil(L);
  return 1;
}

static const ltL_Reg repl_regs[] = {
    {"_repl_eval", l_repl_eval, LTL_FN},
    {"_repl_prompt", l_repl_prompt, LTL_FN},
    {"_repl_interrupted", l_repl_interrupted, LTL_FN},
    {"_repl_readline", l_repl_readline, LTL_FN},
    {"_embedded_source", l_embedded_source, LTL_FN},
    {NULL, NULL, 0},
};

void ltL_open_repl(lua_State *L) { ltL_register(L, repl_regs); }
