/* resp.c: a RESP server (redis GET/SET) on epoll, one ucontext coroutine per
 * connection, built with -finstrument-functions. Load it with
 *   redis-benchmark -p PORT -t get,set
 *
 * usage: resp [PORT]   (0, the default, picks a free port; the port is printed first)
 * Commands: GET, SET, DEL, PING, ECHO, CONFIG (empty reply), QUIT, SHUTDOWN, as RESP
 * arrays or inline. SIGINT/SIGTERM or SHUTDOWN end it cleanly. Single-threaded: the
 * event loop runs in main's context and resumes a connection when its socket is ready. */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <ucontext.h>
#include <unistd.h>

#define STACK_SIZE (64 * 1024)
#define BUF_SIZE (16 * 1024)
#define MAX_ARGS 8
#define NBUCKETS 65536

struct entry {
	struct entry *next;
	char *key, *val;
	size_t klen, vlen;
};

struct conn {
	int fd;
	ucontext_t uc;
	char *stack;
	char in[BUF_SIZE];
	size_t inlen, inpos;
	char *out;
	size_t outlen, outcap;
	int closed;
	unsigned waiting; /* EPOLLIN or EPOLLOUT: what the coroutine waits for */
};

static struct entry *buckets[NBUCKETS];
static struct conn *conns[65536];
static ucontext_t loop_uc;
static struct conn *current;
static int epfd;
static volatile sig_atomic_t stopping;

/* --- the store ----------------------------------------------------------------- */

static size_t hash(const char *s, size_t n)
{
	size_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
	return h & (NBUCKETS - 1);
}

static struct entry **lookup(const char *k, size_t n)
{
	struct entry **e = &buckets[hash(k, n)];
	while (*e && ((*e)->klen != n || memcmp((*e)->key, k, n)))
		e = &(*e)->next;
	return e;
}

static int store_set(const char *k, size_t kn, const char *v, size_t vn)
{
	struct entry **e = lookup(k, kn);
	char *val = malloc(vn + 1);
	if (!val)
		return -1;
	memcpy(val, v, vn);
	if (*e) {
		free((*e)->val);
	} else {
		struct entry *n = calloc(1, sizeof(*n));
		if (!n || !(n->key = malloc(kn + 1))) {
			free(n);
			free(val);
			return -1;
		}
		memcpy(n->key, k, kn);
		n->klen = kn;
		*e = n;
	}
	(*e)->val = val;
	(*e)->vlen = vn;
	return 0;
}

static int store_del(const char *k, size_t kn)
{
	struct entry **e = lookup(k, kn), *d = *e;
	if (!d)
		return 0;
	*e = d->next;
	free(d->key);
	free(d->val);
	free(d);
	return 1;
}

/* --- waiting inside a connection's coroutine ------------------------------------ */

/* Suspends the connection until its socket is ready for `events`. */
static void wait_for(unsigned events)
{
	struct conn *c = current;
	if (c->waiting != events) {
		struct epoll_event ev = {.events = events, .data.fd = c->fd};
		epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev);
		c->waiting = events;
	}
	swapcontext(&c->uc, &loop_uc);
}

static void reply(struct conn *c, const char *s, size_t n)
{
	if (c->outlen + n > c->outcap) {
		size_t cap = (c->outlen + n) * 2;
		char *o = realloc(c->out, cap);
		if (!o) {
			c->closed = 1;
			return;
		}
		c->out = o;
		c->outcap = cap;
	}
	memcpy(c->out + c->outlen, s, n);
	c->outlen += n;
}

static void reply_str(struct conn *c, const char *s)
{
	reply(c, s, strlen(s));
}

static void reply_bulk(struct conn *c, const char *s, size_t n)
{
	char head[32];
	int h = snprintf(head, sizeof(head), "$%zu\r\n", n);
	reply(c, head, (size_t)h);
	reply(c, s, n);
	reply(c, "\r\n", 2);
}

static void flush_out(struct conn *c)
{
	size_t off = 0;
	while (off < c->outlen && !c->closed) {
		ssize_t n = write(c->fd, c->out + off, c->outlen - off);
		if (n > 0)
			off += (size_t)n;
		else if (n < 0 && errno == EAGAIN)
			wait_for(EPOLLOUT);
		else if (!(n < 0 && errno == EINTR))
			c->closed = 1;
	}
	c->outlen = 0;
}

