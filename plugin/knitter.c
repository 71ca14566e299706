/*
 * knitter: the CNI plugin a container runtime execs, as a thin forwarder to the node agent.
 * C99 against libc only. It reads the CNI_* variables and the config on stdin, sends them in ONE
 * request to the agent's unix socket (POST /v1/cni/exec, wire version KNITTER_WIRE), and relays
 * the agent's answer byte for byte to stdout with the agent's exit status. All CNI logic (version
 * negotiation, validation, results, error codes) is the agent's.
 *
 * It answers on its own only VERSION, and a CNI error when it cannot get an answer: the agent
 * unreachable or too slow (code 11; 50 for STATUS), an answer that is not the wire's (999), or a
 * request too large to send (6). Its errors are printed in the config's cniVersion. A timer
 * (agentTimeoutSeconds, default 30 s, 5 s for STATUS) bounds the whole call: whatever hangs, the
 * runtime gets an error in time. See README.md and ../agent/README.md ("The plugin's wire").
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#ifndef CNI_VERSIONS_JSON
#error "build with -DCNI_VERSIONS_JSON='\"0.4.0\",...' (plugin/build.ts passes contract.ts's list)"
#endif

#define KNITTER_WIRE "1"
#define LATEST_VERSION "1.1.0"
#define DEFAULT_SOCKET "/run/knitter/agent.sock"
/* The agent takes request bodies up to this (MAX_AGENT_BODY_BYTES in agent/server/server.ts). */
#define MAX_BODY (1 << 20)
#define MAX_REPLY (4 << 20)
#define MAX_JSON_DEPTH 64
#define AGENT_HINT "is the knitter-agent DaemonSet pod running and ready on this node? " \
  "(kubectl get pods -A -o wide | grep knitter-agent, then read its log)"

struct buf {
  char *p;
  size_t len, cap;
};

/* What the call is about, set as soon as known: errors use it. */
static const char *command = "";
static char version[16] = LATEST_VERSION;
static const char *sock_path = DEFAULT_SOCKET;
static double timeout_s = 30;
/* What the timer prints: rewritten before each phase that may hang. */
static char timeout_msg[2048];
static volatile sig_atomic_t timeout_len;

static int is_status(void) { return strcmp(command, "STATUS") == 0; }

static void put(struct buf *b, const char *s, size_t n) {
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + n + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
      static const char oom[] = "{\"cniVersion\":\"" LATEST_VERSION "\",\"code\":999,"
                                "\"msg\":\"knitter plugin: out of memory\"}\n";
      (void)!write(1, oom, sizeof oom - 1);
      _exit(1);
    }
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = 0;
}

static void puts_(struct buf *b, const char *s) { put(b, s, strlen(s)); }

/* Bytes as the inside of a JSON string; bytes >= 0x80 pass as they are (the agent decodes UTF-8). */
static void put_escaped(struct buf *b, const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    char e[8];
    if (c == '"' || c == '\\') {
      e[0] = '\\', e[1] = (char)c;
      put(b, e, 2);
    } else if (c == '\n') {
      put(b, "\\n", 2);
    } else if (c == '\t') {
      put(b, "\\t", 2);
    } else if (c == '\r') {
      put(b, "\\r", 2);
    } else if (c < 0x20 || c == 0x7f) {
      snprintf(e, sizeof e, "\\u%04x", c);
      put(b, e, 6);
    } else {
      put(b, (const char *)&c, 1);
    }
  }
}

/* A CNI error object in the config's version (50 instead of 11 for STATUS, as the spec asks). */
static void error_json(struct buf *b, int code, const char *msg, const char *details) {
  if (code == 11 && is_status()) code = 50;
  char head[64];
  puts_(b, "{\"cniVersion\":\"");
  puts_(b, version);
  snprintf(head, sizeof head, "\",\"code\":%d,\"msg\":\"", code);
  puts_(b, head);
  put_escaped(b, msg, strlen(msg));
  puts_(b, "\",\"details\":\"");
  put_escaped(b, details, strlen(details));
  puts_(b, "\"}\n");
}

/* 0 once all is written, -1 (errno set) when the other end is gone. */
static int write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* Prints the answer and exits; the timer cannot interleave its own. */
static void finish(const char *out, size_t n, int status) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGALRM);
  sigprocmask(SIG_BLOCK, &set, NULL);
  (void)write_all(1, out, n);
  exit(status);
}

