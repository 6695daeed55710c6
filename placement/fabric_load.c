/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The front of the fabric reader: reads the files, hands each text to its
 * parser (fabric_yaml.c, fabric_tconf.c) and builds the fabric from what
 * they declared (fabric.c). It sits above both parsers and the model, so
 * the model never calls a parser.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "placement/fabric.h"
#include "placement/fabric_int.h"
#include "common/file.h"
#include "common/yaml.h"

/* topology.conf is a few lines per switch; this is far above any real one. */
#define TCONF_MAX_BYTES (16u << 20)

static int parse_texts(struct fab_builder *b, const char *yaml_name, const char *yaml,
		       size_t yaml_len, const char *topo_name, const char *topo, size_t topo_len,
		       char *err, size_t errlen)
{
	char *named_topo = NULL;
	char *data = NULL;
	size_t len;
	int rc;

	if (yaml && phx_fab_parse_yaml(b, yaml_name, yaml, yaml_len, &named_topo, err, errlen) < 0)
		return -1;
	/* A topology.conf given by the caller wins over one the YAML names. */
	if (topo) {
		free(named_topo);
		return phx_fab_parse_tconf(b, topo_name, topo, topo_len, err, errlen);
	}
	if (!named_topo)
		return 0;
	rc = phx_file_read(named_topo, TCONF_MAX_BYTES, &data, &len);
	if (rc < 0) {
		snprintf(err, errlen, "%s: cannot read the topology_conf it names, %s: %s",
			 yaml_name, named_topo, strerror(-rc));
		free(named_topo);
		return -1;
	}
	rc = phx_fab_parse_tconf(b, named_topo, data, len, err, errlen);
	free(data);
	free(named_topo);
	return rc;
}

int phx_fabric_parse(const char *yaml_name, const char *yaml, size_t yaml_len,
		     const char *topo_name, const char *topo, size_t topo_len,
		     struct phx_fabric **out, char *err, size_t errlen)
{
	struct fab_builder b;
	int rc;

	*out = NULL;
	phx_fab_builder_init(&b);
	rc = parse_texts(&b, yaml_name ? yaml_name : "fabric", yaml, yaml_len,
			 topo_name ? topo_name : "topology.conf", topo, topo_len, err, errlen);
	if (rc == 0)
		rc = phx_fab_build(&b, out, err, errlen);
	phx_fab_builder_free(&b);
	return rc;
}

static int read_text(const char *path, size_t max, char **data, size_t *len, char *err,
		     size_t errlen)
{
	int rc = phx_file_read(path, max, data, len);

	if (rc == 0)
		return 0;
	if (rc == -EFBIG)
		snprintf(err, errlen, "%s: larger than %zu MiB; is this the right file?", path,
			 max >> 20);
	else
		snprintf(err, errlen, "%s: cannot read: %s", path, strerror(-rc));
	return -1;
}

int phx_fabric_load(const char *yaml_path, const char *topology_conf, struct phx_fabric **out,
		    char *err, size_t errlen)
{
	char *yaml = NULL, *topo = NULL;
	size_t yaml_len = 0, topo_len = 0;
	int rc = -1;

	*out = NULL;
	if (yaml_path &&
	    read_text(yaml_path, PHX_YAML_MAX_BYTES, &yaml, &yaml_len, err, errlen) < 0)
		return -1;
	if (topology_conf &&
	    read_text(topology_conf, TCONF_MAX_BYTES, &topo, &topo_len, err, errlen) < 0)
		goto out;
	rc = phx_fabric_parse(yaml_path, yaml, yaml_len, topology_conf, topo, topo_len, out, err,
			      errlen);
out:
	free(yaml);
	free(topo);
	return rc;
}
