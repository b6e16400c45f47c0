/* SPDX-License-Identifier: ISC */
/* The backends' shared code: delivery, wake-up, timers, GSO lowering, and
 * the stream pool, slots and send queues. */
#include "loop_common.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

int loop_base_init(struct loop_base *b, const struct loop_handler *h, const struct loop_conf *c)
{
	b->h = *h;
	b->armed = UINT64_MAX;
	b->gro = c->gso && gso_supported();
	b->stream_chunks = c->stream_chunks ? c->stream_chunks : LOOP_STREAM_CHUNKS;
	STAT_SET(b->st.stream_pool, b->stream_chunks);
	STAT_SET(b->st.stream_reserve, LOOP_STREAM_RESERVE(b->stream_chunks));
	timers_init(&b->timers);
	timer_init(&b->accept_timer, 0);
	return fdtab_init(&b->fds, c->max_sockets, b->gro ? GSO_ANY : 0);
}

void loop_base_free(struct loop_base *b)
{
	streams_free(b);
	fdtab_free(&b->fds);
	timers_free(&b->timers);
}

bool loop_deliver(struct loop_base *b, int fd, uint32_t id, const struct loop_dgram *d, size_t seg)
{
	size_t off = 0;

	do {
		struct loop_dgram one = *d;

		one.data = d->data + off;
		one.len = gro_segment(d->len, seg, off);
		one.headroom = off ? 0 : d->headroom;
		b->taken = false;
		b->h.on_dgram(b->h.arg, id, &one);
		/* A handler may close the socket, and its number may be
		 * another socket's by now. */
		if (!fdtab_is(&b->fds, fd, id))
			return false;
		off += gro_segment(d->len, seg, off);
	} while (off < d->len);
	return true;
}

bool loop_wake_earlier(struct loop_base *b, uint64_t *at)
{
	*at = timers_next(&b->timers);
	return *at < b->armed;
}

bool loop_accept_pause(struct loop_base *b, int err)
{
	if (err != -EMFILE && err != -ENFILE && err != -ENOBUFS && err != -ENOMEM)
		return false;
	STAT_ADD(b->st.accept_pauses, 1);
	if (!timer_armed(&b->accept_timer) &&
	    timers_set(&b->timers, &b->accept_timer,
		       loop_now() + LOOP_ACCEPT_PAUSE_MS * NS_PER_MS) < 0)
		return false; /* no memory for the timer: retry as before */
	return true;
}

/* The pause is over: every paused listener takes its accept up again. */
static void streams_accept_resume(struct loop_base *b)
{
	struct loop_streams *x = b->sx;

	for (unsigned i = 0; x && i < x->ns; i++) {
		struct lstream *s = x->sv[i];

		if ((s->flags & (SF_PAUSED | SF_DEAD)) == SF_PAUSED) {
			s->flags &= (uint8_t)~SF_PAUSED;
			b->so->resume((struct loop *)(void *)b, s);
		}
	}
}

void loop_turn_end(struct loop_base *b)
{
	uint64_t now = loop_now();
	struct timer *t;

	if (b->stop)
		return;
	for (uint32_t n = b->timers.n; n > 0 && !b->stop; n--) {
		if (!(t = timers_pop(&b->timers, now)))
			break;
		if (t == &b->accept_timer) {
			streams_accept_resume(b);
			continue;
		}
		if (b->h.on_timer)
			b->h.on_timer(b->h.arg, t->id, now);
	}
}

void loop_train_refused(struct loop_base *b, int fd, uint16_t seg, int err)
{
	STAT_ADD(b->st.gso_refused, 1);
	fdtab_set_gso(&b->fds, fd, gso_refused(fdtab_gso(&b->fds, fd), seg, err));
}

int loop_common_timer_set(struct loop *l, struct timer *t, uint64_t at)
{
	return timers_set(&loop_base(l)->timers, t, at);
}

void loop_common_timer_cancel(struct loop *l, struct timer *t)
{
	timers_cancel(&loop_base(l)->timers, t);
}

