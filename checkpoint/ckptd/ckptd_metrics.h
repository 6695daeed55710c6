/* SPDX-License-Identifier: Apache-2.0 */
/* Prometheus text metrics of phalanx-ckptd over HTTP. */
#ifndef PHX_CKPTD_METRICS_H
#define PHX_CKPTD_METRICS_H

#include <stddef.h>

#include "checkpoint/ckptd/ckptd.h"

int ckptd_metrics_start(struct ckptd *d, const char *hostport, char *err, size_t errlen);
void ckptd_metrics_run(struct ckptd *d);
void ckptd_metrics_stop(struct ckptd *d);
/* The Prometheus text, malloc'd. */
char *ckptd_metrics_text(struct ckptd *d);

#endif