/* Reads more input; 0 on end of stream or error. Flushes pending replies first, as a
 * client waits for them before sending more. */
static int fill(struct conn *c)
{
	if (c->inpos > 0) {
		memmove(c->in, c->in + c->inpos, c->inlen - c->inpos);
		c->inlen -= c->inpos;
		c->inpos = 0;
	}
	if (c->inlen == sizeof(c->in))
		return 0; /* a request larger than the buffer */
	for (;;) {
		ssize_t n = read(c->fd, c->in + c->inlen, sizeof(c->in) - c->inlen);
		if (n > 0) {
			c->inlen += (size_t)n;
			return 1;
		}
		if (n == 0 || (errno != EAGAIN && errno != EINTR))
			return 0;
		if (errno == EAGAIN) {
			flush_out(c);
			wait_for(EPOLLIN);
		}
	}
}

/* --- parsing -------------------------------------------------------------------- */

/* A line ending in \r\n starting at inpos; returns its length, reading more as needed,
 * or -1 at end of stream. */
static long read_line(struct conn *c)
{
	for (;;) {
		char *s = c->in + c->inpos;
		char *nl = memchr(s, '\n', c->inlen - c->inpos);
		if (nl)
			return nl - s;
		if (!fill(c))
			return -1;
	}
}

struct request {
	int argc;
	char *argv[MAX_ARGS];
	size_t len[MAX_ARGS];
	char storage[BUF_SIZE];
};

/* Parses one request (array or inline) into r; 0 ok, -1 connection done. */
static int parse_request(struct conn *c, struct request *r)
{
	long n = read_line(c);
	if (n < 0)
		return -1;
	char *line = c->in + c->inpos;
	size_t used = 0;
	r->argc = 0;
	if (line[0] != '*') { /* inline: words separated by spaces */
		line[n] = 0;
		if (n > 0 && line[n - 1] == '\r')
			line[n - 1] = 0;
		for (char *save, *w = strtok_r(line, " ", &save); w && r->argc < MAX_ARGS;
		     w = strtok_r(NULL, " ", &save)) {
			size_t l = strlen(w);
			if (used + l + 1 > sizeof(r->storage))
				return -1;
			memcpy(r->storage + used, w, l + 1);
			r->argv[r->argc] = r->storage + used;
			r->len[r->argc++] = l;
			used += l + 1;
		}
		c->inpos += (size_t)n + 1;
		return 0;
	}
	long count = strtol(line + 1, NULL, 10);
	c->inpos += (size_t)n + 1;
	for (long i = 0; i < count; i++) {
		if ((n = read_line(c)) < 0)
			return -1;
		long len = strtol(c->in + c->inpos + 1, NULL, 10);
		c->inpos += (size_t)n + 1;
		if (len < 0 || used + (size_t)len + 1 > sizeof(r->storage) ||
		    (size_t)len + 2 > sizeof(c->in))
			return -1;
		while (c->inlen - c->inpos < (size_t)len + 2)
			if (!fill(c))
				return -1;
		if (r->argc < MAX_ARGS) {
			memcpy(r->storage + used, c->in + c->inpos, (size_t)len);
			r->storage[used + (size_t)len] = 0;
			r->argv[r->argc] = r->storage + used;
			r->len[r->argc++] = (size_t)len;
			used += (size_t)len + 1;
		}
		c->inpos += (size_t)len + 2;
	}
	return 0;
}

/* --- commands ------------------------------------------------------------------- */

static void cmd_get(struct conn *c, struct request *r)
{
	struct entry *e = *lookup(r->argv[1], r->len[1]);
	if (e)
		reply_bulk(c, e->val, e->vlen);
	else
		reply_str(c, "$-1\r\n");
}

static void cmd_set(struct conn *c, struct request *r)
{
	if (store_set(r->argv[1], r->len[1], r->argv[2], r->len[2]) == 0)
		reply_str(c, "+OK\r\n");
	else
		reply_str(c, "-ERR out of memory\r\n");
}

static void cmd_del(struct conn *c, struct request *r)
{
	char buf[32];
	int n = 0;
	for (int i = 1; i < r->argc; i++)
		n += store_del(r->argv[i], r->len[i]);
	reply(c, buf, (size_t)snprintf(buf, sizeof(buf), ":%d\r\n", n));
}

