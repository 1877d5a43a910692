/* st-resp.c: a RESP server (redis GET/SET) on State Threads (libst), one st thread per
 * connection, built with -finstrument-functions. State Threads switches with code of
 * its own, which coprof follows from the stack pointer (runtime "stack"). Load it with
 *   redis-benchmark -p PORT -t get,set
 *
 * usage: st-resp [PORT]   (0, the default, picks a free port; the port is printed first)
 * Commands: GET, SET, DEL, PING, CONFIG (empty reply), QUIT, SHUTDOWN, as RESP arrays.
 * SIGINT/SIGTERM or SHUTDOWN end it cleanly. */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <st.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUF_SIZE (16 * 1024)
#define MAX_ARGS 8
#define NBUCKETS 65536

struct entry {
	struct entry *next;
	char *key, *val;
	size_t klen, vlen;
};

struct conn {
	st_netfd_t fd;
	char in[BUF_SIZE];
	size_t start, end; /* unread bytes in[start, end) */
	char out[BUF_SIZE];
	size_t olen;
};

struct request {
	int argc;
	char *argv[MAX_ARGS];
	size_t len[MAX_ARGS];
};

static struct entry *table[NBUCKETS];
static volatile sig_atomic_t stopping;

static size_t hash(const char *s, size_t n)
{
	size_t h = 5381;
	for (size_t i = 0; i < n; i++)
		h = h * 33 + (unsigned char)s[i];
	return h & (NBUCKETS - 1);
}

static struct entry **lookup(const char *k, size_t n)
{
	struct entry **e = &table[hash(k, n)];
	while (*e && ((*e)->klen != n || memcmp((*e)->key, k, n) != 0))
		e = &(*e)->next;
	return e;
}

static int store_set(const char *k, size_t kn, const char *v, size_t vn)
{
	struct entry **slot = lookup(k, kn), *e = *slot;
	char *val = malloc(vn ? vn : 1);
	if (!val)
		return -1;
	memcpy(val, v, vn);
	if (!e) {
		e = calloc(1, sizeof(*e));
		char *key = malloc(kn ? kn : 1);
		if (!e || !key) {
			free(e);
			free(key);
			free(val);
			return -1;
		}
		memcpy(key, k, kn);
		e->key = key;
		e->klen = kn;
		*slot = e;
	} else {
		free(e->val);
	}
	e->val = val;
	e->vlen = vn;
	return 0;
}

/* Flushes the replies gathered so far; the st thread sleeps until the socket takes them. */
static int flush_out(struct conn *c)
{
	if (!c->olen)
		return 0;
	ssize_t n = st_write(c->fd, c->out, c->olen, ST_UTIME_NO_TIMEOUT);
	c->olen = 0;
	return n < 0 ? -1 : 0;
}

static void reply(struct conn *c, const char *s, size_t n)
{
	if (c->olen + n > sizeof(c->out) && flush_out(c) < 0)
		return;
	if (n > sizeof(c->out)) {
		st_write(c->fd, s, n, ST_UTIME_NO_TIMEOUT);
		return;
	}
	memcpy(c->out + c->olen, s, n);
	c->olen += n;
}

static void reply_bulk(struct conn *c, const char *s, size_t n)
{
	char head[32];
	int h = snprintf(head, sizeof(head), "$%zu\r\n", n);
	reply(c, head, (size_t)h);
	reply(c, s, n);
	reply(c, "\r\n", 2);
}

/* Reads more bytes (the st thread sleeps in st_read while there are none); 0 at EOF. */
static int fill(struct conn *c)
{
	if (c->start == c->end) {
		c->start = c->end = 0;
	} else if (c->end == sizeof(c->in)) {
		memmove(c->in, c->in + c->start, c->end - c->start);
		c->end -= c->start;
		c->start = 0;
	}
	if (c->end == sizeof(c->in))
		return -1; /* a request larger than the buffer */
	if (flush_out(c) < 0)
		return -1;
	ssize_t n = st_read(c->fd, c->in + c->end, sizeof(c->in) - c->end, ST_UTIME_NO_TIMEOUT);
	if (n <= 0)
		return n < 0 ? -1 : 0;
	c->end += (size_t)n;
	return 1;
}

/* One line ending in \r\n at c->start: its length without the \r\n, after reading as
 * much as needed; -1 at EOF or error. */
static long read_line(struct conn *c)
{
	for (;;) {
		char *p = memmem(c->in + c->start, c->end - c->start, "\r\n", 2);
		if (p)
			return (long)(p - (c->in + c->start));
		if (fill(c) <= 0)
			return -1;
	}
}

/* A RESP array of bulk strings. The arguments point into c->in and stay valid until
 * the next request is read. */
