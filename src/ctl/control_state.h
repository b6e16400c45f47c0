/* SPDX-License-Identifier: ISC */
/* The control-plane client's state directory: the credential and the
 * route file live there, reached only through the directory's descriptor,
 * and refused when anyone but etrelay's user could have planted them. */
#ifndef ETR_CONTROL_STATE_H
#define ETR_CONTROL_STATE_H

#include <stddef.h>

/* Open the directory (made 0700 when missing; systemd's StateDirectory=
 * makes it) as *dfd; the files are then reached only through it, so no
 * component can be swapped between the checks and the use. The last
 * component is not followed unless it is a symbolic link that root or
 * etrelay's user owns (DynamicUser= makes /var/lib/NAME such a link into
 * /var/lib/private); what is opened must belong to etrelay's user and be
 * writable by no one else. Returns 0, or -1 with why and the fix in err. */
int ctl_state_dir_open(const char *dir, int *dfd, char *err, size_t errlen);

/* Open name (path in messages) in the directory dfd to read it: a regular
 * file, never reached through a symbolic link, that etrelay's user owns
 * and no group or other may use (role names it: "credential", "route
 * file"; planted, what its owner could plant). 1 with *fdp, 0 when there
 * is none, -1 with why and the fix in err. */
int ctl_state_open(int dfd, const char *name, const char *path, const char *role,
		   const char *planted, int *fdp, char *err, size_t errlen);

/* Write text to name in the directory dfd whole or not at all: a
 * temporary file (mode 600), fsync, rename over the old, fsync of the
 * directory. Returns 0 or -errno. */
int ctl_state_write(int dfd, const char *name, const char *text);

#endif
