/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stand-in for libFuzzer when the compiler has none (gcc): replays every
 * seed of the target's corpus, then PHX_FUZZ_ITERATIONS (default 5000)
 * deterministic mutations of them. A crash or sanitizer report fails the
 * test; the printed seed and iteration reproduce it.
 */
#include "config.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/file.h"
#include "tests/fuzz/fuzz.h"
#include "tests/rng.h"

#define MAX_SEEDS 512
#define FUZZ_MAX_INPUT (64u << 10)

struct seed {
	uint8_t *data;
	size_t len;
};

static uint64_t rng_state;

static uint64_t rng(void)
{
	return phx_xorshift64s(&rng_state);
}

static size_t load_seeds(const char *dir, struct seed *seeds)
{
	struct dirent **ents;
	size_t n = 0;
	int count = scandir(dir, &ents, NULL, alphasort);

	for (int i = 0; i < count; i++) {
		char path[4096];
		char *data;
		size_t len;

		if (ents[i]->d_name[0] != '.' && n < MAX_SEEDS &&
		    snprintf(path, sizeof(path), "%s/%s", dir, ents[i]->d_name) <
			    (int)sizeof(path) &&
		    phx_file_read(path, FUZZ_MAX_INPUT, &data, &len) == 0) {
			seeds[n].data = (uint8_t *)data;
			seeds[n].len = len;
			n++;
		}
		free(ents[i]);
	}
	if (count > 0)
		free(ents);
	return n;
}

static size_t mutate(uint8_t *buf, size_t len, const struct seed *seeds, size_t n_seeds)
{
	size_t rounds = 1 + rng() % 8;

	for (size_t r = 0; r < rounds; r++) {
		size_t pos = len ? rng() % len : 0;
		const struct seed *other;
		size_t chunk;

		switch (rng() % 6) {
		case 0: /* flip a bit */
			if (len)
				buf[pos] ^= (uint8_t)(1u << (rng() % 8));
			break;
		case 1: /* random byte */
			if (len)
				buf[pos] = (uint8_t)rng();
			break;
		case 2: /* insert a byte */
			if (len < FUZZ_MAX_INPUT) {
				memmove(buf + pos + 1, buf + pos, len - pos);
				buf[pos] = (uint8_t) "\n:-[],{}*=0 \"'&!#9"[rng() % 18];
				len++;
			}
			break;
		case 3: /* delete a run */
			chunk = len - pos ? 1 + rng() % (len - pos) : 0;
			memmove(buf + pos, buf + pos + chunk, len - pos - chunk);
			len -= chunk;
			break;
		case 4: /* splice in part of another seed */
			other = &seeds[rng() % n_seeds];
			if (other->len) {
				size_t from = rng() % other->len;

				chunk = 1 + rng() % (other->len - from);
				if (len + chunk > FUZZ_MAX_INPUT)
					chunk = FUZZ_MAX_INPUT - len;
				memmove(buf + pos + chunk, buf + pos, len - pos);
				memcpy(buf + pos, other->data + from, chunk);
				len += chunk;
			}
			break;
		default: /* duplicate a run: grows nesting and lists */
			chunk = len - pos ? 1 + rng() % (len - pos) : 0;
			if (len + chunk <= FUZZ_MAX_INPUT) {
				memmove(buf + pos + chunk, buf + pos, len - pos);
				len += chunk;
			}
			break;
		}
	}
	return len;
}

int main(int argc, char **argv)
{
	static struct seed seeds[MAX_SEEDS];
	const char *root = getenv("PHX_FUZZ_CORPUS");
	const char *iter_env = getenv("PHX_FUZZ_ITERATIONS");
	const char *seed_env = getenv("PHX_FUZZ_SEED");
	unsigned long iterations = iter_env ? strtoul(iter_env, NULL, 10) : 5000;
	uint64_t seed = seed_env ? strtoull(seed_env, NULL, 0) : 0x5eed1234abcdull;
	char dir[4096];
	uint8_t *buf;
	size_t n;

	if (argc > 1)
		snprintf(dir, sizeof(dir), "%s", argv[1]);
	else
		snprintf(dir, sizeof(dir), "%s/%s", root ? root : "tests/fuzz/corpus",
			 phx_fuzz_corpus_name);
	n = load_seeds(dir, seeds);
	if (n == 0) {
		fprintf(stderr, "phalanx: fuzz: no seeds in %s; set PHX_FUZZ_CORPUS\n", dir);
		return 1;
	}
	for (size_t i = 0; i < n; i++)
		LLVMFuzzerTestOneInput(seeds[i].data, seeds[i].len);
	buf = malloc(FUZZ_MAX_INPUT);
	if (!buf)
		return 1;
	rng_state = seed ? seed : 1;
	for (unsigned long it = 0; it < iterations; it++) {
		const struct seed *s = &seeds[rng() % n];
		size_t len;

		memcpy(buf, s->data, s->len);
		len = mutate(buf, s->len, seeds, n);
		LLVMFuzzerTestOneInput(buf, len);
	}
	printf("phalanx: fuzz %s: %zu seeds, %lu mutations (seed 0x%llx), no crash\n",
	       phx_fuzz_corpus_name, n, iterations, (unsigned long long)seed);
	free(buf);
	for (size_t i = 0; i < n; i++)
		free(seeds[i].data);
	return 0;
}