const struct loop_stats *loop_common_stats(const struct loop *l)
{
	return &((const struct loop_base *)(const void *)l)->st;
}

void loop_common_stop(struct loop *l)
{
	loop_base(l)->stop = true;
}

int streams_ready(struct loop_base *b, void (*recycle)(struct loop *l, uint32_t c))
{
	struct loop_streams *x;

	if (b->sx)
		return 0;
	x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	x->nread = b->stream_chunks;
	x->nreserve = LOOP_STREAM_RESERVE(x->nread);
	x->nuser = LOOP_STREAM_USER_MIN;
	/* Untouched chunks cost no memory: an idle pool is address space. */
	x->arena = mmap(NULL, (size_t)x->nread * STREAM_STRIDE, PROT_READ | PROT_WRITE,
			MAP_ANONYMOUS | MAP_PRIVATE | MAP_NORESERVE, -1, 0);
	x->c = calloc(x->nread + x->nuser, sizeof(*x->c));
	x->rfree = calloc(x->nread, sizeof(*x->rfree));
	x->ufree = calloc(x->nuser, sizeof(*x->ufree));
	if (x->arena == MAP_FAILED || !x->c || !x->rfree || !x->ufree) {
		if (x->arena != MAP_FAILED)
			munmap(x->arena, (size_t)x->nread * STREAM_STRIDE);
		free(x->c);
		free(x->rfree);
		free(x->ufree);
		free(x);
		return -ENOMEM;
	}
	/* Lowest first out of the stacks: fewer pages touched. */
	for (unsigned i = 0; i < x->nread; i++)
		x->rfree[x->nrfree++] = x->nread - 1 - i;
	for (unsigned i = 0; i < x->nuser; i++)
		x->ufree[x->nufree++] = x->nread + x->nuser - 1 - i;
	x->sfree = STREAM_NONE;
	x->done_head = x->done_tail = STREAM_NONE;
	x->recycle = recycle;
	b->sx = x;
	return 0;
}

void streams_free(struct loop_base *b)
{
	struct loop_streams *x = b->sx;

	if (!x)
		return;
	munmap(x->arena, (size_t)x->nread * STREAM_STRIDE);
	for (unsigned i = 0; i < x->ns; i++)
		free(x->sv[i]);
	free(x->sv);
	free(x->byfd);
	free(x->stalled);
	free(x->c);
	free(x->rfree);
	free(x->ufree);
	free(x);
	b->sx = NULL;
}

struct lstream *stream_at(const struct loop_base *b, int fd)
{
	const struct loop_streams *x = b->sx;

	if (!x || fd < 0 || (unsigned)fd >= x->nfd || !x->byfd[fd])
		return NULL;
	return x->sv[x->byfd[fd] - 1];
}

struct lstream *stream_open(struct loop_base *b, int fd)
{
	struct loop_streams *x = b->sx;
	struct lstream *s = stream_at(b, fd);
	uint32_t slot;

	if (s || fd < 0)
		return s;
	if ((unsigned)fd >= x->nfd) {
		unsigned n = x->nfd ? x->nfd : 64;
		uint32_t *p;

		while (n <= (unsigned)fd)
			n *= 2;
		p = realloc(x->byfd, n * sizeof(*p));
		if (!p)
			return NULL;
		memset(p + x->nfd, 0, (n - x->nfd) * sizeof(*p));
		x->byfd = p;
		x->nfd = n;
	}
	if (x->sfree != STREAM_NONE) {
		slot = x->sfree;
		s = x->sv[slot];
		x->sfree = s->next;
	} else {
		/* Slots are never freed, only reused: the kernel may hold a
		 * pointer to one's dst while a connect runs. */
		if (x->ns == x->scap) {
			unsigned n = x->scap ? 2 * x->scap : 64;
			struct lstream **p = realloc(x->sv, n * sizeof(*p));

			if (!p)
				return NULL;
			x->sv = p;
			x->scap = n;
		}
		s = calloc(1, sizeof(*s));
		if (!s)
			return NULL;
		slot = x->ns;
		x->sv[x->ns++] = s;
	}
	uint32_t gen = s->gen + 1;