static int parse_request(struct conn *c, struct request *r)
{
	long n = read_line(c);
	if (n < 2 || c->in[c->start] != '*')
		return -1;
	int argc = atoi(c->in + c->start + 1);
	c->start += (size_t)n + 2;
	if (argc < 1 || argc > MAX_ARGS)
		return -1;
	/* compact first, so no argument moves once parsed */
	if (c->start) {
		memmove(c->in, c->in + c->start, c->end - c->start);
		c->end -= c->start;
		c->start = 0;
	}
	r->argc = argc;
	for (int i = 0; i < argc; i++) {
		n = read_line(c);
		if (n < 2 || c->in[c->start] != '$')
			return -1;
		long len = atol(c->in + c->start + 1);
		c->start += (size_t)n + 2;
		if (len < 0 || (size_t)len + 2 > sizeof(c->in))
			return -1;
		while (c->end - c->start < (size_t)len + 2)
			if (fill(c) <= 0)
				return -1;
		r->argv[i] = c->in + c->start;
		r->len[i] = (size_t)len;
		c->start += (size_t)len + 2;
	}
	return 0;
}

static void cmd_get(struct conn *c, struct request *r)
{
	struct entry *e = *lookup(r->argv[1], r->len[1]);
	if (e)
		reply_bulk(c, e->val, e->vlen);
	else
		reply(c, "$-1\r\n", 5);
}

static void cmd_set(struct conn *c, struct request *r)
{
	if (store_set(r->argv[1], r->len[1], r->argv[2], r->len[2]) == 0)
		reply(c, "+OK\r\n", 5);
	else
		reply(c, "-ERR out of memory\r\n", 20);
}

static void cmd_del(struct conn *c, struct request *r)
{
	struct entry **slot = lookup(r->argv[1], r->len[1]), *e = *slot;
	if (e) {
		*slot = e->next;
		free(e->key);
		free(e->val);
		free(e);
	}
	reply(c, e ? ":1\r\n" : ":0\r\n", 4);
}

/* Runs one request; returns 1 when the connection should close. */
static int execute(struct conn *c, struct request *r)
{
	const char *cmd = r->argv[0];
	if (!strncasecmp(cmd, "GET", 3) && r->len[0] == 3 && r->argc == 2)
		cmd_get(c, r);
	else if (!strncasecmp(cmd, "SET", 3) && r->len[0] == 3 && r->argc == 3)
		cmd_set(c, r);
	else if (!strncasecmp(cmd, "DEL", 3) && r->len[0] == 3 && r->argc == 2)
		cmd_del(c, r);
	else if (!strncasecmp(cmd, "PING", 4) && r->len[0] == 4)
		reply(c, "+PONG\r\n", 7);
	else if (!strncasecmp(cmd, "CONFIG", 6) && r->len[0] == 6)
		reply(c, "*0\r\n", 4);
	else if (!strncasecmp(cmd, "QUIT", 4) && r->len[0] == 4)
		return reply(c, "+OK\r\n", 5), 1;
	else if (!strncasecmp(cmd, "SHUTDOWN", 8) && r->len[0] == 8)
		return stopping = 1, 1;
	else
		reply(c, "-ERR unknown command\r\n", 22);
	return 0;
}

/* The root of each connection's st thread: it ends when the client leaves. */
static void *serve(void *arg)
{
	struct conn *c = arg;
	struct request r;
	while (!stopping && parse_request(c, &r) == 0)
		if (execute(c, &r))
			break;
	flush_out(c);
	st_netfd_close(c->fd);
	free(c);
	return NULL;
}

static void on_stop(int sig)
{
	(void)sig;
	stopping = 1;
}

static int listen_on(int port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 512) < 0) {
		close(fd);
		return -1;
	}
	socklen_t len = sizeof(a);
	getsockname(fd, (struct sockaddr *)&a, &len);
	printf("%d\n", ntohs(a.sin_port));
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
	if (st_init() < 0) {
		perror("st_init");
		return 1;
	}
	int lfd = listen_on(port);
	st_netfd_t l = lfd < 0 ? NULL : st_netfd_open_socket(lfd);
	if (!l) {
		perror("listen");
		return 1;
	}
	while (!stopping) {
		/* wakes up now and then to see a stop request */
		st_netfd_t cfd = st_accept(l, NULL, NULL, 100000);
		if (!cfd)
			continue;
		int one = 1;
		setsockopt(st_netfd_fileno(cfd), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		struct conn *c = calloc(1, sizeof(*c));
		if (c)
			c->fd = cfd;
		if (!c || !st_thread_create(serve, c, 0, 0)) {
			free(c);
			st_netfd_close(cfd);
		}
	}
	st_netfd_close(l);
	return 0;
}