static void fail(int code, const char *msg, const char *details) {
  struct buf b = {0};
  error_json(&b, code, msg, details);
  finish(b.p, b.len, 1);
}

static void on_timer(int sig) {
  (void)sig;
  (void)write_all(1, timeout_msg, (size_t)timeout_len);
  _exit(1);
}

/* Arms the timer to print `code`/`msg`/`details` once `timeout_s` has passed from now. */
static void arm(int code, const char *msg, const char *details) {
  struct buf b = {0};
  error_json(&b, code, msg, details);
  size_t n = b.len < sizeof timeout_msg ? b.len : sizeof timeout_msg - 1;
  timeout_len = 0;
  memcpy(timeout_msg, b.p, n);
  timeout_len = (sig_atomic_t)n;
  free(b.p);
  struct itimerval t = {{0, 0}, {(time_t)timeout_s, (suseconds_t)((timeout_s - (time_t)timeout_s) * 1e6)}};
  if (t.it_value.tv_sec == 0 && t.it_value.tv_usec == 0) t.it_value.tv_usec = 1;
  setitimer(ITIMER_REAL, &t, NULL);
}

/* ---- a minimal JSON scan: the three top-level keys the forwarder needs, nothing else */

struct span {
  const char *p;
  size_t n;
};

static const char *ws(const char *p, const char *e) {
  while (p < e && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
  return p;
}

/* p at '"'; returns just past the closing quote, or NULL. */
static const char *skip_string(const char *p, const char *e) {
  for (p++; p < e; p++) {
    if (*p == '\\') {
      p++;
    } else if (*p == '"') {
      return p + 1;
    }
  }
  return NULL;
}

static const char *skip_value(const char *p, const char *e, int depth) {
  if (p >= e || depth > MAX_JSON_DEPTH) return NULL;
  if (*p == '"') return skip_string(p, e);
  if (*p == '{' || *p == '[') {
    char close = *p == '{' ? '}' : ']';
    p = ws(p + 1, e);
    if (p < e && *p == close) return p + 1;
    for (;;) {
      if (close == '}') {
        if (p >= e || *p != '"' || !(p = skip_string(p, e))) return NULL;
        p = ws(p, e);
        if (p >= e || *p != ':') return NULL;
        p = ws(p + 1, e);
      }
      if (!(p = skip_value(p, e, depth + 1))) return NULL;
      p = ws(p, e);
      if (p < e && *p == close) return p + 1;
      if (p >= e || *p != ',') return NULL;
      p = ws(p + 1, e);
    }
  }
  const char *start = p;
  while (p < e && (strchr("+-.eE", *p) || (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z'))) p++;
  return p > start ? p : NULL;
}

static int key_is(struct span k, const char *name) {
  return k.n == strlen(name) && memcmp(k.p, name, k.n) == 0;
}

/* Finds the last occurrence of each top-level key (as JSON.parse keeps); 0 if not an object. */
static int scan_config(const char *p, const char *e, struct span *sock, struct span *ver, struct span *tmo) {
  p = ws(p, e);
  if (p >= e || *p != '{') return 0;
  p = ws(p + 1, e);
  if (p < e && *p == '}') return 1;
  for (;;) {
    if (p >= e || *p != '"') return 0;
    struct span k = {p + 1, 0};
    if (!(p = skip_string(p, e))) return 0;
    k.n = (size_t)(p - 1 - k.p);
    p = ws(p, e);
    if (p >= e || *p != ':') return 0;
    p = ws(p + 1, e);
    const char *v = p;
    if (!(p = skip_value(p, e, 1))) return 0;
    struct span val = {v, (size_t)(p - v)};
    if (key_is(k, "agentSocket")) *sock = val;
    if (key_is(k, "cniVersion")) *ver = val;
    if (key_is(k, "agentTimeoutSeconds")) *tmo = val;
    p = ws(p, e);
    if (p < e && *p == '}') return 1;
    if (p >= e || *p != ',') return 0;
    p = ws(p + 1, e);
  }
}

/* A JSON string's inside when it is plain (no escapes, no control bytes); NULL otherwise. */
static char *plain_string(struct span v) {
  if (v.n < 2 || v.p[0] != '"' || v.p[v.n - 1] != '"') return NULL;
  for (size_t i = 1; i + 1 < v.n; i++) {
    if (v.p[i] == '\\' || (unsigned char)v.p[i] < 0x20) return NULL;
  }
  char *s = malloc(v.n - 1);
  if (!s) return NULL;
  memcpy(s, v.p + 1, v.n - 2);
  s[v.n - 2] = 0;
  return s;
}

/* The config's cniVersion for our own errors, when it is one we speak. */
static void take_version(struct span v) {
  char *s = plain_string(v);
  if (!s) return;
  char quoted[32];
  if (strlen(s) < sizeof version &&
      snprintf(quoted, sizeof quoted, "\"%s\"", s) < (int)sizeof quoted &&
      strstr(CNI_VERSIONS_JSON, quoted)) {
    strcpy(version, s);
  }
  free(s);
}

static void take_timeout(struct span v) {
  char num[64];
  if (v.n == 0 || v.n >= sizeof num) return;
  memcpy(num, v.p, v.n);
  num[v.n] = 0;
  char *end;
  double t = strtod(num, &end);
  /* Anything else the agent refuses with code 7, naming it; meanwhile the default bounds the wait. */
  if (*end == 0 && t > 0 && t <= 86400) timeout_s = t;
}

static void take_socket(struct span v) {
  char *s = plain_string(v);
  struct sockaddr_un sa;
  if (!s || s[0] != '/' || strlen(s) >= sizeof sa.sun_path) {
    fail(7, "agentSocket in the network config is not a usable socket path",
         s && s[0] == '/' ? "a unix socket path has at most 107 bytes; the default is " DEFAULT_SOCKET
                          : "it must be a JSON string holding an absolute path (no escapes); "
                            "the default is " DEFAULT_SOCKET);
  }
  sock_path = s;
}

/* ---- stdin, request, reply */

static void read_stdin(struct buf *in) {
  char chunk[65536];
  put(in, "", 0);
  for (;;) {
    ssize_t n = read(0, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return; /* EOF, or no stdin at all: the agent says what is missing */
    put(in, chunk, (size_t)n);
    if (in->len > MAX_BODY) {
      /* VERSION is a probe: it always gets its answer, from what came first. */
      if (strcmp(command, "VERSION") == 0) return;
      /* The keys before the cut still say which version to answer in. */
      struct span sock = {0}, ver = {0}, tmo = {0};
      scan_config(in->p, in->p + in->len, &sock, &ver, &tmo);
      take_version(ver);
      fail(6, "the network configuration on stdin is too large",
           "knitter takes at most 1 MiB on stdin (what the agent accepts in one request)");
    }
  }
}

static void put_env(struct buf *b, const char *name, int *first) {
  const char *v = getenv(name);
  if (!v) return;
  puts_(b, *first ? "\"" : ",\"");
  puts_(b, name);
  puts_(b, "\":\"");
  put_escaped(b, v, strlen(v));
  puts_(b, "\"");
  *first = 0;
}

static void build_request(struct buf *req, const struct buf *in) {
  static const char *const vars[] = {"CNI_COMMAND", "CNI_CONTAINERID", "CNI_NETNS",
                                     "CNI_IFNAME",  "CNI_ARGS",        "CNI_PATH"};
  struct buf body = {0};
  int first = 1;
  puts_(&body, "{\"wire\":" KNITTER_WIRE ",\"env\":{");
  for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) put_env(&body, vars[i], &first);
  puts_(&body, "},\"stdin\":\"");
  put_escaped(&body, in->p, in->len);
  puts_(&body, "\"}");
  if (body.len > MAX_BODY) {
    fail(6, "the network configuration and CNI_* variables are too large to forward",
         "the agent takes requests of at most 1 MiB, with stdin JSON-encoded");
  }
  char head[256];
  snprintf(head, sizeof head,
           "POST /v1/cni/exec HTTP/1.1\r\nHost: knitter-agent\r\nContent-Type: application/json\r\n"
           "Knitter-Wire: " KNITTER_WIRE "\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
           body.len);
  puts_(req, head);
  put(req, body.p, body.len);
  free(body.p);
}

static void not_answering(char *msg, size_t n) {
  snprintf(msg, n, "%s: the knitter agent at %s is not answering",
           is_status() ? "plugin not available" : "try again later", sock_path);
}

/* Code 11 (50 for STATUS): the agent is not answering, and why, in words an operator acts on. */
static void unreachable(const char *why) {
  char msg[512];
  not_answering(msg, sizeof msg);
  fail(11, msg, why);
}

static int connect_agent(void) {
  char why[1024];
  struct stat st;
  if (stat(sock_path, &st) != 0) {
    snprintf(why, sizeof why, "%s: %s; " AGENT_HINT, sock_path, strerror(errno));
    unreachable(why);
  }
  if (!S_ISSOCK(st.st_mode)) {
    snprintf(why, sizeof why,
             "%s exists but is not a socket; agentSocket in the network config (else "
             "KNITTER_AGENT_SOCKET, else " DEFAULT_SOCKET ") must name the agent's socket",
             sock_path);
    unreachable(why);
  }
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0) {
    snprintf(why, sizeof why, "cannot make a unix socket: %s", strerror(errno));
    unreachable(why);
  }
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof sa);
  sa.sun_family = AF_UNIX;
  strcpy(sa.sun_path, sock_path);
  while (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    if (errno == EINTR) continue;
    if (errno == EACCES || errno == EPERM) {
      snprintf(why, sizeof why,
               "the OS denied access to %s (%s); the plugin runs as the runtime's user (normally "
               "root) and the agent must create the socket for it",
               sock_path, strerror(errno));
    } else {
      snprintf(why, sizeof why, "%s exists but nothing accepts connections on it (%s); " AGENT_HINT,
               sock_path, strerror(errno));
    }
    unreachable(why);
  }
  return fd;
}

static void exchange(int fd, const struct buf *req, struct buf *reply) {
  char why[512];
  if (write_all(fd, req->p, req->len) != 0) {
    snprintf(why, sizeof why, "the connection dropped while sending the request (%s); " AGENT_HINT,
             strerror(errno));
    unreachable(why);
  }
  /* No shutdown(SHUT_WR): Deno's HTTP server takes a half-close for a client gone away. The
     request says "Connection: close", so the agent closes after its answer. */
  char chunk[65536];
  for (;;) {
    ssize_t n = read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      snprintf(why, sizeof why, "the connection dropped while reading the answer (%s); " AGENT_HINT,
               strerror(errno));
      unreachable(why);
    }
    if (n == 0) return;
    put(reply, chunk, (size_t)n);
    if (reply->len > MAX_REPLY) {
      fail(999, "the knitter agent's answer is too large", "more than 4 MiB; a CNI answer is far smaller");
    }
  }
}

/* The value of header `name` (case-insensitive) in head[0..n), copied into out; 0 if absent. */
static int header(const char *head, size_t n, const char *name, char *out, size_t cap) {
  size_t len = strlen(name);
  for (const char *p = head; p < head + n;) {
    const char *eol = memchr(p, '\n', (size_t)(head + n - p));
    if (!eol) eol = head + n;
    if ((size_t)(eol - p) > len && p[len] == ':' && strncasecmp(p, name, len) == 0) {
      const char *v = p + len + 1;
      while (v < eol && (*v == ' ' || *v == '\t')) v++;
      const char *end = eol;
      while (end > v && (end[-1] == '\r' || end[-1] == ' ')) end--;
      size_t vn = (size_t)(end - v) < cap - 1 ? (size_t)(end - v) : cap - 1;
      memcpy(out, v, vn);
      out[vn] = 0;
      return 1;
    }
    p = eol + 1;
  }
  return 0;
}

static void mismatch(const char *what) {
  char msg[512], details[1024];
  snprintf(msg, sizeof msg, "the knitter agent at %s does not speak this plugin's wire version " KNITTER_WIRE,
           sock_path);
  snprintf(details, sizeof details,
           "%s; the plugin in the CNI bin dir and the agent come from different Knitter releases: "
           "install the plugin that comes with the running agent (the agent DaemonSet's install-cni "
           "init container copies it), or run the agent of the plugin's release",
           what);
  fail(999, msg, details);
}

/* Checks the reply is the wire's answer, then prints its body and exits with its status. */
static void relay(const struct buf *reply) {
  char why[512], value[64], excerpt[128];
  const char *end = reply->len ? strstr(reply->p, "\r\n\r\n") : NULL;
  if (reply->len == 0) {
    unreachable("the agent closed the connection without an answer; " AGENT_HINT);
  }
  if (!end || strncmp(reply->p, "HTTP/1.", 7) != 0 || reply->len < 12) {
    snprintf(excerpt, sizeof excerpt, "%.60s", reply->p);
    for (char *c = excerpt; *c; c++) if ((unsigned char)*c < 0x20) *c = ' ';
    if (!end && strncmp(reply->p, "HTTP/1.", 7) == 0) {
      unreachable("the connection closed inside the answer's headers; " AGENT_HINT);
    }
    snprintf(why, sizeof why, "the answer is not HTTP/1.x: \"%s\"", excerpt);
    mismatch(why);
  }
  size_t head_n = (size_t)(end - reply->p);
  const char *body = end + 4;
  size_t body_n = reply->len - (size_t)(body - reply->p);
  int status = atoi(reply->p + 9);
  if (!header(reply->p, head_n, "Knitter-Wire", value, sizeof value)) {
    snprintf(why, sizeof why, "it answered HTTP %d without a Knitter-Wire header: it is older than the plugin",
             status);
    mismatch(why);
  }
  if (strcmp(value, KNITTER_WIRE) != 0) {
    snprintf(why, sizeof why, "it speaks wire version %s (HTTP %d)", value, status);
    mismatch(why);
  }
  if (header(reply->p, head_n, "Transfer-Encoding", value, sizeof value)) {
    mismatch("it answered with a Transfer-Encoding; the wire's answers have a Content-Length");
  }
  if (!header(reply->p, head_n, "Content-Length", value, sizeof value)) {
    mismatch("its answer has no Content-Length");
  }
  if (strtoul(value, NULL, 10) != body_n) {
    snprintf(why, sizeof why,
             "the answer's body has %zu bytes, its Content-Length says %s: the connection closed "
             "in the middle of it; " AGENT_HINT,
             body_n, value);
    unreachable(why);
  }
  char *e;
  if (!header(reply->p, head_n, "Knitter-Exit-Code", value, sizeof value) ||
      strtol(value, &e, 10) < 0 || strtol(value, NULL, 10) > 255 || *e || !*value) {
    mismatch("its answer has no Knitter-Exit-Code header of 0-255");
  }
  finish(body, body_n, (int)strtol(value, NULL, 10));
}

int main(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_timer;
  sigaction(SIGALRM, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  command = getenv("CNI_COMMAND") ? getenv("CNI_COMMAND") : "";
  if (is_status()) timeout_s = 5;
  arm(6, "the runtime did not close stdin in time",
      "a CNI runtime writes the network configuration to stdin and closes it");

  struct buf in = {0};
  read_stdin(&in);
  struct span sock = {0}, ver = {0}, tmo = {0};
  scan_config(in.p, in.p + in.len, &sock, &ver, &tmo);
  take_version(ver);
  if (strcmp(command, "VERSION") == 0) {
    struct buf out = {0};
    char *asked = plain_string(ver);
    puts_(&out, "{\"cniVersion\":\"");
    puts_(&out, asked && *asked ? asked : LATEST_VERSION);
    puts_(&out, "\",\"supportedVersions\":[" CNI_VERSIONS_JSON "]}\n");
    finish(out.p, out.len, 0);
  }
  take_timeout(tmo);
  if (sock.n) {
    take_socket(sock);
  } else if (getenv("KNITTER_AGENT_SOCKET") && *getenv("KNITTER_AGENT_SOCKET")) {
    sock_path = getenv("KNITTER_AGENT_SOCKET");
    if (sock_path[0] != '/' || strlen(sock_path) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
      fail(7, "KNITTER_AGENT_SOCKET is not a usable socket path",
           "it must be an absolute path of at most 107 bytes");
    }
  }

  struct buf req = {0}, reply = {0};
  build_request(&req, &in);
  char details[512];
  snprintf(details, sizeof details, "no answer within %gs; the agent may be overloaded or stuck; " AGENT_HINT,
           timeout_s);
  char msg[512];
  not_answering(msg, sizeof msg);
  arm(11, msg, details);
  int fd = connect_agent();
  exchange(fd, &req, &reply);
  relay(&reply);
  return 0;
}
