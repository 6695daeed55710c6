/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <stdlib.h>

#include "phalanx.h"

#define PHX_STR2(x) #x
#define PHX_STR(x) PHX_STR2(x)

const char *phx_version(void)
{
	return PHX_STR(PHX_VERSION_MAJOR) "." PHX_STR(PHX_VERSION_MINOR) "." PHX_STR(
		PHX_VERSION_PATCH);
}

const char *phx_strerror(int status)
{
	static const char *const text[] = {
		[PHX_OK] = "success",
		[PHX_EINVAL] = "invalid argument",
		[PHX_ENOMEM] = "out of memory",
		[PHX_EIO] = "input/output error",
		[PHX_ENOENT] = "no such checkpoint generation",
		[PHX_EAUTH] = "the job token was refused; run the job through Slurm with spank_phalanx.so loaded",
		[PHX_ESTATE] = "call made in the wrong order; see phalanx(3)",
		[PHX_ENOAGENT] = "no Phalanx agent supervises this process; start it with phalanx-launch",
	};
	int code = abs(status);

	if (code < 0 || (size_t)code >= sizeof(text) / sizeof(text[0]))
		return "unknown phalanx status";
	return text[code];
}
