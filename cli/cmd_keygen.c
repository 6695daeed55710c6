/* SPDX-License-Identifier: Apache-2.0 */
/* phalanx keygen [--force] [FILE]: the cluster key that signs job tokens. */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "common/conf.h"
#include "common/log.h"
#include "common/token.h"
#include "cli/commands.h"

const char phx_keygen_usage[] =
	"usage: phalanx keygen [--force] [FILE] (default: key_file of phalanx.yaml)\n";

int phx_cmd_keygen(int argc, char **argv)
{
	struct phx_conf conf;
	struct phx_key key;
	const char *path = NULL;
	char err[512];
	int force = 0, rc = 1;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--force"))
			force = 1;
		else if (argv[i][0] != '-' && !path)
			path = argv[i];
		else {
			phx_error("%s", phx_keygen_usage);
			return 2;
		}
	}
	if (phx_conf_defaults(&conf) < 0)
		return 1;
	if (!path)
		path = conf.key_file;
	if (geteuid() != 0)
		phx_warn("not running as root: the plugin only accepts a key file owned by root");
	if (phx_key_generate(&key) < 0) {
		phx_error("the OpenSSL random generator failed; check the system's entropy source");
		goto out;
	}
	if (phx_key_save(path, &key, force, err, sizeof(err)) < 0) {
		phx_error("%s", err);
		goto out;
	}
	printf("phalanx: wrote a new cluster key to %s (mode 0400); copy it to every node and to "
	       "the phalanx-ckptd host\n",
	       path);
	rc = 0;
out:
	OPENSSL_cleanse(&key, sizeof(key));
	phx_conf_free(&conf);
	return rc;
}
