/* SPDX-License-Identifier: ISC */
/* Test-only: a TLS echo server on 127.0.0.1 over tls_server.c and the real
 * loop (either backend), with the certificate reload on a timer, so that
 * `openssl s_client` can be pointed at the engine before the TURN listener
 * carries it. Usage: tls_echo BACKEND PORT CERT KEY [RELOAD_MS]. Runs until
 * SIGTERM or SIGINT. */
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "loop.h"
#include "tls_reload.h"
#include "tls_server.h"

#define ECHO_CONNS 64
#define ID_LISTEN  0
#define ID_SIGNAL  1
#define ID_CONN0   2

struct echo_conn {
	int fd; /* -1: free */
	struct tls_conn *tls;
	bool sending, closing;
};

static const struct loop_ops *ops;
static struct loop *lp;
static struct tls_server srv;
static struct tls_reload reload;
static struct timer reload_timer;
static uint64_t reload_ns;
static struct echo_conn conns[ECHO_CONNS];

static void conn_close(struct echo_conn *c)
{
	if (c->fd < 0)
		return;
	ops->del_socket(lp, c->fd, (uint32_t)(c - conns) + ID_CONN0);
	close(c->fd);
	c->fd = -1;
	/* A send cancelled by del_socket still gets its on_sent, which
	 * finds the slot free; the tls_conn's buffer must live until then. */
	if (!c->sending) {
		tls_conn_free(c->tls);
		c->tls = NULL;
	}
}

static void kick_send(struct echo_conn *c)
{
	const uint8_t *p;
	size_t n;

	if (c->sending || c->fd < 0)
		return;
	n = tls_conn_pending_out(c->tls, &p);
	if (n == 0) {
		if (c->closing)
			conn_close(c);
		return;
	}
	if (ops->stream_send(lp, c->fd, p, n, (uint32_t)(c - conns) + ID_CONN0) < 0) {
		conn_close(c);
		return;
	}
	c->sending = true;
}

static void on_accept(void *arg, uint32_t id, int fd)
{
	struct echo_conn *c = NULL;

	if (fd < 0)
		return;
	for (int i = 0; i < ECHO_CONNS && !c; i++)
		if (conns[i].fd < 0 && !conns[i].tls)
			c = &conns[i];
	if (!c || !(c->tls = tls_conn_new(&srv))) {
		close(fd);
		return;
	}
	c->fd = fd;
	c->sending = c->closing = false;
	if (ops->stream_read(lp, fd, (uint32_t)(c - conns) + ID_CONN0) < 0)
		conn_close(c);
}

static void on_stream(void *arg, uint32_t id, struct loop_dgram *d)
{
	struct echo_conn *c = &conns[id - ID_CONN0];
	uint8_t buf[4096];
	ssize_t n;

	if (d->len == 0) {
		conn_close(c);
		return;
	}
	if (tls_conn_feed(c->tls, d->data, d->len) < 0) {
		char why[256];

		fprintf(stderr, "tls_echo: handshake failed: %s\n",
			tls_error_text(why, sizeof(why)));
		c->closing = true; /* the alert goes out first */
		kick_send(c);
		return;
	}
	while ((n = tls_conn_read(c->tls, buf, sizeof(buf))) > 0)
		if (tls_conn_write(c->tls, buf, (size_t)n) < 0)
			break; /* a client that does not read: its echo is lost */
	if (n < 0)
		c->closing = true; /* close_notify (ours answers it) or fatal */
	kick_send(c);
	if (!c->closing && c->fd >= 0 && ops->stream_read(lp, c->fd, id) < 0)
		conn_close(c);
}

static void on_sent(void *arg, uint32_t id, int res)
{
	struct echo_conn *c;

	if (id < ID_CONN0)
		return;
	c = &conns[id - ID_CONN0];
	c->sending = false;
	if (c->fd < 0) {
		tls_conn_free(c->tls);
		c->tls = NULL;
		return;
	}
	if (res < 0) {
		conn_close(c);
		return;
	}
	tls_conn_out_done(c->tls, (size_t)res);
	kick_send(c);
}