	memset(s, 0, sizeof(*s));
	s->fd = fd;
	s->slot = slot;
	s->gen = gen;
	s->qhead = s->qtail = STREAM_NONE;
	s->pipe = -1;
	x->byfd[fd] = slot + 1;
	return s;
}

void stream_detach(struct loop_base *b, struct lstream *s)
{
	struct loop_streams *x = b->sx;

	if (x->byfd[s->fd] == s->slot + 1)
		x->byfd[s->fd] = 0;
	if (s->flags & SF_STALLED) {
		unsigned k = 0;

		for (unsigned i = 0; i < x->nstalled; i++)
			if (x->stalled[i] != s->slot)
				x->stalled[k++] = x->stalled[i];
		x->nstalled = k;
	}
	s->flags = (uint8_t)((s->flags & ~(SF_STALLED | SF_READ)) | SF_DEAD);
}

void stream_close(struct loop_base *b, struct lstream *s)
{
	struct loop_streams *x = b->sx;

	if (!(s->flags & SF_DEAD))
		stream_detach(b, s);
	s->flags = 0;
	s->gen++;
	s->next = x->sfree;
	x->sfree = s->slot;
}

void chunk_take(struct loop_base *b, uint32_t c, uint8_t st)
{
	struct loop_streams *x = b->sx;

	x->c[c].state = st;
	x->inuse++;
	STAT_SET(b->st.stream_chunks, x->inuse);
	if (x->inuse > STAT_GET(b->st.stream_chunks_peak))
		STAT_SET(b->st.stream_chunks_peak, x->inuse);
}

void chunk_put(struct loop_base *b, uint32_t c)
{
	struct loop_streams *x = b->sx;

	x->c[c].state = CH_FREE;
	if (c >= x->nread) {
		x->c[c].data = NULL;
		x->ufree[x->nufree++] = c;
		return;
	}
	x->inuse--;
	STAT_SET(b->st.stream_chunks, x->inuse);
	x->recycle((struct loop *)(void *)b, c);
}

/* Twice the user send entries: they are few (one per send pending), and
 * an index stays an index when c moves. */
static int user_grow(struct loop_streams *x)
{
	unsigned n = 2 * x->nuser;
	struct lchunk *c = realloc(x->c, (x->nread + (size_t)n) * sizeof(*c));
	uint32_t *f;

	if (!c)
		return -ENOMEM;
	x->c = c;
	memset(c + x->nread + x->nuser, 0, (n - x->nuser) * sizeof(*c));
	f = realloc(x->ufree, n * sizeof(*f));
	if (!f)
		return -ENOMEM; /* c is larger, the table is not: harmless */
	x->ufree = f;
	for (unsigned i = n; i > x->nuser; i--)
		x->ufree[x->nufree++] = x->nread + i - 1;
	x->nuser = n;
	return 0;
}

int stream_user(struct loop_base *b, const void *buf, size_t len, uint32_t *c)
{
	struct loop_streams *x = b->sx;

	if (len > INT_MAX)
		return -EMSGSIZE;
	if (x->nufree == 0 && user_grow(x) < 0)
		return -ENOMEM;
	*c = x->ufree[--x->nufree];
	x->c[*c].state = CH_SEND;
	x->c[*c].data = buf;
	x->c[*c].pipe = -1;
	x->c[*c].len = (uint32_t)len;
	return 0;
}

int stream_take(struct loop_base *b, const struct loop_dgram *d, uint32_t *c)
{
	struct loop_streams *x = b->sx;
	uint8_t *base;

	if (!x || d->bid >= x->nread || x->c[d->bid].state != CH_USER)
		return -EINVAL;
	base = chunk_base(x, d->bid);
	if (d->data < base || d->data + d->len > base + STREAM_STRIDE)
		return -EINVAL;
	*c = d->bid;
	x->c[*c].state = CH_SEND;
	x->c[*c].pipe = -1;
	x->c[*c].data = d->data;
	x->c[*c].len = (uint32_t)d->len;
	return 0;
}