static void execute(struct conn *c, struct request *r)
{
	const char *cmd = r->argv[0];
	if (!strcasecmp(cmd, "GET") && r->argc == 2)
		cmd_get(c, r);
	else if (!strcasecmp(cmd, "SET") && r->argc >= 3)
		cmd_set(c, r);
	else if (!strcasecmp(cmd, "DEL") && r->argc >= 2)
		cmd_del(c, r);
	else if (!strcasecmp(cmd, "PING"))
		reply_str(c, "+PONG\r\n");
	else if (!strcasecmp(cmd, "ECHO") && r->argc == 2)
		reply_bulk(c, r->argv[1], r->len[1]);
	else if (!strcasecmp(cmd, "CONFIG"))
		reply_str(c, "*0\r\n");
	else if (!strcasecmp(cmd, "QUIT")) {
		reply_str(c, "+OK\r\n");
		c->closed = 1;
	} else if (!strcasecmp(cmd, "SHUTDOWN")) {
		stopping = 1;
		c->closed = 1;
	} else
		reply_str(c, "-ERR unknown command\r\n");
}

/* A connection's coroutine: requests in, replies out, until the client goes. */
static void serve(int fd)
{
	struct conn *c = conns[fd];
	struct request *r = malloc(sizeof(*r));
	while (r && !c->closed && parse_request(c, r) == 0) {
		if (r->argc > 0)
			execute(c, r);
		if (c->inpos == c->inlen) /* no pipelined request left: send the replies */
			flush_out(c);
	}
	free(r);
	c->closed = 1;
}

/* --- the event loop ------------------------------------------------------------- */

static void resume(struct conn *c)
{
	current = c;
	swapcontext(&loop_uc, &c->uc);
	current = NULL;
	if (c->closed) {
		epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd, NULL);
		close(c->fd);
		conns[c->fd] = NULL;
		free(c->stack);
		free(c->out);
		free(c);
	}
}

static void accept_all(int lfd)
{
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		struct conn *c = calloc(1, sizeof(*c));
		if (fd >= 65536 || !c || !(c->stack = malloc(STACK_SIZE))) {
			free(c);
			close(fd);
			continue;
		}
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		c->fd = fd;
		conns[fd] = c;
		getcontext(&c->uc);
		c->uc.uc_stack.ss_sp = c->stack;
		c->uc.uc_stack.ss_size = STACK_SIZE;
		c->uc.uc_link = &loop_uc;
		makecontext(&c->uc, (void (*)(void))serve, 1, fd);
		struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
		c->waiting = EPOLLIN;
		epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
		resume(c);
	}
}

static void on_stop(int sig)
{
	stopping = 1;
}

static int listen_on(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons((uint16_t)port),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(a);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 512) ||
	    getsockname(fd, (struct sockaddr *)&a, &alen)) {
		perror("resp: listen");
		exit(1);
	}
	printf("resp: listening on port %d\n", ntohs(a.sin_port));
	fflush(stdout);
	return fd;
}

int main(int argc, char **argv)
{
	int port = argc > 1 ? atoi(argv[1]) : 0;
	struct sigaction sa = {.sa_handler = on_stop};
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	int lfd = listen_on(port);
	epfd = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = lfd};
	epoll_ctl(epfd, EPOLL_CTL_ADD, lfd, &ev);
	while (!stopping) {
		struct epoll_event evs[64];
		int n = epoll_wait(epfd, evs, 64, -1);
		for (int i = 0; i < n && !stopping; i++) {
			int fd = evs[i].data.fd;
			if (fd == lfd)
				accept_all(lfd);
			else if (conns[fd])
				resume(conns[fd]);
		}
	}
	for (int fd = 0; fd < 65536; fd++)
		if (conns[fd]) {
			close(fd);
			free(conns[fd]->stack);
			free(conns[fd]->out);
			free(conns[fd]);
		}
	for (size_t i = 0; i < NBUCKETS; i++)
		while (buckets[i])
			store_del(buckets[i]->key, buckets[i]->klen);
	close(lfd);
	close(epfd);
	printf("resp: stopped\n");
	return 0;
}
