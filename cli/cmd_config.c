/* SPDX-License-Identifier: Apache-2.0 */
/* phalanx config check|show [FILE] */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "common/conf.h"
#include "common/log.h"
#include "cli/commands.h"

const char phx_config_usage[] =
	"usage: phalanx config check|show [FILE] (default FILE: " PHX_CONF_DEFAULT_PATH ")\n";

int phx_cmd_config(int argc, char **argv)
{
	const char *path = PHX_CONF_DEFAULT_PATH;
	struct phx_conf conf;
	char err[512];
	bool show;

	if (argc < 2 || argc > 3 || (strcmp(argv[1], "check") && strcmp(argv[1], "show"))) {
		phx_error("%s", phx_config_usage);
		return 2;
	}
	show = !strcmp(argv[1], "show");
	if (argc == 3)
		path = argv[2];
	if (phx_conf_load_file(path, &conf, err, sizeof(err)) < 0) {
		phx_error("%s", err);
		phx_conf_free(&conf);
		return 1;
	}
	if (show)
		phx_conf_dump(&conf, stdout);
	else
		printf("phalanx: %s: ok\n", path);
	phx_conf_free(&conf);
	return 0;
}