void stream_enqueue(struct loop_base *b, struct lstream *s, uint32_t c, uint32_t id)
{
	struct lchunk *ch = &b->sx->c[c];

	ch->id = id;
	ch->done = 0;
	ch->next = STREAM_NONE;
	if (s->qtail == STREAM_NONE)
		s->qhead = c;
	else
		b->sx->c[s->qtail].next = c;
	s->qtail = c;
}

uint32_t stream_dequeue(struct loop_base *b, struct lstream *s)
{
	uint32_t c = s->qhead;

	if (c != STREAM_NONE) {
		s->qhead = b->sx->c[c].next;
		if (s->qhead == STREAM_NONE)
			s->qtail = STREAM_NONE;
	}
	return c;
}

void stream_finished(struct loop_base *b, uint32_t c, int res)
{
	struct loop_streams *x = b->sx;

	x->c[c].res = res;
	x->c[c].next = STREAM_NONE;
	if (x->done_tail == STREAM_NONE)
		x->done_head = c;
	else
		x->c[x->done_tail].next = c;
	x->done_tail = c;
}

void streams_complete(struct loop *l)
{
	struct loop_base *b = loop_base(l);
	struct loop_streams *x = b->sx;

	while (x && x->done_head != STREAM_NONE) {
		uint32_t c = x->done_head;
		uint32_t id = x->c[c].id;
		int res = x->c[c].res;

		x->done_head = x->c[c].next;
		if (x->done_head == STREAM_NONE)
			x->done_tail = STREAM_NONE;
		chunk_put(b, c);
		b->h.on_sent(b->h.arg, id, res);
	}
}

void stream_deliver(struct loop *l, struct lstream *s, uint32_t c, size_t len, uint64_t now)
{
	static uint8_t eof[LOOP_HEADROOM];
	struct loop_base *b = loop_base(l);
	struct loop_streams *x = b->sx;
	struct loop_dgram d = {
	    .data = c == STREAM_NONE ? eof + LOOP_HEADROOM : chunk_base(x, c) + LOOP_HEADROOM,
	    .len = len,
	    .headroom = c == STREAM_NONE ? 0 : LOOP_HEADROOM,
	    .bid = c,
	    .now = now,
	};

	/* EOF may come without a chunk (io_uring): d points at nothing then,
	 * and cannot be forwarded. */
	STAT_ADD(b->st.stream_rx_bytes, len);
	if (c == STREAM_NONE) {
		b->h.on_stream(b->h.arg, s->read_id, &d);
		return;
	}
	x->c[c].state = CH_USER;
	b->h.on_stream(b->h.arg, s->read_id, &d);
	if (x->c[c].state == CH_USER)
		chunk_put(b, c);
}

void stream_stall(struct loop_base *b, struct lstream *s)
{
	struct loop_streams *x = b->sx;

	STAT_ADD(b->st.stream_stalls, 1);
	if (s->flags & SF_STALLED)
		return;
	if (x->nstalled == x->stcap) {
		unsigned n = x->stcap ? 2 * x->stcap : 16;
		uint32_t *p = realloc(x->stalled, n * sizeof(*p));

		if (!p)
			return; /* out of memory: the read is lost, the peer times out */
		x->stalled = p;
		x->stcap = n;
	}
	s->flags |= SF_STALLED;
	x->stalled[x->nstalled++] = s->slot;
}

struct lstream *stream_unstall(struct loop_base *b, bool bulk)
{
	struct loop_streams *x = b->sx;
	struct lstream *s = NULL;
	unsigned i;

	if (!x)
		return NULL;
	for (i = 0; i < x->nstalled; i++) {
		s = x->sv[x->stalled[i]];
		if (bulk || !s->bulk)
			break;
	}
	if (i == x->nstalled)
		return NULL;
	memmove(x->stalled + i, x->stalled + i + 1, (x->nstalled - i - 1) * sizeof(*x->stalled));
	x->nstalled--;
	s->flags &= (uint8_t)~SF_STALLED;
	return s;
}