static void on_recv_error(void *arg, uint32_t id, int err)
{
	if (id >= ID_CONN0)
		conn_close(&conns[id - ID_CONN0]);
}

static void on_readable(void *arg, uint32_t id)
{
	ops->stop(lp);
}

static void on_timer(void *arg, uint32_t id, uint64_t now)
{
	enum tls_reload_result r = tls_reload_check(&reload, now);

	if (r == TLS_RELOAD_LOADED)
		fprintf(stderr, "tls_echo: certificate reloaded\n");
	else if (r == TLS_RELOAD_FAILED)
		fprintf(stderr, "tls_echo: certificate reload failed: %s\n", reload.error);
	ops->timer_set(lp, &reload_timer, now + reload_ns);
}

int main(int argc, char **argv)
{
	struct loop_handler h = {
	    .on_accept = on_accept,
	    .on_stream = on_stream,
	    .on_sent = on_sent,
	    .on_recv_error = on_recv_error,
	    .on_readable = on_readable,
	    .on_timer = on_timer,
	};
	struct loop_conf lc = {.max_sockets = ECHO_CONNS + 4};
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	char err[512];
	sigset_t ss;
	int lfd, sfd, one = 1, rc;

	if (argc < 5) {
		fprintf(stderr, "usage: tls_echo io_uring|epoll PORT CERT KEY [RELOAD_MS]\n");
		return 2;
	}
	ops = strcmp(argv[1], "epoll") == 0 ? &loop_epoll_ops : &loop_uring_ops;
	sin.sin_port = htons((uint16_t)atoi(argv[2]));
	reload_ns = (argc > 5 ? strtoull(argv[5], NULL, 10) : 60000) * NS_PER_MS;
	for (int i = 0; i < ECHO_CONNS; i++)
		conns[i].fd = -1;
	if (tls_server_init(&srv) < 0 ||
	    tls_reload_init(&reload, &srv, argv[3], argv[4], loop_now(), err, sizeof(err)) < 0) {
		fprintf(stderr, "tls_echo: %s\n", err);
		return 1;
	}
	rc = ops->create(&lp, &h, &lc, err, sizeof(err));
	if (rc < 0) {
		fprintf(stderr, "tls_echo: %s: %s\n", ops->name, err);
		return rc == -ENOSYS || rc == -EPERM ? 77 : 1;
	}
	sigemptyset(&ss);
	sigaddset(&ss, SIGTERM);
	sigaddset(&ss, SIGINT);
	sigprocmask(SIG_BLOCK, &ss, NULL);
	sfd = signalfd(-1, &ss, SFD_NONBLOCK | SFD_CLOEXEC);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (sfd < 0 || lfd < 0 || bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
	    listen(lfd, 64) < 0 || ops->listen(lp, lfd, ID_LISTEN) < 0 ||
	    ops->watch(lp, sfd, ID_SIGNAL) < 0) {
		perror("tls_echo: listen");
		return 1;
	}
	timer_init(&reload_timer, 0);
	ops->timer_set(lp, &reload_timer, loop_now() + reload_ns);
	fprintf(stderr, "tls_echo: %s on 127.0.0.1:%s\n", ops->name, argv[2]);
	rc = ops->run(lp);
	for (int i = 0; i < ECHO_CONNS; i++)
		conn_close(&conns[i]);
	ops->timer_cancel(lp, &reload_timer);
	ops->flush(lp);
	ops->del_socket(lp, lfd, ID_LISTEN);
	ops->destroy(lp);
	for (int i = 0; i < ECHO_CONNS; i++)
		tls_conn_free(conns[i].tls);
	close(lfd);
	close(sfd);
	tls_reload_free(&reload);
	tls_server_free(&srv);
	return rc < 0 ? 1 : 0;
}
