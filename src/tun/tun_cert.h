/* SPDX-License-Identifier: ISC */
/* The tunnel certificate in force (seed 002): a new key and a request that
 * names nothing for each RequestCertificate, the chain that comes back
 * checked (tls_csr.h) and put in force as the context rung 3's TLS takes,
 * with the name it was issued for. The last good pair stays until a new
 * one is taken. Requests come from the control thread; the context is
 * read by the workers (tls_server's lock), the name by the heartbeat. */
#ifndef ETR_TUN_CERT_H
#define ETR_TUN_CERT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tls_csr.h"
#include "tls_server.h"

/* The path of the tunnel (wss://NAME/t). */
#define TUN_CERT_PATH "/t"
/* "wss://" NAME "/t" and its NUL. */
#define TUN_CERT_URL_MAX (6 + TLS_CERT_NAME_MAX + sizeof(TUN_CERT_PATH))

struct tun_cert {
	pthread_mutex_t lock; /* name, not_after */
	bool init;
	struct tls_server tls;	      /* the context rung 3 takes; none until the first */
	struct evp_pkey_st *key;      /* the control thread's: the key of the request out */
	char name[TLS_CERT_NAME_MAX]; /* "" until a certificate is in force */
	int64_t not_after;	      /* of the one in force, unix seconds; 0: none */
};

/* Returns 0 or -errno. */
int tun_cert_init(struct tun_cert *c);
/* Safe on a zeroed struct (init never called). */
void tun_cert_free(struct tun_cert *c);

/* A new key (kept for the answer) and the PEM text of a request naming
 * nothing into *pem (malloc'd). Returns 0, or -1 with why in err. */
int tun_cert_request(struct tun_cert *c, char **pem, char *err, size_t errlen);

/* How long a certificate just taken lasts, for the schedule (certsched). */
struct tun_cert_taken {
	uint64_t valid_for_ms, age_ms; /* now to notAfter, notBefore to now */
	int64_t not_after;	       /* unix seconds */
};

/* The chain answered to the last request (len bytes of PEM, leaf first),
 * checked against its key and relay_id (NULL: any id, tls_cert_accept) at
 * now_ms (unix milliseconds), put in force. Returns 0 with *t filled, or -1 with
 * why in err: the pair in force (if any) stays. Either way the request's
 * key is spent. */
int tun_cert_take(struct tun_cert *c, const char *chain, size_t len, const char *relay_id,
		  int64_t now_ms, struct tun_cert_taken *t, char *err, size_t errlen);

/* tun_cert_take, refusing a chain that checks but has less than
 * min_left_ms to live at now_ms (attack round 15, F7: one with seconds
 * left would be renewed again and again): TUN_CERT_SHORT with why in err,
 * and the pair in force (if any) stays. */
#define TUN_CERT_SHORT 1
int tun_cert_take_floor(struct tun_cert *c, const char *chain, size_t len, const char *relay_id,
			int64_t now_ms, uint64_t min_left_ms, struct tun_cert_taken *t, char *err,
			size_t errlen);

/* The name of the certificate in force into name; false (name "") while
 * there is none or it has expired at now (unix seconds). */
bool tun_cert_name(struct tun_cert *c, int64_t now, char name[TLS_CERT_NAME_MAX]);

#endif