struct lstream *stream_get(struct loop *l, int fd, int *err)
{
	struct loop_base *b = loop_base(l);
	struct lstream *s = NULL;

	*err = b->so->ready(l);
	if (!*err && !(s = stream_open(b, fd)))
		*err = -ENOMEM;
	return s;
}

int loop_stream_listen(struct loop *l, int fd, uint32_t id)
{
	int err;
	struct lstream *s = stream_get(l, fd, &err);

	if (!s)
		return err;
	if (s->flags & SF_ACCEPT)
		return -EALREADY;
	s->acc_id = id;
	return loop_base(l)->so->listen(l, s);
}

int loop_stream_connect(struct loop *l, int fd, const struct sockaddr *dst, socklen_t dstlen,
			uint32_t id)
{
	int err;
	struct lstream *s = stream_get(l, fd, &err);

	if (!s)
		return err;
	if (s->flags & SF_CONNECT)
		return -EALREADY;
	return loop_base(l)->so->connect(l, s, dst, dstlen, id);
}

/* A read of fd for id: into a chunk (bulk: not from the reserve), or with
 * pipe >= 0 a splice of at most len bytes into it. */
static int stream_read_ask(struct loop *l, int fd, uint32_t id, bool bulk, int pipe, size_t len)
{
	int err;
	struct lstream *s = stream_get(l, fd, &err);

	if (!s)
		return err;
	if (s->flags & SF_READ)
		return -EALREADY;
	s->read_id = id;
	s->bulk = bulk;
	s->pipe = pipe;
	s->pipe_len = (uint32_t)len;
	s->flags |= SF_READ;
	err = loop_base(l)->so->read(l, s);
	if (err)
		s->flags &= (uint8_t)~SF_READ;
	return err;
}

int loop_stream_read(struct loop *l, int fd, uint32_t id)
{
	return stream_read_ask(l, fd, id, false, -1, 0);
}

int loop_stream_read_bulk(struct loop *l, int fd, uint32_t id)
{
	return stream_read_ask(l, fd, id, true, -1, 0);
}

int loop_stream_splice_in(struct loop *l, int fd, int pipe_w, size_t len, uint32_t id)
{
	if (pipe_w < 0 || len == 0 || len > INT_MAX)
		return -EINVAL;
	return stream_read_ask(l, fd, id, true, pipe_w, len);
}

int loop_stream_forward(struct loop *l, int fd, struct loop_dgram *d, uint32_t id)
{
	struct loop_base *b = loop_base(l);
	int err;
	struct lstream *s;
	uint32_t c;

	if (!b->sx || stream_take(b, d, &c) < 0)
		return -EINVAL;
	if (!(s = stream_get(l, fd, &err)) || (err = b->so->queue(l, s, c, id)) < 0) {
		b->sx->c[c].state = CH_USER; /* still the caller's */
		return err;
	}
	return 0;
}

/* A send of len bytes: the caller's at buf, or with splice those waiting
 * in the pipe whose read end is pipe. */
static int stream_send_from(struct loop *l, int fd, const void *buf, bool splice, int pipe,
			    size_t len, uint32_t id)
{
	struct loop_base *b = loop_base(l);
	int err;
	struct lstream *s = stream_get(l, fd, &err);
	uint32_t c;

	if (!s)
		return err;
	if (splice && (pipe < 0 || len == 0))
		return -EINVAL;
	if ((err = stream_user(b, buf, len, &c)) < 0)
		return err;
	b->sx->c[c].pipe = pipe;
	if ((err = b->so->queue(l, s, c, id)) < 0)
		chunk_put(b, c);
	return err;
}

int loop_stream_send(struct loop *l, int fd, const void *buf, size_t len, uint32_t id)
{
	return stream_send_from(l, fd, buf, false, -1, len, id);
}

int loop_stream_splice_out(struct loop *l, int fd, int pipe_r, size_t len, uint32_t id)
{
	return stream_send_from(l, fd, NULL, true, pipe_r, len, id);
}
